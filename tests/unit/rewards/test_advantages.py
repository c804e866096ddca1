"""Edge cases of the entropic advantage's default (bug-fixed) behaviour."""

from __future__ import annotations

import numpy as np

from openmle.rewards import entropic_advantage, entropic_advantages


def test_near_tie_and_exact_tie_agree() -> None:
    """A one-ulp gap at the top behaves like an exact tie (the KL cap is continuous).

    Found by hypothesis: [0, 1, 1 - 1e-16] shifted by 1 rounds to the exact tie [1, 2, 2];
    before the fix the two gave [-1, 1, 1] and [-0.85, 0.74, 0.74].
    """
    near = entropic_advantage([0.0, 1.0, 0.9999999999999999])
    exact = entropic_advantage([1.0, 2.0, 2.0])
    np.testing.assert_allclose(near, exact, rtol=1e-9, atol=1e-9)
    assert near[1] == near[2] or abs(near[1] - near[2]) < 1e-9


def test_two_member_groups_stay_bounded() -> None:
    """Bug B2: a two-member group no longer blows up to ~1e12."""
    adv = entropic_advantage([0.2, 0.9])
    assert np.all(np.abs(adv) < 10)
    assert adv[1] > 0 > adv[0]
    released = entropic_advantage([0.2, 0.9], compat="openrsi")
    assert released[1] > 1e6


def test_batched_matches_single_on_ragged_groups() -> None:
    """Ragged groups through the mask give the single-group answers exactly."""
    groups = [[0.1, 0.5, 0.9, 0.3], [0.0, 1.0], [0.4, 0.4, 0.8]]
    width = max(map(len, groups))
    matrix = np.zeros((len(groups), width))
    mask = np.zeros_like(matrix, dtype=bool)
    for i, g in enumerate(groups):
        matrix[i, : len(g)] = g
        mask[i, : len(g)] = True
    batched = entropic_advantages(matrix, mask)
    for i, g in enumerate(groups):
        np.testing.assert_array_equal(batched[i, : len(g)], entropic_advantage(g))


def test_group_normalized_advantage_of_subnormal_rewards_does_not_overflow() -> None:
    """Rewards of subnormal size (found by hypothesis: ``[0, 5e-324]``): eps dwarfs the spread,
    so the advantages are tiny and ordered, with no overflow warning from the rescaling."""
    import warnings

    from openmle.rewards import group_normalized_advantage

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adv = group_normalized_advantage([0.0, 5e-324])
    assert adv[0] <= 0.0 <= adv[1] and abs(adv[1]) < 1e-300
