"""SFT export: the parallel and evolutionary selections, chat records, parquet and JSONL."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from tests.unit.search._nodes import IM, D, G, X, node, write_run
from tests.unit.search._toy import toy_spec

from openmle import Outcome
from openmle.errors import InvalidArgument
from openmle.operators import parse_response
from openmle.search import (
    SFTExport,
    SFTExportSummary,
    SFTRecord,
    estimate_tokens,
    evolutionary_records,
    export_sft,
    parallel_records,
    read_sft_jsonl,
)


def test_parallel_keeps_top_four_distinct_draft_scores(tmp_path: Path) -> None:
    """Drafts with scores are deduplicated by score (earliest kept) and the best four kept."""
    nodes = [
        node("a", 0, D, score=0.5),
        node("b", 1, D, score=0.9),
        node("c", 2, D, score=0.9),  # duplicate of b
        node("d", 3, D),  # failed
        node("e", 4, D, score=0.7),
        node("f", 5, D, score=0.6),
        node("g", 6, D, score=0.1),
        node("h", 7, IM, ("b",), score=0.99),  # not a Draft
    ]
    recs = parallel_records([write_run(tmp_path / "r", nodes)])
    assert [r.node_id for r in recs] == ["b", "e", "f", "a"]
    assert all(r.path == "parallel" and r.operator == "draft" for r in recs)


def test_parallel_pools_runs_and_respects_direction(tmp_path: Path) -> None:
    """Runs of one task are pooled; lower-is-better keeps the lowest scores."""
    r1 = write_run(tmp_path / "r1", [node("a", 0, D, score=3.0), node("b", 1, D, score=1.0)],
                   hib=False)  # fmt: skip
    r2 = write_run(tmp_path / "r2", [node("a", 0, D, score=2.0), node("b", 1, D, score=1.0)],
                   hib=False)  # fmt: skip
    recs = parallel_records([r1, r2], top_k=2)
    assert [(r.run_id, r.score) for r in recs] == [("r1", 1.0), ("r2", 2.0)]


def test_evolutionary_segments_follow_the_rules(tmp_path: Path) -> None:
    """Draft segments ending scored, Improves beating the parent and Crossovers beating the
    better parent are kept, each node of a segment as a record; the rest are dropped."""
    nodes = [
        node("d1", 0, D),  # failed draft ...
        node("g1", 1, G, ("d1",)),  # ... failed debug ...
        node("g2", 2, G, ("g1",), score=0.4),  # ... fixed: segment d1-g1-g2 kept
        node("d2", 3, D, score=0.6),  # draft with a score: kept alone
        node("i1", 4, IM, ("d2",), score=0.5),  # worse than parent: dropped
        node("i2", 5, IM, ("d2",)),  # failed improve ...
        node("g3", 6, G, ("i2",), score=0.7),  # ... debugged above the parent: kept
        node("x1", 7, X, ("d2", "g2"), score=0.65),  # beats 0.6: kept
        node("x2", 8, X, ("d2", "g2"), score=0.55),  # below the better parent: dropped
        node("d3", 9, D),  # failed, never fixed: dropped
    ]
    recs = evolutionary_records([write_run(tmp_path / "r", nodes)])
    segs = [(r.segment_id, r.position, r.node_id) for r in recs]
    assert segs == [
        ("d1", 0, "d1"), ("d1", 1, "g1"), ("d1", 2, "g2"),
        ("d2", 0, "d2"),
        ("i2", 0, "i2"), ("i2", 1, "g3"),
        ("x1", 0, "x1"),
    ]  # fmt: skip
    first = recs[0]
    assert first.segment_score == 0.4 and first.score is None
    # The Debug prompt shows its parent's program and feedback, the answer is the node's own.
    debug = recs[1]
    assert "ValueError: boom" in debug.messages[-2].content
    assert parse_response(debug.messages[-1].content).code == "print(1)\n"
    assert parse_response(debug.messages[-1].content).plan == "plan g1"


def test_evolutionary_segments_must_end_at_a_medal_when_the_task_has_a_leaderboard(
    tmp_path: Path,
) -> None:
    """With a leaderboard for the task, a kept segment must also end at bronze or better (in the
    task's direction); a task without a leaderboard keeps the plain rules."""
    nodes = [
        node("d1", 0, D, score=0.5),  # draft at 0.5: below bronze
        node("d2", 1, D, score=0.8),  # draft at 0.8: bronze
        node("i1", 2, IM, ("d1",), score=0.7),  # beats its parent, below bronze: dropped
        node("i2", 3, IM, ("d1",)),
        node("g1", 4, G, ("i2",), score=0.95),  # debugged to gold: segment i2-g1 kept
    ]
    run = write_run(tmp_path / "r", nodes)
    board = [1.0, 0.95, 0.9, 0.8, 0.75, 0.7, 0.65, 0.6, 0.5, 0.4]  # 10 entries: bronze 4th = 0.8
    recs = evolutionary_records([run], leaderboards={"toy": board})
    assert [(r.segment_id, r.node_id) for r in recs] == [("d2", "d2"), ("i2", "i2"), ("i2", "g1")]
    plain = evolutionary_records([run], leaderboards={"other-task": board})
    assert [r.node_id for r in plain] == ["d1", "d2", "i1", "i2", "g1"]
    low = write_run(tmp_path / "low", [node("a", 0, D, score=3.0), node("b", 1, D, score=1.0)],
                    hib=False)  # fmt: skip
    low_recs = evolutionary_records([low], leaderboards={"toy": [0.5, 1.0, 2.0, 4.0, 8.0]})
    assert [r.node_id for r in low_recs] == ["b"]  # lower is better: 1.0 reaches bronze
    out = tmp_path / "sft.jsonl"
    export_sft([run], out, path="evolutionary", leaderboards={"toy": board})
    assert [r.node_id for r in read_sft_jsonl(out)] == ["d2", "i2", "g1"]


def test_records_are_chat_format_without_test_scores(tmp_path: Path) -> None:
    """Every record is system, user, assistant; round-trips through its dict."""
    recs = parallel_records([write_run(tmp_path / "r", [node("a", 0, D, score=0.5)])])
    (rec,) = recs
    assert [m.role for m in rec.messages] == ["system", "user", "assistant"]
    assert SFTRecord.from_dict(rec.to_dict()) == rec


@pytest.mark.needs("pyarrow")
def test_export_jsonl_and_parquet_read_back(tmp_path: Path) -> None:
    """JSONL reads back exactly; parquet reads with pandas and with `datasets`."""
    nodes = [node("a", 0, D, score=0.5), node("b", 1, IM, ("a",), score=0.8)]
    run = write_run(tmp_path / "r", nodes)
    recs = export_sft([run], tmp_path / "out" / "sft.jsonl")
    assert [r.path for r in recs] == ["parallel", "evolutionary"]  # "a" once: no duplicates
    assert read_sft_jsonl(tmp_path / "out" / "sft.jsonl") == recs

    pq = tmp_path / "sft.parquet"
    export_sft([run], pq, path="evolutionary")
    pd = pytest.importorskip("pandas", reason="needs pandas: pip install 'openmle[data]'")
    frame = pd.read_parquet(pq)
    assert list(frame["node_id"]) == ["a", "b"]
    assert list(frame["messages"][1][-1].keys()) == ["role", "content"]
    datasets = pytest.importorskip("datasets", reason="needs datasets: pip install 'openmle[trl]'")
    ds = datasets.Dataset.from_parquet(str(pq))
    assert ds[1]["messages"][-1]["role"] == "assistant"
    assert ds[1]["messages"][-1]["content"] == recs[1].messages[-1].content


def test_default_export_has_no_duplicate_records(tmp_path: Path) -> None:
    """A Draft in the parallel top-k and in its own segment, and nested Debug segments, are
    written once each (the first record of a node is kept); the summary counts the rest."""
    nodes = [
        node("a", 0, D, score=0.5),  # parallel and a one-node segment
        node("b", 1, D),  # failed
        node("c", 2, G, ("b",), score=0.6),  # segment b -> c
        node("d", 3, G, ("c",), score=0.7),  # segment b -> c -> d (b and c again)
    ]
    out = tmp_path / "sft.jsonl"
    recs = export_sft([write_run(tmp_path / "r", nodes)], out)
    assert isinstance(recs, SFTExport) and isinstance(recs, list)
    ids = [(r.run_id, r.node_id) for r in recs]
    assert ids == [("r", "a"), ("r", "b"), ("r", "c"), ("r", "d")]
    assert recs[0].path == "parallel" and recs[1].path == "evolutionary"
    assert recs.summary == SFTExportSummary(
        selected=7, written=4, duplicates=3, over_limit=0, max_tokens=None,
        longest=max(estimate_tokens(r.messages) for r in recs),
    )  # fmt: skip
    assert read_sft_jsonl(out) == list(recs)
    # runs with the same directory name but different programs are not merged
    other = [attrs.evolve(node("a", 0, D, score=0.4), code="print('other')\n")]
    both = export_sft(
        [write_run(tmp_path / "x" / "r", nodes), write_run(tmp_path / "y" / "r", other)],
        tmp_path / "two.jsonl", path="parallel",
    )  # fmt: skip
    assert [r.node_id for r in both] == ["a", "a"] and both.summary.duplicates == 0


def test_over_long_records_are_dropped_not_truncated(tmp_path: Path) -> None:
    """A record over max_tokens is not written (nor cut); the summary counts it."""
    long = attrs.evolve(node("b", 1, D, score=0.9), code="x = 1\n" * 400)
    run = write_run(tmp_path / "r", [node("a", 0, D, score=0.5), long])
    full = export_sft([run], tmp_path / "all.jsonl", path="parallel")
    sizes = {r.node_id: estimate_tokens(r.messages) for r in full}
    assert sizes["b"] > sizes["a"] + 500
    limit = sizes["a"] + 10
    recs = export_sft([run], tmp_path / "cut.jsonl", path="parallel", max_tokens=limit)
    assert [r.node_id for r in recs] == ["a"]
    assert recs[0] == next(r for r in full if r.node_id == "a")  # kept records are whole
    assert (recs.summary.over_limit, recs.summary.written, recs.summary.longest) == (
        1,
        1,
        sizes["a"],
    )
    assert read_sft_jsonl(tmp_path / "cut.jsonl") == list(recs)
    # a caller's counter decides (here: one token per character)
    chars = export_sft(
        [run], tmp_path / "c.jsonl", path="parallel", max_tokens=4 * limit,
        count_tokens=lambda msgs: sum(len(m.content) for m in msgs),
    )  # fmt: skip
    assert chars.summary.max_tokens == 4 * limit and chars.summary.over_limit >= 1
    with pytest.raises(InvalidArgument, match="max_tokens"):
        export_sft([run], tmp_path / "x.jsonl", max_tokens=0)
    with pytest.raises(InvalidArgument, match="count_tokens"):
        export_sft([run], tmp_path / "x.jsonl", count_tokens=lambda msgs: -1)


def test_estimate_tokens_is_a_quarter_of_the_characters_rounded_up() -> None:
    from openmle import Message

    msgs = [Message(role="user", content="abcde"), Message(role="assistant", content="abcd")]
    assert estimate_tokens(msgs) == 2 + 1
    assert estimate_tokens([]) == 0


def test_bad_arguments_name_the_field(tmp_path: Path) -> None:
    """Unknown paths, formats and top_k values are argument errors."""
    run = write_run(tmp_path / "r", [node("a", 0, D, score=0.5)])
    with pytest.raises(InvalidArgument, match="path"):
        export_sft([run], tmp_path / "x.jsonl", path="all")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="format"):
        export_sft([run], tmp_path / "x.csv", format="csv")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="top_k"):
        parallel_records([run], top_k=0)


