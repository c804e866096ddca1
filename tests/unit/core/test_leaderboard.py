"""MLE-bench medal rules, human rank and the released direction inference."""

from __future__ import annotations

import pytest

from openmle._leaderboard import (
    beaten_fraction,
    infer_higher_is_better,
    medal_of,
    medal_positions,
    medal_thresholds,
)
from openmle.errors import InvalidArgument


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (1, (1, 1, 1)),
        (9, (1, 1, 3)),
        (50, (5, 10, 20)),
        (99, (9, 19, 39)),
        (100, (10, 20, 40)),
        (249, (10, 49, 99)),
        (250, (10, 50, 100)),
        (999, (11, 50, 100)),
        (1000, (12, 50, 100)),
        (5000, (20, 250, 500)),
    ],
)
def test_medal_positions(n: int, expected: tuple[int, int, int]) -> None:
    """Positions follow the four leaderboard-size bands."""
    assert medal_positions(n) == expected


def test_thresholds_and_medals_both_directions() -> None:
    """Thresholds are the scores at the positions; reaching one is inclusive."""
    hi = [1.0 - i / 100 for i in range(50)]  # best first, higher is better
    t = medal_thresholds(hi, higher_is_better=True)
    assert (t.gold, t.silver, t.bronze) == (hi[4], hi[9], hi[19])
    assert medal_of(hi[4], t) == "gold" and medal_of(hi[5], t) == "silver"
    assert medal_of(hi[19], t) == "bronze" and medal_of(hi[20], t) is None
    lo = [i / 100 for i in range(50)]  # best first, lower is better
    t2 = medal_thresholds(lo, higher_is_better=False)
    assert medal_of(0.0, t2) == "gold" and medal_of(lo[20], t2) is None
    assert medal_of(None, t2) is None and medal_of(float("nan"), t2) is None
    with pytest.raises(InvalidArgument):
        medal_thresholds([float("nan")], higher_is_better=True)


def test_beaten_fraction_and_inference() -> None:
    """Human rank is the share strictly beaten; direction inference mirrors the released rule."""
    scores = [0.9, 0.8, 0.7, 0.6]
    assert beaten_fraction(0.85, scores, higher_is_better=True) == 0.75
    assert beaten_fraction(0.85, scores, higher_is_better=False) == 0.25
    assert beaten_fraction(None, scores, higher_is_better=True) == 0.0
    assert infer_higher_is_better(scores) is True
    assert infer_higher_is_better([0.1, 0.5]) is False
    assert infer_higher_is_better([0.5, 0.5]) is True
