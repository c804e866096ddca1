"""The model-judged step filter over SFT records: verdicts, recorded errors, concurrency."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.unit.search._nodes import D, G, node, write_run

from openmle import ModelRequest
from openmle.errors import InvalidArgument, ModelError
from openmle.search import (
    JudgedRecords,
    SFTRecord,
    ajudge_sft_records,
    evolutionary_records,
    judge_sft_records,
)
from openmle.testing import ScriptedModel


def _records(tmp_path: Path) -> list[SFTRecord]:
    """Three records: a failed Draft, its Debug fix (one segment) and a scored Draft."""
    nodes = [node("d1", 0, D, (), None), node("g1", 1, G, ("d1",), 0.4),
             node("d2", 2, D, (), 0.6)]  # fmt: skip
    run = write_run(tmp_path / "r", nodes)
    return evolutionary_records([run])


def test_the_judge_sees_each_step_and_its_verdicts_filter(tmp_path: Path) -> None:
    """One request per record with the step's instructions and answer; kept records follow the
    verdicts, in input order; a fenced JSON answer is read."""
    recs = _records(tmp_path)
    assert [r.node_id for r in recs] == ["d1", "g1", "d2"]

    def verdict(request: ModelRequest) -> str:
        keep = "plan g1" not in request.messages[-1].content
        body = json.dumps({"keep": keep, "reason": "ok" if keep else "no"})
        return f"```json\n{body}\n```" if keep else body

    judge = ScriptedModel(verdict)
    out = judge_sft_records(recs, judge, concurrency=2)
    assert isinstance(out, JudgedRecords)
    assert [r.node_id for r in out.kept] == ["d1", "d2"]
    assert [(v.keep, v.reason, v.error) for v in out.verdicts] == [
        (True, "ok", None), (False, "no", None), (True, "ok", None),
    ]  # fmt: skip
    assert out.errors == ()
    assert len(judge.requests) == 3
    for request, rec in zip(sorted(judge.requests, key=lambda r: r.metadata["node_id"]),
                            sorted(recs, key=lambda r: r.node_id), strict=True):  # fmt: skip
        user = request.messages[-1].content
        assert rec.messages[-1].content in user  # the answer
        assert rec.messages[-2].content in user  # the instructions the step received
        assert request.metadata["purpose"] == "sft-step-judge"


@pytest.mark.parametrize(
    "answer",
    ["keep it", '{"keep": "yes"}', '{"reason": "fine"}', "[true]", '{"keep": true, "reason": 3}'],
)
def test_a_malformed_answer_is_an_error_recorded_not_silent(tmp_path: Path, answer: str) -> None:
    """A verdict that cannot be read drops the record (default) and is listed in errors with the
    answer quoted; on_error="keep" keeps it but still records the error."""
    recs = _records(tmp_path)[:1]
    dropped = judge_sft_records(recs, ScriptedModel([answer]))
    assert dropped.kept == ()
    (err,) = dropped.errors
    assert err.error is not None and "malformed judge answer" in err.error
    assert err.record is recs[0] and err.keep is False
    kept = judge_sft_records(recs, ScriptedModel([answer]), on_error="keep")
    assert kept.kept == (recs[0],) and len(kept.errors) == 1


def test_a_failed_judge_call_is_recorded(tmp_path: Path) -> None:
    """A ModelError from the judge is recorded on the verdict; the other records are judged."""
    recs = _records(tmp_path)

    def flaky(request: ModelRequest) -> str:
        if request.metadata["node_id"] == "g1":
            raise ModelError("service unavailable after 3 retries")
        return '{"keep": true, "reason": "fine"}'

    out = judge_sft_records(recs, ScriptedModel(flaky))
    assert [r.node_id for r in out.kept] == ["d1", "d2"]
    (err,) = out.errors
    assert err.record.node_id == "g1"
    assert err.error == "judge call failed: service unavailable after 3 retries"


def test_a_bug_in_the_judge_is_one_error_not_a_group(tmp_path: Path) -> None:
    """An unexpected exception from the judge surfaces as itself."""
    recs = _records(tmp_path)

    def broken(request: ModelRequest) -> str:
        raise RuntimeError("bug")

    with pytest.raises(RuntimeError, match="bug"):
        judge_sft_records(recs, ScriptedModel(broken))


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    recs = _records(tmp_path)
    with pytest.raises(InvalidArgument, match="concurrency"):
        judge_sft_records(recs, ScriptedModel([]), concurrency=0)
    with pytest.raises(InvalidArgument, match="on_error"):
        judge_sft_records(recs, ScriptedModel([]), on_error="ignore")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_async_entry_point(tmp_path: Path) -> None:
    recs = _records(tmp_path)
    out = await ajudge_sft_records(recs, ScriptedModel(lambda r: '{"keep": false}'))
    assert out.kept == () and len(out.verdicts) == 3 and out.errors == ()
