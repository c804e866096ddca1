"""The GSPO loss and its helpers against values worked out by hand on small tensors."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle.train._loss import (  # noqa: E402
    AGGREGATIONS,
    aggregate,
    chunked_token_logprobs,
    gspo_loss,
    low_var_kl,
    sft_loss,
    token_entropy,
    token_logprobs,
)

pytestmark = pytest.mark.torch

# Two sequences, four positions. Sequence 0 has 2 response tokens, sequence 1 has 3.
MASK = torch.tensor([[0, 1, 1, 0], [0, 1, 1, 1]], dtype=torch.bool)
NEW = torch.tensor([[0.0, -1.0, -2.0, 0.0], [0.0, -0.5, -0.5, -0.5]])
# Sequence 0: token log-ratios 0.1, 0.1 -> s_0 = e^0.1 = 1.10517. Sequence 1: s_1 = 1.
# The masked position holds NaN: it must not leak into anything.
OLD = torch.tensor([[0.0, -1.1, -2.1, math.nan], [0.0, -0.5, -0.5, -0.5]])
ADV = torch.tensor([1.0, -2.0])
EPS = 0.05  # s_0 is clipped to 1.05; pg_0 = max(-1.10517, -1.05) = -1.05; pg_1 = max(2, 2) = 2


def test_default_aggregation_is_mean_of_sequence_means() -> None:
    """Mean over tokens per sequence then over sequences: (-1.05 + 2) / 2 = 0.475."""
    out = gspo_loss(NEW, OLD, ADV, MASK, clip_eps_low=EPS)
    assert out.loss.item() == pytest.approx(0.475, abs=1e-6)
    assert out.pg_loss.item() == pytest.approx(0.475, abs=1e-6)
    assert out.clip_fraction.item() == pytest.approx(0.5)  # sequence 0 is clipped upwards
    assert out.ratio_max.item() == pytest.approx(math.exp(0.1), abs=1e-6)
    assert out.ratio_min.item() == pytest.approx(1.0)
    assert out.ratio_mean.item() == pytest.approx((math.exp(0.1) + 1) / 2, abs=1e-6)
    assert out.tis_weight_mean.item() == 1.0 and out.tis_clip_fraction.item() == 0.0


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("seq-mean-token-mean", (-1.05 + 2.0) / 2),
        ("token-mean", (-1.05 * 2 + 2.0 * 3) / 5),
        ("seq-mean-token-sum", (-1.05 * 2 + 2.0 * 3) / 2),
        ("seq-mean-token-sum-norm", (-1.05 * 2 + 2.0 * 3) / (2 * 4)),
        ("sum-of-sample-mean", -1.05 + 2.0),
    ],
)
def test_each_aggregation_mode(mode: str, expected: float) -> None:
    """Every aggregation mode gives its hand-computed value."""
    out = gspo_loss(NEW, OLD, ADV, MASK, clip_eps_low=EPS, aggregation=mode, norm_length=4)
    assert out.loss.item() == pytest.approx(expected, abs=1e-6)


def test_gradient_is_zero_for_clipped_sequence_and_geometric_for_the_other() -> None:
    """Clipped sequence 0 gets no gradient; each token of sequence 1 gets -A*s/(n*B) = 1/3."""
    new = NEW.clone().requires_grad_(True)
    torch.autograd.backward(gspo_loss(new, OLD, ADV, MASK, clip_eps_low=EPS).loss)
    assert new.grad is not None
    expected = torch.tensor([[0.0, 0.0, 0.0, 0.0], [0.0, 1 / 3, 1 / 3, 1 / 3]])
    torch.testing.assert_close(new.grad, expected)


def test_truncated_importance_sampling_weights_tokens() -> None:
    """IS weights exp(old - rollout) = 3 (truncated to 2), 0.5, 1 on sequence 1 scale its tokens."""
    rollout = OLD.clone()
    rollout[1, 1:] = OLD[1, 1:] - torch.tensor([math.log(3.0), math.log(0.5), 0.0])
    out = gspo_loss(NEW, OLD, ADV, MASK, clip_eps_low=EPS, rollout_logprobs=rollout)
    # sequence 1: 2 * (2 + 0.5 + 1) / 3; sequence 0 unchanged (weights 1)
    assert out.loss.item() == pytest.approx((-1.05 + 2 * 3.5 / 3) / 2, abs=1e-6)
    assert out.tis_weight_mean.item() == pytest.approx((1 + 1 + 2 + 0.5 + 1) / 5, abs=1e-6)
    assert out.tis_clip_fraction.item() == pytest.approx(1 / 5)


def test_asymmetric_clip_band() -> None:
    """A wider upper band (eps_high 0.2) leaves s_0 = 1.105 unclipped: (-1.10517 + 2) / 2."""
    out = gspo_loss(NEW, OLD, ADV, MASK, clip_eps_low=EPS, clip_eps_high=0.2)
    assert out.loss.item() == pytest.approx((-math.exp(0.1) + 2.0) / 2, abs=1e-6)
    assert out.clip_fraction.item() == 0.0


def test_low_var_kl_is_k3() -> None:
    """k3 at r = ln 2 is 2 - ln 2 - 1; it is 0 where the policies agree."""
    kl = low_var_kl(torch.tensor([[0.0, -1.0]]), torch.tensor([[math.log(2.0), -1.0]]))
    torch.testing.assert_close(kl, torch.tensor([[1.0 - math.log(2.0), 0.0]]))


def test_kl_and_entropy_terms_are_added_when_switched_on() -> None:
    """KL adds kl_coef * aggregated k3 and entropy subtracts entropy_coef * aggregated entropy."""
    ref = NEW.clone()
    ref[1, 1] += math.log(2.0)  # one token of sequence 1 has k3 = 1 - ln 2
    ent = torch.where(MASK, torch.full_like(NEW, 0.7), torch.zeros_like(NEW))
    base = gspo_loss(NEW, OLD, ADV, MASK, clip_eps_low=EPS).loss.item()
    out = gspo_loss(
        NEW, OLD, ADV, MASK, clip_eps_low=EPS, ref_logprobs=ref, kl_coef=0.5,
        entropy=ent, entropy_coef=0.1,
    )  # fmt: skip
    k3 = 1.0 - math.log(2.0)
    expected = base + 0.5 * (k3 / 3) / 2 - 0.1 * 0.7
    assert out.loss.item() == pytest.approx(expected, abs=1e-6)
    assert out.kl.item() == pytest.approx(k3 / 5, abs=1e-6)
    assert out.entropy.item() == pytest.approx(0.7, abs=1e-6)


def test_terms_are_off_by_default() -> None:
    """A reference and entropies given with zero coefficients change only the statistics."""
    ref = NEW + 0.3
    out = gspo_loss(NEW, OLD, ADV, MASK, clip_eps_low=EPS, ref_logprobs=ref, entropy=NEW.abs())
    assert out.loss.item() == pytest.approx(0.475, abs=1e-6)
    assert out.kl.item() > 0


@pytest.mark.parametrize("mode", AGGREGATIONS)
def test_split_batch_with_global_denominator_sums_to_whole(mode: str) -> None:
    """Micro-batches given the whole batch's denominator add up to the whole-batch loss."""
    gen = torch.Generator().manual_seed(0)
    per_token = torch.randn(6, 5, generator=gen)
    mask = torch.rand(6, 5, generator=gen) > 0.4
    mask[2] = False  # an empty sequence neither contributes nor counts
    whole = aggregate(per_token, mask, mode, norm_length=5)
    if mode == "token-mean":
        denom: float = float(mask.sum())
    else:
        denom = float((mask.sum(-1) > 0).sum())
    parts = sum(
        aggregate(per_token[i : i + 2], mask[i : i + 2], mode, denominator=denom, norm_length=5)
        for i in range(0, 6, 2)
    )
    torch.testing.assert_close(parts, whole)


