"""The GSPO policy loss and the supervised next-token loss, as pure functions.

Shapes use ``B`` for sequences in the batch, ``T`` for token positions (padded) and ``V`` for the
vocabulary. Every per-token tensor is *token aligned*: position ``t`` holds the value for the
token ``input_ids[:, t]`` given the tokens before it, and ``mask`` marks the response tokens that
are trained on (``mask[:, 0]`` is always 0, the first token has no prediction).

GSPO (Zheng et al., 2025, "Group Sequence Policy Optimization") replaces PPO's per-token
importance ratio by one ratio per sequence, the geometric mean of the token ratios::

    s_i = exp( mean_{t in response_i} (log p_new(t) - log p_old(t)) )
    pg_i = max(-s_i A_i, -clip(s_i, 1 - eps_low, 1 + eps_high) A_i)

broadcast to the response tokens, optionally multiplied by the truncated importance-sampling
weight ``clamp(exp(log p_old - log p_rollout), tis_low, tis_high)`` (the correction for the
rollout engine computing slightly different log-probs from the trainer), plus an optional
``low_var_kl`` penalty against a reference policy, then aggregated by an explicit mode.

Departures, and why:

- The default aggregation is ``"seq-mean-token-mean"`` (mean over tokens per sequence, then mean
  over sequences): each sequence weighs the same whatever its length, which is the GSPO paper's
  objective. The released OpenMLE configuration (SLIME) sums the per-sequence means
  (``"sum-of-sample-mean"``), which scales the gradient with the batch size; it is available by
  name. Token-summed modes under a sequence-level ratio weight sequences by their length (the
  footgun TRL now warns about, trl#3823); they are here for parity, not as defaults.
- The seq-mean modes divide by the number of sequences *with at least one response token*, not
  by ``B``: a sequence masked out entirely (an infrastructure error in its rollout) neither
  contributes nor dilutes the others. TRL divides by ``B``; both agree when no sequence is empty.
- Zero-advantage sequences (a group whose members all scored the same) contribute zero policy
  loss but still count in the denominators, as in TRL and verl; drop them upstream if you want
  them not to dilute the step.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "AGGREGATIONS",
    "GSPOLossOutput",
    "aggregate",
    "chunked_token_logprobs",
    "gspo_loss",
    "low_var_kl",
    "sft_loss",
    "token_entropy",
    "token_logprobs",
]

AGGREGATIONS: tuple[str, ...] = (
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
    "sum-of-sample-mean",
    "token-mean",
)
"""Loss aggregation modes (verl's names, plus SLIME's ``sum-of-sample-mean``).

=========================  =========================================  ==================
mode                       value                                      TRL ``loss_type``
=========================  =========================================  ==================
seq-mean-token-mean        mean_i ( sum_t l_it / n_i )                ``grpo``
token-mean                 sum_it l_it / sum_i n_i                    ``bnpo``, ``dapo``
seq-mean-token-sum         mean_i ( sum_t l_it )                      ``luspo``
seq-mean-token-sum-norm    sum_it l_it / (B * norm_length)            ``dr_grpo``
sum-of-sample-mean         sum_i ( sum_t l_it / n_i )                 (none; SLIME)
=========================  =========================================  ==================
"""


def token_logprobs(logits: Tensor, input_ids: Tensor) -> Tensor:
    """Log-probability of each token given the tokens before it, token aligned.

    Args:
        logits: ``(B, K, V)`` model outputs for the last ``K <= T`` positions (``K = T`` for a
            full forward; less when the model was asked for ``logits_to_keep=K``);
            ``logits[:, k]`` predicts the token after position ``T - K + k``.
        input_ids: ``(B, T)`` token ids.

    Returns:
        ``(B, T)`` float32 log-probabilities; positions with no prediction (position 0, and the
        first ``T - K`` positions of a partial forward) are 0.
    """
    offset = input_ids.size(1) - logits.size(1)  # leading positions without logits
    pred = logits[:, :-1].float()  # (B, K-1, V)
    target = input_ids[:, offset + 1 :]  # (B, K-1)
    # cross_entropy = logsumexp - logit[target], without materialising the log-softmax
    nll = torch.nn.functional.cross_entropy(
        pred.reshape(-1, pred.size(-1)), target.reshape(-1), reduction="none"
    ).view_as(target)  # (B, K-1)
    return torch.nn.functional.pad(-nll, (offset + 1, 0))  # (B, T)


CHUNK_BYTES = 64 * 2**20
"""Default budget of one chunk's float32 logits in :func:`chunked_token_logprobs` (64 MiB)."""


