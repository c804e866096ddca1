"""``GSPOTrainer``: one rollout batch in, a few AdamW steps out; the loop reads top to bottom.

For each rollout batch ``step``:

1. moves the batch to the model's device and, when the batch carries no ``old_logprobs``,
   recomputes them with the current weights (no gradient), so the first optimiser step is
   exactly on-policy (sequence ratios of 1);
2. splits the batch into ``steps_per_batch`` mini-batches, in order; each is one optimiser step;
3. for each mini-batch, runs forward + :func:`gspo_loss` + backward on micro-batches of
   ``micro_batch_size`` sequences (gradient accumulation), dividing by the sequence or token
   count of the *whole* mini-batch over all ranks, so accumulation and data parallelism give
   the same gradient as one pass on the whole mini-batch;
4. clips the gradient norm and takes an AdamW step.

Defaults follow the paper's configuration (reference §2.3): lr 1e-6 constant, weight decay 0.1,
betas (0.9, 0.98), clip epsilon 3.5e-4 on both sides, truncated importance sampling on [0, 2]
when rollout log-probs are given, KL and entropy terms off. Departure: the default loss
aggregation is the per-sequence token mean averaged over sequences, not the released sum of
sample means (see :mod:`._loss`); pass ``aggregation="sum-of-sample-mean"`` for the released
behaviour. The released run offloads Adam to the CPU (Megatron); we leave placement to the user.

:meth:`GSPOConfig.paper` adds the paper's rollout shape to those defaults: groups of 16 samples,
16 groups per rollout batch, 2 optimiser steps per rollout batch (a global batch of 128
sequences per step); the trainer then checks that every rollout batch has that shape.
"""

from __future__ import annotations

from typing import Any, ClassVar, final

import torch
from attrs import define, field, frozen
from torch import nn

from openmle._protocols import Trainer
from openmle._validation import check_choice, check_positive, check_type, fail

from ._batch import RolloutBatch
from ._engine import Engine, EngineOwner, OptimConfig
from ._loss import AGGREGATIONS, GSPOLossOutput, gspo_loss

__all__ = ["GSPOConfig", "GSPOTrainer"]

_STAT_KEYS = tuple(k for k in GSPOLossOutput._fields if k not in ("loss", "pg_loss"))


@final
@frozen(kw_only=True)
class GSPOConfig(OptimConfig):
    """Hyperparameters of :class:`GSPOTrainer` (defaults: the paper's GSPO run).

    The optimiser fields (``lr``, ``weight_decay``, ``betas``, ``adam_eps``,
    ``max_grad_norm``, ``bf16``, ``distributed``, ``chunk_logprobs``) are
    :class:`~openmle.train.OptimConfig`'s; GSPO's ``lr`` default is 1e-6 (constant).

    Attributes:
        clip_eps_low: sequence ratio clipped below at ``1 - clip_eps_low``.
        clip_eps_high: clipped above at ``1 + clip_eps_high`` (``None``: same as low).
        use_tis: apply truncated importance sampling when the batch has rollout log-probs.
        tis_clip_low: lower truncation of the IS weight.
        tis_clip_high: upper truncation of the IS weight.
        kl_coef: weight of the ``low_var_kl`` term (needs ``ref_model`` or ``ref_logprobs``).
        entropy_coef: weight of the entropy bonus.
        aggregation: loss aggregation mode, one of ``AGGREGATIONS``.
        norm_length: the constant of ``seq-mean-token-sum-norm``.
        steps_per_batch: optimiser steps per rollout batch (the batch is cut into this many
            consecutive mini-batches; under DDP, per rank).
        micro_batch_size: sequences per forward/backward (``None``: a whole mini-batch).
        group_size: samples per prompt the rollouts use (``None``: not checked).
        rollout_batch_size: groups per rollout batch (``None``: not checked). With both set,
            :meth:`GSPOTrainer.step` checks that the rollout batch over all ranks holds
            ``group_size * rollout_batch_size`` sequences.
    """

    lr: float = 1e-6
    clip_eps_low: float = 3.5e-4
    clip_eps_high: float | None = None
    use_tis: bool = True
    tis_clip_low: float = 0.0
    tis_clip_high: float = 2.0
    kl_coef: float = 0.0
    entropy_coef: float = 0.0
    aggregation: str = "seq-mean-token-mean"
    norm_length: int | None = None
    steps_per_batch: int = 1
    micro_batch_size: int | None = None
    group_size: int | None = None
    rollout_batch_size: int | None = None

    @classmethod
    def paper(cls, **overrides: Any) -> GSPOConfig:
        """The paper's GSPO run: groups of 16, 16 groups per rollout batch, 2 optimiser steps
        per rollout batch (128 sequences each), clip 3.5e-4 on both sides, truncated importance
        sampling on [0, 2], AdamW lr 1e-6 constant, weight decay 0.1, betas (0.9, 0.98),
        gradient clipping at 1.0, no KL or entropy term.

        The loss aggregation stays the per-sequence token mean (the GSPO objective); the
        released configuration summed per-sequence means (pass
        ``aggregation="sum-of-sample-mean"`` for it).
        """
        kw: dict[str, Any] = {
            "lr": 1e-6, "weight_decay": 0.1, "betas": (0.9, 0.98), "max_grad_norm": 1.0,
            "clip_eps_low": 3.5e-4, "clip_eps_high": None, "use_tis": True, "tis_clip_low": 0.0,
            "tis_clip_high": 2.0, "kl_coef": 0.0, "entropy_coef": 0.0, "steps_per_batch": 2,
            "group_size": 16, "rollout_batch_size": 16,
        }  # fmt: skip
        kw.update(overrides)
        return cls(**kw)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()  # the optimiser fields (lr, betas, ...)
        for name in ("group_size", "rollout_batch_size"):
            v = getattr(self, name)
            if v is not None:
                check_positive(check_type(v, int, name), name)
        check_positive(self.clip_eps_low, "clip_eps_low", allow_zero=True)
        if self.clip_eps_high is not None:
            check_positive(self.clip_eps_high, "clip_eps_high", allow_zero=True)
        check_positive(self.tis_clip_low, "tis_clip_low", allow_zero=True)
        if check_positive(self.tis_clip_high, "tis_clip_high") < self.tis_clip_low:
            raise fail("tis_clip_high >= tis_clip_low", "tis_clip_high", self.tis_clip_high)
        check_positive(self.kl_coef, "kl_coef", allow_zero=True)
        check_positive(self.entropy_coef, "entropy_coef", allow_zero=True)
        check_choice(self.aggregation, AGGREGATIONS, "aggregation")
        if self.aggregation == "seq-mean-token-sum-norm" and self.norm_length is None:
            raise fail(
                "an int >= 1", "norm_length", None, "aggregation 'seq-mean-token-sum-norm' needs it"
            )
        check_positive(check_type(self.steps_per_batch, int, "steps_per_batch"), "steps_per_batch")
        if self.micro_batch_size is not None:
            check_positive(
                check_type(self.micro_batch_size, int, "micro_batch_size"), "micro_batch_size"
            )