def test_export_from_a_real_search_run(tmp_path: Path) -> None:
    """A run directory written by run_search exports records whose answers parse back to the
    nodes' programs, with the prompts the search's default builder makes (without memory)."""
    import hashlib

    from openmle import Job, ModelRequest, RunResult
    from openmle.search import Budget, RunDir, SearchConfig, run_search
    from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

    def model(request: ModelRequest) -> str:
        digest = hashlib.sha256(request.messages[-1].content.encode()).hexdigest()
        value = int(digest[:6], 16) / 0xFFFFFF
        if value < 0.3:
            return "Plan: try.\n```python\nraise ValueError('bad')\n```"
        return f"Plan: constant.\n```python\nscore = {value:.6f}\n```"

    def grade(job: Job) -> RunResult:
        if "score = " not in job.code:
            return RunResult(outcome=Outcome.RUNTIME_ERROR, split=job.split, logs="ValueError")
        value = float(job.code.split("score = ")[1].split()[0])
        return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split)

    out = tmp_path / "run"
    spec = toy_spec(
        ScriptedModel(model),
        FunctionSandbox(grade),
        selector=FunctionSelector(lambda c: 0.1 + (c.score or 0.0)),
        budget=Budget(steps=12),
        config=SearchConfig(initial_drafts=4, seed=3),
        ordered=True,
        final_test=False,
    )
    run_search(spec, run_dir=out)
    recs = export_sft([out], tmp_path / "sft.jsonl")
    nodes = {n.node_id: n for n in RunDir.open(out).nodes()}
    assert recs and any(r.path == "parallel" for r in recs)
    for r in recs:
        assert parse_response(r.messages[-1].content).code == nodes[r.node_id].code.rstrip() + "\n"
        assert [m.role for m in r.messages] == ["system", "user", "assistant"]
        for pid in nodes[r.node_id].parent_ids:  # the prompt shows each parent's program
            assert nodes[pid].code.strip() in r.messages[1].content


def test_export_sft_docstring_counts_its_rules() -> None:
    """It said "Two rules apply" and listed three."""
    import re

    from openmle.search import export_sft

    doc = export_sft.__doc__ or ""
    listed = re.findall(r"^\s+(\d)\. \*\*", doc, flags=re.M)
    words = {2: "Two", 3: "Three", 4: "Four"}
    assert f"{words[len(listed)]} rules apply" in doc, listed
