"""The search loop with lazy node summaries: shown in later prompts, synthesised only for the
nodes a prompt shows, counted in the token budget, independent of timing, cached for resume."""

from __future__ import annotations

import json
import random
from pathlib import Path

import anyio
import pytest
from attrs import define, field
from tests.unit.search._toy import toy_spec
from tests.unit.search._trees import add_card

from openmle import Job, ModelRequest, ModelResponse, Operator, Outcome, RunResult, Usage
from openmle.search import (
    Board,
    Budget,
    OperatorPrompts,
    PriceTable,
    Proposal,
    ResumeSpec,
    SearchConfig,
    SummaryStore,
    TaskInfo,
    aresume_search,
    arun_search,
    journal_fingerprint,
)
from openmle.testing import FunctionSandbox, FunctionSelector

PROGRAM = "```python\nimport sklearn\nscore = {score}\n```"


@define(eq=False)
class Model:
    """Writes programs for operator requests and JSON summaries for summary requests; summary
    answers take a random time (seeded) so that their order varies between runs."""

    delay_seed: int = 0
    summary_delays: bool = False
    summary_cost: float | None = None
    operator_cost: float | None = None
    requests: list[ModelRequest] = field(factory=list)
    _rng: random.Random = field(init=False)

    def __attrs_post_init__(self) -> None:
        self._rng = random.Random(self.delay_seed)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """One answer, with a fixed usage per kind of request."""
        self.requests.append(request)
        if request.metadata.get("purpose") == "node_summary":
            if self.summary_delays:
                await anyio.sleep(self._rng.uniform(0.0, 0.1))
            node = request.metadata["node_id"]
            text = json.dumps({"method": f"summary-of-{node} uses a forest.", "lesson": "ok."})
            return ModelResponse(
                text=text,
                usage=Usage(prompt_tokens=100, completion_tokens=7),
                cost_usd=self.summary_cost,
            )
        step = int(request.metadata["step"])
        text = f"plan {step}\n" + PROGRAM.format(score=round(0.1 + 0.01 * (step % 5), 4))
        return ModelResponse(
            text=text,
            usage=Usage(prompt_tokens=10, completion_tokens=3),
            cost_usd=self.operator_cost,
        )

    def summary_requests(self) -> list[ModelRequest]:
        """The summary calls made, in order."""
        return [r for r in self.requests if r.metadata.get("purpose") == "node_summary"]

    def operator_requests(self) -> list[ModelRequest]:
        """The operator calls made, in order."""
        return [r for r in self.requests if r.metadata.get("purpose") != "node_summary"]


def grade(job: Job) -> RunResult:
    """Grades by the program's 'score = x' line."""
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


async def search(
    model: Model,
    store: SummaryStore,
    *,
    steps: int,
    run_dir: Path | None = None,
    workers: int = 1,
) -> tuple[list[str], int]:
    """A search with summaries; the node ids and the ledger's tokens."""
    result = await arun_search(
        toy_spec(
            model,
            FunctionSandbox(grade),
            budget=Budget(steps=steps),
            config=SearchConfig(initial_drafts=2, seed=3),
            workers=workers,
            ordered=True,
            description="toy task",
            prompts=OperatorPrompts(summaries=store),
            final_test=False,
        ),
        run_dir=run_dir,
    )
    return [n.node_id for n in result.nodes], int(result.spent["tokens"])


@pytest.mark.anyio
async def test_summaries_reach_later_prompts_and_only_for_shown_nodes() -> None:
    """Operator prompts after the drafts show model-written summaries; only nodes a prompt
    shows are summarised, each once; summary tokens are in the budget ledger."""
    model = Model()
    store = SummaryStore(model=model)
    nodes, tokens = await search(model, store, steps=10)
    summaries = model.summary_requests()
    summarised = [str(r.metadata["node_id"]) for r in summaries]
    assert summarised, "no summary was requested"
    assert len(set(summarised)) == len(summarised) == store.calls  # each node once
    assert set(summarised) <= set(nodes)
    shown = [r for r in model.operator_requests() if "summary-of-" in r.messages[-1].content]
    assert shown, "no operator prompt showed a summary"
    for r in shown:  # a prompt shows summaries of nodes summarised before it was sent
        for node in set(summarised):
            if f"summary-of-{node}" in r.messages[-1].content:
                assert model.requests.index(r) > summarised.index(node)
    # the ledger counts the operator calls and the summary calls
    assert tokens == 13 * len(model.operator_requests()) + 107 * len(summaries)
    assert store.usage == Usage(prompt_tokens=100 * store.calls, completion_tokens=7 * store.calls)


@pytest.mark.anyio
@pytest.mark.parametrize("operator_cost", [0.5, None])
async def test_summary_costs_count_and_unknown_costs_are_priced(
    operator_cost: float | None,
) -> None:
    """Reported costs add up; when the operator call reports none, the price table prices the
    step's whole usage (summary tokens included) instead of counting only the known part."""
    model = Model(summary_cost=0.25, operator_cost=operator_cost)
    store = SummaryStore(model=model)
    prices = PriceTable(prices={"*": (1e6, 0.0)})  # 1 USD per prompt token
    result = await arun_search(
        toy_spec(
            model,
            FunctionSandbox(grade),
            budget=Budget(steps=8, prices=prices),
            config=SearchConfig(initial_drafts=2, seed=3),
            ordered=True,
            description="toy task",
            prompts=OperatorPrompts(summaries=store),
            final_test=False,
        )
    )
    n_ops, n_sum = len(model.operator_requests()), len(model.summary_requests())
    assert n_sum > 0
    if operator_cost is not None:
        expected = 0.5 * n_ops + 0.25 * n_sum
    else:  # priced: 10 prompt tokens per operator call, 100 per summary call
        expected = 10.0 * n_ops + 100.0 * n_sum
    assert result.spent["usd"] == pytest.approx(expected)


