"""The paper's presets (``GSPOConfig.paper``, ``SFTConfig.paper``) and the SFT schedule, epochs
and length cut."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from openmle import Message  # noqa: E402
from openmle.errors import InvalidArgument  # noqa: E402
from openmle.train import (  # noqa: E402
    ByteTokenizer,
    GSPOConfig,
    GSPOTrainer,
    RolloutBatch,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
)

pytestmark = pytest.mark.torch


def _model(seed: int = 0) -> Any:
    return TinyCausalLM(TinyLMConfig(dim=32, n_layers=1, n_heads=2, seed=seed))


def _sft_batch(n: int = 4, answer: str = "42") -> SFTBatch:
    recs = [
        [
            Message(role="user", content=f"Q{i}?"),
            Message(role="assistant", content=answer * (i + 1)),
        ]
        for i in range(n)
    ]
    return SFTBatch.from_messages(ByteTokenizer(), recs)


def test_gspo_paper_preset() -> None:
    c = GSPOConfig.paper()
    assert (c.group_size, c.rollout_batch_size, c.steps_per_batch) == (16, 16, 2)
    assert (c.lr, c.weight_decay, c.betas, c.max_grad_norm) == (1e-6, 0.1, (0.9, 0.98), 1.0)
    assert (c.clip_eps_low, c.clip_eps_high, c.use_tis) == (3.5e-4, None, True)
    assert (c.tis_clip_low, c.tis_clip_high, c.kl_coef, c.entropy_coef) == (0.0, 2.0, 0.0, 0.0)
    assert GSPOConfig.paper(lr=2e-6).lr == 2e-6
    d = GSPOConfig()  # the defaults differ only in the rollout shape and steps per batch
    assert (d.group_size, d.rollout_batch_size, d.steps_per_batch) == (None, None, 1)
    with pytest.raises(InvalidArgument, match="group_size"):
        GSPOConfig(group_size=0)


def test_gspo_checks_the_rollout_shape(random_batch: Any) -> None:
    batch: RolloutBatch = random_batch(0, size=4, vocab=32)
    small = GSPOConfig.paper(group_size=2, rollout_batch_size=2, lr=1e-3)
    trainer = GSPOTrainer(TinyCausalLM(TinyLMConfig(vocab_size=32, dim=16, n_layers=1)), small)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    metrics = trainer.step(batch)
    assert trainer.step_count == 2 and math.isfinite(metrics["loss"])
    after = list(trainer.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))
    wrong = GSPOTrainer(_model(), GSPOConfig.paper())
    with pytest.raises(InvalidArgument, match="256 sequences"):
        wrong.step(batch)


def test_sft_paper_preset_and_schedule() -> None:
    c = SFTConfig.paper(total_steps=100)
    assert (c.lr, c.schedule, c.warmup_ratio, c.epochs, c.max_length) == (
        3e-5, "cosine", 0.1, 3, 32_768,
    )  # fmt: skip
    lrs = [c.lr_at(k) for k in range(100)]
    assert lrs[0] == pytest.approx(3e-5 / 10) and lrs[9] == pytest.approx(3e-5)
    assert all(a < b for a, b in itertools.pairwise(lrs[:10]))  # linear warm-up
    assert all(a >= b for a, b in itertools.pairwise(lrs[9:]))  # cosine decay
    assert lrs[-1] < 0.01 * 3e-5
    mid = 10 + 45  # halfway through the decay: half the peak
    assert c.lr_at(mid) == pytest.approx(3e-5 * 0.5, rel=1e-9)
    assert SFTConfig().lr_at(10**6) == 1e-5  # the default stays constant
    with pytest.raises(InvalidArgument, match="total_steps"):
        SFTConfig.paper().lr_at(0)
    with pytest.raises(InvalidArgument, match="warmup_ratio"):
        SFTConfig(warmup_ratio=1.0)
    with pytest.raises(InvalidArgument, match="schedule"):
        SFTConfig(schedule="linear")


def test_sft_fit_runs_epochs_on_the_schedule() -> None:
    batches = [_sft_batch(2), _sft_batch(3, "7")]
    trainer = SFTTrainer(_model(), SFTConfig.paper(lr=1e-3, epochs=3))
    seen: list[float] = []
    out = trainer.fit(batches, on_step=lambda m: seen.append(m["lr"]))
    assert len(out) == 6 and trainer.step_count == 6 and trainer.config.total_steps == 6
    assert seen == [pytest.approx(trainer.config.lr_at(k)) for k in range(6)]
    assert seen[0] == pytest.approx(1e-3)  # ceil(0.1 * 6) = 1 warm-up step
    assert seen[-1] < seen[1]
    assert out[-1]["loss"] < out[0]["loss"]
    with pytest.raises(InvalidArgument, match="batches"):
        trainer.fit([])


def test_sft_length_cut_equals_training_on_the_cut_batch() -> None:
    """With max_length=L the step equals a step on the batch cut to L tokens beforehand."""
    batch = _sft_batch(3, "abcdef")
    cut = batch.input_ids.shape[1] - 5
    a = SFTTrainer(_model(), SFTConfig(lr=1e-3, max_length=cut))
    b = SFTTrainer(_model(), SFTConfig(lr=1e-3))
    pre = SFTBatch(
        input_ids=batch.input_ids[:, :cut], attention_mask=batch.attention_mask[:, :cut],
        loss_mask=batch.loss_mask[:, :cut],
    )  # fmt: skip
    ma, mb = a.step(batch), b.step(pre)
    assert ma["tokens"] == mb["tokens"] < float(batch.loss_mask.sum())
    assert ma["loss"] == pytest.approx(mb["loss"], rel=1e-6)
    for pa, pb in zip(a.model.parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(pa, pb)


def test_sft_paper_global_batch_is_checked() -> None:
    c = SFTConfig.paper()
    assert c.global_batch_size == 128 and SFTConfig().global_batch_size is None
    small = SFTTrainer(_model(), SFTConfig(lr=1e-3, global_batch_size=2))
    small.step(_sft_batch(2))
    small.step(_sft_batch(1))  # a shorter final batch is allowed
    with pytest.raises(InvalidArgument, match="global_batch_size=2"):
        small.step(_sft_batch(3))
    with pytest.raises(InvalidArgument, match="global_batch_size"):
        SFTConfig(global_batch_size=0)
