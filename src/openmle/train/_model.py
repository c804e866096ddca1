"""A tiny causal transformer with a Hugging Face style forward, for tests and laptops.

``TinyCausalLM(config)(input_ids=..., attention_mask=...).logits`` has the same call shape as a
``transformers`` causal LM, so the trainers treat both alike. Pre-norm blocks, learned positions,
causal scaled-dot-product attention, GELU MLP, tied input/output embeddings; no dropout, so a
forward is a pure function of the parameters (which makes exact resume and DDP parity tests
meaningful). Positions come from the attention mask, so left and right padding both work.

:func:`sample_completions` is a small sampler (no KV cache: it re-runs the prefix each step),
enough for rollouts of a few dozen tokens on the CPU; use an inference engine for anything larger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple, final

import torch
from attrs import frozen
from torch import Tensor, nn

from openmle._validation import check_positive, check_type, fail
from openmle.errors import InvalidArgument

__all__ = ["CausalLMOutput", "Completion", "TinyCausalLM", "TinyLMConfig", "sample_completions"]


@final
@frozen(kw_only=True)
class TinyLMConfig:
    """Shape of a :class:`TinyCausalLM` (defaults: about 0.15 M parameters, byte vocabulary).

    Attributes:
        vocab_size: number of token ids (``ByteTokenizer`` needs 259).
        dim: model width; must be divisible by ``n_heads``.
        n_layers: transformer blocks.
        n_heads: attention heads.
        max_seq_len: longest sequence (learned positions).
        seed: seeds the parameter initialisation (the global RNG is left untouched).
    """

    vocab_size: int = 259
    dim: int = 64
    n_layers: int = 2
    n_heads: int = 4
    max_seq_len: int = 512
    seed: int = 0

    def __attrs_post_init__(self) -> None:
        for name in ("vocab_size", "dim", "n_layers", "n_heads", "max_seq_len"):
            check_positive(check_type(getattr(self, name), int, name), name)
        if self.dim % self.n_heads:
            raise fail(f"dim divisible by n_heads={self.n_heads}", "dim", self.dim)


class CausalLMOutput(NamedTuple):
    """Forward output, shaped like ``transformers``' ``CausalLMOutput``.

    Attributes:
        logits: ``(B, T, V)`` next-token logits.
    """

    logits: Tensor


class _Block(nn.Module):
    def __init__(self, dim: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)  # 3 x (B, T, D)
        shape = (b, t, self.n_heads, d // self.n_heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))  # (B, H, T, D/H)
        att = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))  # (B, T, D)
        return x + self.mlp(self.norm2(x))  # type: ignore[no-any-return]


@final
class TinyCausalLM(nn.Module):
    """A small decoder-only transformer; ``forward`` matches Hugging Face causal LMs.

    Args:
        config: the shape; ``TinyLMConfig()`` by default.
    """

    def __init__(self, config: TinyLMConfig | None = None) -> None:
        super().__init__()
        self.config = config or TinyLMConfig()
        c = self.config
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(c.seed)
            self.embed = nn.Embedding(c.vocab_size, c.dim)
            self.pos = nn.Embedding(c.max_seq_len, c.dim)
            self.blocks = nn.ModuleList(_Block(c.dim, c.n_heads) for _ in range(c.n_layers))
            self.norm = nn.LayerNorm(c.dim)
            nn.init.normal_(self.embed.weight, std=0.02)
            nn.init.normal_(self.pos.weight, std=0.02)
            for block in self.blocks:
                if not isinstance(block, _Block):
                    raise AssertionError("internal invariant broken: isinstance(block, _Block)")
                nn.init.normal_(block.proj.weight, std=0.02 / math.sqrt(2 * c.n_layers))

    def hidden_states(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """``(B, T, D)`` the normalised last hidden states, the input of the output layer
        (whose weight is ``embed.weight``, tied).

        Args:
            input_ids: ``(B, T)`` token ids, ``T <= max_seq_len``.
            attention_mask: ``(B, T)`` 1 for real tokens, 0 for padding (left or right).
        """
        b, t = input_ids.shape
        if t > self.config.max_seq_len:
            raise InvalidArgument(
                f"sequence length {t} > TinyLMConfig.max_seq_len {self.config.max_seq_len}; "
                "shorten the prompt (plus max_new_tokens when sampling) or raise max_seq_len"
            )
        causal = torch.ones(t, t, dtype=torch.bool, device=input_ids.device).tril()  # (T, T)
        if attention_mask is None:
            pos = torch.arange(t, device=input_ids.device).expand(b, t)  # (B, T)
            mask = causal.expand(b, 1, t, t)
        else:
            keep = attention_mask.bool()  # (B, T)
            pos = (keep.long().cumsum(-1) - 1).clamp(min=0)  # (B, T)
            eye = torch.eye(t, dtype=torch.bool, device=input_ids.device)
            # a query sees earlier real tokens, and always itself (no empty rows, no NaN)
            mask = (causal & (keep[:, None, :] | eye)).unsqueeze(1)  # (B, 1, T, T)
        x = self.embed(input_ids) + self.pos(pos)  # (B, T, D)
        for block in self.blocks:
            x = block(x, mask)
        return self.norm(x)  # type: ignore[no-any-return]

    def forward(
        self, input_ids: Tensor, attention_mask: Tensor | None = None, logits_to_keep: int = 0
    ) -> CausalLMOutput:
        """Next-token logits.

        Args:
            input_ids: ``(B, T)`` token ids, ``T <= max_seq_len``.
            attention_mask: ``(B, T)`` 1 for real tokens, 0 for padding (left or right).
            logits_to_keep: compute logits for the last ``K`` positions only (0: all), as in
                ``transformers``.

        Returns:
            :class:`CausalLMOutput` with ``logits`` ``(B, T, V)`` (``(B, K, V)`` with ``K``).
        """
        x = self.hidden_states(input_ids, attention_mask)  # (B, T, D)
        if logits_to_keep > 0:
            x = x[:, -logits_to_keep:]  # (B, K, D)
        logits = x @ self.embed.weight.T  # (B, T or K, V)
        return CausalLMOutput(logits=logits)


class Completion(NamedTuple):
    """One sampled continuation.

    Attributes:
        token_ids: the sampled ids (ending with ``eos_token_id`` unless cut at the length limit).
        logprobs: the sampler's log-probability of each sampled id (same length), usable as
            ``rollout_logprobs``.
    """

    token_ids: list[int]
    logprobs: list[float]


@torch.no_grad()
def sample_completions(
    model: nn.Module,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_token_id: int,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
) -> list[Completion]:
    """Sample continuations of ``prompts`` from any model with a Hugging Face style forward.

    Prompts are left-padded together; each continuation stops at ``eos_token_id`` or after
    ``max_new_tokens``.

    Args:
        model: returns ``.logits`` ``(B, T, V)`` from ``model(input_ids=, attention_mask=)``.
        prompts: token ids of each prompt (non-empty).
        max_new_tokens: the length limit of each continuation.
        eos_token_id: the id that ends a continuation (kept in ``token_ids``).
        temperature: softmax temperature (> 0); log-probs are of the tempered distribution.
        generator: the random source (for reproducible samples).

    Returns:
        One :class:`Completion` per prompt, in order.

    Raises:
        InvalidArgument: no prompt, an empty prompt (or a string), a ``max_new_tokens`` that
            is not an integer >= 0, ``temperature <= 0``, or (a :class:`TinyCausalLM`) a
            prompt plus continuation longer than its ``max_seq_len``.
    """
    check_positive(temperature, "temperature")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise fail("an integer >= 0", "max_new_tokens", max_new_tokens)
    if max_new_tokens < 0:
        raise fail("an integer >= 0", "max_new_tokens", max_new_tokens)
    if isinstance(prompts, str | bytes) or not isinstance(prompts, Sequence) or not prompts:
        raise fail("a non-empty list of prompts (lists of token ids)", "prompts", prompts)
    for i, p in enumerate(prompts):
        if isinstance(p, str | bytes) or not hasattr(p, "__len__") or len(p) == 0:
            raise fail("a non-empty list of token ids", f"prompts[{i}]", p)
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[0] * (width - len(p)) + list(p) for p in prompts], device=device)
    attn = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    done = torch.zeros(len(prompts), dtype=torch.bool, device=device)
    out_ids: list[list[int]] = [[] for _ in prompts]
    out_lp: list[list[float]] = [[] for _ in prompts]
    for _ in range(max_new_tokens):
        logits = model(input_ids=ids, attention_mask=attn).logits[:, -1].float()  # (B, V)
        logp = (logits / temperature).log_softmax(-1)  # (B, V)
        nxt = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)  # (B,)
        chosen = logp.gather(-1, nxt[:, None]).squeeze(-1)  # (B,)
        for i, (tok, lp) in enumerate(zip(nxt.tolist(), chosen.tolist(), strict=True)):
            if not done[i]:
                out_ids[i].append(tok)
                out_lp[i].append(lp)
        done |= nxt == eos_token_id
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        attn = torch.cat([attn, (~done | (nxt == eos_token_id)).long()[:, None]], dim=1)
        if bool(done.all()):
            break
    return [Completion(a, b) for a, b in zip(out_ids, out_lp, strict=True)]
