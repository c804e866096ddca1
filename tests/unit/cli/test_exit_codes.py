"""One rule for exit codes across the CLI (docs/reference/errors.md): 2 when the command line
is wrong (fix a flag), 1 when it is right but the machine, the data or the run is not."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

from openmle._cli import main
from openmle.errors import MissingDependency

ERRORS = Path(__file__).resolve().parents[3] / "docs" / "reference" / "errors.md"


def test_bench_doctor_follows_the_rule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --registry that is no MLE-bench checkout is the command line's fault (2); no
    --registry and no MLE-bench installed is the machine's (1). Both say how to fix it."""
    assert main(["bench", "doctor", "lite", "--data", str(tmp_path), "--registry",
                 str(tmp_path / "nope")]) == 2  # fmt: skip
    assert "--registry" in capsys.readouterr().err
    real = importlib.util.find_spec

    def no_mlebench(name: str, *a: Any, **kw: Any) -> Any:
        return None if name == "mlebench" else real(name, *a, **kw)

    monkeypatch.setattr(importlib.util, "find_spec", no_mlebench)
    assert main(["bench", "doctor", "lite", "--data", str(tmp_path)]) == 1
    assert "MLE-bench is not installed" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["build", "build-many"])
def test_a_missing_dependency_in_task_build_is_not_a_usage_error(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`task build`/`build-many` exited 2 for a missing extra; by the rule it is 1."""
    from openmle._cli import _task

    def missing(args: Any) -> Any:
        raise MissingDependency("the builder needs pandas: pip install 'openmle[data]'")

    monkeypatch.setattr(_task, "_builder_setup", missing)
    assert main(["task", command, str(tmp_path), "--out", str(tmp_path / "out")]) == 1
    assert "pip install 'openmle[data]'" in capsys.readouterr().err


def test_the_errors_page_states_the_one_rule() -> None:
    """The rule and the MissingDependency case are written down."""
    text = re.sub(r"\s+", " ", ERRORS.read_text())
    assert "2 when the fix is to change the command line" in text
    assert "`MissingDependency`" in text.split("| 1 |")[1].split("| 2 |")[0]
