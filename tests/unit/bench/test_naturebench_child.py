"""The NatureBench evaluator runner (``openmle.bench.naturebench.child``) in-process, in both modes.

In a bench it runs in the confined child (``python -I -m openmle.bench.naturebench.child``) or in
a grading container (``python3 -I -c SOURCE --container``), which coverage does not measure;
here it runs evaluators this test writes (the container's paths pointed at them).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openmle.bench.naturebench import child
from openmle.bench.naturebench.child import run_case_evaluator


@pytest.fixture
def case(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sys, "path", list(sys.path))  # the evaluator's folder goes first
    monkeypatch.setenv("OUTPUT_DIR", "unset")  # restored after; the child sets it
    evaluator = tmp_path / "evaluation" / "evaluator.py"
    evaluator.parent.mkdir()

    def run(source: str) -> dict[str, Any]:
        evaluator.write_text(source)
        return run_case_evaluator({"evaluator": str(evaluator), "output_dir": str(tmp_path)})

    return run


def test_the_evaluators_result_with_numbers_as_floats(case: Any, tmp_path: Path) -> None:
    got = case(
        "import os\nfrom decimal import Decimal\n"
        "def run_evaluation():\n"
        "    return {'out': os.environ['OUTPUT_DIR'], 'acc': Decimal('0.5'), 'f': object}\n"
    )
    assert got == {"raw": {"out": str(tmp_path), "acc": 0.5, "f": str(object)}}
    assert case("def main():\n    return {'n': 3}\n") == {"raw": {"n": 3}}


def test_evaluator_failures_are_results(case: Any) -> None:
    assert case("x = 1\n") == {"error": "evaluator.py defines neither run_evaluation() nor main()"}
    assert case("def main():\n    return 7\n") == {
        "error": "the evaluator returned int, not a dict"
    }
    assert case("def main():\n    raise KeyError('the answers')\n") == {
        "error": "the evaluator raised KeyError at evaluator.py:2"
    }
    with pytest.raises(MemoryError):  # main() turns it into the memory limit's result
        case("def main():\n    raise MemoryError\n")
    assert os.environ["OUTPUT_DIR"]  # set for the evaluator (restored after the test)


@pytest.fixture
def container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Any:
    """Run ``child.main([-c, --container])`` on an evaluator with this source; returns the
    result it marked last on stdout and its stderr."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the evaluator's folder goes first
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # the container mode sends print to stderr
    monkeypatch.setenv("OUTPUT_DIR", "unset")
    evaluation = tmp_path / "evaluation"
    evaluation.mkdir()
    monkeypatch.setattr(child, "CONTAINER_EVALUATION", str(evaluation))
    monkeypatch.setattr(child, "CONTAINER_OUTPUT_DIR", str(tmp_path / "output"))

    def run(source: str) -> tuple[dict[str, Any], str]:
        (evaluation / "evaluator.py").write_text(source)
        captured = sys.stdout
        assert child.main(["-c", child.CONTAINER_FLAG]) == 0
        sys.stdout = captured  # main() sends print to stderr for good: back for the next run
        out, err = capsys.readouterr()
        last = out.strip().splitlines()[-1]
        assert last.startswith(child.MARK)
        found = json.loads(last.removeprefix(child.MARK))
        assert isinstance(found, dict)
        return found, err

    return run


def test_the_container_mode_gives_the_raw_result(container: Any, tmp_path: Path) -> None:
    got, _ = container(
        "import os\n"
        "def run_evaluation():\n"
        "    return {'acc': 0.5, 'out': os.environ['OUTPUT_DIR']}\n"
    )
    assert got == {"raw": {"acc": 0.5, "out": str(tmp_path / "output")}}
    assert container("def main():\n    return {'rmse': 2}\n")[0] == {"raw": {"rmse": 2}}


def test_the_container_modes_evaluator_failures_are_results(container: Any) -> None:
    assert container("x = 1\n")[0] == {
        "error": "evaluator.py defines neither run_evaluation() nor main()"
    }
    assert container("def main():\n    return [1]\n")[0] == {
        "error": "the evaluator returned list, not a dict"
    }
    assert container("def main():\n    raise KeyError('secret')\n")[0] == {
        "error": "the evaluator raised KeyError at evaluator.py:2"
    }
    assert container("def main():\n    raise MemoryError\n")[0] == {
        "error": "the evaluator ran out of memory",
        "limit": "memory",
    }


def test_the_container_mode_prints_the_marked_result_last_and_the_evaluators_output_to_stderr(
    container: Any,
) -> None:
    result, err = container(
        "from decimal import Decimal\n"
        "def run_evaluation():\n"
        "    print('" + child.MARK + '{"raw": {"fake": 1}}\')\n'
        "    return {'score': Decimal('0.25'), 'note': object}\n"
    )
    assert child.MARK in err  # the evaluator's printing cannot forge the result
    assert result["raw"]["score"] == float(Decimal("0.25"))
    assert result["raw"]["note"] == str(object)


def test_the_container_program_needs_only_the_standard_library(tmp_path: Path) -> None:
    """The image has no openmle: the module's top level imports the standard library only,
    and its source runs as the grading container runs it with no site-packages at all."""
    source = Path(child.__file__).read_text(encoding="utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
            for name in names:
                assert str(name).partition(".")[0] in sys.stdlib_module_names | {"__future__"}
    argv = [sys.executable, "-I", "-S", "-c", source, child.CONTAINER_FLAG]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    found = json.loads(last.removeprefix(child.MARK))  # no /nb/evaluation here
    assert last.startswith(child.MARK) and "FileNotFoundError" in found["error"], found
