"""``openmle report A B`` (``write_comparison``, ``compare_runs``) on runs of different tasks:
refused when one metric is maximised and the other minimised, warned when the tasks differ."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from openmle import Job, Outcome, RunResult
from openmle._cli import main
from openmle.errors import InvalidArgument
from openmle.search import Budget, SearchSpec, compare_runs, run_search, write_comparison
from openmle.testing import FunctionSandbox, ScriptedModel


def _run(path: Path, task: str, higher_is_better: bool) -> Path:
    def grade(job: Job) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)

    spec = SearchSpec(
        task=task,
        higher_is_better=higher_is_better,
        model=ScriptedModel(lambda r: "plan\n```python\nprint(1)\n```"),
        sandbox=FunctionSandbox(grade),
        budget=Budget(steps=2),
        workers=1,
        description="",
    )
    run_search(spec, run_dir=path, quiet=True)
    return path


def test_opposite_directions_are_refused_naming_both_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    auc = _run(tmp_path / "auc", "toy-auc", True)
    rmse = _run(tmp_path / "rmse", "toy-rmse", False)
    with pytest.raises(InvalidArgument, match="opposite directions"):
        compare_runs(auc, rmse)
    assert main(["report", str(auc), str(rmse)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for part in ("'toy-auc', higher is better", "'toy-rmse', lower is better"):
        assert part in err[0]
    assert not list(auc.glob("compare-*.html"))


def test_different_tasks_in_one_direction_are_compared_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = (_run(tmp_path / name, f"toy-{name}", False) for name in "ab")
    with pytest.warns(UserWarning, match="different tasks"):
        write_comparison(a, b)
    assert main(["report", str(a), str(b)]) == 0
    captured = capsys.readouterr()
    assert "openmle: warning: comparing runs of different tasks ('toy-a' and 'toy-b')" in (
        captured.err
    )
    assert "wrote" in captured.out
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare_runs(a, a)  # one task: no warning
