"""``SFTTrainer``: supervised fine-tuning on (prompt, answer) batches with the GSPO model interface.

The loss is the next-token cross-entropy on the answer tokens only (the prompt is context),
averaged over the answer tokens of the whole optimiser step across micro-batches and ranks, so
gradient accumulation and DDP give the same step as one pass. One ``step`` call is one
optimiser step. Same model contract, checkpoint layout and distribution rules as
:class:`GSPOTrainer`, so a model can be fine-tuned on search transitions and then trained with
GSPO in the same process.

The released system ran SFT inside SLIME/Megatron with its own launcher settings; the defaults
here (AdamW lr 1e-5 constant, weight decay 0.1, betas 0.9/0.98, clipping at 1.0, one epoch, no
length cut) are ours, chosen to match the GSPO optimiser. :meth:`SFTConfig.paper` is the paper's
recipe: lr 3e-5 with cosine decay after a 0.1 linear warm-up, 3 epochs, a 32,768-token context.

The learning rate of step ``k`` (0-based) out of ``total_steps`` is a pure function of ``k``
(:meth:`SFTConfig.lr_at`), so a restored checkpoint resumes the schedule exactly.
:meth:`SFTTrainer.fit` runs ``epochs`` passes over a list of batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, final

import attrs
import torch
from attrs import define, field, frozen
from torch import nn

from openmle._protocols import Trainer
from openmle._validation import check_choice, check_positive, check_type, fail

from ._batch import SFTBatch
from ._engine import Engine, EngineOwner, OptimConfig
from ._loss import aggregate

__all__ = ["SFTConfig", "SFTTrainer"]


@final
@frozen(kw_only=True)
class SFTConfig(OptimConfig):
    """Hyperparameters of :class:`SFTTrainer`.

    The optimiser fields (``lr``: the peak learning rate, ``weight_decay``, ``betas``,
    ``adam_eps``, ``max_grad_norm``, ``bf16``, ``distributed``, ``chunk_logprobs``) are
    :class:`~openmle.train.OptimConfig`'s, with its defaults.

    Attributes:
        micro_batch_size: sequences per forward/backward (``None``: the whole batch).
        schedule: ``"constant"`` or ``"cosine"`` (linear warm-up, then cosine decay to
            ``min_lr_ratio * lr`` at ``total_steps``).
        warmup_ratio: fraction of ``total_steps`` spent warming up linearly from 0 (in [0, 1)).
        min_lr_ratio: the cosine schedule's final learning rate as a fraction of ``lr``.
        total_steps: optimiser steps of the whole run (needed by ``"cosine"`` and by
            ``warmup_ratio > 0`` unless :meth:`SFTTrainer.fit` sets it from the data).
        epochs: passes over the data in :meth:`SFTTrainer.fit`.
        max_length: the length cut: tokens past this position (prompt + answer) are dropped
            before the forward, so no sequence longer than the context is trained on
            (``None``: no cut).
        global_batch_size: sequences per optimiser step over all ranks; when set,
            :meth:`SFTTrainer.step` refuses a batch holding more (a shorter final batch of an
            epoch is allowed). ``None``: not checked.
    """

    micro_batch_size: int | None = None
    schedule: str = "constant"
    warmup_ratio: float = 0.0
    min_lr_ratio: float = 0.0
    total_steps: int | None = None
    epochs: int = 1
    max_length: int | None = None
    global_batch_size: int | None = None

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # the optimiser fields (lr, betas, ...)
        if self.micro_batch_size is not None:
            check_type(self.micro_batch_size, int, "micro_batch_size")
            check_positive(self.micro_batch_size, "micro_batch_size")
        check_choice(self.schedule, ("constant", "cosine"), "schedule")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise fail("a number in [0, 1)", "warmup_ratio", self.warmup_ratio)
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise fail("a number in [0, 1]", "min_lr_ratio", self.min_lr_ratio)
        for name in ("total_steps", "max_length", "global_batch_size"):
            v = getattr(self, name)
            if v is not None:
                check_positive(check_type(v, int, name), name)
        check_positive(check_type(self.epochs, int, "epochs"), "epochs")

    @classmethod
    def paper(cls, **overrides: Any) -> SFTConfig:
        """The paper's SFT recipe: lr 3e-5, cosine decay after a 0.1 warm-up, 3 epochs, a
        32,768-token length cut, a global batch of 128 sequences per optimiser step; AdamW
        weight decay 0.1, betas 0.9/0.98, clipping at 1.0.

        ``total_steps`` is set by :meth:`SFTTrainer.fit` from the data (or pass it).
        """
        kw: dict[str, Any] = {
            "lr": 3e-5, "schedule": "cosine", "warmup_ratio": 0.1, "epochs": 3,
            "max_length": 32_768, "global_batch_size": 128,
        }  # fmt: skip
        kw.update(overrides)
        return cls(**kw)

    def lr_at(self, step: int) -> float:
        """The learning rate of 0-based optimiser step ``step``.

        Raises:
            InvalidArgument: a schedule or warm-up without ``total_steps``.
        """
        if self.schedule == "constant" and self.warmup_ratio == 0.0:
            return self.lr
        if self.total_steps is None:
            raise fail(
                "an int >= 1", "total_steps", None,
                f"schedule={self.schedule!r} with warmup_ratio={self.warmup_ratio} needs it "
                "(SFTTrainer.fit sets it from the data)",
            )  # fmt: skip
        total = self.total_steps
        warm = math.ceil(self.warmup_ratio * total)
        if step < warm:
            return self.lr * (step + 1) / warm
        if self.schedule == "constant":
            return self.lr
        progress = min(1.0, (step - warm) / max(1, total - warm))
        floor = self.min_lr_ratio * self.lr
        return floor + (self.lr - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))


@final
@define(eq=False)
class SFTTrainer(EngineOwner, Trainer[SFTBatch]):
    """Supervised next-token training on answer tokens; satisfies :class:`openmle.Trainer`.

    Args:
        model: any ``nn.Module`` with a Hugging Face style forward (see :class:`GSPOTrainer`).
        config: hyperparameters; ``SFTConfig()`` by default.

    ``step`` returns ``loss`` (mean NLL per answer token over the step), ``grad_norm``
    (pre-clip), ``lr`` (the scheduled rate this step used), ``step`` and ``tokens`` (answer
    tokens over all ranks, after the length cut).
    """

    _kind: ClassVar[str] = "sft"  # the checkpoint kind
    model: nn.Module
    config: SFTConfig = field(factory=SFTConfig)
    _engine: Engine = field(init=False)

    def __attrs_post_init__(self) -> None:
        check_type(self.model, nn.Module, "model")
        check_type(self.config, SFTConfig, "config")
        c = self.config
        self._engine = Engine(self.model, c.optim())

    def step(self, batch: SFTBatch) -> dict[str, float]:
        """One optimiser step on ``batch`` (this rank's shard), accumulated over micro-batches."""
        eng = self._engine
        check_type(batch, SFTBatch, "batch")
        cut = self.config.max_length
        if cut is not None and batch.input_ids.shape[1] > cut:
            batch = SFTBatch(
                input_ids=batch.input_ids[:, :cut], attention_mask=batch.attention_mask[:, :cut],
                loss_mask=batch.loss_mask[:, :cut],
            )  # fmt: skip
        want = self.config.global_batch_size
        if want is not None:
            (total,) = eng.global_sum(float(batch.size))
            if int(total) > want:
                raise fail(
                    f"at most global_batch_size={want} sequences over all ranks", "batch.size",
                    int(total), "cut the data into batches of that size or set it to None",
                )  # fmt: skip
        batch = batch.to(eng.device)
        lr = self.config.lr_at(eng.step_count)
        for g in eng.optimizer.param_groups:
            g["lr"] = lr
        (n_tok,) = eng.global_sum(batch.loss_mask.sum())
        micro = eng.split(torch.arange(batch.size, device=eng.device), self.config.micro_batch_size)
        loss_sum = torch.zeros((), dtype=torch.float64, device=eng.device)
        with eng.training():
            for i, rows in enumerate(micro):
                mb = batch.select(rows).trimmed()  # no compute on trailing padding
                keep = eng.keep_from(mb.loss_mask)  # no output layer on prompt positions
                logp, _ = eng.logprobs(mb.input_ids, mb.attention_mask, keep=keep)
                loss = aggregate(-logp, mb.loss_mask, "token-mean", denominator=n_tok)
                eng.backward(loss, sync=i == len(micro) - 1)
                loss_sum += loss.detach().double()
            (loss_total,) = eng.global_sum(loss_sum)
            grad_norm = eng.optimizer_step()
        return {
            "loss": loss_total,
            "grad_norm": grad_norm,
            "lr": lr,
            "step": float(eng.step_count),
            "tokens": n_tok,
        }

    def fit(
        self,
        batches: Sequence[SFTBatch],
        *,
        on_step: Callable[[dict[str, float]], Any] | None = None,
    ) -> list[dict[str, float]]:
        """``config.epochs`` passes over ``batches`` (one optimiser step per batch, in order).

        When the config has no ``total_steps``, it is set to ``epochs * len(batches)`` (plus the
        steps already taken) so the schedule ends with the run.

        Returns:
            The metrics of every step.

        Raises:
            InvalidArgument: no batches.
        """
        if not batches:
            raise fail("at least one SFTBatch", "batches", 0)
        c = self.config
        if c.total_steps is None:
            self.config = attrs.evolve(c, total_steps=self.step_count + c.epochs * len(batches))
        out = []
        for _ in range(c.epochs):
            for b in batches:
                m = self.step(b)
                out.append(m)
                if on_step is not None:
                    on_step(m)
        return out
