"""The in-memory fakes satisfy their protocols and pass the shipped conformance checks."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from openmle import (
    Candidate,
    Job,
    Message,
    ModelRequest,
    OperatorModel,
    Outcome,
    RunResult,
    Sandbox,
    Selector,
    Trainer,
)
from openmle.errors import InvalidArgument, SandboxError
from openmle.testing import (
    FunctionSandbox,
    FunctionSelector,
    RecordingTrainer,
    ScriptedModel,
    check_operator_model,
    check_selector,
    check_trainer,
)


def test_fakes_satisfy_protocols() -> None:
    """Every fake is an instance of its runtime-checkable protocol."""
    assert isinstance(FunctionSandbox(lambda j: RunResult(outcome="success")), Sandbox)
    assert isinstance(ScriptedModel(["x"]), OperatorModel)
    assert isinstance(FunctionSelector(lambda c: 1.0), Selector)
    assert isinstance(RecordingTrainer[int](), Trainer)


@pytest.mark.anyio
async def test_function_sandbox_sync_and_async_handlers() -> None:
    """Sync and async handlers both work; jobs are recorded; run after aclose raises."""

    async def handler(job: Job) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=float(len(job.code)))

    sb = FunctionSandbox(handler)
    res = await sb.run(Job(code="abc", task="t"))
    assert res.score == 3.0 and len(sb.jobs) == 1
    sync = FunctionSandbox(lambda j: RunResult(outcome="timeout"))
    assert (await sync.run(Job(code="", task="t"))).outcome is Outcome.TIMEOUT
    await sb.aclose()
    with pytest.raises(SandboxError):
        await sb.run(Job(code="", task="t"))


@pytest.mark.anyio
async def test_scripted_model_conforms_and_runs_out() -> None:
    """The scripted model passes the model conformance check and reports exhaustion clearly."""
    model = ScriptedModel(["```python\nprint(1)\n```"])
    await check_operator_model(model)
    with pytest.raises(InvalidArgument, match="ran out"):
        await model.complete(ModelRequest(messages=[Message(role="user", content="again")]))
    echo = ScriptedModel(lambda req: req.messages[-1].content.upper())
    resp = await echo.complete(ModelRequest(messages=[{"role": "user", "content": "hi"}]))
    assert resp.text == "HI"
    assert resp.usage.prompt_tokens == 1 and resp.usage.completion_tokens == 1


def test_function_selector_conforms_and_weights() -> None:
    """Probabilities follow the weights; zero weights fall back to uniform."""
    check_selector(FunctionSelector(lambda c: (c.score or 0.0) + 0.1))
    cands = [Candidate(node_id="a", score=1.0), Candidate(node_id="b", score=3.0)]
    sel = FunctionSelector(lambda c: c.score or 0.0).select(cands, np.random.default_rng(0))
    assert sel.probabilities == (0.25, 0.75)
    uni = FunctionSelector(lambda c: 0.0).select(cands, np.random.default_rng(0), k=2)
    assert uni.probabilities == (0.5, 0.5) and set(uni.chosen) == {"a", "b"}


def test_recording_trainer_conforms() -> None:
    """The recording trainer resumes exactly through save/load."""

    def metrics(batch: int, step: int) -> Mapping[str, float]:
        return {"loss": batch / (step + 1)}

    check_trainer(lambda: RecordingTrainer[int](metrics), [1, 2, 3, 4])