def chunked_token_logprobs(
    hidden: Tensor,
    weight: Tensor,
    input_ids: Tensor,
    *,
    bias: Tensor | None = None,
    entropy: bool = False,
    chunk_rows: int | None = None,
) -> tuple[Tensor, Tensor | None]:
    """:func:`token_logprobs` (and :func:`token_entropy`) from the output layer's *input*, by
    chunks of positions, never holding the ``(B, K, V)`` logits.

    Each chunk's logits ``hidden @ weight.T + bias`` are computed, reduced to the log-softmax of
    the target and the entropy, and dropped; the backward pass recomputes them chunk by chunk
    (one extra output-layer matmul) and accumulates the gradients of ``hidden``, ``weight`` and
    ``bias``. Peak memory is one chunk's logits instead of the whole batch's. Values equal the
    unchunked computation up to float32 summation order.

    Args:
        hidden: ``(B, K, D)`` the last hidden states of the last ``K <= T`` positions (what the
            output layer maps to logits; ``hidden[:, k]`` predicts the token after position
            ``T - K + k``).
        weight: ``(V, D)`` the output layer's weight.
        input_ids: ``(B, T)`` token ids.
        bias: ``(V,)`` the output layer's bias, if it has one.
        entropy: also return the token-aligned entropies.
        chunk_rows: positions per chunk; ``None`` sizes chunks to :data:`CHUNK_BYTES` of
            float32 logits.

    Returns:
        ``(B, T)`` float32 log-probs and ``(B, T)`` float32 entropies (``None`` unless asked),
        token aligned; positions with no prediction are 0.
    """
    b, t = input_ids.shape
    k = hidden.size(1)
    offset = t - k
    h = hidden[:, :-1].reshape(-1, hidden.size(-1))  # (B*(K-1), D)
    target = input_ids[:, offset + 1 :].reshape(-1)  # (B*(K-1),)
    rows = chunk_rows if chunk_rows is not None else max(1, CHUNK_BYTES // (4 * weight.size(0)))
    logp, ent = _ChunkedHead.apply(h, weight, bias, target, int(rows), entropy)  # type: ignore[no-untyped-call]
    logp = torch.nn.functional.pad(logp.view(b, k - 1), (offset + 1, 0))  # (B, T)
    if not entropy:
        return logp, None
    return logp, torch.nn.functional.pad(ent.view(b, k - 1), (offset + 1, 0))  # (B, T)


def _chunk_logits(h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    z = h @ weight.T if bias is None else torch.addmm(bias, h, weight.T)  # (N, V)
    return z if z.dtype == torch.float64 else z.float()


class _ChunkedHead(torch.autograd.Function):
    """Per-row target log-prob and entropy of ``softmax(h @ W.T + b)``, chunk by chunk."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda")  # type: ignore[untyped-decorator]
    def forward(
        ctx: Any,
        h: Tensor,
        weight: Tensor,
        bias: Tensor | None,
        target: Tensor,
        rows: int,
        want_entropy: bool,
    ) -> tuple[Tensor, Tensor]:
        n = h.size(0)
        dtype = torch.float64 if h.dtype == torch.float64 else torch.float32
        logp = torch.empty(n, dtype=dtype, device=h.device)  # (N,)
        lse = torch.empty_like(logp)  # (N,)
        ent = torch.empty_like(logp) if want_entropy else logp.new_zeros(0)  # (N,) or (0,)
        for s in range(0, n, rows):
            z = _chunk_logits(h[s : s + rows], weight, bias)  # (n_c, V) float32
            tgt = target[s : s + rows]
            lse_c = torch.logsumexp(z, -1)  # (n_c,)
            lse[s : s + rows] = lse_c
            logp[s : s + rows] = z.gather(-1, tgt[:, None]).squeeze(-1) - lse_c
            if want_entropy:  # H = lse - sum_v p_v z_v
                ent[s : s + rows] = lse_c - ((z - lse_c[:, None]).exp() * z).sum(-1)
        ctx.save_for_backward(h, weight, bias, target, lse, ent)
        ctx.rows = rows
        ctx.want_entropy = want_entropy
        ctx.mark_non_differentiable(target)
        return logp, ent

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")  # type: ignore[untyped-decorator]
    def backward(
        ctx: Any, g_logp: Tensor | None, g_ent: Tensor | None
    ) -> tuple[Tensor | None, ...]:
        h, weight, bias, target, lse, ent = ctx.saved_tensors
        rows: int = ctx.rows
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        grad_h = torch.empty_like(h) if need_h else None
        grad_w = torch.zeros_like(weight, dtype=lse.dtype) if need_w else None
        grad_b = torch.zeros(weight.size(0), dtype=lse.dtype, device=h.device) if need_b else None
        for s in range(0, h.size(0), rows):
            hc = h[s : s + rows]  # (n_c, D)
            z = _chunk_logits(hc, weight, bias)  # (n_c, V)
            logp_all = z - lse[s : s + rows, None]  # (n_c, V) log-softmax
            p = logp_all.exp()  # (n_c, V)
            gz = torch.zeros_like(z) if g_logp is None else p * -g_logp[s : s + rows, None]
            if g_logp is not None:  # d logp[target] / dz = onehot - p
                gz.scatter_add_(-1, target[s : s + rows, None], g_logp[s : s + rows, None])
            if g_ent is not None and ctx.want_entropy:  # dH / dz = -p * (log p + H)
                gz -= p * (logp_all + ent[s : s + rows, None]) * g_ent[s : s + rows, None]
            if grad_h is not None:
                grad_h[s : s + rows] = (gz @ weight.to(gz.dtype)).to(h.dtype)
            if grad_w is not None:
                grad_w.addmm_(gz.T, hc.to(gz.dtype))
            if grad_b is not None:
                grad_b += gz.sum(0)
        gw = grad_w.to(weight.dtype) if grad_w is not None else None
        gb = grad_b.to(bias.dtype) if grad_b is not None and bias is not None else None
        return grad_h, gw, gb, None, None, None


def token_entropy(logits: Tensor, length: int | None = None) -> Tensor:
    """Entropy of each next-token distribution, token aligned like :func:`token_logprobs`.

    Args:
        logits: ``(B, K, V)`` for the last ``K`` positions.
        length: ``T``, the full sequence length (``K`` when ``None``).

    Returns:
        ``(B, T)`` float32 entropies in nats; positions with no prediction are 0.
    """
    offset = (logits.size(1) if length is None else length) - logits.size(1)
    logp = logits[:, :-1].float().log_softmax(-1)  # (B, K-1, V)
    ent = -(logp.exp() * logp).sum(-1)  # (B, K-1)
    return torch.nn.functional.pad(ent, (offset + 1, 0))  # (B, T)


def low_var_kl(logprobs: Tensor, ref_logprobs: Tensor) -> Tensor:
    """The k3 estimator of KL(new || ref) per token (Schulman 2020), clamped like verl and SLIME.

    ``k3 = exp(r) - r - 1`` with ``r = log p_ref - log p_new`` clamped to [-20, 20]; the result
    is clamped to [-10, 10]. Non-negative, unbiased for KL when tokens come from ``p_new``.

    Args:
        logprobs: ``(B, T)`` current log-probs (carry the gradient).
        ref_logprobs: ``(B, T)`` reference-policy log-probs.

    Returns:
        ``(B, T)`` per-token KL estimates (unmasked).
    """
    r = (ref_logprobs - logprobs).clamp(-20.0, 20.0)  # (B, T)
    return (r.exp() - r - 1.0).clamp(-10.0, 10.0)  # (B, T)


def aggregate(
    per_token: Tensor,
    mask: Tensor,
    mode: str = "seq-mean-token-mean",
    *,
    denominator: float | Tensor | None = None,
    norm_length: int | None = None,
) -> Tensor:
    """Reduce a per-token loss to a scalar by ``mode`` (see :data:`AGGREGATIONS`).

    Args:
        per_token: ``(B, T)`` loss per token; positions outside ``mask`` are ignored (even NaN).
        mask: ``(B, T)`` bool or 0/1, the tokens that count.
        mode: one of :data:`AGGREGATIONS`.
        denominator: what the sum is divided by, instead of this batch's own count: the number
            of non-empty sequences for the ``seq-mean-*`` modes, the number of masked tokens for
            ``token-mean``. Trainers pass the count over the whole optimiser step (all
            micro-batches and ranks) so that the accumulated micro-batch losses add up to the
            loss of the whole batch. Ignored by ``sum-of-sample-mean``.
        norm_length: the constant length of ``seq-mean-token-sum-norm`` (TRL's
            ``max_completion_length``); required by that mode only.

    Returns:
        A 0-d tensor.

    Raises:
        ValueError: an unknown ``mode``, or ``seq-mean-token-sum-norm`` without ``norm_length``.
    """
    m = mask.bool()  # (B, T)
    tok = torch.where(m, per_token, torch.zeros_like(per_token))  # (B, T)
    if mode == "token-mean":
        denom = m.sum() if denominator is None else denominator
        return tok.sum() / _at_least_one(denom)
    lengths = m.sum(-1)  # (B,)
    if mode in ("seq-mean-token-mean", "sum-of-sample-mean"):
        per_seq = tok.sum(-1) / lengths.clamp(min=1)  # (B,)
    elif mode == "seq-mean-token-sum":
        per_seq = tok.sum(-1)  # (B,)
    elif mode == "seq-mean-token-sum-norm":
        if norm_length is None or norm_length < 1:
            raise ValueError("aggregation 'seq-mean-token-sum-norm' needs norm_length >= 1")
        per_seq = tok.sum(-1) / norm_length  # (B,)
    else:
        raise ValueError(f"unknown aggregation {mode!r}; expected one of {list(AGGREGATIONS)}")
    if mode == "sum-of-sample-mean":
        return per_seq.sum()
    denom = (lengths > 0).sum() if denominator is None else denominator
    return per_seq.sum() / _at_least_one(denom)


def _at_least_one(x: float | Tensor) -> float | Tensor:
    return x.clamp(min=1) if isinstance(x, Tensor) else max(float(x), 1.0)


class GSPOLossOutput(NamedTuple):
    """What :func:`gspo_loss` returns: the loss to backpropagate and detached statistics.

    Attributes:
        loss: 0-d, carries the gradient (policy loss + KL term - entropy bonus).
        pg_loss: 0-d, the aggregated policy-gradient term alone.
        kl: 0-d, masked token mean of the ``low_var_kl`` estimate (0 without a reference).
        entropy: 0-d, masked token mean entropy (0 when no entropy was given).
        clip_fraction: 0-d, fraction of non-empty sequences whose ratio is clipped in the
            direction that zeroes its gradient.
        ratio_mean: 0-d, mean sequence ratio ``s_i`` over non-empty sequences.
        ratio_min: 0-d.
        ratio_max: 0-d.
        tis_weight_mean: 0-d, masked token mean of the truncated IS weight (1 without TIS).
        tis_clip_fraction: 0-d, fraction of response tokens whose IS weight was truncated.
    """

    loss: Tensor
    pg_loss: Tensor
    kl: Tensor
    entropy: Tensor
    clip_fraction: Tensor
    ratio_mean: Tensor
    ratio_min: Tensor
    ratio_max: Tensor
    tis_weight_mean: Tensor
    tis_clip_fraction: Tensor

    def metrics(self) -> dict[str, float]:
        """Every field as a Python float (one device sync)."""
        values = torch.stack([t.detach().float() for t in self]).tolist()
        return dict(zip(self._fields, values, strict=True))


def _check_loss_inputs(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    kl_coef: float,
    has_ref: bool,
    entropy_coef: float,
    has_entropy: bool,
) -> None:
    """Raise ``ValueError`` for mismatched shapes or a coefficient without its input."""
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must be (B, T), got shape {tuple(logprobs.shape)}")
    for name, t in (("old_logprobs", old_logprobs), ("mask", mask)):
        if t.shape != logprobs.shape:
            raise ValueError(
                f"{name} must have shape {tuple(logprobs.shape)}, got {tuple(t.shape)}"
            )
    if advantages.shape != logprobs.shape[:1]:
        raise ValueError(f"advantages must be (B,)={logprobs.shape[:1]}, got {advantages.shape}")
    if kl_coef != 0.0 and not has_ref:
        raise ValueError("kl_coef != 0 needs ref_logprobs")
    if entropy_coef != 0.0 and not has_entropy:
        raise ValueError("entropy_coef != 0 needs entropy")


def gspo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    rollout_logprobs: Tensor | None = None,
    ref_logprobs: Tensor | None = None,
    entropy: Tensor | None = None,
    clip_eps_low: float = 3.5e-4,
    clip_eps_high: float | None = None,
    tis_clip_low: float = 0.0,
    tis_clip_high: float = 2.0,
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    aggregation: str = "seq-mean-token-mean",
    denominator: float | Tensor | None = None,
    norm_length: int | None = None,
) -> GSPOLossOutput:
    """The GSPO clipped objective with truncated importance sampling (pure; no state).

    Args:
        logprobs: ``(B, T)`` log-probs of the tokens under the policy being trained (carry the
            gradient), token aligned.
        old_logprobs: ``(B, T)`` log-probs under the policy that the rollout batch is judged
            against (the trainer's recompute before this batch's first optimiser step).
        advantages: ``(B,)`` one advantage per sequence (group-normalised or entropic, from
            :mod:`openmle.rewards`).
        mask: ``(B, T)`` bool or 0/1, the response tokens to train on.
        rollout_logprobs: ``(B, T)`` log-probs reported by the rollout engine for the sampled
            tokens; when given, each token's loss is multiplied by
            ``clamp(exp(old_logprobs - rollout_logprobs), tis_clip_low, tis_clip_high)``.
        ref_logprobs: ``(B, T)`` reference-policy log-probs; needed when ``kl_coef != 0``.
        entropy: ``(B, T)`` per-token entropies (carry the gradient); needed when
            ``entropy_coef != 0``, reported in the statistics when given.
        clip_eps_low: the ratio is clipped below at ``1 - clip_eps_low`` (paper: 3e-4 to 4e-4;
            OpenMLE: 3.5e-4).
        clip_eps_high: the upper clip ``1 + clip_eps_high``; ``None`` means ``clip_eps_low``.
        tis_clip_low: lower truncation of the IS weight.
        tis_clip_high: upper truncation of the IS weight.
        kl_coef: weight of the per-token ``low_var_kl`` term (0 = off).
        entropy_coef: weight of the entropy bonus subtracted from the loss (0 = off).
        aggregation: one of :data:`AGGREGATIONS`.
        denominator: see :func:`aggregate`.
        norm_length: see :func:`aggregate`.

    Returns:
        A :class:`GSPOLossOutput`.

    Raises:
        ValueError: mismatched shapes, an unknown aggregation, or a nonzero coefficient without
            its input.
    """
    _check_loss_inputs(
        logprobs,
        old_logprobs,
        advantages,
        mask,
        kl_coef=kl_coef,
        has_ref=ref_logprobs is not None,
        entropy_coef=entropy_coef,
        has_entropy=entropy is not None,
    )
    eps_high = clip_eps_low if clip_eps_high is None else clip_eps_high
    m = mask.bool()  # (B, T)
    zeros = torch.zeros_like(logprobs)
    lengths = m.sum(-1)  # (B,)
    valid = lengths > 0  # (B,) sequences with at least one response token
    ratio = _sequence_ratio(logprobs, old_logprobs, m, zeros, lengths)  # (B,)
    adv = advantages.to(logprobs.dtype)  # (B,)
    pg_tok = _clipped_objective(ratio, adv, clip_eps_low, eps_high, logprobs)  # (B, T)
    pg_tok, tis_mean, tis_clip = _truncated_is(
        pg_tok, old_logprobs, rollout_logprobs, m, zeros, tis_clip_low, tis_clip_high
    )
    agg = partial(
        aggregate, mask=m, mode=aggregation, denominator=denominator, norm_length=norm_length
    )
    pg_loss = agg(pg_tok)
    loss, kl_stat, ent_stat = _regularised(
        pg_loss, logprobs, m, agg, ref_logprobs, kl_coef, entropy, entropy_coef
    )
    with torch.no_grad():
        clip_fraction, ratio_mean, ratio_min, ratio_max = _ratio_stats(
            ratio, adv, valid, clip_eps_low, eps_high
        )
        return GSPOLossOutput(
            loss=loss,
            pg_loss=pg_loss.detach(),
            kl=kl_stat,
            entropy=ent_stat,
            clip_fraction=clip_fraction,
            ratio_mean=ratio_mean,
            ratio_min=ratio_min,
            ratio_max=ratio_max,
            tis_weight_mean=tis_mean,
            tis_clip_fraction=tis_clip,
        )


def _sequence_ratio(
    logprobs: Tensor, old_logprobs: Tensor, m: Tensor, zeros: Tensor, lengths: Tensor
) -> Tensor:
    """``(B,)`` sequence-level importance ratio: the geometric mean of the token ratios over
    the response tokens (``m``, ``lengths`` of them per row); 1 for a sequence without any.
    """
    log_ratio = torch.where(m, logprobs - old_logprobs, zeros)  # (B, T)
    seq_log_ratio = log_ratio.sum(-1) / lengths.clamp(min=1)  # (B,)
    return seq_log_ratio.exp()


def _clipped_objective(
    ratio: Tensor, adv: Tensor, clip_eps_low: float, eps_high: float, like: Tensor
) -> Tensor:
    """The clipped sequence objective ``max(-r A, -clip(r) A)``, ``(B,)``, repeated over each
    sequence's tokens as a ``(B, T)`` view shaped ``like``.
    """
    clipped_ratio = ratio.clamp(1.0 - clip_eps_low, 1.0 + eps_high)  # (B,)
    pg_seq = torch.maximum(-ratio * adv, -clipped_ratio * adv)  # (B,)
    return pg_seq.unsqueeze(-1).expand_as(like)  # (B, T)


def _truncated_is(
    pg_tok: Tensor,
    old_logprobs: Tensor,
    rollout_logprobs: Tensor | None,
    m: Tensor,
    zeros: Tensor,
    tis_clip_low: float,
    tis_clip_high: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """Truncated importance sampling against the rollout engine's log-probs.

    Returns ``(pg_tok * weight, mean weight, fraction of tokens clipped)``; without
    ``rollout_logprobs`` the per-token loss unchanged, weight 1 and fraction 0.
    """
    if rollout_logprobs is None:
        return pg_tok, torch.ones((), device=zeros.device), torch.zeros((), device=zeros.device)
    raw_w = torch.where(m, (old_logprobs - rollout_logprobs).exp(), zeros + 1.0)  # (B, T)
    tis_w = raw_w.clamp(tis_clip_low, tis_clip_high).detach()  # (B, T)
    clipped = ((raw_w < tis_clip_low) | (raw_w > tis_clip_high)).float()
    return pg_tok * tis_w, _masked_mean(tis_w, m), _masked_mean(clipped, m)


def _regularised(
    pg_loss: Tensor,
    logprobs: Tensor,
    m: Tensor,
    agg: Callable[[Tensor], Tensor],
    ref_logprobs: Tensor | None,
    kl_coef: float,
    entropy: Tensor | None,
    entropy_coef: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(loss, kl statistic, entropy statistic)``: the policy loss plus ``kl_coef`` times the
    aggregated ``low_var_kl`` and minus ``entropy_coef`` times the aggregated entropy; each
    statistic is the masked token mean of its input (0 without it).
    """
    loss = pg_loss
    kl_stat = torch.zeros((), device=logprobs.device)
    if ref_logprobs is not None:
        kl_tok = low_var_kl(logprobs, ref_logprobs)  # (B, T)
        kl_stat = _masked_mean(kl_tok.detach(), m)
        if kl_coef != 0.0:
            loss = loss + kl_coef * agg(kl_tok)
    ent_stat = torch.zeros((), device=logprobs.device)
    if entropy is not None:
        ent_stat = _masked_mean(entropy.detach(), m)
        if entropy_coef != 0.0:
            loss = loss - entropy_coef * agg(entropy)
    return loss, kl_stat, ent_stat


def _ratio_stats(
    ratio: Tensor, adv: Tensor, valid: Tensor, clip_eps_low: float, eps_high: float
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``(clip fraction, mean, min, max)`` of the sequence ratios over the ``valid``
    sequences (min and max 1 when none is valid); call under ``torch.no_grad()``.
    """
    is_clipped = ((ratio < 1.0 - clip_eps_low) & (adv < 0)) | ((ratio > 1.0 + eps_high) & (adv > 0))
    n_valid = valid.sum().clamp(min=1)
    one = torch.ones_like(ratio)
    return (
        (is_clipped & valid).sum() / n_valid,
        torch.where(valid, ratio, 0 * one).sum() / n_valid,
        torch.where(valid, ratio, torch.inf * one).min().nan_to_num(posinf=1.0),
        torch.where(valid, ratio, -torch.inf * one).max().nan_to_num(neginf=1.0),
    )


def _masked_mean(x: Tensor, m: Tensor) -> Tensor:
    return torch.where(m, x, torch.zeros_like(x)).sum() / m.sum().clamp(min=1)


def sft_loss(
    logits: Tensor,
    input_ids: Tensor,
    mask: Tensor,
    *,
    denominator: float | Tensor | None = None,
) -> Tensor:
    """Masked next-token cross-entropy on the answer tokens, averaged over answer tokens.

    Args:
        logits: ``(B, T, V)``.
        input_ids: ``(B, T)``.
        mask: ``(B, T)`` bool or 0/1, token aligned: the answer tokens to predict.
        denominator: divide by this instead of this batch's answer-token count (trainers pass
            the count of the whole optimiser step).

    Returns:
        A 0-d tensor: the summed negative log-likelihood over masked tokens / denominator.
    """
    nll = -token_logprobs(logits, input_ids)  # (B, T)
    return aggregate(nll, mask, "token-mean", denominator=denominator)
