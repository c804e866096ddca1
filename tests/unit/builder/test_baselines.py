"""The solvability stage's baseline programs: real modules, read as text, run as ``main.py``."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openmle.builder._solvability import baseline_program

FACTS = {"id": "id", "target": "y", "metric": "auc", "k": None, "task_type": "binary"}


@pytest.mark.parametrize(("kind", "facts"), [("constant", None), ("gradient_boosting", FACTS)])
def test_programs_are_their_modules_text_and_import_no_openmle(
    kind: str, facts: dict[str, object] | None
) -> None:
    """The program is the module's source (the slot filled); it parses and imports nothing of
    openmle (the sandbox may not have it)."""
    text = baseline_program(kind, facts)
    module = Path(__file__).parents[3] / "src/openmle/builder/_baselines" / f"{kind}.py"
    own = module.read_text(encoding="utf-8")
    head = own.split("# <<call>>")[0].rsplit("\n", 1)[0]
    assert text.startswith(head)
    imported = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert imported and not any(m.startswith("openmle") for m in imported)
    if facts is not None:
        assert "# <<call>>" not in text and '"metric": "auc"' in text


def test_unknown_kind_or_missing_facts_is_refused() -> None:
    with pytest.raises(ValueError, match="no baseline program 'svm'"):
        baseline_program("svm")
    with pytest.raises(ValueError, match="gradient_boosting"):
        baseline_program("gradient_boosting")


def _run(text: str, data: Path, work: Path) -> Path:
    (work / "main.py").write_text(text)
    env = {"PATH": os.environ.get("PATH", ""), "DATA_DIR": str(data)}
    subprocess.run([sys.executable, "main.py"], cwd=work, env=env, check=True, timeout=120)
    return work / "submission.csv"


def test_constant_copies_the_sample(tmp_path: Path) -> None:
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    (data / "sample_submission.csv").write_text("id,y\na,0\n")
    assert _run(baseline_program("constant"), data, work).read_text() == "id,y\na,0\n"


def test_gradient_boosting_writes_positive_class_probabilities(tmp_path: Path) -> None:
    """AUC: one probability column of the positive ("yes") class, one row per test id."""
    pytest.importorskip("sklearn", reason="needs scikit-learn: pip install 'openmle[data]'")
    pd = pytest.importorskip("pandas", reason="needs pandas: pip install 'openmle[data]'")
    data, work = tmp_path / "data", tmp_path / "work"
    data.mkdir()
    work.mkdir()
    rows = [(f"r{i}", i % 7, "yes" if i % 7 > 3 else "no") for i in range(60)]
    pd.DataFrame(rows, columns=["id", "x", "y"]).to_csv(data / "train.csv", index=False)
    pd.DataFrame([("t1", 6), ("t2", 0)], columns=["id", "x"]).to_csv(data / "test.csv", index=False)
    (data / "sample_submission.csv").write_text("id,y\nt1,0.5\nt2,0.5\n")
    out = pd.read_csv(_run(baseline_program("gradient_boosting", FACTS), data, work))
    assert list(out["id"]) == ["t1", "t2"]
    assert out["y"][0] > 0.5 > out["y"][1]
