"""What the GSPO and SFT trainers share: the optimiser, the forward, the step and checkpoints.

Composition, not inheritance: each trainer owns one :class:`Engine` and writes its own loop.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
from attrs import define, field
from torch import Tensor, nn

from openmle._validation import check_choice, check_positive, fail
from openmle.errors import TrainerError

from . import _distributed as D
from ._loss import token_entropy, token_logprobs

__all__ = ["Engine", "OptimConfig"]


@define(frozen=True, kw_only=True)
class OptimConfig:
    """AdamW, clipping, precision and distribution settings common to both trainers."""

    lr: float
    weight_decay: float
    betas: tuple[float, float]
    adam_eps: float
    max_grad_norm: float | None
    bf16: bool
    distributed: str

    def __attrs_post_init__(self) -> None:
        check_positive(self.lr, "lr")
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive(self.adam_eps, "adam_eps")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise fail("two betas in [0, 1)", "betas", self.betas)
        if self.max_grad_norm is not None:
            check_positive(self.max_grad_norm, "max_grad_norm")
        check_choice(self.distributed, ("auto", "none"), "distributed")


@define(eq=False)
class Engine:
    """Owns the (possibly DDP-wrapped) model, the AdamW optimiser and the step counter.

    Weight decay applies to parameters with 2 or more dimensions (matrices, embeddings), not to
    biases and norm gains, as in Megatron and Hugging Face.
    """

    model: nn.Module
    optim: OptimConfig
    device: torch.device = field(init=False)
    wrapped: nn.Module = field(init=False)
    optimizer: torch.optim.AdamW = field(init=False)
    step_count: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        try:
            self.device = next(self.model.parameters()).device
        except StopIteration:
            raise TrainerError("the model has no parameters to train") from None
        use_ddp = self.optim.distributed == "auto"
        self.wrapped = D.wrap_ddp(self.model, self.device) if use_ddp else self.model
        params = [p for p in self.model.parameters() if p.requires_grad]
        groups = [
            {
                "params": [p for p in params if p.dim() >= 2],
                "weight_decay": self.optim.weight_decay,
            },
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ]
        self.optimizer = torch.optim.AdamW(
            [g for g in groups if g["params"]],
            lr=self.optim.lr,
            betas=self.optim.betas,
            eps=self.optim.adam_eps,
            fused=self.device.type == "cuda",
        )

    # -- forward -----------------------------------------------------------------------------

    def autocast(self) -> contextlib.AbstractContextManager[Any]:
        """bf16 autocast on CUDA when enabled; nothing on the CPU."""
        if self.optim.bf16 and self.device.type == "cuda":
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def logits(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        *,
        keep: int | None = None,
        train: bool = True,
        model: nn.Module | None = None,
    ) -> Tensor:
        """``(B, K, V)`` logits of the last ``K`` positions from a Hugging Face style forward.

        ``K = keep`` when the model's forward takes ``logits_to_keep`` (transformers models,
        :class:`TinyCausalLM`), which skips the output layer on prompt positions; else ``T``.
        """
        model = model if model is not None else self.wrapped if train else self.model
        kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
        if hasattr(getattr(model, "config", None), "use_cache"):
            kwargs["use_cache"] = False  # transformers models: no KV cache while training
        if keep is not None and keep < input_ids.size(1) and _takes_logits_to_keep(model):
            kwargs["logits_to_keep"] = keep
        with self.autocast():
            out = model(**kwargs)
        logits = out.logits if hasattr(out, "logits") else out
        if not isinstance(logits, Tensor):
            raise TrainerError(f"the model returned {type(out).__name__}, not logits")
        return logits

    def logprobs(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        *,
        keep: int | None = None,
        entropy: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Token-aligned ``(B, T)`` log-probs (with gradient), and entropies when asked."""
        logits = self.logits(input_ids, attention_mask, keep=keep)
        ent = token_entropy(logits, input_ids.size(1)) if entropy else None
        return token_logprobs(logits, input_ids), ent

    @torch.no_grad()
    def frozen_logprobs(
        self,
        model: nn.Module | None,
        input_ids: Tensor,
        attention_mask: Tensor,
        score_mask: Tensor,
        micro: list[Tensor],
    ) -> Tensor:
        """``(B, T)`` log-probs without gradient of the tokens in ``score_mask``, micro-batch by
        micro-batch, each cut to its own width (``model``, or the trained one when ``None``).

        Runs in eval mode (no dropout); the training forward runs in train mode, so a model
        with dropout sees ratios that are not exactly 1 on the first step. LLMs usually train
        with dropout off (``attention_dropout=0``); TRL switches it off for RL.
        """
        out = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
        scorer = self.model if model is None else model
        was_training = scorer.training
        scorer.eval()  # no dropout in a reference computation
        try:
            for rows in micro:
                cols = attention_mask[rows].bool().any(0).nonzero()
                width = int(cols[-1]) + 1 if len(cols) else 1
                ids, attn = input_ids[rows, :width], attention_mask[rows, :width]
                keep = self.keep_from(score_mask[rows, :width])
                logits = self.logits(ids, attn, keep=keep, train=False, model=scorer)
                out[rows, :width] = token_logprobs(logits, ids)
        finally:
            scorer.train(was_training)
        return out

    @staticmethod
    def keep_from(mask: Tensor) -> int:
        """Positions whose logits are needed to score ``mask`` ``(B, T)``: from the position
        before the earliest masked token to the end.
        """
        cols = mask.any(0).nonzero()
        return int(mask.size(1) - cols[0]) + 1 if len(cols) else 1

    # -- batching ----------------------------------------------------------------------------

    @staticmethod
    def split(rows: Tensor, size: int | None) -> list[Tensor]:
        """``rows`` in consecutive chunks of ``size`` (one chunk when ``None``)."""
        if size is None or size >= len(rows):
            return [rows]
        return list(torch.split(rows, size))

    def global_sum(self, *counts: float | Tensor) -> list[float]:
        """Sum each count over ranks."""
        t = torch.tensor([float(c) for c in counts], dtype=torch.float64, device=self.device)
        return [float(v) for v in D.all_reduce_sum(t).tolist()]

    def global_mean(self, values: Mapping[str, float]) -> dict[str, float]:
        """Average each metric over ranks (keys must be the same on every rank)."""
        if not D.is_distributed():
            return dict(values)
        keys = sorted(values)
        sums = self.global_sum(*(values[k] for k in keys))
        return {k: s / D.world_size() for k, s in zip(keys, sums, strict=True)}

    # -- optimisation ------------------------------------------------------------------------

    def backward(self, loss: Tensor, *, sync: bool) -> None:
        """Backpropagate ``loss`` scaled by the world size (DDP averages gradients)."""
        with D.no_sync(self.wrapped, enabled=not sync):
            torch.autograd.backward(loss * D.world_size())

    def optimizer_step(self) -> float:
        """Clip gradients, take an AdamW step, zero the gradients; returns the pre-clip norm.

        Raises:
            TrainerError: the gradient norm is not finite (no update is made).
        """
        params = [p for p in self.model.parameters() if p.grad is not None]
        max_norm = self.optim.max_grad_norm
        norm = torch.nn.utils.clip_grad_norm_(params, math.inf if max_norm is None else max_norm)
        if not math.isfinite(float(norm)):
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainerError(
                f"non-finite gradient norm ({float(norm)}) at step {self.step_count}: the update"
                " was skipped; check the batch's advantages and log-probs for NaN or overflow"
            )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step_count += 1
        return float(norm)

    @contextlib.contextmanager
    def training(self) -> Iterator[None]:
        """Model in train mode inside, gradients zeroed on entry."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        yield

    # -- checkpoints -------------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str], meta: Mapping[str, Any]) -> None:
        """Write ``model.pt``, ``optimizer.pt``, ``trainer.json`` (rank 0) and ``rng-<rank>.pt``."""
        p = Path(path)
        try:
            p.mkdir(parents=True, exist_ok=True)
            if D.rank() == 0:
                torch.save(self.model.state_dict(), p / "model.pt")
                torch.save(self.optimizer.state_dict(), p / "optimizer.pt")
                info = {"step": self.step_count, **meta}
                (p / "trainer.json").write_text(json.dumps(info, indent=2, sort_keys=True))
            torch.save(_rng_state(), p / f"rng-{D.rank()}.pt")
        except OSError as exc:
            raise TrainerError(f"cannot write checkpoint {p}: {exc}") from exc
        D.barrier()

    def load(self, path: str | os.PathLike[str], kind: str) -> dict[str, Any]:
        """Restore model, optimiser, RNG and step written by :meth:`save`; returns the meta."""
        p = Path(path)
        try:
            info = json.loads((p / "trainer.json").read_text())
            model = torch.load(p / "model.pt", map_location=self.device, weights_only=True)
            optim = torch.load(p / "optimizer.pt", map_location=self.device, weights_only=True)
            rng_file = p / f"rng-{D.rank()}.pt"
            rng = torch.load(rng_file if rng_file.exists() else p / "rng-0.pt", weights_only=False)
        except (OSError, ValueError, RuntimeError) as exc:
            raise TrainerError(f"cannot read checkpoint {p}: {exc}") from exc
        if info.get("kind") != kind:
            raise TrainerError(f"{p} holds a {info.get('kind')!r} checkpoint, not a {kind!r} one")
        self.model.load_state_dict(model)
        self.optimizer.load_state_dict(optim)
        _set_rng_state(rng)
        self.step_count = int(info["step"])
        return dict(info)


def _takes_logits_to_keep(model: nn.Module) -> bool:
    inner = getattr(model, "module", model)  # DDP keeps the model in .module
    try:
        return "logits_to_keep" in inspect.signature(inner.forward).parameters
    except (TypeError, ValueError):
        return False


def _rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