def test_empty_sequence_is_not_counted() -> None:
    """A fully masked sequence (an infra error) leaves the mean over the others unchanged."""
    mask = MASK.clone()
    mask = torch.cat([mask, torch.zeros(1, 4, dtype=torch.bool)])
    out = gspo_loss(
        torch.cat([NEW, torch.zeros(1, 4)]), torch.cat([OLD, torch.zeros(1, 4)]),
        torch.cat([ADV, torch.tensor([5.0])]), mask, clip_eps_low=EPS,
    )  # fmt: skip
    assert out.loss.item() == pytest.approx(0.475, abs=1e-6)


def test_bad_inputs_raise() -> None:
    """Shape mismatches, unknown modes and missing inputs for nonzero coefficients are refused."""
    with pytest.raises(ValueError, match="advantages"):
        gspo_loss(NEW, OLD, ADV[:1], MASK)
    with pytest.raises(ValueError, match="old_logprobs"):
        gspo_loss(NEW, OLD[:, :3], ADV, MASK)
    with pytest.raises(ValueError, match="unknown aggregation"):
        gspo_loss(NEW, OLD, ADV, MASK, aggregation="mean")
    with pytest.raises(ValueError, match="norm_length"):
        gspo_loss(NEW, OLD, ADV, MASK, aggregation="seq-mean-token-sum-norm")
    with pytest.raises(ValueError, match="ref_logprobs"):
        gspo_loss(NEW, OLD, ADV, MASK, kl_coef=0.1)


def test_token_logprobs_and_entropy_are_aligned() -> None:
    """Position t holds log p(x_t | x_<t); uniform logits give entropy ln V."""
    gen = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 7, generator=gen)
    ids = torch.randint(0, 7, (2, 5), generator=gen)
    lp = token_logprobs(logits, ids)
    assert lp.shape == (2, 5) and torch.all(lp[:, 0] == 0)
    expected = logits.log_softmax(-1)[0, 2, ids[0, 3]]
    torch.testing.assert_close(lp[0, 3], expected)
    ent = token_entropy(torch.zeros(1, 3, 4))
    torch.testing.assert_close(ent, torch.tensor([[0.0, math.log(4), math.log(4)]]))


