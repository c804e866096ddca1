"""Several models in one run: :class:`OperatorRouter` sends each operator's requests to its
model, the manifest records every model (per route, and the summary model), and the budget
prices each model's tokens at its own price."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from attrs import define, field

from openmle import Job, ModelRequest, ModelResponse, Operator, Outcome, RunResult, Usage
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.search import (
    Budget,
    OperatorPrompts,
    OperatorRouter,
    PriceTable,
    SearchConfig,
    SearchSpec,
    SummaryStore,
    arun_search,
    write_report,
)
from openmle.testing import FunctionSandbox, FunctionSelector

PROGRAM = "```python\nscore = {score}\n```"


@define(eq=False)
class Model:
    """Answers every request with a program (a failing one for the steps in ``fail``) or, for
    summary requests, a JSON summary; records what it was asked. Reports no cost, so a price
    table prices its tokens by ``model``."""

    model: str
    fail: frozenset[int] = frozenset()
    requests: list[ModelRequest] = field(factory=list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        if request.metadata.get("purpose") == "node_summary":
            text = json.dumps({"method": "a forest.", "lesson": "ok."})
            return ModelResponse(
                text=text, usage=Usage(prompt_tokens=100, completion_tokens=0), model=self.model
            )
        step = int(request.metadata["step"])
        body = "raise SystemExit(1)" if step in self.fail else f"score = {0.1 + 0.01 * step}"
        return ModelResponse(
            text=f"plan {step}\n```python\n{body}\n```",
            usage=Usage(prompt_tokens=10, completion_tokens=0),
            model=self.model,
        )

    def operators(self) -> set[Operator | None]:
        return {r.operator for r in self.requests if r.metadata.get("purpose") != "node_summary"}

    def summaries(self) -> int:
        return sum(r.metadata.get("purpose") == "node_summary" for r in self.requests)


def grade(job: Job) -> RunResult:
    if "score = " not in job.code:
        return RunResult(outcome=Outcome.RUNTIME_ERROR, error_signature="SystemExit: 1")
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


def spec(model: object, *, steps: int, prompts: object = None, prices: object = None) -> SearchSpec:
    return SearchSpec(
        task="toy",
        higher_is_better=True,
        model=model,  # type: ignore[arg-type]
        sandbox=FunctionSandbox(grade),
        selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
        budget=Budget(steps=steps, prices=prices),  # type: ignore[arg-type]
        config=SearchConfig(initial_drafts=2, seed=3, crossover_prob=0.5),
        workers=1,
        ordered=True,
        description="toy task",
        prompts=prompts,  # type: ignore[arg-type]
        final_test=False,
    )


@pytest.mark.anyio
async def test_each_operator_reaches_its_model_and_the_manifest_records_them(
    tmp_path: Path,
) -> None:
    draft = Model(model="draft-m", fail=frozenset({1}))
    improve, debug, cross = Model(model="improve-m"), Model(model="debug-m"), Model("cross-m")
    router = OperatorRouter(
        routes={
            Operator.DRAFT: draft,
            "improve": improve,
            Operator.DEBUG: debug,
            Operator.CROSSOVER: cross,
        }
    )
    await arun_search(spec(router, steps=16), run_dir=tmp_path / "run")
    assert draft.operators() == {Operator.DRAFT}
    assert improve.operators() == {Operator.IMPROVE}
    assert debug.operators() == {Operator.DEBUG}
    assert cross.operators() == {Operator.CROSSOVER}
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    routes = manifest["model"]["routes"]
    assert {k: v["id"] for k, v in routes.items()} == {
        "draft": "draft-m",
        "improve": "improve-m",
        "debug": "debug-m",
        "crossover": "cross-m",
    }
    assert manifest["model"]["class"].endswith("OperatorRouter")
    assert manifest["summary_model"] is None
    journal = (tmp_path / "run" / "journal.jsonl").read_text()
    assert '"model":"cross-m"' in journal  # each node records the model that answered


@pytest.mark.anyio
async def test_a_mapping_routes_with_a_default_and_a_summary_model_is_recorded(
    tmp_path: Path,
) -> None:
    """SearchSpec turns a mapping into a router; operators without a route use ``default``;
    a separate summary model writes every summary, and each model is priced at its price."""
    big, small, cheap = Model(model="big"), Model(model="small"), Model(model="cheap")
    prices = PriceTable(prices={"big": (1e6, 0.0), "small": (1e5, 0.0), "cheap": (1e3, 0.0)})
    store = SummaryStore(model=cheap)
    s = spec(
        {"draft": big, "default": small},
        steps=10,
        prompts=OperatorPrompts(summaries=store),
        prices=prices,
    )
    assert isinstance(s.model, OperatorRouter)
    result = await arun_search(s, run_dir=tmp_path / "run")
    assert big.operators() == {Operator.DRAFT}
    assert small.operators() and Operator.DRAFT not in small.operators()
    assert cheap.operators() == set() and cheap.summaries() == store.calls > 0
    assert big.summaries() == small.summaries() == 0
    n_big, n_small = len(big.requests), len(small.requests)
    # 10 prompt tokens per operator call, 100 per summary call, each at its model's price
    expected = 10.0 * n_big + 1.0 * n_small + 0.1 * cheap.summaries()
    assert result.spent["usd"] == pytest.approx(expected)
    assert result.spent["tokens"] == 10 * (n_big + n_small) + 100 * cheap.summaries()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {k: v["id"] for k, v in manifest["model"]["routes"].items()} == {
        "draft": "big",
        "default": "small",
    }
    assert manifest["summary_model"]["id"] == "cheap"
    html = write_report(tmp_path / "run").read_text()
    assert "default: small, draft: big</code> (summaries: <code>cheap</code>)" in html


def test_an_operator_without_a_model_is_refused_by_name() -> None:
    with pytest.raises(InvalidArgument, match=r"operator 'debug'.*debug=.*default="):
        OperatorRouter(routes={"draft": Model("a"), "improve": Model("b")})
    with pytest.raises(InvalidArgument, match="'summarise', which is no operator"):
        OperatorRouter(routes={"summarise": Model("a")}, default=Model("b"))
    with pytest.raises(InvalidArgumentType, match=r"routes\['draft'\]"):
        OperatorRouter(routes={"draft": "gpt"}, default=Model("b"))
    with pytest.raises(InvalidArgumentType, match="default="):
        OperatorRouter(routes={}, default=42)  # type: ignore[arg-type]


def test_model_for_auxiliary_requests() -> None:
    a, b = Model("a"), Model("b")
    assert OperatorRouter(routes={"improve": a}, default=b).model_for(None) is b
    full = OperatorRouter(routes={o: Model(o.value) for o in Operator})
    assert full.model_for(None) is full.routes[Operator.DRAFT]
    assert full.model_for(Operator.DEBUG) is full.routes[Operator.DEBUG]
