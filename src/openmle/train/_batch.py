"""The batches the trainers consume: token ids with masks, as frozen values.

A rollout producer (or an SFT data loader) builds them from lists of token ids with
:meth:`RolloutBatch.from_sequences` / :meth:`SFTBatch.from_sequences`, which right-pad prompt +
answer into ``(B, T)`` tensors. Every per-token tensor is *token aligned*: position ``t`` holds
the value for token ``input_ids[:, t]`` (its log-probability given the tokens before it), so
an inference engine's per-token log-probs of the generated tokens go straight into the response
positions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import torch
from attrs import evolve, frozen
from torch import Tensor

from openmle._types import Message
from openmle._validation import fail
from openmle.errors import InvalidArgumentType

from ._tokenizer import Tokenizer, encode_chat

__all__ = ["RolloutBatch", "SFTBatch"]


def _check_2d(name: str, t: Tensor | None, shape: torch.Size) -> None:
    if t is not None and t.shape != shape:
        raise fail(f"a {tuple(shape)} tensor like input_ids", name, tuple(t.shape))


def _pad(
    prompts: Sequence[Sequence[int]], answers: Sequence[Sequence[int]], pad_token_id: int
) -> tuple[Tensor, Tensor, Tensor]:
    if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int):
        raise fail("an integer token id", "pad_token_id", pad_token_id)
    for name, seqs in (("prompts", prompts), ("answers", answers)):
        if isinstance(seqs, str | bytes) or not isinstance(seqs, Sequence):
            raise fail("a list of token-id lists", name, seqs)
        for i, seq in enumerate(seqs):
            if isinstance(seq, str | bytes) or not hasattr(seq, "__len__"):
                raise fail("a list of token ids", f"{name}[{i}]", seq)
    if len(prompts) != len(answers) or not prompts:
        raise fail("as many answers as prompts (at least one)", "answers", len(answers))
    width = max(len(p) + len(a) for p, a in zip(prompts, answers, strict=True))
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(prompts), width), dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.bool)
    for i, (p, a) in enumerate(zip(prompts, answers, strict=True)):
        if not p:
            raise fail("a non-empty prompt", f"prompts[{i}]", list(p))
        n = len(p) + len(a)
        ids[i, :n] = torch.tensor([*p, *a], dtype=torch.long)
        attn[i, :n] = 1
        mask[i, len(p) : n] = True
    return ids, attn, mask


def _width(attention_mask: Tensor) -> int:
    """One past the last column holding a real token in any row (at least 1)."""
    cols = attention_mask.bool().any(0).nonzero()
    return int(cols[-1]) + 1 if len(cols) else 1


def _place(
    values: Sequence[Sequence[float]], prompts: Sequence[Sequence[int]], like: Tensor
) -> Tensor:
    out = torch.zeros(like.shape, dtype=torch.float32)
    for i, (v, p) in enumerate(zip(values, prompts, strict=True)):
        out[i, len(p) : len(p) + len(v)] = torch.tensor(list(v), dtype=torch.float32)
    return out


@final
@frozen(kw_only=True, eq=False)
class RolloutBatch:
    """One rollout batch for :class:`GSPOTrainer`: ``B`` sequences of prompt + response.

    Attributes:
        input_ids: ``(B, T)`` long, prompt then response ids, right-padded.
        attention_mask: ``(B, T)`` 1 for real tokens, 0 for padding.
        response_mask: ``(B, T)`` bool, the response tokens to train on (set a whole row to
            False to drop a sequence, e.g. an infrastructure error: it then neither contributes
            nor counts).
        advantages: ``(B,)`` float, one advantage per sequence (from :mod:`openmle.rewards`).
        old_logprobs: ``(B, T)`` float or ``None``: log-probs under the policy the batch is
            judged against; ``None`` makes the trainer recompute them with the current weights
            before the first optimiser step of the batch.
        rollout_logprobs: ``(B, T)`` float or ``None``: the inference engine's log-probs of the
            sampled tokens, for truncated importance sampling (off when ``None``).
        ref_logprobs: ``(B, T)`` float or ``None``: reference-policy log-probs for the KL term.
    """

    input_ids: Tensor
    attention_mask: Tensor
    response_mask: Tensor
    advantages: Tensor
    old_logprobs: Tensor | None = None
    rollout_logprobs: Tensor | None = None
    ref_logprobs: Tensor | None = None

    def __attrs_post_init__(self) -> None:
        if self.input_ids.dim() != 2:
            raise fail("a (B, T) tensor", "input_ids", tuple(self.input_ids.shape))
        shape = self.input_ids.shape
        for name in ("attention_mask", "response_mask", "old_logprobs", "rollout_logprobs"):
            _check_2d(name, getattr(self, name), shape)
        _check_2d("ref_logprobs", self.ref_logprobs, shape)
        if self.advantages.shape != shape[:1]:
            raise fail(f"a ({shape[0]},) tensor", "advantages", tuple(self.advantages.shape))
        if not bool(torch.isfinite(self.advantages).all()):
            raise fail("finite advantages", "advantages", self.advantages.tolist())

    @property
    def size(self) -> int:
        """``B``, the number of sequences."""
        return int(self.input_ids.shape[0])

    def select(self, rows: Tensor | slice) -> RolloutBatch:
        """The sub-batch of ``rows`` (an index tensor or a slice)."""
        return self._map(lambda t: t[rows])

    def to(self, device: torch.device | str) -> RolloutBatch:
        """The same batch with every tensor on ``device``."""
        return self._map(lambda t: t.to(device))

    def trimmed(self) -> RolloutBatch:
        """The batch without its trailing all-padding columns (a sub-batch of short sequences
        taken from a batch padded to a long one does not pay for the padding).
        """
        width = _width(self.attention_mask)
        if width == self.input_ids.size(1):
            return self
        return self._map(lambda t: t[:, :width] if t.dim() == 2 else t)

    def _map(self, fn: Callable[[Tensor], Tensor]) -> RolloutBatch:
        names = ("input_ids", "attention_mask", "response_mask", "advantages")
        extra = ("old_logprobs", "rollout_logprobs", "ref_logprobs")
        changes: dict[str, Any] = {}
        for n in (*names, *extra):
            t = getattr(self, n)
            changes[n] = None if t is None else fn(t)
        return evolve(self, **changes)

    def with_logprobs(
        self, *, old: Tensor | None = None, ref: Tensor | None = None
    ) -> RolloutBatch:
        """A copy with ``old_logprobs`` and/or ``ref_logprobs`` filled in."""
        changes = {"old_logprobs": old} if old is not None else {}
        if ref is not None:
            changes["ref_logprobs"] = ref
        return evolve(self, **changes)

    @classmethod
    def from_sequences(
        cls,
        prompts: Sequence[Sequence[int]],
        responses: Sequence[Sequence[int]],
        advantages: Sequence[float],
        *,
        pad_token_id: int,
        rollout_logprobs: Sequence[Sequence[float]] | None = None,
    ) -> RolloutBatch:
        """Right-pad prompt + response ids into a batch.

        Args:
            prompts: token ids of each prompt (non-empty).
            responses: sampled token ids of each response (may be empty: nothing to train).
            advantages: one per sequence.
            pad_token_id: the id written in padding positions.
            rollout_logprobs: the sampler's log-prob of each response token (same lengths as
                ``responses``), for truncated importance sampling.

        Raises:
            InvalidArgument: mismatched lengths or an empty prompt.
        """
        ids, attn, mask = _pad(prompts, responses, pad_token_id)
        if len(advantages) != len(prompts):
            raise fail(f"{len(prompts)} advantages", "advantages", len(advantages))
        roll = None
        if rollout_logprobs is not None:
            for i, (lp, r) in enumerate(zip(rollout_logprobs, responses, strict=True)):
                if len(lp) != len(r):
                    raise fail(f"{len(r)} log-probs", f"rollout_logprobs[{i}]", len(lp))
            roll = _place(rollout_logprobs, prompts, ids)
        adv = torch.tensor([float(a) for a in advantages], dtype=torch.float32)
        return cls(
            input_ids=ids, attention_mask=attn, response_mask=mask, advantages=adv,
            rollout_logprobs=roll,
        )  # fmt: skip


def _conversation(raw: object, i: int) -> list[Message]:
    """Conversation ``i`` as messages: each a :class:`Message` or a ``role``/``content`` mapping."""
    if isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Sequence):
        raise InvalidArgumentType(
            f"Expected a list of messages but got conversations[{i}]={raw!r:.80} "
            f"(type={type(raw).__name__})"
        )
    out = []
    for j, m in enumerate(raw):
        if isinstance(m, Message):
            out.append(m)
        elif isinstance(m, Mapping) and isinstance(m.get("content"), str):
            out.append(Message(role=str(m.get("role")), content=m["content"]))
        else:
            raise InvalidArgumentType(
                f"Expected a Message or a {{'role', 'content'}} mapping but got "
                f"conversations[{i}][{j}]={m!r:.80} (type={type(m).__name__})"
            )
    return out


@final
@frozen(kw_only=True, eq=False)
class SFTBatch:
    """One supervised batch for :class:`SFTTrainer`: prompts with the answers to imitate.

    Attributes:
        input_ids: ``(B, T)`` long, prompt then answer ids, right-padded.
        attention_mask: ``(B, T)`` 1 for real tokens, 0 for padding.
        loss_mask: ``(B, T)`` bool, the answer tokens whose next-token loss is trained.
    """

    input_ids: Tensor
    attention_mask: Tensor
    loss_mask: Tensor

    def __attrs_post_init__(self) -> None:
        if self.input_ids.dim() != 2:
            raise fail("a (B, T) tensor", "input_ids", tuple(self.input_ids.shape))
        _check_2d("attention_mask", self.attention_mask, self.input_ids.shape)
        _check_2d("loss_mask", self.loss_mask, self.input_ids.shape)

    @property
    def size(self) -> int:
        """``B``, the number of sequences."""
        return int(self.input_ids.shape[0])

    def select(self, rows: Tensor | slice) -> SFTBatch:
        """The sub-batch of ``rows``."""
        return SFTBatch(
            input_ids=self.input_ids[rows],
            attention_mask=self.attention_mask[rows],
            loss_mask=self.loss_mask[rows],
        )

    def trimmed(self) -> SFTBatch:
        """The batch without its trailing all-padding columns."""
        w = _width(self.attention_mask)
        if w == self.input_ids.size(1):
            return self
        return SFTBatch(
            input_ids=self.input_ids[:, :w],
            attention_mask=self.attention_mask[:, :w],
            loss_mask=self.loss_mask[:, :w],
        )

    def to(self, device: torch.device | str) -> SFTBatch:
        """The same batch on ``device``."""
        return SFTBatch(
            input_ids=self.input_ids.to(device),
            attention_mask=self.attention_mask.to(device),
            loss_mask=self.loss_mask.to(device),
        )

    @classmethod
    def from_sequences(
        cls,
        prompts: Sequence[Sequence[int]],
        answers: Sequence[Sequence[int]],
        *,
        pad_token_id: int,
    ) -> SFTBatch:
        """Right-pad prompt + answer ids; the loss is on the answer ids."""
        ids, attn, mask = _pad(prompts, answers, pad_token_id)
        return cls(input_ids=ids, attention_mask=attn, loss_mask=mask)

    @classmethod
    def from_messages(
        cls, tokenizer: Tokenizer, conversations: Sequence[Sequence[Message]]
    ) -> SFTBatch:
        """Chat records (each ending with the assistant answer to imitate) into a batch.

        The prompt is every message but the last, rendered by the tokenizer's chat template
        with the generation prompt; the answer is the last message's content plus EOS.

        A message is a :class:`openmle.Message` or a mapping with ``role`` and ``content``
        (the chat JSON most datasets hold).

        Raises:
            InvalidArgument: a conversation that does not end with an assistant message, or a
                message whose role is not system, user or assistant.
            InvalidArgumentType: a conversation or message of another type (named by index).
        """
        prompts, answers = [], []
        for i, raw in enumerate(conversations):
            conv = _conversation(raw, i)
            if not conv or conv[-1].role != "assistant":
                raise fail(
                    "a conversation ending with an assistant message", f"conversations[{i}]", conv
                )
            p, a = encode_chat(tokenizer, conv[:-1], conv[-1].content)
            prompts.append(p)
            answers.append(a)
        return cls.from_sequences(prompts, answers, pad_token_id=tokenizer.pad_token_id)