@final
@define(eq=False)
class GSPOTrainer(EngineOwner, Trainer[RolloutBatch]):
    """Trains a causal LM with GSPO on rollout batches; satisfies :class:`openmle.Trainer`.

    Args:
        model: any ``nn.Module`` with a Hugging Face style forward
            (``model(input_ids=, attention_mask=)`` returning ``.logits`` ``(B, T, V)`` or the
            logits tensor), on the device to train on. Wrapped in DDP when a process group is
            initialised.
        config: hyperparameters; ``GSPOConfig()`` by default.
        ref_model: a frozen reference policy for the KL term (only used when
            ``config.kl_coef > 0`` and a batch has no ``ref_logprobs``).

    A mini-batch with no response token on any rank is skipped (no forward, no update: AdamW's
    weight decay would otherwise still move the weights). ``step`` raises
    :class:`~openmle.errors.TrainerError` without updating when the gradient norm is not finite.

    ``step`` returns the mean over micro-batches (and ranks) of the loss statistics, with
    ``loss`` and ``pg_loss`` as the full mini-batch values averaged over the batch's optimiser
    steps, plus ``grad_norm`` (pre-clip, mean over steps), ``lr``, ``step`` (optimiser steps
    taken so far), ``sequences`` and ``tokens`` (trained response tokens, over all ranks).
    """

    _kind: ClassVar[str] = "gspo"  # the checkpoint kind
    model: nn.Module
    config: GSPOConfig = field(factory=GSPOConfig)
    ref_model: nn.Module | None = None
    _engine: Engine = field(init=False)

    def __attrs_post_init__(self) -> None:
        check_type(self.model, nn.Module, "model")
        check_type(self.config, GSPOConfig, "config")
        self._engine = Engine(self.model, self.config.optim())

    def step(self, batch: RolloutBatch) -> dict[str, float]:
        """Take ``config.steps_per_batch`` optimiser steps on one rollout batch (this rank's shard).

        Raises:
            InvalidArgument: fewer sequences than ``steps_per_batch``, or a KL term without a
                reference.
        """
        cfg, eng = self.config, self._engine
        check_type(batch, RolloutBatch, "batch")
        if batch.size < cfg.steps_per_batch:
            raise fail(
                f">= steps_per_batch={cfg.steps_per_batch} sequences", "batch.size", batch.size
            )
        if cfg.group_size is not None and cfg.rollout_batch_size is not None:
            want = cfg.group_size * cfg.rollout_batch_size
            (total,) = eng.global_sum(float(batch.size))
            if int(total) != want:
                raise fail(
                    f"{want} sequences over all ranks (group_size={cfg.group_size} x "
                    f"rollout_batch_size={cfg.rollout_batch_size})", "batch.size", int(total),
                    "make the rollouts match the config or set both to None",
                )  # fmt: skip
        batch = batch.to(eng.device)
        all_rows = torch.arange(batch.size, device=eng.device)
        with eng.training():
            # 1. the log-probs every optimiser step of this batch is judged against
            micro_all = eng.split(all_rows, cfg.micro_batch_size)
            ids, attn, resp = batch.input_ids, batch.attention_mask, batch.response_mask
            if batch.old_logprobs is None:
                old = eng.frozen_logprobs(None, ids, attn, resp, micro_all)
                batch = batch.with_logprobs(old=old)
            if cfg.kl_coef > 0 and batch.ref_logprobs is None:
                if self.ref_model is None:
                    raise fail("ref_model or batch.ref_logprobs", "ref_model", None, "kl_coef > 0")
                ref = eng.frozen_logprobs(self.ref_model, ids, attn, resp, micro_all)
                batch = batch.with_logprobs(ref=ref)
            # 2. one optimiser step per mini-batch
            sums: dict[str, float] = {}
            n_micro = 0
            totals = {
                "loss": 0.0,
                "pg_loss": 0.0,
                "grad_norm": 0.0,
                "sequences": 0.0,
                "tokens": 0.0,
            }
            for mini in torch.tensor_split(all_rows, cfg.steps_per_batch):
                stats, n, totals_step = self._optimizer_step(batch.select(mini))
                for k, v in stats.items():
                    sums[k] = sums.get(k, 0.0) + v
                n_micro += n
                for k, v in totals_step.items():
                    totals[k] += v
        if n_micro == 0:  # every mini-batch was empty: no update, neutral statistics
            sums, n_micro = {k: 0.0 for k in _STAT_KEYS}, 1
            sums.update(ratio_mean=1.0, ratio_min=1.0, ratio_max=1.0, tis_weight_mean=1.0)
        metrics = eng.global_mean({k: v / n_micro for k, v in sums.items()})
        steps = cfg.steps_per_batch
        metrics.update(
            loss=totals["loss"] / steps,
            pg_loss=totals["pg_loss"] / steps,
            grad_norm=totals["grad_norm"] / steps,
            sequences=totals["sequences"],
            tokens=totals["tokens"],
            lr=float(eng.optimizer.param_groups[0]["lr"]),
            step=float(eng.step_count),
        )
        return metrics

    def _optimizer_step(self, mini: RolloutBatch) -> tuple[dict[str, float], int, dict[str, float]]:
        """Accumulate over micro-batches of ``mini`` and take one optimiser step."""
        cfg, eng = self.config, self._engine
        lengths = mini.response_mask.sum(-1)
        n_seq, n_tok = eng.global_sum((lengths > 0).sum(), lengths.sum())
        denom = n_tok if cfg.aggregation == "token-mean" else n_seq
        if n_tok == 0:  # nothing to train on anywhere (e.g. every member an infra error)
            return (
                {},
                0,
                {"loss": 0.0, "pg_loss": 0.0, "grad_norm": 0.0, "sequences": 0.0, "tokens": 0.0},
            )
        micro = eng.split(torch.arange(mini.size, device=eng.device), cfg.micro_batch_size)
        sums: dict[str, float] = {}
        loss_sum = torch.zeros(2, dtype=torch.float64, device=eng.device)
        for i, rows in enumerate(micro):
            mb = mini.select(rows).trimmed()  # no compute on trailing padding
            keep = eng.keep_from(mb.response_mask)  # no output layer on prompt positions
            if mb.old_logprobs is None:
                raise AssertionError("internal invariant broken: mb.old_logprobs is not None")
            logp, ent = eng.logprobs(
                mb.input_ids, mb.attention_mask, keep=keep, entropy=cfg.entropy_coef > 0
            )
            out = gspo_loss(
                logp,
                mb.old_logprobs,
                mb.advantages,
                mb.response_mask,
                rollout_logprobs=mb.rollout_logprobs if cfg.use_tis else None,
                ref_logprobs=mb.ref_logprobs,
                entropy=ent,
                clip_eps_low=cfg.clip_eps_low,
                clip_eps_high=cfg.clip_eps_high,
                tis_clip_low=cfg.tis_clip_low,
                tis_clip_high=cfg.tis_clip_high,
                kl_coef=cfg.kl_coef,
                entropy_coef=cfg.entropy_coef,
                aggregation=cfg.aggregation,
                denominator=denom,
                norm_length=cfg.norm_length,
            )
            eng.backward(out.loss, sync=i == len(micro) - 1)
            loss_sum += torch.stack([out.loss.detach(), out.pg_loss]).double()
            for k, v in out.metrics().items():
                if k not in ("loss", "pg_loss"):
                    sums[k] = sums.get(k, 0.0) + v
        loss, pg = eng.global_sum(*loss_sum.tolist())
        grad_norm = eng.optimizer_step()
        totals = {
            "loss": loss,
            "pg_loss": pg,
            "grad_norm": grad_norm,
            "sequences": n_seq,
            "tokens": n_tok,
        }
        return sums, len(micro), totals
