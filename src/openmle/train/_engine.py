"""What the GSPO and SFT trainers share: the optimiser, the forward, the step and checkpoints.

Composition, not inheritance: each trainer owns one :class:`Engine` and writes its own loop.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import pickle
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import attrs
import torch
from attrs import define, field
from torch import Tensor, nn

from openmle._readback import loads_untrusted, read_back
from openmle._validation import check_choice, check_positive, fail
from openmle._writeback import write_file
from openmle.errors import TrainerError

from . import _distributed as D
from ._loss import chunked_token_logprobs, token_entropy, token_logprobs

__all__ = ["Engine", "EngineOwner", "OptimConfig"]

_INFO_MAX_BYTES = 16 * 2**20
"""The largest ``trainer.json`` of a checkpoint read back."""


@define(frozen=True, kw_only=True)
class OptimConfig:
    """The optimiser settings of both trainers: AdamW, clipping, precision and distribution.

    :class:`~openmle.train.GSPOConfig` and :class:`~openmle.train.SFTConfig` are OptimConfigs
    (they add their own fields and may change a default, e.g. GSPO's ``lr``), so every optimiser
    field has one name, one check and one meaning across both trainers.

    Attributes:
        lr: AdamW learning rate (the peak, when a schedule applies).
        weight_decay: AdamW decoupled weight decay on matrices and embeddings (not on biases
            and norm gains).
        betas: AdamW betas, each in [0, 1).
        adam_eps: AdamW epsilon.
        max_grad_norm: clip the global gradient norm to this (``None``: no clipping).
        bf16: bfloat16 autocast for the forward on CUDA (ignored on the CPU).
        distributed: ``"auto"`` wraps the model in DDP when a process group is initialised;
            ``"none"`` never wraps (for FSDP or custom wrappers you apply yourself).
        chunk_logprobs: compute log-probs from the output layer's input chunk by chunk of
            positions, never holding the ``(B, K, V)`` logits (same values; lower peak memory,
            one extra output-layer matmul in the backward pass). Applies to
            :class:`TinyCausalLM` and transformers causal LMs without logit scaling or
            soft-capping, not under FSDP (those use the model's logits).

    Raises:
        InvalidArgument: a field out of range (the message names it).
    """

    lr: float = 1e-5
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-8
    max_grad_norm: float | None = 1.0
    bf16: bool = True
    distributed: str = "auto"
    chunk_logprobs: bool = True

    def __attrs_post_init__(self) -> None:
        check_positive(self.lr, "lr")
        check_positive(self.weight_decay, "weight_decay", allow_zero=True)
        check_positive(self.adam_eps, "adam_eps")
        if len(self.betas) != 2 or not all(0.0 <= b < 1.0 for b in self.betas):
            raise fail("two betas in [0, 1)", "betas", self.betas)
        if self.max_grad_norm is not None:
            check_positive(self.max_grad_norm, "max_grad_norm")
        check_choice(self.distributed, ("auto", "none"), "distributed")

    def optim(self) -> OptimConfig:
        """The optimiser part alone (a plain :class:`OptimConfig` with these values)."""
        return OptimConfig(**{a.name: getattr(self, a.name) for a in attrs.fields(OptimConfig)})


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
    _head: _Head | None = field(init=False)
    optimizer: torch.optim.AdamW = field(init=False)
    step_count: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        try:
            self.device = next(self.model.parameters()).device
        except StopIteration:
            raise TrainerError("the model has no parameters to train") from None
        sharded = _is_fsdp(self.model)
        self._head = None if sharded or not self.optim.chunk_logprobs else _split_head(self.model)
        runner = _Runner(self.model, self._head)
        use_ddp = self.optim.distributed == "auto" and not sharded  # FSDP2 is its own wrapper
        self.wrapped = D.wrap_ddp(runner, self.device) if use_ddp else runner
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
        with self.autocast():
            if model is None and train:
                out = self.wrapped(input_ids, attention_mask, keep)
            else:
                scorer = self.model if model is None else model
                out = _model_logits(scorer, input_ids, attention_mask, keep)
        return out  # type: ignore[no-any-return]

    def logprobs(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        *,
        keep: int | None = None,
        entropy: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Token-aligned ``(B, T)`` log-probs (with gradient), and entropies when asked.

        When the output layer can be split from the model (:class:`TinyCausalLM`, transformers
        causal LMs without logit scaling or soft-capping) and ``chunk_logprobs`` is on, the
        ``(B, K, V)`` logits are never held: :func:`chunked_token_logprobs`.
        """
        with self.autocast():
            out = self.wrapped(input_ids, attention_mask, keep, "logprobs", entropy)
        logp, ent = out
        return logp, ent

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
                head = self._head if model is None else _split_head(scorer)
                if _is_fsdp(scorer) or not self.optim.chunk_logprobs:
                    head = None
                with self.autocast():
                    logp, _ = _model_logprobs(scorer, head, ids, attn, keep, entropy=False)
                out[rows, :width] = logp
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
        """Write ``model.pt``, ``optimizer.pt``, ``trainer.json`` (rank 0) and ``rng-<rank>.pt``.

        Under FSDP2 every rank must call it: the parameters and the optimiser state are gathered
        into full (unsharded) tensors first, and the optimiser state is keyed by parameter name
        (``trainer.json`` says ``"optimizer_keys": "fqn"``), so the checkpoint loads into any
        number of processes, one included.
        """
        p = Path(path)
        sharded = _is_fsdp(self.model)
        if sharded:  # collective: every rank takes part, rank 0 gets the full tensors
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_model_state_dict,
                get_optimizer_state_dict,
            )

            opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
            model_sd = get_model_state_dict(self.model, options=opts)
            optim_sd = get_optimizer_state_dict(self.model, self.optimizer, options=opts)
        try:
            p.mkdir(parents=True, exist_ok=True)
            # each file written anew and renamed into place: a link standing there (a folder
            # from elsewhere) is replaced, never written through
            if D.rank() == 0:
                model_state = model_sd if sharded else self.model.state_dict()
                optim_state = optim_sd if sharded else self.optimizer.state_dict()
                write_file(p / "model.pt", lambda f: torch.save(model_state, f))
                write_file(p / "optimizer.pt", lambda f: torch.save(optim_state, f))
                info = {"step": self.step_count, "optimizer_keys": "fqn" if sharded else "index",
                        **meta}  # fmt: skip
                write_file(p / "trainer.json", json.dumps(info, indent=2, sort_keys=True).encode())
            rng_state = _rng_state()
            write_file(p / f"rng-{D.rank()}.pt", lambda f: torch.save(rng_state, f))
        except OSError as exc:
            raise TrainerError(f"cannot write checkpoint {p}: {exc}") from exc
        D.barrier()

    def load(self, path: str | os.PathLike[str], kind: str) -> dict[str, Any]:
        """Restore model, optimiser, RNG and step written by :meth:`save`; returns the meta.

        A checkpoint written under FSDP2 loads into a plain model and the other way round
        (the full tensors are sharded again for an FSDP2 model; every rank must call it then).
        """
        p = Path(path)
        try:
            # bounded: a checkpoint from elsewhere is untrusted (links followed: a checkpoint
            # folder may be made of links, as a model cache is)
            info = loads_untrusted(
                read_back(p / "trainer.json", max_bytes=_INFO_MAX_BYTES, follow=True)
            )
            model = torch.load(p / "model.pt", map_location=self.device, weights_only=True)
            optim = torch.load(p / "optimizer.pt", map_location=self.device, weights_only=True)
            rng_file = p / f"rng-{D.rank()}.pt"
            # weights_only: a checkpoint from elsewhere is untrusted; a full unpickler would run
            # whatever code its rng file names
            rng = torch.load(rng_file if rng_file.exists() else p / "rng-0.pt", weights_only=True)
        except (OSError, ValueError, RuntimeError, pickle.UnpicklingError) as exc:
            raise TrainerError(f"cannot read checkpoint {p}: {exc}") from exc
        if not isinstance(info, dict) or type(info.get("step")) is not int or info["step"] < 0:
            raise TrainerError(f"{p}/trainer.json is not a trainer checkpoint's (no step)")
        if info.get("kind") != kind:
            raise TrainerError(f"{p} holds a {info.get('kind')!r} checkpoint, not a {kind!r} one")
        try:
            self._restore(model, optim, by_name=info.get("optimizer_keys") == "fqn")
        except (RuntimeError, KeyError, ValueError) as exc:
            first = str(exc).strip().splitlines()[-1].strip() if str(exc).strip() else repr(exc)
            raise TrainerError(
                f"checkpoint {p} does not fit this model ({type(exc).__name__}: {first[:300]}); "
                "load it into a model built with the same architecture and config"
            ) from exc
        try:
            _set_rng_state(rng)
        except (TypeError, ValueError, KeyError, RuntimeError) as exc:
            raise TrainerError(f"checkpoint {p} holds no usable RNG state ({exc})") from exc
        self.step_count = int(info["step"])
        return dict(info)

    def _restore(self, model: Any, optim: Any, *, by_name: bool) -> None:
        """Load the model and optimiser state dicts (by parameter name under FSDP2)."""
        if by_name or _is_fsdp(self.model):
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                set_model_state_dict,
                set_optimizer_state_dict,
            )

            opts = StateDictOptions(full_state_dict=True)
            set_model_state_dict(self.model, model, options=opts)
            set_optimizer_state_dict(
                self.model, self.optimizer, optim if by_name else self._by_name(optim),
                options=opts,
            )  # fmt: skip
        else:
            self.model.load_state_dict(model)
            self.optimizer.load_state_dict(optim)

    def _by_name(self, optim: Mapping[str, Any]) -> dict[str, Any]:
        """An index-keyed optimiser state (:meth:`torch.optim.Optimizer.state_dict` of an
        unsharded run) keyed by parameter name instead, for an FSDP2 model.
        """
        names = {id(q): n for n, q in self.model.named_parameters()}
        order = [names[id(q)] for g in self.optimizer.param_groups for q in g["params"]]
        return {
            "state": {order[int(i)]: st for i, st in optim["state"].items()},
            "param_groups": [
                {**g, "params": [order[int(i)] for i in g["params"]]} for g in optim["param_groups"]
            ],
        }


