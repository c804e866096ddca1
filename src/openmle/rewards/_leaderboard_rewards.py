"""Leaderboard rewards: a medal (MLE-bench rules) or the released ``leaderboard_rank`` reward.

Both take the leaderboard's scores listed best first (rank order) and use the medal rules of
:mod:`openmle._leaderboard`. When ``higher_is_better`` is None the direction is inferred from the
list as the released code does (reference bug B12: first score < last score means lower is
better, a tie means higher); pass the task's direction to avoid that guess.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from openmle._leaderboard import (
    infer_higher_is_better,
    leaderboard_rank_of,
    medal_of,
    medal_thresholds,
    read_leaderboard,
)
from openmle.errors import InvalidArgumentType
from openmle.rewards._scores import optional_number

__all__ = ["leaderboard_rank", "medal_binary", "read_leaderboard"]


def _clean(scores: Sequence[float | None]) -> list[float]:
    """The finite entries of ``scores``; a leaderboard that is no sequence of numbers or None
    is refused, naming the bad entry.
    """
    if isinstance(scores, str | bytes | Mapping) or not isinstance(scores, Iterable):
        raise InvalidArgumentType(
            f"Expected a sequence of scores, best first but got leaderboard={scores!r:.80} "
            f"(type={type(scores).__name__}); pass [] for a task without a leaderboard"
        )
    out = []
    for i, s in enumerate(scores):
        v = optional_number(s, f"leaderboard[{i}]")
        if v is not None and math.isfinite(v):
            out.append(v)
    return out


def _score(score: float | None) -> float | None:
    """``score`` as a finite float, or None when it is missing or not finite."""
    v = optional_number(score, "score")
    return v if v is not None and math.isfinite(v) else None


def _direction(board: list[float], higher_is_better: bool | None) -> bool:
    return infer_higher_is_better(board) if higher_is_better is None else bool(higher_is_better)


def medal_binary(
    score: float | None,
    leaderboard: Sequence[float | None],
    *,
    higher_is_better: bool | None = None,
) -> float:
    """1.0 if ``score`` earns a bronze medal or better on ``leaderboard``, else 0.0.

    Args:
        score: raw score in task units; None or non-finite gives 0.0.
        leaderboard: the leaderboard's scores, best first; non-finite entries are dropped.
        higher_is_better: metric direction, or None to infer it from the list (released rule).

    Returns:
        1.0 or 0.0 (also 0.0 for an empty leaderboard).

    Raises:
        InvalidArgumentType: ``score`` neither a number nor None, or ``leaderboard`` not a
            sequence of numbers or None.
    """
    board, value = _clean(leaderboard), _score(score)
    if value is None or not board:
        return 0.0
    hib = _direction(board, higher_is_better)
    return 1.0 if medal_of(value, medal_thresholds(board, higher_is_better=hib)) else 0.0


def leaderboard_rank(
    score: float | None,
    leaderboard: Sequence[float | None],
    *,
    higher_is_better: bool | None = None,
) -> float:
    """The released RL reward ``leaderboard_rank``: ``1 - (entries strictly better than score)
    / (N - 1)``, clipped to [0, 1].

    1.0 means no entry beats ``score``; 0.0 means (at least) every other entry does. A
    one-entry leaderboard gives 1.0; a missing score or an empty leaderboard gives 0.0.
    This is a reward, not the Human Rank that evaluation reports print (the fraction of
    participants surpassed, :attr:`openmle.gym.GradeReport.human_rank`): 3 better of 20 gives
    ``1 - 3/19`` = 0.842 here and 17/20 = 0.85 as Human Rank.

    Args:
        score: raw score in task units.
        leaderboard: the leaderboard's scores, best first; non-finite entries are dropped.
        higher_is_better: metric direction, or None to infer it from the list (released rule).

    Raises:
        InvalidArgumentType: as :func:`medal_binary`.
    """
    board, value = _clean(leaderboard), _score(score)
    if value is None or not board:
        return 0.0
    return leaderboard_rank_of(value, board, higher_is_better=_direction(board, higher_is_better))
