"""The NatureBench grading container's program (``openmle.backends._nb_runner``) in-process.

In a grade it runs in the case's container (``python3 -I -c``), which coverage does not
measure; here it loads evaluators this test writes (``EVALUATOR`` pointed at them).
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from openmle.backends import _nb_runner


@pytest.fixture
def evaluator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(sys, "path", list(sys.path))  # evaluate() prepends the folder
    path = tmp_path / "evaluation" / "evaluator.py"
    path.parent.mkdir()
    monkeypatch.setattr(_nb_runner, "EVALUATOR", str(path))

    def write(source: str) -> Path:
        path.write_text(source)
        return path

    return write


def test_run_evaluation_or_main_gives_the_raw_result(evaluator: Any) -> None:
    evaluator("def run_evaluation():\n    return {'acc': 0.5}\n")
    assert _nb_runner.evaluate() == {"raw": {"acc": 0.5}}
    evaluator("def main():\n    return {'rmse': 2}\n")
    assert _nb_runner.evaluate() == {"raw": {"rmse": 2}}


def test_evaluator_failures_are_results(evaluator: Any) -> None:
    evaluator("x = 1\n")
    assert _nb_runner.evaluate() == {
        "error": "evaluator.py defines neither run_evaluation() nor main()"
    }
    evaluator("def main():\n    return [1]\n")
    assert _nb_runner.evaluate() == {"error": "the evaluator returned list, not a dict"}
    evaluator("def main():\n    raise KeyError('secret')\n")
    assert _nb_runner.evaluate() == {"error": "the evaluator raised KeyError at evaluator.py:2"}
    evaluator("def main():\n    raise MemoryError\n")
    assert _nb_runner.evaluate() == {"error": "the evaluator ran out of memory", "limit": "memory"}


def test_main_prints_the_marked_result_last_and_the_evaluators_output_to_stderr(
    evaluator: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdout", sys.stdout)  # main() sends print to stderr for good
    evaluator(
        "from decimal import Decimal\n"
        "def run_evaluation():\n"
        "    print('" + _nb_runner.MARK + '{"raw": {"fake": 1}}\')\n'
        "    return {'score': Decimal('0.25'), 'note': object}\n"
    )
    _nb_runner.main()
    out, err = capsys.readouterr()
    assert _nb_runner.MARK in err  # the evaluator's printing cannot forge the result
    last = out.strip().splitlines()[-1]
    assert last.startswith(_nb_runner.MARK)
    result = json.loads(last.removeprefix(_nb_runner.MARK))
    assert result["raw"]["score"] == float(Decimal("0.25"))
    assert result["raw"]["note"] == str(object)
