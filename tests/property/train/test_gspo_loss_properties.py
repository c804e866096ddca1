"""Properties of the GSPO loss (hypothesis): on-policy value, invariances, the clip's gradient."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle.train._loss import AGGREGATIONS, gspo_loss  # noqa: E402

pytestmark = pytest.mark.torch

_SETTINGS = settings(deadline=None, max_examples=60)


@st.composite
def batches(draw: Any) -> dict[str, Any]:
    """Random (B, T) log-probs, a mask with at least one token per row, advantages, a seed."""
    b, t = draw(st.integers(1, 6)), draw(st.integers(2, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(b, t, generator=gen) < draw(st.floats(0.2, 1.0))
    mask[:, 0] = False
    mask[torch.arange(b), torch.randint(1, t, (b,), generator=gen)] = True
    new = -3 * torch.rand(b, t, generator=gen, dtype=torch.float64)
    noise = draw(st.floats(0.0, 0.05))
    old = new + noise * torch.randn(b, t, generator=gen, dtype=torch.float64)
    adv = torch.randn(b, generator=gen, dtype=torch.float64)
    return {"new": new, "old": old, "adv": adv, "mask": mask, "gen": gen}


@_SETTINGS
@given(batches(), st.floats(1e-4, 0.3))
def test_on_policy_loss_is_minus_mean_advantage(x: dict[str, Any], eps: float) -> None:
    """With old == new every ratio is 1 and the default loss is -mean(A)."""
    out = gspo_loss(x["new"], x["new"].clone(), x["adv"], x["mask"], clip_eps_low=eps)
    assert out.loss.item() == pytest.approx(-x["adv"].mean().item(), abs=1e-9)
    assert out.clip_fraction.item() == 0.0


@_SETTINGS
@given(batches(), st.sampled_from(AGGREGATIONS), st.floats(0.1, 10.0))
def test_advantage_scaling_scales_the_loss(x: dict[str, Any], mode: str, c: float) -> None:
    """Multiplying every advantage by c > 0 multiplies the loss by c."""
    kw: dict[str, Any] = {"aggregation": mode, "norm_length": 8, "clip_eps_low": 0.01}
    base = gspo_loss(x["new"], x["old"], x["adv"], x["mask"], **kw).loss.item()
    scaled = gspo_loss(x["new"], x["old"], c * x["adv"], x["mask"], **kw).loss.item()
    assert scaled == pytest.approx(c * base, rel=1e-9, abs=1e-12)


@_SETTINGS
@given(batches(), st.sampled_from(AGGREGATIONS))
def test_row_order_and_padding_do_not_matter(x: dict[str, Any], mode: str) -> None:
    """Permuting sequences, or appending masked columns of garbage, leaves the loss unchanged."""
    kw: dict[str, Any] = {"aggregation": mode, "norm_length": 8, "clip_eps_low": 0.01}
    base = gspo_loss(x["new"], x["old"], x["adv"], x["mask"], **kw).loss.item()
    perm = torch.randperm(len(x["adv"]), generator=x["gen"])
    permuted = gspo_loss(x["new"][perm], x["old"][perm], x["adv"][perm], x["mask"][perm], **kw)
    assert permuted.loss.item() == pytest.approx(base, rel=1e-9, abs=1e-12)
    b = len(x["adv"])
    pad = torch.full((b, 3), float("nan"), dtype=torch.float64)
    padded = gspo_loss(
        torch.cat([x["new"], pad.nan_to_num(7.0)], 1), torch.cat([x["old"], pad], 1), x["adv"],
        torch.cat([x["mask"], torch.zeros(b, 3, dtype=torch.bool)], 1), **kw,
    )  # fmt: skip
    assert padded.loss.item() == pytest.approx(base, rel=1e-9, abs=1e-12)


@_SETTINGS
@given(batches())
def test_clipped_sequences_get_no_gradient(x: dict[str, Any]) -> None:
    """A sequence whose ratio left the band in its advantage's direction gets zero gradient;
    the others get a nonzero one."""
    new = x["new"].clone().requires_grad_(True)
    out = gspo_loss(new, x["old"], x["adv"], x["mask"], clip_eps_low=1e-3)
    torch.autograd.backward(out.loss)
    assert new.grad is not None
    m = x["mask"]
    ratio = (((x["new"] - x["old"]) * m).sum(-1) / m.sum(-1)).exp()
    clipped = ((ratio > 1 + 1e-3) & (x["adv"] > 0)) | ((ratio < 1 - 1e-3) & (x["adv"] < 0))
    for i in range(len(ratio)):
        row = new.grad[i][m[i]]
        if clipped[i]:
            assert torch.all(row == 0)
        elif x["adv"][i] != 0:
            assert torch.all(row != 0)
    assert torch.all(new.grad[~m] == 0)
