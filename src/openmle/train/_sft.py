"""``SFTTrainer``: supervised fine-tuning on (prompt, answer) batches with the GSPO model interface.

The loss is the next-token cross-entropy on the answer tokens only (the prompt is context),
averaged over the answer tokens of the whole optimiser step across micro-batches and ranks, so
gradient accumulation and DDP give the same step as one pass. One ``step`` call is one
optimiser step. Same model contract, checkpoint layout and distribution rules as
:class:`GSPOTrainer`, so a model can be fine-tuned on search transitions and then trained with
GSPO in the same process.

The released system ran SFT inside SLIME/Megatron with its own launcher settings; the defaults
here (AdamW lr 1e-5 constant, weight decay 0.1, betas 0.9/0.98, clipping at 1.0) are ours, chosen
to match the GSPO optimiser, not read from the paper.
"""

from __future__ import annotations

import os
from typing import final

import attrs
import torch
from attrs import define, field, frozen
from torch import nn

from openmle._protocols import Trainer
from openmle._validation import check_positive, check_type

from ._batch import SFTBatch
from ._engine import Engine, OptimConfig
from ._loss import sft_loss

__all__ = ["SFTConfig", "SFTTrainer"]


@final
@frozen(kw_only=True)
class SFTConfig:
    """Hyperparameters of :class:`SFTTrainer`.

    Attributes:
        lr: AdamW learning rate (constant).
        weight_decay: AdamW decoupled weight decay on matrices and embeddings.
        betas: AdamW betas.
        adam_eps: AdamW epsilon.
        max_grad_norm: clip the global gradient norm (``None``: no clipping).
        micro_batch_size: sequences per forward/backward (``None``: the whole batch).
        bf16: bfloat16 autocast on CUDA (ignored on the CPU).
        distributed: ``"auto"`` (DDP under a process group) or ``"none"``.
    """

    lr: float = 1e-5
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    max_grad_norm: float | None = 1.0
    micro_batch_size: int | None = None
    bf16: bool = True
    distributed: str = "auto"

    def __attrs_post_init__(self) -> None:
        self.optim()  # validates the optimiser fields (lr, betas, ...)
        if self.micro_batch_size is not None:
            check_type(self.micro_batch_size, int, "micro_batch_size")
            check_positive(self.micro_batch_size, "micro_batch_size")

    def optim(self) -> OptimConfig:
        """The optimiser part."""
        return OptimConfig(
            lr=self.lr, weight_decay=self.weight_decay, betas=self.betas, adam_eps=self.adam_eps,
            max_grad_norm=self.max_grad_norm, bf16=self.bf16, distributed=self.distributed,
        )  # fmt: skip


@final
@define(eq=False)
class SFTTrainer(Trainer[SFTBatch]):
    """Supervised next-token training on answer tokens; satisfies :class:`openmle.Trainer`.

    Args:
        model: any ``nn.Module`` with a Hugging Face style forward (see :class:`GSPOTrainer`).
        config: hyperparameters; ``SFTConfig()`` by default.

    ``step`` returns ``loss`` (mean NLL per answer token over the step), ``grad_norm``
    (pre-clip), ``lr``, ``step`` and ``tokens`` (answer tokens over all ranks).
    """

    model: nn.Module
    config: SFTConfig = field(factory=SFTConfig)
    _engine: Engine = field(init=False)

    def __attrs_post_init__(self) -> None:
        check_type(self.model, nn.Module, "model")
        c = self.config
        self._engine = Engine(self.model, c.optim())

    @property
    def step_count(self) -> int:
        """Optimiser steps taken so far."""
        return self._engine.step_count

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The AdamW optimiser."""
        return self._engine.optimizer

    def step(self, batch: SFTBatch) -> dict[str, float]:
        """One optimiser step on ``batch`` (this rank's shard), accumulated over micro-batches."""
        eng = self._engine
        check_type(batch, SFTBatch, "batch")
        batch = batch.to(eng.device)
        (n_tok,) = eng.global_sum(batch.loss_mask.sum())
        micro = eng.split(torch.arange(batch.size, device=eng.device), self.config.micro_batch_size)
        loss_sum = torch.zeros((), dtype=torch.float64, device=eng.device)
        with eng.training():
            for i, rows in enumerate(micro):
                mb = batch.select(rows).trimmed()  # no compute on trailing padding
                keep = eng.keep_from(mb.loss_mask)  # no output layer on prompt positions
                logits = eng.logits(mb.input_ids, mb.attention_mask, keep=keep)
                loss = sft_loss(logits, mb.input_ids, mb.loss_mask, denominator=n_tok)
                eng.backward(loss, sync=i == len(micro) - 1)
                loss_sum += loss.detach().double()
            (loss_total,) = eng.global_sum(loss_sum)
            grad_norm = eng.optimizer_step()
        return {
            "loss": loss_total,
            "grad_norm": grad_norm,
            "lr": float(eng.optimizer.param_groups[0]["lr"]),
            "step": float(eng.step_count),
            "tokens": n_tok,
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint directory (same layout as :meth:`GSPOTrainer.save`).

        Raises:
            TrainerError: the directory cannot be written.
        """
        cfg = {
            k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self.config).items()
        }
        self._engine.save(path, {"kind": "sft", "config": cfg})

    def load(self, path: str | os.PathLike[str]) -> None:
        """Restore a checkpoint written by :meth:`save`.

        Raises:
            TrainerError: missing or unreadable files, or a checkpoint of another trainer kind.
        """
        self._engine.load(path, "sft")


# Public names report the public module (``openmle.backends.X``).
for _obj in (SFTConfig, SFTTrainer):
    _obj.__module__ = "openmle.backends"
