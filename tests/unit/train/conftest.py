"""Fixtures for the torch backend tests: small random rollout batches and a tiny model."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")


def _random_batch(
    seed: int = 0, *, size: int = 4, vocab: int = 32, rollout: bool = False, max_len: int = 9
) -> Any:
    from openmle.train import RolloutBatch

    gen = torch.Generator().manual_seed(seed)
    prompts, responses, logps = [], [], []
    for _ in range(size):
        p = int(torch.randint(2, 5, (1,), generator=gen))
        r = int(torch.randint(1, max_len - p + 1, (1,), generator=gen))
        prompts.append(torch.randint(0, vocab, (p,), generator=gen).tolist())
        responses.append(torch.randint(0, vocab, (r,), generator=gen).tolist())
        logps.append((-torch.rand(r, generator=gen) * 4).tolist())
    adv = torch.randn(size, generator=gen).tolist()
    return RolloutBatch.from_sequences(
        prompts, responses, adv, pad_token_id=0, rollout_logprobs=logps if rollout else None
    )


@pytest.fixture
def random_batch() -> Callable[..., Any]:
    """``random_batch(seed, size=, vocab=, rollout=)`` builds a reproducible RolloutBatch."""
    return _random_batch


@pytest.fixture
def tiny_model() -> Callable[..., Any]:
    """``tiny_model(seed)`` builds a 1-layer TinyCausalLM over a 32-token vocabulary."""
    from openmle.train import TinyCausalLM, TinyLMConfig

    def make(seed: int = 0) -> Any:
        return TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=seed))

    return make
