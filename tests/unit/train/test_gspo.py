"""GSPOTrainer: exact resume, accumulation, on-policy first step, learning direction, errors."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle import Trainer  # noqa: E402
from openmle.errors import InvalidArgument, TrainerError  # noqa: E402
from openmle.testing import check_trainer  # noqa: E402
from openmle.train import GSPOConfig, GSPOTrainer, RolloutBatch  # noqa: E402

pytestmark = pytest.mark.torch

FAST = GSPOConfig(lr=1e-3, clip_eps_low=0.2, steps_per_batch=2, micro_batch_size=2)


def _params(model: Any) -> list[Any]:
    return [p.detach().clone() for p in model.parameters()]


def test_satisfies_protocol_and_conformance(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """The trainer is a Trainer and passes check_trainer (save/load resumes exactly)."""
    batches = [random_batch(i, size=4, rollout=True) for i in range(4)]
    assert isinstance(GSPOTrainer(tiny_model()), Trainer)
    check_trainer(lambda: GSPOTrainer(tiny_model(), config=FAST), batches)


def test_defaults_are_the_papers() -> None:
    """AdamW lr 1e-6, wd 0.1, betas (0.9, 0.98), eps 3.5e-4 both sides, TIS [0, 2], no KL."""
    c = GSPOConfig()
    assert (c.lr, c.weight_decay, c.betas) == (1e-6, 0.1, (0.9, 0.98))
    assert (c.clip_eps_low, c.clip_eps_high, c.tis_clip_low, c.tis_clip_high) == (
        3.5e-4,
        None,
        0,
        2,
    )
    assert c.kl_coef == 0 and c.entropy_coef == 0 and c.aggregation == "seq-mean-token-mean"


def test_optimizer_uses_config(tiny_model: Callable[..., Any]) -> None:
    """The AdamW groups carry the configured lr, betas and weight decay (none on biases)."""
    trainer = GSPOTrainer(tiny_model())
    groups = trainer.optimizer.param_groups
    assert isinstance(trainer.optimizer, torch.optim.AdamW)
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert all(g["lr"] == 1e-6 and g["betas"] == (0.9, 0.98) for g in groups)


def test_first_step_is_on_policy(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """Without old log-probs the trainer recomputes them: every sequence ratio is exactly 1."""
    m = GSPOTrainer(tiny_model()).step(random_batch(3))
    assert m["ratio_min"] == m["ratio_max"] == 1.0 and m["clip_fraction"] == 0.0
    assert m["step"] == 1.0 and m["sequences"] == 4.0 and m["tokens"] > 0


def test_later_steps_of_a_batch_are_off_policy(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """With several optimiser steps per batch the ratio moves and clipping engages."""
    cfg = GSPOConfig(lr=1e-2, steps_per_batch=4)
    m = GSPOTrainer(tiny_model(), config=cfg).step(random_batch(3, size=8))
    assert m["step"] == 4.0
    assert m["ratio_max"] > 1.0 or m["ratio_min"] < 1.0
    assert m["clip_fraction"] > 0.0


def _grads_at_step(trainer: GSPOTrainer) -> list[list[Any]]:
    """Record the (clipped) gradients each time the optimiser is about to step."""
    seen: list[list[Any]] = []

    def hook(opt: Any, args: Any, kwargs: Any) -> None:
        seen.append(
            [
                torch.zeros_like(p) if p.grad is None else p.grad.clone()
                for p in trainer.model.parameters()
            ]
        )

    trainer.optimizer.register_step_pre_hook(hook)
    return seen


@pytest.mark.parametrize("aggregation", ["seq-mean-token-mean", "token-mean", "sum-of-sample-mean"])
def test_accumulation_equals_one_pass(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any], aggregation: str
) -> None:
    """Micro-batches of 1 sequence give the same gradient as one pass on the whole batch."""
    batch = random_batch(5, size=6, rollout=True)
    a = GSPOTrainer(tiny_model(), config=GSPOConfig(lr=1e-3, aggregation=aggregation))
    b = GSPOTrainer(
        tiny_model(), config=GSPOConfig(lr=1e-3, aggregation=aggregation, micro_batch_size=1)
    )
    ga, gb = _grads_at_step(a), _grads_at_step(b)
    ma, mb = a.step(batch), b.step(batch)
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-6)
    assert ma["grad_norm"] == pytest.approx(mb["grad_norm"], rel=1e-5)
    for x, y in zip(ga[0], gb[0], strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7)


def test_positive_advantage_raises_likelihood(tiny_model: Callable[..., Any]) -> None:
    """Rewarding one response and penalising another moves their log-probs apart."""
    batch = RolloutBatch.from_sequences(
        [[1, 2, 3], [1, 2, 3]], [[7, 8, 9], [10, 11, 12]], [1.0, -1.0], pad_token_id=0
    )
    trainer = GSPOTrainer(tiny_model(), config=GSPOConfig(lr=3e-3))

    def gap() -> float:
        from openmle.train._loss import token_logprobs

        with torch.no_grad():
            lp = token_logprobs(trainer.model(input_ids=batch.input_ids).logits, batch.input_ids)
        seq = (lp * batch.response_mask).sum(-1)
        return float(seq[0] - seq[1])

    before = gap()
    for _ in range(10):
        trainer.step(batch)
    assert gap() > before + 1.0


def test_masked_sequence_has_no_effect(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """A fully masked sequence (an infra error) changes nothing: same update as without it."""
    batch = random_batch(2, size=4)
    mask = batch.response_mask.clone()
    mask[3] = False
    masked = RolloutBatch(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, response_mask=mask,
        advantages=batch.advantages,
    )  # fmt: skip
    a, b = GSPOTrainer(tiny_model(), config=FAST), GSPOTrainer(tiny_model(), config=FAST)
    ga, gb = _grads_at_step(a), _grads_at_step(b)
    a.step(masked)
    b.step(batch.select(slice(0, 3)))
    for x, y in zip(ga[0] + ga[1], gb[0] + gb[1], strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7)


def test_kl_term_uses_reference_model(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """With a reference copy the KL starts at 0; a nonzero coefficient without one is refused."""
    model = tiny_model()
    cfg = GSPOConfig(lr=1e-2, kl_coef=0.1, entropy_coef=0.01)
    trainer = GSPOTrainer(model, config=cfg, ref_model=copy.deepcopy(model))
    first = trainer.step(random_batch(1))
    second = trainer.step(random_batch(1))
    assert first["kl"] == pytest.approx(0.0, abs=1e-7) and second["kl"] > 0
    assert first["entropy"] > 0
    with pytest.raises(InvalidArgument, match="ref_model"):
        GSPOTrainer(tiny_model(), config=cfg).step(random_batch(1))


def test_load_errors(tmp_path: Path, tiny_model: Callable[..., Any]) -> None:
    """Loading a missing checkpoint raises TrainerError naming the path."""
    with pytest.raises(TrainerError, match="cannot read checkpoint"):
        GSPOTrainer(tiny_model()).load(tmp_path / "nope")


def test_checkpoint_files(
    tmp_path: Path, tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """save writes model, optimiser, RNG and a JSON with the step and config."""
    trainer = GSPOTrainer(tiny_model(), config=FAST)
    trainer.step(random_batch(0))
    trainer.save(tmp_path / "ck")
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert names == ["model.pt", "optimizer.pt", "rng-0.pt", "trainer.json"]
    info = (tmp_path / "ck" / "trainer.json").read_text()
    assert '"step": 2' in info and '"kind": "gspo"' in info


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"lr": -1.0}, "lr"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"aggregation": "mean"}, "aggregation"),
        ({"aggregation": "seq-mean-token-sum-norm"}, "norm_length"),
        ({"steps_per_batch": 0}, "steps_per_batch"),
        ({"tis_clip_high": 0.5, "tis_clip_low": 1.0}, "tis_clip_high"),
        ({"distributed": "fsdp"}, "distributed"),
    ],
)
def test_config_validation(kwargs: dict[str, Any], field: str) -> None:
    """Bad hyperparameters raise InvalidArgument naming the field."""
    with pytest.raises(InvalidArgument, match=field):
        GSPOConfig(**kwargs)


def test_batch_smaller_than_steps_is_refused(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any]
) -> None:
    """A batch with fewer sequences than optimiser steps per batch is an argument error."""
    trainer = GSPOTrainer(tiny_model(), config=GSPOConfig(steps_per_batch=8))
    with pytest.raises(InvalidArgument, match="steps_per_batch"):
        trainer.step(random_batch(0, size=4))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_bf16_step_on_gpu(tiny_model: Callable[..., Any], random_batch: Callable[..., Any]) -> None:
    """On CUDA the forward runs under bf16 autocast; steps stay finite and resume exactly."""
    batches = [random_batch(i, rollout=True) for i in range(4)]
    check_trainer(lambda: GSPOTrainer(tiny_model().cuda(), config=FAST), batches)
    trainer = GSPOTrainer(tiny_model().cuda(), config=FAST)
    batch = batches[0].to("cuda")
    with trainer._engine.autocast():
        logits = trainer.model(input_ids=batch.input_ids).logits
    assert logits.dtype == torch.bfloat16


def test_micro_batches_skip_trailing_padding(tiny_model: Callable[..., Any]) -> None:
    """Each micro-batch is cut to its own longest sequence; the output layer skips prompts."""
    batch = RolloutBatch.from_sequences(
        [[1, 2], [3, 4, 5]], [[6] * 20, [7, 8]], [1.0, -1.0], pad_token_id=0
    )
    model = tiny_model()
    seen: list[tuple[int, int]] = []

    def record(module: Any, args: Any, kwargs: Any, out: Any) -> None:
        seen.append((kwargs["input_ids"].shape[1], out.logits.shape[1]))

    model.register_forward_hook(record, with_kwargs=True)
    GSPOTrainer(model, config=GSPOConfig(micro_batch_size=1, chunk_logprobs=False)).step(batch)
    # recompute of old log-probs, then training: row 0 is 22 wide (logits from position 1),
    # row 1 is 5 wide (logits from position 2)
    assert seen == [(22, 21), (5, 3), (22, 21), (5, 3)]


def test_chunked_path_skips_trailing_padding_and_prompts(
    tiny_model: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With chunked log-probs (the default) the output layer sees the same positions."""
    from openmle.train._loss import chunked_token_logprobs as real

    batch = RolloutBatch.from_sequences(
        [[1, 2], [3, 4, 5]], [[6] * 20, [7, 8]], [1.0, -1.0], pad_token_id=0
    )
    seen: list[tuple[int, int]] = []

    def record(hidden: Any, weight: Any, input_ids: Any, **kw: Any) -> Any:
        seen.append((input_ids.shape[1], hidden.shape[1]))
        return real(hidden, weight, input_ids, **kw)

    monkeypatch.setattr("openmle.train._engine.chunked_token_logprobs", record)
    GSPOTrainer(tiny_model(), config=GSPOConfig(micro_batch_size=1)).step(batch)
    assert seen == [(22, 21), (5, 3), (22, 21), (5, 3)]


