"""The NatureBench evaluator child's ``run_case_evaluator`` called in-process.

In a bench it runs in the confined child (``python -I -m openmle.bench.naturebench.child``),
which coverage does not measure; here it runs evaluators this test writes.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

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