def test_partial_logits_align_with_full_ones() -> None:
    """Logits of the last K positions (logits_to_keep) give the same tail log-probs, entropies."""
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 6, 5, generator=gen)
    ids = torch.randint(0, 5, (2, 6), generator=gen)
    full, part = token_logprobs(logits, ids), token_logprobs(logits[:, 3:], ids)
    assert part.shape == (2, 6) and torch.all(part[:, :4] == 0)
    torch.testing.assert_close(part[:, 4:], full[:, 4:])
    torch.testing.assert_close(token_entropy(logits[:, 3:], 6)[:, 4:], token_entropy(logits)[:, 4:])


def test_sft_loss_is_masked_token_mean_nll() -> None:
    """Uniform logits over V=4 give nll ln 4 on every answer token."""
    logits = torch.zeros(2, 4, 4)
    ids = torch.zeros(2, 4, dtype=torch.long)
    assert sft_loss(logits, ids, MASK).item() == pytest.approx(math.log(4), abs=1e-6)
    assert sft_loss(logits, ids, MASK, denominator=10.0).item() == pytest.approx(
        5 * math.log(4) / 10, abs=1e-6
    )


def _head_case(dtype: Any = torch.float32) -> tuple[Any, Any, Any, Any]:
    gen = torch.Generator().manual_seed(0)
    b, t, k, d, v = 3, 11, 7, 16, 97  # logits for the last 7 of 11 positions
    hidden = torch.randn(b, k, d, generator=gen, dtype=dtype).requires_grad_()
    weight = (0.3 * torch.randn(v, d, generator=gen, dtype=dtype)).requires_grad_()
    bias = torch.randn(v, generator=gen, dtype=dtype).requires_grad_()
    ids = torch.randint(0, v, (b, t), generator=gen)
    return hidden, weight, bias, ids


@pytest.mark.parametrize("rows", [1, 5, 18, None])
def test_chunked_logprobs_equal_unchunked_values_and_gradients(rows: int | None) -> None:
    """Chunked log-probs and entropies equal the (B, K, V) computation to 1e-6, and so do the
    gradients of a GSPO-like loss through them (hidden states, weight and bias)."""
    hidden, weight, bias, ids = _head_case()
    g_lp = torch.randn(ids.shape, generator=torch.Generator().manual_seed(1))
    g_ent = torch.randn(ids.shape, generator=torch.Generator().manual_seed(2))

    logits = hidden @ weight.T + bias  # (B, K, V)
    ref_lp, ref_ent = token_logprobs(logits, ids), token_entropy(logits, ids.size(1))
    ref_grads = torch.autograd.grad(
        (ref_lp * g_lp).sum() + (ref_ent * g_ent).sum(), (hidden, weight, bias)
    )
    lp, ent = chunked_token_logprobs(hidden, weight, ids, bias=bias, entropy=True, chunk_rows=rows)
    assert ent is not None
    torch.testing.assert_close(lp, ref_lp, rtol=0, atol=1e-6)
    torch.testing.assert_close(ent, ref_ent, rtol=1e-6, atol=1e-6)  # entropies ~4.5 nats
    assert bool((lp[:, : ids.size(1) - hidden.size(1) + 1] == 0).all())  # no prediction there
    grads = torch.autograd.grad((lp * g_lp).sum() + (ent * g_ent).sum(), (hidden, weight, bias))
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
    lp_only, none = chunked_token_logprobs(hidden, weight, ids, chunk_rows=rows)
    assert none is None
    torch.testing.assert_close(lp_only, token_logprobs(hidden @ weight.T, ids), rtol=0, atol=1e-6)


def test_chunked_logprobs_pass_gradcheck() -> None:
    """Analytic gradients of the chunked op (log-probs and entropies) match finite differences."""
    hidden, weight, bias, ids = _head_case(torch.float64)

    def f(h: Any, w: Any, b: Any) -> Any:
        return chunked_token_logprobs(h, w, ids, bias=b, entropy=True, chunk_rows=4)

    assert torch.autograd.gradcheck(f, (hidden, weight, bias))


def test_chunked_logprobs_feed_gspo_loss_like_logits() -> None:
    """The GSPO loss on chunked log-probs equals the loss on full logits, gradients too."""
    hidden, weight, _, ids = _head_case()
    mask = torch.zeros(ids.shape, dtype=torch.bool)
    mask[:, 6:] = True
    old = torch.full(ids.shape, -4.0)
    adv = torch.tensor([1.0, -0.5, 2.0])
    ref = gspo_loss(token_logprobs(hidden @ weight.T, ids), old, adv, mask, clip_eps_low=10.0)
    ref_g = torch.autograd.grad(ref.loss, (hidden, weight))
    lp, _ = chunked_token_logprobs(hidden, weight, ids, chunk_rows=3)
    out = gspo_loss(lp, old, adv, mask, clip_eps_low=10.0)
    torch.testing.assert_close(out.loss, ref.loss, rtol=0, atol=1e-6)
    for got, want in zip(torch.autograd.grad(out.loss, (hidden, weight)), ref_g, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
