"""The worked example of the rewards explanation page, every figure asserted.

A log-loss task (lower is better) with static signed bounds (best 0.0, worst -20.0) and one
group of 16 program scores.
"""

from __future__ import annotations

import numpy as np
import pytest

from openmle import TaskMeta
from openmle.rewards import (
    adaptive_bounds,
    entropic_advantage,
    entropic_advantages,
    group_normalized_advantage,
    score_to_reward,
    signed_score,
    static_bounds,
)

SCORES = [
    0.171, 0.164, 0.159, 0.152, 0.148, 0.141, 0.139, 0.131,
    0.129, 0.122, 0.118, 0.111, 0.104, 0.098, 0.091, 0.083,
]  # fmt: skip
META = TaskMeta(higher_is_better=False, theoretical_min=0.0, theoretical_max=20.0)


def test_static_bounds_squash_the_group() -> None:
    """Static bounds (0, -20) leave a reward spread of only 0.0044."""
    best, worst = static_bounds(META)
    assert (best, worst) == (0.0, -20.0)
    rewards = score_to_reward(signed_score(SCORES, False), best=best, worst=worst)
    assert float(np.ptp(rewards)) == pytest.approx(0.0044, abs=1e-12)


def test_adaptive_bounds_spread_the_group() -> None:
    """top1_top16 with shift 0.25 gives bounds [-0.1930, -0.0830] and a spread of 0.8000."""
    best, worst = adaptive_bounds([], SCORES, meta=META, mode="top1_top16", lower_shift_ratio=0.25)
    assert best == pytest.approx(-0.0830, abs=1e-12)
    assert worst == pytest.approx(-0.1930, abs=1e-12)
    rewards = np.asarray(score_to_reward(signed_score(SCORES, False), best=best, worst=worst))
    assert float(np.ptp(rewards)) == pytest.approx(0.8000, abs=1e-12)
    assert rewards[-1] == 1.0 and rewards[0] == pytest.approx(0.2, abs=1e-12)


def test_best_candidate_advantage_grpo_vs_entropic() -> None:
    """The best candidate gets 1.718 under GRPO and 5.654 under the entropic advantage (3.29x)."""
    best, worst = adaptive_bounds([], SCORES, meta=META)
    rewards = score_to_reward(signed_score(SCORES, False), best=best, worst=worst)
    grpo = group_normalized_advantage(rewards)
    ent = entropic_advantage(rewards)
    assert grpo[-1] == pytest.approx(1.718, abs=5e-4)
    assert ent[-1] == pytest.approx(5.654, abs=5e-4)
    assert ent[-1] / grpo[-1] == pytest.approx(3.29, abs=5e-3)
    assert np.array_equal(ent, entropic_advantage(rewards, compat="openrsi"))


def test_random_groups_ratio_distribution() -> None:
    """4,000 seeded U(0,1) groups of 16: best-candidate ratio in [1.6, 6.4], median 2.96."""
    rewards = np.random.default_rng(0).uniform(0.0, 1.0, size=(4000, 16))
    ent = entropic_advantages(rewards)
    grpo = np.stack([group_normalized_advantage(row) for row in rewards])
    rows = np.arange(4000)
    top = np.argmax(rewards, axis=1)
    ratio = ent[rows, top] / grpo[rows, top]
    assert ratio.min() >= 1.6
    assert ratio.max() <= 6.4
    assert float(np.median(ratio)) == pytest.approx(2.96, abs=0.02)