@pytest.mark.anyio
async def test_prompts_do_not_depend_on_how_long_summaries_take(tmp_path: Path) -> None:
    """Ordered runs whose summary calls are asked for in different orders write the same
    journal (so a prompt is fixed by the board at proposal time and the summaries' texts).

    The orders come from seeded random delays; how far they reorder the calls depends on the
    machine's load, so runs are added (up to six) until two orders differ. Pass or fail never
    depends on timing: every run must give the same prompts and journal.
    """
    prompts, orders, fingerprints = [], [], []
    for seed in range(1, 7):
        model = Model(delay_seed=seed, summary_delays=True)
        run_dir = tmp_path / f"r{seed}"
        await search(model, SummaryStore(model=model), steps=12, run_dir=run_dir, workers=3)
        prompts.append(
            {int(r.metadata["step"]): r.messages[-1].content for r in model.operator_requests()}
        )
        orders.append([r.metadata["node_id"] for r in model.summary_requests()])
        fingerprints.append(journal_fingerprint(run_dir))
        if len({tuple(o) for o in orders}) > 1:
            break
    assert any("summary-of-" in p for p in prompts[0].values())
    assert all(p == prompts[0] for p in prompts)
    assert all(f == fingerprints[0] for f in fingerprints)
    if len({tuple(o) for o in orders}) == 1:
        pytest.skip("six runs asked for the summaries in the same order (a loaded machine)")


@pytest.mark.anyio
async def test_run_directory_caches_summaries_for_resume(tmp_path: Path) -> None:
    """A store without a cache gets ``<run_dir>/summaries``; a resumed search with a fresh
    store reads those files instead of asking the model again."""
    run = tmp_path / "run"
    first = Model()
    await search(first, SummaryStore(model=first), steps=8, run_dir=run)
    cached = {p.stem for p in (run / "summaries").glob("*.json")}
    assert cached == {str(r.metadata["node_id"]) for r in first.summary_requests()}
    second = Model()
    store = SummaryStore(model=second)
    result = await aresume_search(
        run,
        ResumeSpec(
            model=second,
            sandbox=FunctionSandbox(grade),
            selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
            prompts=OperatorPrompts(summaries=store),
            budget=Budget(steps=16),
            final_test=False,
        ),
    )
    assert len(result.nodes) == 16
    assert store.cache_dir == run / "summaries"
    again = {str(r.metadata["node_id"]) for r in second.summary_requests()}
    assert not again & cached, "a cached summary was asked for again"
    shown_cached = [
        r for r in second.operator_requests()
        if any(f"summary-of-{n}" in r.messages[-1].content for n in cached)
    ]  # fmt: skip
    assert shown_cached, "the resumed search never showed a cached summary"


@pytest.mark.anyio
async def test_failed_summaries_show_plans_and_the_search_goes_on() -> None:
    """A summary model that answers garbage leaves plans in memory; no step fails."""
    model = Model()

    @define(eq=False)
    class Garbage:
        calls: int = 0

        async def complete(self, request: ModelRequest) -> ModelResponse:
            self.calls += 1
            return ModelResponse(text="not json", usage=Usage(prompt_tokens=5))

    bad = Garbage()
    store = SummaryStore(model=bad)
    nodes, _ = await search(model, store, steps=8)
    assert len(nodes) == 8 and bad.calls > 0 and store.failures == bad.calls
    later = model.operator_requests()[-1].messages[-1].content
    assert "plan " in later and "summary-of-" not in later


def test_build_without_a_store_is_unchanged() -> None:
    """Without a summary store, defer gives the finished request, equal to build's."""
    prompts = OperatorPrompts()
    proposal = Proposal(step=0, node_id="n00000", operator=Operator.DRAFT, parent_ids=(), seed=1)
    info = TaskInfo(name="toy", description="d")
    request = prompts.defer(proposal, [], info)
    assert isinstance(request, ModelRequest)
    assert request == prompts.build(proposal, [], info)


@pytest.mark.anyio
async def test_the_summary_cache_never_writes_through_a_link(tmp_path: Path) -> None:
    """A link left in the cache (``<node>.json.tmp`` -> a file outside, the old temporary
    name) or a ``summaries`` directory that is a link is never written through: the file
    outside keeps its bytes, the directory outside stays empty."""

    def board() -> Board:
        fresh = Board()
        add_card(fresh, "n1", 0.5)
        return fresh

    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    cache = tmp_path / "run" / "summaries"
    cache.mkdir(parents=True)
    (cache / "n1.json.tmp").symlink_to(outside)
    model = Model()
    assert await SummaryStore(model=model, cache_dir=cache).get(board(), "n1")
    assert outside.read_text() == "precious\n"
    assert json.loads((cache / "n1.json").read_text())["node_id"] == "n1"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = tmp_path / "run2" / "summaries"
    linked.parent.mkdir()
    linked.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(OSError, match="symbolic link"):
        await SummaryStore(model=Model(), cache_dir=linked).get(board(), "n1")
    assert list(elsewhere.iterdir()) == []
