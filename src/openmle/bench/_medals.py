"""MLE-bench's medal rule, above-median rule and grading-report fields.

Implemented from MLE-bench's documented behaviour (``mlebench/grade_helpers.py``'s
``Grader.rank_score`` and ``grade.py``'s ``grade_csv``), not copied:

- The leaderboard is ``leaderboard.csv``'s ``score`` column **in file order** (it is Kaggle's
  final standings, best first). ``N`` counts every row.
- Lower is better when the first row's score is lower than the last row's (a tie: higher).
- Thresholds are the scores at these 1-indexed rows (``int`` truncates):

  =================  ======================  =====================  =====================
  N                  gold                    silver                 bronze
  =================  ======================  =====================  =====================
  1 <= N < 100       max(1, int(0.1 N))      max(1, int(0.2 N))     max(1, int(0.4 N))
  100 <= N < 250     10                      max(1, int(0.2 N))     max(1, int(0.4 N))
  250 <= N < 1000    10 + int(0.002 N)       50                     100
  N >= 1000          10 + int(0.002 N)       max(1, int(0.05 N))    max(1, int(0.1 N))
  =================  ======================  =====================  =====================

- The median threshold is the median of the scores, missing scores skipped (pandas'
  ``Series.median``).
- The grader's score is rounded to 5 decimals **before** it is compared: the grading process
  rounds the grader's own return value as MLE-bench does (``round(score, 5)``, so a NumPy
  scalar by NumPy's rule), and :func:`round_score` (Python's ``round``) leaves such a value
  unchanged; thresholds are not rounded. Comparisons are inclusive for medals (``>=``, or
  ``<=`` when lower is better), medals are exclusive (the best one counts) and "above median"
  is strict.
- A submission that does not grade has ``score=None``: no medal, not above median,
  ``valid_submission=False``.

The leaderboard reading, the thresholds, the medal and the above-median rules are the core's
(:func:`openmle._leaderboard.read_leaderboard`, :func:`~openmle._leaderboard.medal_thresholds`,
:func:`~openmle._leaderboard.medal_of`, :func:`~openmle._leaderboard.above_median_of`) with
``rule="mlebench"``; the gym's task packages use the same functions with the task's direction
(``rule="metadata"``). This module adds MLE-bench's rounding; the report value is the one of
every grade, :class:`openmle.gym.GradeReport` (``CompetitionReport`` is its deprecated alias),
stored by the bench as :func:`bench_dict`.

One departure: a grader that returns a non-finite number (NaN, inf) gives ``score=None`` here
(MLE-bench keeps the NaN and calls the submission valid); a NaN cannot earn anything either way.

Human Rank (the paper's definition, the one every openmle report prints): the fraction of the
``N`` finite leaderboard scores strictly worse than the score (ties are not surpassed), 0.0 for
a missing score; see :func:`openmle._leaderboard.human_rank_of`.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any, final

from attrs import field, frozen

from openmle._leaderboard import (
    above_median_of,
    human_rank_of,
    medal_of,
    medal_thresholds,
    read_leaderboard,
)
from openmle.errors import InvalidArgument
from openmle.gym import GradeReport

__all__ = [
    "BENCH_REPORT_FIELDS",
    "MLEBENCH_REPORT_FIELDS",
    "Leaderboard",
    "RankInfo",
    "bench_dict",
    "competition_report",
    "rank_score",
    "round_score",
]

MLEBENCH_REPORT_FIELDS: tuple[str, ...] = GradeReport.MLEBENCH_FIELDS
"""The keys of one competition report in MLE-bench's grading report, in its order
(:meth:`openmle.gym.GradeReport.to_mlebench`'s keys)."""

BENCH_REPORT_FIELDS: tuple[str, ...] = (
    *MLEBENCH_REPORT_FIELDS,
    "human_rank",
    "seed",
    "reason",
    "leaderboard_size",
)
"""The keys of a run's report in the bench's files (``bench_result.json``, ``report.json``):
MLE-bench's, then the human rank, the seed, the reason and the leaderboard's size."""


def round_score(score: float | None) -> float | None:
    """The score as MLE-bench compares it, rounded to 5 decimals (None: missing/not finite)."""
    if score is None or isinstance(score, bool):
        return None
    try:
        v = float(score)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(v):
        return None
    return float(round(v, 5))


def _scores(values: Iterable[float | None]) -> tuple[float, ...]:
    return tuple(math.nan if v is None else float(v) for v in values)


@final
@frozen(kw_only=True)
class Leaderboard:
    """A competition's leaderboard scores in file order (best first, as Kaggle lists them).

    Args:
        scores: every row's score in file order; missing ones as NaN (they count in ``N``
            and are skipped by the median, as in pandas).
    """

    scores: tuple[float, ...] = field(converter=_scores)

    def __attrs_post_init__(self) -> None:
        if not self.scores:
            raise InvalidArgument(
                "Expected a leaderboard with at least one row; MLE-bench needs one to award medals"
            )

    @property
    def n(self) -> int:
        """Rows on the board (MLE-bench's ``num_teams``)."""
        return len(self.scores)

    @property
    def lower_is_better(self) -> bool:
        """MLE-bench's rule: the first row's score is lower than the last row's."""
        return bool(self.scores[0] < self.scores[-1])

    @property
    def finite(self) -> tuple[float, ...]:
        """The finite scores."""
        return tuple(s for s in self.scores if math.isfinite(s))

    @classmethod
    def from_csv(cls, path: str | os.PathLike[str]) -> Leaderboard:
        """Read ``leaderboard.csv`` (its ``score`` column, file order), by MLE-bench's rule
        (:func:`openmle._leaderboard.read_leaderboard` with ``rule="mlebench"``).

        Raises:
            InvalidArgument: the file is a git-lfs pointer (run ``git lfs pull`` in the
                MLE-bench checkout), has no ``score`` column or no rows.
            OSError: the file cannot be read.
        """
        return cls(scores=read_leaderboard(path, rule="mlebench"))

    def thresholds(self) -> tuple[float, float, float, float]:
        """(gold, silver, bronze, median) thresholds by MLE-bench's rule
        (:func:`openmle._leaderboard.medal_thresholds` with ``rule="mlebench"``).
        """
        th = medal_thresholds(self.scores, rule="mlebench")
        return th.gold, th.silver, th.bronze, th.median

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN as None)."""
        return {"scores": [s if math.isfinite(s) else None for s in self.scores]}


@final
@frozen(kw_only=True)
class RankInfo:
    """Where a (rounded) score lands on a leaderboard (``Grader.rank_score``'s fields)."""

    gold_threshold: float
    silver_threshold: float
    bronze_threshold: float
    median_threshold: float
    gold_medal: bool
    silver_medal: bool
    bronze_medal: bool
    above_median: bool
    is_lower_better: bool

    @property
    def any_medal(self) -> bool:
        """Gold, silver or bronze."""
        return self.gold_medal or self.silver_medal or self.bronze_medal


def rank_score(score: float | None, leaderboard: Leaderboard | Sequence[float]) -> RankInfo:
    """MLE-bench's medal and above-median flags for an already rounded ``score``.

    Round the grader's raw score with :func:`round_score` first (as MLE-bench's grader does).
    """
    board = leaderboard if isinstance(leaderboard, Leaderboard) else Leaderboard(scores=leaderboard)
    th = medal_thresholds(board.scores, rule="mlebench")
    medal = medal_of(score, th)
    return RankInfo(
        gold_threshold=th.gold,
        silver_threshold=th.silver,
        bronze_threshold=th.bronze,
        median_threshold=th.median,
        gold_medal=medal == "gold",
        silver_medal=medal == "silver",
        bronze_medal=medal == "bronze",
        above_median=above_median_of(score, th),
        is_lower_better=not th.higher_is_better,
    )


def bench_dict(report: GradeReport) -> dict[str, Any]:
    """``report`` as the bench stores it (:data:`BENCH_REPORT_FIELDS`): MLE-bench's keys
    (:meth:`~openmle.gym.GradeReport.to_mlebench`) plus ``human_rank`` (0.0 without one),
    ``seed``, ``reason`` and ``leaderboard_size``. :meth:`~openmle.gym.GradeReport.from_dict`
    reads it back.
    """
    return {
        **report.to_mlebench(),
        "human_rank": report.human_rank or 0.0,
        "seed": report.seed,
        "reason": report.reason,
        "leaderboard_size": report.leaderboard_size,
    }


def competition_report(
    competition_id: str,
    score: float | None,
    leaderboard: Leaderboard | Sequence[float],
    *,
    submission_exists: bool,
    submission_path: str = "",
    seed: int | None = None,
    reason: str = "",
    created_at: _dt.datetime | None = None,
) -> GradeReport:
    """The grading report of one submission, as MLE-bench's ``grade_csv`` builds it.

    Args:
        competition_id: the competition.
        score: the grader's raw score (rounded here to 5 decimals), or None when the
            submission did not grade.
        leaderboard: the competition's leaderboard (file order).
        submission_exists: whether a submission file existed.
    """
    board = leaderboard if isinstance(leaderboard, Leaderboard) else Leaderboard(scores=leaderboard)
    s = round_score(score)
    info = rank_score(s, board)
    when = created_at or _dt.datetime.now(_dt.UTC)
    return GradeReport(
        task=competition_id,
        score=s,
        valid=s is not None,
        reason=reason,
        higher_is_better=not info.is_lower_better,
        gold_threshold=info.gold_threshold,
        silver_threshold=info.silver_threshold,
        bronze_threshold=info.bronze_threshold,
        median_threshold=info.median_threshold,
        any_medal=info.any_medal,
        gold_medal=info.gold_medal,
        silver_medal=info.silver_medal,
        bronze_medal=info.bronze_medal,
        above_median=info.above_median,
        submission_exists=submission_exists,
        created_at=when.isoformat(),
        submission_path=submission_path,
        human_rank=human_rank_of(s, board.finite, higher_is_better=not info.is_lower_better),
        seed=seed,
        leaderboard_size=board.n,
    )
