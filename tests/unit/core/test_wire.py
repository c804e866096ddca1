"""``openmle._wire``: the strict reader of the job service's answers (shared by both ends)."""

from __future__ import annotations

from typing import Any

import pytest

from openmle import Outcome, RunResult, Split, TaskMeta
from openmle._wire import (
    WireError,
    check_job_id,
    check_score,
    parse_job_view,
    parse_run_result,
)


@pytest.mark.parametrize(
    "result",
    [
        RunResult(outcome=Outcome.SUCCESS, score=0.25, logs="ok", runtime_s=1.5, queue_s=0.1),
        RunResult(
            outcome=Outcome.RUNTIME_ERROR,
            split=Split.TEST,
            logs="Traceback",
            error_signature="ZeroDivisionError",
            exit_code=1,
            artifacts=("model.pkl",),
            printed_score=0.9,
            logs_dropped_bytes=10,
        ),
        RunResult.infra_error("worker lost"),
    ],
)
def test_round_trip(result: RunResult) -> None:
    """Every ``RunResult.to_dict()`` reads back equal."""
    assert parse_run_result(result.to_dict(), split=result.split) == result


def _rr(**kw: Any) -> dict[str, Any]:
    d = RunResult(outcome=Outcome.SUCCESS, score=0.5).to_dict()
    d.update(kw)
    return d


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ("x", "not an object"),
        (_rr(outcome=None), "outcome"),
        (_rr(split="test"), "split"),
        (_rr(score=10**400), "too large"),
        (_rr(score=float("inf")), "finite"),
        (_rr(score=True), "not a number"),
        (_rr(score=2e100), "beyond any metric"),
        (_rr(logs=3), "logs"),
        (_rr(exit_code=2**70), "exit_code"),
        (_rr(logs_dropped_bytes=-1), "logs_dropped_bytes"),
        (_rr(queue_s=float("nan")), "queue_s"),
        (_rr(artifacts=[1]), "artifacts"),
    ],
)
def test_bad_fields_raise_wire_error(data: Any, said: str) -> None:
    """Each bad field raises ``WireError`` naming it."""
    with pytest.raises(WireError, match=said):
        parse_run_result(data, split=Split.VALID)


def test_metric_range_and_job_ids() -> None:
    """Scores are held to the task's theoretical range; job ids are URL-safe tokens."""
    meta = TaskMeta(theoretical_min=0.0, theoretical_max=1.0)
    check_score(1.0, "score", meta)
    check_score(5.0, "score", None)
    with pytest.raises(WireError, match=r"metric range \[0.0, 1.0\]"):
        check_score(1.0000001, "score", meta)
    with pytest.raises(WireError, match="metric range"):
        parse_run_result(_rr(score=-0.5), split=Split.VALID, meta=meta)
    assert check_job_id("a1b2-c3_d.e:f") == "a1b2-c3_d.e:f" and check_job_id(42) == "42"
    for bad in ("..", "../x", "a/b", "", "x" * 129, None, 1.5, True):
        with pytest.raises(WireError, match="job_id"):
            check_job_id(bad)


def test_job_view_binding() -> None:
    """A view about another job, or with a bad envelope, is refused; a view without a job id
    (released routers) is accepted."""
    assert parse_job_view({"status": "running"}, job_id="j1")["status"] == "running"
    with pytest.raises(WireError, match="not job 'j1'"):
        parse_job_view({"job_id": "j2"}, job_id="j1")
    for bad, said in [
        ([], "not a JSON object"),
        ({"status": ["x"]}, "status"),
        ({"detail": 3}, "detail"),
        ({"eval_split": "train"}, "eval_split"),
        ({"result": "done"}, "result"),
    ]:
        with pytest.raises(WireError, match=said):
            parse_job_view(bad, job_id="j1")
