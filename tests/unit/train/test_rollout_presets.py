"""The rollout side of the paper's preset: producer and policies, and a paper GSPO step fed by
a paper producer."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle import Job, Message, ModelRequest, Operator, Outcome, RunResult  # noqa: E402
from openmle.errors import InvalidArgument  # noqa: E402
from openmle.search import DEFAULT_MIX  # noqa: E402
from openmle.testing import FunctionSandbox, ScriptedModel  # noqa: E402
from openmle.train import (  # noqa: E402
    ByteTokenizer,
    GSPOConfig,
    GSPOTrainer,
    LocalPolicy,
    ModelPolicy,
    RolloutProducer,
    RolloutTask,
    TinyCausalLM,
    TinyLMConfig,
    train_on_policy,
)

pytestmark = [pytest.mark.torch, pytest.mark.anyio]

seen: list[ModelRequest] = []


def answer(request: ModelRequest) -> str:
    seen.append(request)
    return f"```python\nprint({(request.seed or 0) % 10})\n```"


def grade(job: Job) -> RunResult:
    value = int(job.code.split("print(")[1].split(")")[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value / 10, split=job.split)


def _paper_producer(**kw: object) -> RolloutProducer:
    tok = ByteTokenizer()
    return RolloutProducer.paper(
        policy=ModelPolicy.paper(ScriptedModel(answer), tok),
        sandbox=FunctionSandbox(grade),
        tasks=[RolloutTask(name="toy", description="Print a digit.")],
        **kw,
    )


def test_policy_presets() -> None:
    tok = ByteTokenizer()
    local = LocalPolicy.paper(TinyCausalLM(TinyLMConfig(dim=16, n_layers=1)), tok)
    assert (local.temperature, local.max_new_tokens) == (1.0, 24_576)
    assert LocalPolicy.paper(local.model, tok, max_new_tokens=64).max_new_tokens == 64
    remote = ModelPolicy.paper(ScriptedModel(answer), tok)
    assert (remote.temperature, remote.max_tokens) == (1.0, 24_576)
    plain = ModelPolicy(ScriptedModel(answer), tok)
    assert (plain.temperature, plain.max_tokens) == (None, None)
    with pytest.raises(InvalidArgument, match="max_tokens"):
        ModelPolicy(ScriptedModel(answer), tok, max_tokens=0)
    with pytest.raises(InvalidArgument, match="temperature"):
        ModelPolicy(ScriptedModel(answer), tok, temperature=0.0)


def test_producer_preset() -> None:
    prod = _paper_producer()
    assert prod.group_size == 16 and prod.mix == DEFAULT_MIX
    probs = prod.mix.probabilities()
    assert [probs[op] for op in Operator] == [pytest.approx(p) for p in (0.5, 0.17, 0.17, 0.16)]
    assert [op.value for op in Operator] == ["draft", "improve", "debug", "crossover"]
    assert _paper_producer(group_size=4, seed=9).group_size == 4


async def test_model_policy_sends_its_sampling_settings() -> None:
    seen.clear()
    g = await _paper_producer().group()
    assert len(g.samples) == 16 and len(seen) == 16
    assert all(r.temperature == 1.0 and r.max_tokens == 24_576 for r in seen)


async def test_paper_gspo_step_fed_by_a_paper_producer_passes_its_batch_check() -> None:
    """16 groups of 16 from the paper producer are exactly the 256 sequences GSPOConfig.paper()
    checks for; one call takes its two optimiser steps."""
    cfg = GSPOConfig.paper()
    assert cfg.group_size is not None and cfg.rollout_batch_size is not None
    model = TinyCausalLM(TinyLMConfig(dim=16, n_layers=1, n_heads=2))
    trainer = GSPOTrainer(model, cfg)
    short = lambda task, op, parents: ModelRequest(  # noqa: E731  (a short prompt for the tiny LM)
        messages=[Message(role="user", content="digit?")], operator=op
    )
    prod = _paper_producer(prompt=short)
    steps = await train_on_policy(
        prod, trainer, steps=1, groups_per_step=cfg.rollout_batch_size,
        pad_token_id=ByteTokenizer().pad_token_id,
    )  # fmt: skip
    assert trainer.step_count == cfg.steps_per_batch == 2
    assert steps[0].metrics["sequences"] == cfg.group_size * cfg.rollout_batch_size == 256
    assert math.isfinite(steps[0].metrics["loss"])
