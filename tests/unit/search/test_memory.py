"""Operator-conditioned memory: what each operator sees, budgets, lazy cached summaries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import numpy as np
import pytest
from attrs import define, field
from tests.unit.search._trees import PROGRAMS, add_card, grow_board, result_for

from openmle import ModelRequest, ModelResponse, Operator, Outcome, RunResult, Split, TaskMeta
from openmle.errors import InvalidArgument, ModelError
from openmle.operators import ParentView, TaskBrief, build_request
from openmle.search import (
    Board,
    ExperienceCard,
    MemoryConfig,
    OperatorMemory,
    SummaryStore,
)
from openmle.testing import ScriptedModel

GOOD = json.dumps({"method": "LightGBM on raw features.", "lesson": "Raised the score."})


def _family_tree() -> Board:
    b = Board()
    add_card(b, "r", 0.5, code=PROGRAMS[0])
    add_card(b, "a", 0.6, ("r",), code=PROGRAMS[0])
    add_card(b, "a1", 0.7, ("a",), code=PROGRAMS[0])
    add_card(b, "p", 0.62, ("a1",), code=PROGRAMS[0])
    for i, s in enumerate([0.65, None, 0.9, 0.55]):
        add_card(b, f"s{i}", s, ("a1",), code=PROGRAMS[i % 3], sig="ValueError: x")
    add_card(b, "q", 0.8, code=PROGRAMS[3])
    return b


def test_improve_sees_parent_ancestors_and_ranked_siblings() -> None:
    """Improve: parent, 3 ancestors nearest first, 3 siblings by utility then failures."""
    b = _family_tree()
    plan = OperatorMemory(b).plan(Operator.IMPROVE, ["p"])
    assert plan.parents == ("p",)
    assert plan.ancestors == (("a1", "a", "r"),)
    assert plan.siblings[0][:2] == ("s2", "s0")  # best utility first
    assert len(plan.siblings[0]) == 3 and "s1" not in plan.siblings[0][:2]
    text = OperatorMemory(b).render(plan)
    assert "Parent:\n[p] improve of a1" in text and "Sibling of p: [s2]" in text
    assert "valid 0.62" in text


def test_siblings_include_failures_when_room() -> None:
    """Failed siblings follow scored ones when the cap allows."""
    b = _family_tree()
    cfg = MemoryConfig(improve_siblings=5)
    sib = OperatorMemory(b, cfg).plan("improve", ["p"]).siblings[0]
    assert sib[-1] == "s1"


def test_crossover_complementarity_and_limits() -> None:
    """Crossover: both parents, 2 ancestors and 2 siblings each, a complementarity line."""
    b = _family_tree()
    mem = OperatorMemory(b)
    plan = mem.plan("crossover", ["p", "q"])
    assert plan.ancestors[0] == ("a1", "a") and plan.ancestors[1] == ()
    assert len(plan.siblings[0]) == 2
    text = mem.render(plan)
    assert "Complementarity: the parents use different methods (lightgbm vs neural_net)" in text
    same = mem.render(mem.plan("crossover", ["p", "a1"]))
    assert "both parents are lightgbm" in same


def test_debug_same_signature_first() -> None:
    """Debug: same error signature first (newest first), then recent nodes, capped."""
    b = Board()
    add_card(b, "x0", None, sig="KeyError: k")
    add_card(b, "y0", None, sig="ValueError: v")
    add_card(b, "x1", None, sig="KeyError: k")
    for i in range(10):
        add_card(b, f"ok{i}", 0.5 + i / 100)
    add_card(b, "x2", None, sig="KeyError: k")
    plan = OperatorMemory(b).plan("debug", ["x2"])
    assert plan.related[:2] == ("x1", "x0")
    assert len(plan.related) == 8 and "x2" not in plan.related
    assert plan.related[2] == "ok9"
    text = OperatorMemory(b).render(plan)
    assert "Repeated errors: KeyError: k (x3)" in text


def test_draft_summarises_explored_ideas() -> None:
    """Draft sees per-family counts, bests and ideas; an empty board gives nothing."""
    assert OperatorMemory(Board()).render(OperatorMemory(Board()).plan("draft")) == ""
    b = _family_tree()
    text = OperatorMemory(b).render(OperatorMemory(b).plan("draft"))
    assert text.startswith("Nodes so far: 9")
    assert "- lightgbm:" in text and "plan of" in text


def test_memory_budget_is_hard() -> None:
    """Blocks never exceed max_chars, dropping whole entries first."""
    board = grow_board(300, seed=2)
    cfg = MemoryConfig(max_chars=1500, debug_related=8)
    mem = OperatorMemory(board, cfg)
    for op, parents in (("debug", [board.failed_nodes()[-1]]), ("draft", [])):
        text = mem.render(mem.plan(op, parents))
        assert 0 < len(text) <= 1500


def test_wrong_parent_count_and_unknown_nodes() -> None:
    """The plan checks parent counts and ids."""
    b = _family_tree()
    with pytest.raises(InvalidArgument, match="improve takes 1"):
        OperatorMemory(b).plan("improve", [])
    with pytest.raises(InvalidArgument, match="not on the board"):
        OperatorMemory(b).plan("improve", ["zzz"])


@pytest.mark.anyio
async def test_summaries_are_lazy_and_cached(tmp_path: Path) -> None:
    """Only the nodes a prompt shows are summarised; a second store reads the disk cache."""
    b = _family_tree()
    model = ScriptedModel(lambda req: GOOD)
    store = SummaryStore(model=model, cache_dir=tmp_path)
    mem = OperatorMemory(b)
    text = await mem.build("improve", ["p"], store=store, code_of=lambda n: PROGRAMS[0])
    shown = set(mem.plan("improve", ["p"]).node_ids())
    asked = {r.metadata["node_id"] for r in model.requests}
    assert asked == shown and len(model.requests) == len(shown)
    assert "LightGBM on raw features. Raised the score." in text
    assert b.card("p").summary is not None and b.card("q").summary is None
    names = sorted([p.name async for p in anyio.Path(tmp_path).iterdir()])
    assert names == sorted(f"{n}.json" for n in shown)
    await mem.build("improve", ["p"], store=store)
    assert len(model.requests) == len(shown)  # memory cache
    fresh_board = Board.from_cards([c.with_summary(None) for c in b], b.task)
    offline = SummaryStore(model=ScriptedModel([]), cache_dir=tmp_path)
    got = await offline.ensure(fresh_board, sorted(shown))
    assert set(got) == shown and offline.calls == 0


@define(eq=False)
class _SlowModel:
    """Answers after a pause, counting calls per node; fails the first ``fail`` calls."""

    fail: int = 0
    answer: str = GOOD
    calls: dict[str, int] = field(factory=dict)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        node = str(request.metadata["node_id"])
        self.calls[node] = self.calls.get(node, 0) + 1
        await anyio.sleep(0.01)
        if self.fail > 0:
            self.fail -= 1
            raise ModelError("service unavailable")
        return ModelResponse(text=self.answer)


@pytest.mark.anyio
async def test_concurrent_requests_share_one_call() -> None:
    """Many concurrent requests for one node make one model call."""
    b = _family_tree()
    model = _SlowModel()
    store = SummaryStore(model=model)
    results: list[str | None] = []

    async def ask() -> None:
        results.append(await store.get(b, "p"))

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(ask)
    assert model.calls == {"p": 1}
    assert results == [results[0]] * 10 and results[0]


@pytest.mark.anyio
async def test_failed_and_invalid_summaries_fall_back_and_retry() -> None:
    """A failure or invalid JSON shows the plan; the next need retries."""
    b = _family_tree()
    model = _SlowModel(fail=1)
    store = SummaryStore(model=model)
    mem = OperatorMemory(b)
    text = await mem.build("improve", ["p"], store=store)
    assert "plan of p" in text and store.failures == 1 and "ModelError" in (store.last_error or "")
    assert b.card("p").summary is None  # the parent's call ran first and failed
    assert b.card("a1").summary is not None
    await store.get(b, "p")
    assert b.card("p").summary is not None and model.calls["p"] == 2
    bad = SummaryStore(model=_SlowModel(answer="not json"))
    assert await bad.get(b, "q") is None and bad.failures == 1
    assert await bad.get(b, "q") is None and bad.failures == 2
    nested = '{"method": ' + "[" * 100_000 + "]" * 100_000 + "}"  # RecursionError escaped
    deep = SummaryStore(model=_SlowModel(answer=nested))
    assert await deep.get(b, "q") is None and deep.failures == 1


def test_test_scores_never_reach_prompts() -> None:
    """Test grades live outside search state; no prompt or memory block can show them.

    Each node also gets a distinctive *test* grade. Cards and feedback refuse test results,
    and none of the test grades appears in any operator prompt built from the board.
    """
    board = grow_board(120, seed=9, task=TaskMeta(higher_is_better=True))
    rng = np.random.default_rng(0)
    test_grades = {c.node_id: 0.1234567 + float(rng.integers(1, 10**6)) * 1e-13 for c in board}
    with pytest.raises(InvalidArgument):
        ExperienceCard.build(
            node_id="t",
            operator="draft",
            code="",
            result=RunResult(outcome=Outcome.SUCCESS, score=0.5, split=Split.TEST),
            task=board.task,
        )
    mem = OperatorMemory(board)
    scored = [c.node_id for c in board if c.score is not None]
    failed = list(board.failed_nodes())
    task = TaskBrief(description="Predict y.")
    prompts = []
    for op, parents in (
        ("draft", []),
        ("improve", scored[-1:]),
        ("crossover", scored[-2:]),
        ("debug", failed[-1:]),
    ):
        views = [
            ParentView.from_result(p, PROGRAMS[0], result_for(board.card(p).score)) for p in parents
        ]
        req = build_request(
            op,
            task=task,
            parents=views,
            memory=mem.render(mem.plan(op, parents)),
            execution_timeout_s=600,
        )
        prompts.append("".join(m.content for m in req.messages))
    numbers = {float(x) for p in prompts for x in re.findall(r"\d+\.\d+", p)}
    assert not numbers & set(test_grades.values())
    assert not any(f"{g:.6g}" in p for p in prompts for g in test_grades.values())


@pytest.mark.anyio
async def test_the_offline_model_reads_the_summary_request_through_the_shared_contract() -> None:
    """The summary prompt holds the contract's lines, and OfflineModel, which reads them, gives
    a summary that states the node's and its parent's scores (a prompt edit that drops a line
    fails here, not silently in the offline model)."""
    from openmle._summary_contract import (
        NODE_SUMMARY_PURPOSE,
        OUTCOME_LINE_RE,
        PARENT_LINE_RE,
        PURPOSE_KEY,
    )
    from openmle.backends import OfflineModel

    seen: list[ModelRequest] = []
    offline = OfflineModel()

    @define
    class Spy:
        async def complete(self, request: ModelRequest) -> ModelResponse:
            seen.append(request)
            return await offline.complete(request)

    b = _family_tree()
    store = SummaryStore(model=Spy())
    summary = await store.get(b, "a1", code_of=lambda _: PROGRAMS[0])
    assert len(seen) == 1 and seen[0].metadata[PURPOSE_KEY] == NODE_SUMMARY_PURPOSE
    text = "\n".join(m.content for m in seen[0].messages)
    own, parent = OUTCOME_LINE_RE.search(text), PARENT_LINE_RE.search(text)
    assert own is not None and own.groups() == ("success", "0.7")
    assert parent is not None and parent.groups() == ("a", "0.6")
    assert summary is not None and "Validation 0.7 against 0.6 for parent a" in summary
