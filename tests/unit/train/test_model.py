"""TinyCausalLM: Hugging Face style output, padding invariance, seeding, and the sampler."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle.errors import InvalidArgument  # noqa: E402
from openmle.train import TinyCausalLM, TinyLMConfig, sample_completions  # noqa: E402
from openmle.train._loss import token_logprobs  # noqa: E402

pytestmark = pytest.mark.torch


def test_forward_shape_and_seed(tiny_model: Callable[..., Any]) -> None:
    """logits are (B, T, V); the same seed gives the same weights without touching global RNG."""
    state = torch.get_rng_state()
    a, b, c = tiny_model(0), tiny_model(0), tiny_model(1)
    assert torch.equal(torch.get_rng_state(), state)
    ids = torch.randint(0, 32, (2, 5))
    out = a(input_ids=ids)
    assert out.logits.shape == (2, 5, 32)
    assert torch.equal(out.logits, b(input_ids=ids).logits)
    assert not torch.equal(out.logits, c(input_ids=ids).logits)


def test_left_and_right_padding_agree(tiny_model: Callable[..., Any]) -> None:
    """The real tokens' logits do not depend on where the padding is."""
    model = tiny_model()
    ids = torch.tensor([[5, 6, 7]])
    alone = model(input_ids=ids).logits
    right = model(
        input_ids=torch.tensor([[5, 6, 7, 0, 0]]), attention_mask=torch.tensor([[1, 1, 1, 0, 0]])
    )
    left = model(
        input_ids=torch.tensor([[0, 0, 5, 6, 7]]), attention_mask=torch.tensor([[0, 0, 1, 1, 1]])
    )
    torch.testing.assert_close(right.logits[:, :3], alone)
    torch.testing.assert_close(left.logits[:, 2:], alone)
    assert torch.isfinite(left.logits).all()


def test_logits_to_keep_is_the_tail(tiny_model: Callable[..., Any]) -> None:
    """logits_to_keep=K returns the last K positions of the full logits."""
    model = tiny_model()
    ids = torch.randint(0, 32, (2, 7))
    full = model(input_ids=ids).logits
    torch.testing.assert_close(model(input_ids=ids, logits_to_keep=3).logits, full[:, -3:])


def test_config_validation() -> None:
    """Widths not divisible by the heads and non-positive sizes are refused."""
    with pytest.raises(InvalidArgument, match="dim"):
        TinyLMConfig(dim=30, n_heads=4)
    with pytest.raises(InvalidArgument, match="n_layers"):
        TinyLMConfig(n_layers=0)
    with pytest.raises(ValueError, match="max_seq_len"):
        TinyCausalLM(TinyLMConfig(max_seq_len=4))(input_ids=torch.zeros(1, 5, dtype=torch.long))


def test_sampler_logprobs_match_the_trainer(tiny_model: Callable[..., Any]) -> None:
    """At temperature 1 the sampler's log-probs equal the trainer's recomputation."""
    model = tiny_model()
    prompts = [[1, 2, 3], [4, 5]]
    gen = torch.Generator().manual_seed(0)
    outs = sample_completions(model, prompts, max_new_tokens=6, eos_token_id=31, generator=gen)
    assert all(1 <= len(o.token_ids) <= 6 for o in outs)
    assert all(o.token_ids[-1] == 31 or len(o.token_ids) == 6 for o in outs)
    for p, o in zip(prompts, outs, strict=True):
        ids = torch.tensor([p + o.token_ids])
        lp = token_logprobs(model(input_ids=ids).logits, ids)[0, len(p) :]
        torch.testing.assert_close(lp, torch.tensor(o.logprobs), rtol=1e-4, atol=1e-5)
    again = sample_completions(
        model,
        prompts,
        max_new_tokens=6,
        eos_token_id=31,
        generator=torch.Generator().manual_seed(0),
    )
    assert again == outs
