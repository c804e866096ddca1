"""Failure penalties (one place) and the validation/test gap penalty.

The penalties are the released values: a response without code gets -1, a program the guard
rejects as reward hacking gets -0.5, a program that does not print its validation score line
(when self-validation is required) gets -0.5, a generation abort -1. A program that ran but
produced no score gets 0 (:data:`NO_SCORE_REWARD`).

The gap penalty (released ``validation_test_gap_info`` + ``apply_validation_test_gap_penalty``)
shrinks a positive reward when the program's own validation score and the graded score disagree;
every released launcher disables it, and :class:`RewardProfile` keeps it off unless asked.
"""

from __future__ import annotations

import math
from typing import Any

from attrs import frozen

from openmle._validation import check_finite, check_positive, finite_or_none
from openmle.errors import InvalidArgumentType
from openmle.rewards._scores import MetaLike, as_meta, check_number

__all__ = [
    "GENERATION_ABORT_PENALTY",
    "HACK_PENALTY",
    "MISSING_VALIDATION_PENALTY",
    "NO_CODE_PENALTY",
    "NO_SCORE_REWARD",
    "GapInfo",
    "GapPenalty",
    "validation_gap",
    "validation_gap_penalty",
]

NO_CODE_PENALTY = -1.0
"""Reward of a response that holds no program."""
HACK_PENALTY = -0.5
"""Reward of a program the reward-hacking guard rejected."""
MISSING_VALIDATION_PENALTY = -0.5
"""Reward of a program without the required ``Final Validation Score`` print line."""
GENERATION_ABORT_PENALTY = -1.0
"""Reward of a sample whose generation was aborted (its whole group is regenerated)."""
NO_SCORE_REWARD = 0.0
"""Reward of a program that ran but produced no finite score."""

_SMALL_RANGE = 2.0
_BIG_RANGE = 100.0


@frozen(kw_only=True)
class GapInfo:
    """How far a program's own validation score is from its graded score.

    Attributes:
        validation_score, test_score: the two scores (None when missing or non-finite).
        abs_gap: ``|test - validation|``, None when a score is missing.
        relative_gap: ``abs_gap / denominator``.
        denominator: the scale used; see :func:`validation_gap`.
        source: which scale: ``theoretical_range_le_small_threshold``, ``leaderboard_range``,
            ``theoretical_range_gt_small_threshold``,
            ``max_abs_valid_test_for_big_range``,
            ``max_abs_valid_test_for_missing_range`` or ``missing_validation_or_test_score``.
    """

    validation_score: float | None
    test_score: float | None
    abs_gap: float | None
    relative_gap: float | None
    denominator: float | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        """The released field names."""
        return {
            "validation_score": self.validation_score,
            "test_score": self.test_score,
            "abs_gap": self.abs_gap,
            "relative_gap": self.relative_gap,
            "gap_denominator": self.denominator,
            "gap_denominator_source": self.source,
        }


@frozen(kw_only=True)
class GapPenalty:
    """Penalised reward: ``original * multiplier`` with ``multiplier = max(0, 1 - penalty)``."""

    reward: float
    penalty: float
    multiplier: float


def validation_gap(
    validation_score: float | None, test_score: float | None, meta: MetaLike
) -> GapInfo:
    """The relative gap between a program's validation score and its graded score.

    The denominator is the theoretical range when it is at most 2; else the leaderboard range
    (or the theoretical range); a range above 100, or no range, is replaced by
    ``max(|validation|, |test|)``.
    """
    m = as_meta(meta)
    val, test = finite_or_none(validation_score), finite_or_none(test_score)
    if val is None or test is None:
        return GapInfo(
            validation_score=val,
            test_score=test,
            abs_gap=None,
            relative_gap=None,
            denominator=None,
            source="missing_validation_or_test_score",
        )
    gap = abs(test - val)
    th = (
        m.theoretical_max - m.theoretical_min
        if m.theoretical_min is not None and m.theoretical_max is not None
        else None
    )
    lb = (
        m.leaderboard_max - m.leaderboard_min
        if m.leaderboard_min is not None and m.leaderboard_max is not None
        else None
    )
    denom: float | None
    if th is not None and 0 < th <= _SMALL_RANGE:
        denom, source = th, "theoretical_range_le_small_threshold"
    elif lb is not None and lb > 0:
        denom, source = lb, "leaderboard_range"
    elif th is not None and th > 0:
        denom, source = th, "theoretical_range_gt_small_threshold"
    else:
        denom, source = None, "missing"
    if denom is None:
        denom, source = max(abs(val), abs(test)), "max_abs_valid_test_for_missing_range"
    elif denom > _BIG_RANGE:
        denom, source = max(abs(val), abs(test)), "max_abs_valid_test_for_big_range"
    rel = gap / denom if denom > 0 else 0.0
    return GapInfo(
        validation_score=val,
        test_score=test,
        abs_gap=gap,
        relative_gap=rel,
        denominator=denom,
        source=source,
    )


def validation_gap_penalty(
    reward: float,
    gap: GapInfo,
    *,
    coef: float = 0.05,
    high_coef: float = 0.25,
    tolerance: float = 0.12,
    piecewise: bool = False,
) -> GapPenalty:
    """Shrink a finite positive reward by the relative validation/test gap.

    ``g = relative_gap / tolerance`` (a tolerance <= 0 means 0.12); the penalty is ``coef * g``,
    or with ``piecewise`` ``coef * min(g, 1) + high_coef * max(g - 1, 0)``; the multiplier is
    ``max(0, 1 - penalty)``. Non-positive or non-finite rewards and a missing gap are unchanged.

    Raises:
        InvalidArgumentType: ``reward`` not a number, or ``gap`` not a :class:`GapInfo` (make
            one with :func:`validation_gap`).
        InvalidArgument: ``coef`` or ``high_coef`` not a finite number >= 0 (a negative one
            would raise the reward), or ``tolerance`` not finite.
    """
    r = check_number(reward, "reward")
    if not isinstance(gap, GapInfo):
        raise InvalidArgumentType(
            f"Expected a GapInfo but got gap={gap!r:.80} (type={type(gap).__name__}); "
            "make it with openmle.rewards.validation_gap(validation_score, test_score, meta)"
        )
    check_positive(coef, "coef", allow_zero=True)
    check_positive(high_coef, "high_coef", allow_zero=True)
    check_finite(tolerance, "tolerance")
    if gap.relative_gap is None or not math.isfinite(r) or r <= 0:
        return GapPenalty(reward=r, penalty=0.0, multiplier=1.0)
    tol = tolerance if tolerance > 0 else 0.12
    g = gap.relative_gap / tol
    if piecewise:
        penalty = coef * min(g, 1.0) + high_coef * max(g - 1.0, 0.0)
    else:
        penalty = coef * g
    multiplier = max(0.0, 1.0 - penalty)
    return GapPenalty(reward=r * multiplier, penalty=penalty, multiplier=multiplier)
