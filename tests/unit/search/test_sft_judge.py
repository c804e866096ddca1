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
    export_sft,
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
        keep = request.metadata["node_id"] != "g1"
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
    [
        "keep it",
        '{"keep": "yes"}',
        '{"reason": "fine"}',
        "[true]",
        '{"keep": true, "reason": 3}',
        '{"keep": ' + "[" * 100_000 + "]" * 100_000 + "}",  # RecursionError: the run failed
    ],
    ids=["prose", "keep-text", "no-keep", "list", "reason-int", "nested"],
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


def test_the_judge_sees_the_whole_segment_up_to_its_endpoint(tmp_path: Path) -> None:
    """The failed Draft d1 is judged inside its segment d1 -> g1: the request shows both steps'
    answers in order, their scores (failed, then 0.4), the endpoint's score, which step is under
    review, and the paper's criteria (inherited and contributing; cosmetic edits, blind
    retries, scale-shrinking dodges and failed environment steps dropped). The one-step Draft
    d2 is its own segment."""
    recs = _records(tmp_path)
    judge = ScriptedModel(lambda r: '{"keep": true, "reason": "inherited"}')
    out = judge_sft_records(recs, judge)
    by_node = {r.metadata["node_id"]: r for r in judge.requests}
    system = by_node["d1"].messages[0].content
    for phrase in ("inherited by the later steps", "contributes to the endpoint",
                   "cosmetic edits", "blind retries", "scale-shrinking dodges",
                   "failed environment steps"):  # fmt: skip
        assert phrase in system
    d1 = by_node["d1"].messages[-1].content
    assert "Segment: 2 step(s), ending with validation score 0.4" in d1
    assert "Step under review: step 1 (draft)" in d1
    assert d1.index("plan d1") < d1.index("plan g1")  # the later step is shown, in order
    assert "### Step 1: draft, failed (no validation score)  <- the step under review" in d1
    assert "### Step 2: debug, validation score 0.4\n" in d1
    g1 = by_node["g1"].messages[-1].content
    assert "Step under review: step 2 (debug)" in g1 and "plan d1" in g1
    d2 = by_node["d2"].messages[-1].content
    assert "Segment: 1 step(s)" in d2 and "plan d1" not in d2
    assert [v.segment_steps for v in out.verdicts] == [2, 2, 1]
    assert out.verdicts[0].to_dict()["segment_id"] == recs[0].segment_id


def test_a_filtered_record_still_sees_its_segment_through_context(tmp_path: Path) -> None:
    """Judging only g1 with every record as context still shows d1's step before it."""
    recs = _records(tmp_path)
    judge = ScriptedModel(lambda r: '{"keep": false, "reason": "blind retry"}')
    out = judge_sft_records(recs[1:2], judge, context=recs)
    (req,) = judge.requests
    assert "plan d1" in req.messages[-1].content and out.verdicts[0].segment_steps == 2
    alone = ScriptedModel(lambda r: '{"keep": false, "reason": "x"}')
    judge_sft_records(recs[1:2], alone)
    assert "plan d1" not in alone.requests[0].messages[-1].content


def test_the_export_records_the_verdicts_and_errors_in_its_summary(tmp_path: Path) -> None:
    """export_sft(judge=...) writes the kept records only and counts judged, dropped and errors,
    with every verdict in the summary."""
    recs = _records(tmp_path)  # writes the run directory tmp_path / "r"

    def verdict(request: ModelRequest) -> str:
        node = request.metadata["node_id"]
        if node == "d2":
            return "not json"
        return json.dumps({"keep": node == "g1", "reason": f"r-{node}"})

    out = export_sft([tmp_path / "r"], tmp_path / "sft.jsonl", path="evolutionary",
                     judge=ScriptedModel(verdict))  # fmt: skip
    s = out.summary
    assert [r.node_id for r in out] == ["g1"]
    assert (s.judged, s.judge_dropped, s.judge_errors, s.written) == (3, 2, 1, 1)
    assert [(v.record.node_id, v.keep, v.reason) for v in s.verdicts] == [
        ("d1", False, "r-d1"), ("g1", True, "r-g1"), ("d2", False, ""),
    ]  # fmt: skip
    assert s.verdicts[2].error is not None and "malformed" in s.verdicts[2].error
    lines = (tmp_path / "sft.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["node_id"] == "g1"
    plain = export_sft([tmp_path / "r"], tmp_path / "all.jsonl", path="evolutionary")
    assert plain.summary.judged == 0 and plain.summary.verdicts == () and len(plain) == 3
    assert len(recs) == 3