class EngineOwner:
    """What every trainer built on an :class:`Engine` shares: the step counter and the
    optimiser read from it, and checkpoints of kind ``_kind`` holding the trainer's ``config``.

    A subclass (an attrs class) sets ``_kind``, and has the fields ``_engine`` and ``config``.
    """

    __slots__ = ()
    _kind: ClassVar[str]
    _engine: Engine
    config: Any

    @property
    def step_count(self) -> int:
        """Optimiser steps taken so far."""
        return self._engine.step_count

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        """The AdamW optimiser (e.g. to attach a learning-rate scheduler)."""
        return self._engine.optimizer

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write a checkpoint directory: model, optimiser, RNG states, step and config.

        Under DDP every rank calls ``save``; rank 0 writes the shared files.

        Raises:
            TrainerError: the directory cannot be written.
        """
        config = {
            k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self.config).items()
        }
        self._engine.save(path, {"kind": self._kind, "config": config})

    def load(self, path: str | os.PathLike[str]) -> None:
        """Restore a checkpoint written by :meth:`save` (into a trainer built the same way).

        Raises:
            TrainerError: missing or unreadable files, or a checkpoint of another trainer kind.
        """
        self._engine.load(path, self._kind)


class _Head(NamedTuple):
    """A model split at its output layer: ``body(input_ids, attention_mask)`` gives the
    ``(B, T, D)`` input of the output layer, whose weight (and bias) are ``weight``/``bias``.
    """

    body: Callable[[Tensor, Tensor], Tensor]
    weight: Tensor
    bias: Tensor | None


_SCALED_LOGITS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def _split_head(model: nn.Module) -> _Head | None:
    """The model's body and output layer, or ``None`` when they cannot be split safely."""
    from ._model import TinyCausalLM

    if isinstance(model, TinyCausalLM):
        return _Head(model.hidden_states, model.embed.weight, None)
    get_out = getattr(model, "get_output_embeddings", None)
    get_dec = getattr(model, "get_decoder", None)
    config = getattr(model, "config", None)
    if not (callable(get_out) and callable(get_dec)) or config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if any(getattr(text, name, None) not in (None, 1.0) for name in _SCALED_LOGITS):
        return None  # the logits are rescaled or soft-capped after the output layer
    try:
        head, dec = get_out(), get_dec()
    except (AttributeError, NotImplementedError, ValueError):
        return None
    if not isinstance(head, nn.Linear) or not isinstance(dec, nn.Module) or dec is model:
        return None

    def body(input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        out = dec(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return hidden  # type: ignore[no-any-return]

    return _Head(body, head.weight, head.bias)


def _is_fsdp(model: nn.Module) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # pragma: no cover - torch built without distributed
        return False
    return any(isinstance(m, FSDPModule) for m in model.modules())


def _model_logits(
    model: nn.Module, input_ids: Tensor, attention_mask: Tensor, keep: int | None
) -> Tensor:
    kwargs: dict[str, Any] = {"input_ids": input_ids, "attention_mask": attention_mask}
    if hasattr(getattr(model, "config", None), "use_cache"):
        kwargs["use_cache"] = False  # transformers models: no KV cache while training
    if keep is not None and keep < input_ids.size(1) and _takes_logits_to_keep(model):
        kwargs["logits_to_keep"] = keep
    out = model(**kwargs)
    logits = out.logits if hasattr(out, "logits") else out
    if not isinstance(logits, Tensor):
        raise TrainerError(f"the model returned {type(out).__name__}, not logits")
    return logits


def _model_logprobs(
    model: nn.Module,
    head: _Head | None,
    input_ids: Tensor,
    attention_mask: Tensor,
    keep: int | None,
    *,
    entropy: bool,
) -> tuple[Tensor, Tensor | None]:
    if head is None:
        logits = _model_logits(model, input_ids, attention_mask, keep)
        ent = token_entropy(logits, input_ids.size(1)) if entropy else None
        return token_logprobs(logits, input_ids), ent
    hidden = head.body(input_ids, attention_mask)  # (B, T, D)
    if keep is not None and keep < hidden.size(1):
        hidden = hidden[:, -keep:]  # (B, K, D)
    return chunked_token_logprobs(hidden, head.weight, input_ids, bias=head.bias, entropy=entropy)


class _Runner(nn.Module):
    """What DDP wraps: the model's forward, returning logits or (chunked) log-probs, so that
    both go through DDP's forward (its gradient hooks need that).
    """

    def __init__(self, model: nn.Module, head: _Head | None) -> None:
        super().__init__()
        self.model = model
        self._split = head

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor,
        keep: int | None = None,
        mode: str = "logits",
        entropy: bool = False,
    ) -> Any:
        if mode == "logits":
            return _model_logits(self.model, input_ids, attention_mask, keep)
        return _model_logprobs(
            self.model, self._split, input_ids, attention_mask, keep, entropy=entropy
        )


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