@pytest.mark.parametrize("entropy_coef", [0.0, 0.01])
def test_chunked_and_unchunked_steps_agree(
    tiny_model: Callable[..., Any], random_batch: Callable[..., Any], entropy_coef: float
) -> None:
    """Two optimiser steps with chunked log-probs give the unchunked parameters and metrics
    (the output layer is tied to the embedding, so its gradient flows both ways)."""
    batch = random_batch(3, size=4, rollout=True)
    out = []
    for chunk in (True, False):
        model = tiny_model()
        cfg = GSPOConfig(
            lr=1e-2, adam_eps=1e-3, steps_per_batch=2, micro_batch_size=1,
            entropy_coef=entropy_coef, chunk_logprobs=chunk,
        )  # fmt: skip
        metrics = GSPOTrainer(model, config=cfg).step(batch)
        out.append((_params(model), metrics))
    (pa, ma), (pb, mb) = out
    for a, b in zip(pa, pb, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)
    assert ma.keys() == mb.keys()
    for k in ma:
        assert ma[k] == pytest.approx(mb[k], rel=1e-5, abs=1e-6), k
    moved = max(float((a - b).abs().max()) for a, b in zip(pa, _params(tiny_model()), strict=True))
    assert moved > 1e-3


def test_empty_batch_makes_no_update(tiny_model: Callable[..., Any]) -> None:
    """A batch with no response token (all infra errors) leaves the weights and step alone."""
    batch = RolloutBatch.from_sequences([[1, 2], [3]], [[], []], [0.5, -0.5], pad_token_id=0)
    trainer = GSPOTrainer(tiny_model(), config=FAST)
    before = _params(trainer.model)
    m = trainer.step(batch)
    assert m["step"] == 0.0 and m["tokens"] == 0.0 and m["loss"] == 0.0
    assert m["ratio_mean"] == 1.0 and "clip_fraction" in m
    for a, b in zip(before, _params(trainer.model), strict=True):
        assert torch.equal(a, b)


def test_non_finite_inputs_are_refused(tiny_model: Callable[..., Any]) -> None:
    """NaN advantages are an argument error; a non-finite gradient skips the update loudly."""
    with pytest.raises(InvalidArgument, match="finite advantages"):
        RolloutBatch.from_sequences([[1]], [[2]], [float("nan")], pad_token_id=0)
    batch = RolloutBatch.from_sequences([[1, 2]], [[3, 4]], [1.0], pad_token_id=0)
    bad = batch.with_logprobs(old=torch.full_like(batch.input_ids, float("nan"), dtype=torch.float))
    trainer = GSPOTrainer(tiny_model(), config=GSPOConfig(lr=1e-3))
    before = _params(trainer.model)
    with pytest.raises(TrainerError, match="non-finite gradient norm"):
        trainer.step(bad)
    assert trainer.step_count == 0
    for a, b in zip(before, _params(trainer.model), strict=True):
        assert torch.equal(a, b)
