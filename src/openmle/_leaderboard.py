"""Leaderboard maths shared by grading reports and leaderboard rewards (MLE-bench's rules),
and the one leaderboard CSV reader (:func:`read_leaderboard`, public as
:func:`openmle.rewards.read_leaderboard`).

Medal positions by leaderboard size N (1-based positions, scores in rank order, best first):

=============  ===================  ============  ============
N              gold                 silver        bronze
=============  ===================  ============  ============
N < 100        max(1, int(0.1 N))   int(0.2 N)    int(0.4 N)   (each at least 1)
100 <= N < 250 10                   int(0.2 N)    int(0.4 N)
250 <= N < 1000 10 + int(0.002 N)   50            100
N >= 1000      10 + int(0.002 N)    int(0.05 N)   int(0.1 N)
=============  ===================  ============  ============

A medal's threshold is the score at its position; reaching it (inclusive) earns the medal.

Departure from the released code (bug B12): the direction comes from the task metadata, not
from comparing the first and last rows of the CSV; the ``openrsi`` reward profile can still
infer it from the file to reproduce the released numbers.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from attrs import frozen

from openmle.errors import InvalidArgument

__all__ = [
    "GIT_LFS_POINTER",
    "MEDAL_RULES",
    "MedalThresholds",
    "above_median_of",
    "human_rank_of",
    "infer_higher_is_better",
    "leaderboard_rank_of",
    "medal_of",
    "medal_positions",
    "medal_thresholds",
    "read_leaderboard",
]


def medal_positions(n: int) -> tuple[int, int, int]:
    """1-based (gold, silver, bronze) positions for a leaderboard of ``n`` entries (n >= 1)."""
    if n < 1:
        raise InvalidArgument(f"Expected a leaderboard of at least 1 entry but got n={n}")
    if n < 100:
        g, s, b = int(0.1 * n), int(0.2 * n), int(0.4 * n)
    elif n < 250:
        g, s, b = 10, int(0.2 * n), int(0.4 * n)
    elif n < 1000:
        g, s, b = 10 + int(0.002 * n), 50, 100
    else:
        g, s, b = 10 + int(0.002 * n), int(0.05 * n), int(0.1 * n)
    return max(1, g), max(1, s), max(1, b)


@frozen(kw_only=True)
class MedalThresholds:
    """Scores needed for each medal and for "above median", in raw score units."""

    gold: float
    silver: float
    bronze: float
    median: float
    higher_is_better: bool
    n_entries: int


def _clean(scores: Sequence[float | None]) -> npt.NDArray[np.float64]:
    arr = np.asarray([float(s) for s in scores if s is not None], dtype=np.float64)
    return arr[np.isfinite(arr)]


MEDAL_RULES = ("metadata", "mlebench")
"""How a leaderboard is read into medal thresholds (:func:`medal_thresholds`):

- ``metadata``: the finite scores only (``N`` counts them), in rank order, the direction given
  by the task's metadata (the gym's task packages, the rewards);
- ``mlebench``: MLE-bench's ``Grader.rank_score`` exactly: every row counts in ``N`` (a missing
  score as NaN, which may then be a threshold), the rows in file order, lower is better when
  the first row's score is lower than the last row's.

Both take the medal positions of :func:`medal_positions` and the median of the scores:
``metadata`` over the finite ones, ``mlebench`` skipping only missing ones (pandas'
``Series.median``: an infinite score on the board counts)."""


def _median(arr: npt.NDArray[np.float64]) -> float:
    if not arr.size:
        return math.nan
    with np.errstate(invalid="ignore"):  # -inf and inf in the middle: NaN, as in pandas
        return float(np.median(arr))


def medal_thresholds(
    scores_in_rank_order: Sequence[float | None],
    *,
    higher_is_better: bool | None = None,
    rule: str = "metadata",
) -> MedalThresholds:
    """Thresholds from a leaderboard's scores listed best first, by ``rule``
    (:data:`MEDAL_RULES`).

    Args:
        scores_in_rank_order: the scores, best first (``mlebench``: in file order).
        higher_is_better: the direction (``metadata``: required); under ``mlebench`` the
            direction is the file's and this must be None.
        rule: ``metadata`` or ``mlebench``.

    Raises:
        InvalidArgument: an unknown rule, a direction missing (``metadata``) or given
            (``mlebench``), or a leaderboard with no finite score (``metadata``) or no row
            (``mlebench``).
    """
    if rule == "mlebench":
        if higher_is_better is not None:
            raise InvalidArgument(
                "Expected higher_is_better=None with rule='mlebench' (MLE-bench reads the "
                "direction from the file order); use rule='metadata' to give it"
            )
        rows = np.asarray(
            [math.nan if s is None else float(s) for s in scores_in_rank_order], dtype=np.float64
        )
        if rows.size == 0:
            raise InvalidArgument(
                "Expected a leaderboard with at least one row; MLE-bench needs one to award medals"
            )
        hib = not bool(rows[0] < rows[-1])
        finite = rows[~np.isnan(rows)]  # pandas' median skips NaN, not an infinite score
    elif rule == "metadata":
        if higher_is_better is None:
            raise InvalidArgument(
                "Expected higher_is_better (the task's direction) with rule='metadata'"
            )
        rows = finite = _clean(scores_in_rank_order)
        hib = bool(higher_is_better)
        if rows.size == 0:
            raise InvalidArgument("Expected a leaderboard with at least one finite score")
    else:
        raise InvalidArgument(f"Expected rule in {MEDAL_RULES} but got rule={rule!r}")
    g, s, b = medal_positions(int(rows.size))
    return MedalThresholds(
        gold=float(rows[g - 1]),
        silver=float(rows[s - 1]),
        bronze=float(rows[b - 1]),
        median=_median(finite),
        higher_is_better=hib,
        n_entries=int(rows.size),
    )


def _reaches(score: float, threshold: float, higher_is_better: bool) -> bool:
    return score >= threshold if higher_is_better else score <= threshold


def medal_of(score: float | None, thresholds: MedalThresholds) -> str | None:
    """``"gold"``, ``"silver"``, ``"bronze"`` or None (also None for a missing/non-finite score)."""
    if score is None or not math.isfinite(score):
        return None
    hib = thresholds.higher_is_better
    for name in ("gold", "silver", "bronze"):
        if _reaches(score, getattr(thresholds, name), hib):
            return name
    return None


def above_median_of(score: float | None, thresholds: MedalThresholds) -> bool:
    """Whether ``score`` is strictly better than the median (MLE-bench's "above median");
    False for a missing or non-finite score.
    """
    if score is None or not math.isfinite(score):
        return False
    if thresholds.higher_is_better:
        return score > thresholds.median
    return score < thresholds.median


def human_rank_of(
    score: float | None, scores: Sequence[float | None], *, higher_is_better: bool
) -> float:
    """The Human Rank of ``score``: the fraction of human leaderboard participants it surpasses.

    ``W / N``, where ``N`` counts the finite leaderboard scores and ``W`` those *strictly worse*
    than ``score`` (the paper's and the released results page's definition). Ties count as
    not surpassed (not even half, unlike AIRA-dojo's ``(W + T / 2) / N``), so a score equal to
    every entry gives 0.0 and 1.0 needs a score strictly better than every entry. A missing or
    non-finite score, or an empty leaderboard, gives 0.0.

    Example: 3 entries better of 20 (no ties) surpasses 17, 17 / 20 = 0.85; a score of 4 on
    the higher-is-better board [4, 3, 2, 1] surpasses 3 of 4, 0.75.

    This is the evaluation metric every report prints. The RL reward ``1 - B / (N - 1)`` is a
    different number: :func:`leaderboard_rank_of` (:func:`openmle.rewards.leaderboard_rank`).
    """
    arr = _clean(scores)
    if score is None or not math.isfinite(score) or arr.size == 0:
        return 0.0
    worse = arr < score if higher_is_better else arr > score
    return float(np.count_nonzero(worse)) / float(arr.size)


def leaderboard_rank_of(
    score: float | None, scores: Sequence[float | None], *, higher_is_better: bool
) -> float:
    """The RL reward's rank (the released code's ``leaderboard_rank``): ``1 - B / (N - 1)``,
    clipped to [0, 1].

    ``N`` counts the finite leaderboard scores and ``B`` those strictly better than ``score``:
    1.0 when no entry beats the score, 0.0 when every other entry does; a one-entry leaderboard
    gives 1.0; a missing score or an empty leaderboard gives 0.0. Example: 3 better of 20 gives
    ``1 - 3/19`` = 0.842. A reward only; reports print :func:`human_rank_of`.
    """
    arr = _clean(scores)
    if score is None or not math.isfinite(score) or arr.size == 0:
        return 0.0
    n = int(arr.size)
    if n <= 1:
        return 1.0
    better = int(np.count_nonzero(arr > score if higher_is_better else arr < score))
    return min(max(1.0 - better / (n - 1), 0.0), 1.0)


def infer_higher_is_better(scores_in_rank_order: Sequence[float]) -> bool:
    """The released code's rule: lower is better iff the first score < the last (ties: higher)."""
    arr = _clean(scores_in_rank_order)
    return not (arr.size >= 2 and arr[0] < arr[-1])


GIT_LFS_POINTER = "version https://git-lfs.github.com/spec/v1"
"""How a file that git-lfs did not fetch begins."""


def _to_float(text: str | None) -> float:
    try:
        return float(text) if text is not None else math.nan
    except (TypeError, ValueError):
        return math.nan


def read_leaderboard(path: str | os.PathLike[str], *, rule: str = "metadata") -> list[float]:
    """Scores of a leaderboard CSV, best first, read by ``rule`` (:data:`MEDAL_RULES`).

    - ``metadata``: columns matched case-insensitively (``score``, optional ``rank``; a UTF-8
      BOM is ignored); rows whose score is not a finite number are dropped; rows are ordered
      by rank when the file has a rank column, else kept in file order.
    - ``mlebench``: MLE-bench's reading: the ``score`` column (exact name) of every row in
      file order, a missing or unparsable score as NaN (it counts in ``N``); a git-lfs
      pointer is refused with the fix.

    Raises:
        InvalidArgument: the file has no ``score`` column, is a git-lfs pointer
            (``mlebench``), or ``rule`` is unknown.
        OSError: the file cannot be read.
    """
    if rule not in MEDAL_RULES:
        raise InvalidArgument(f"Expected rule in {MEDAL_RULES} but got rule={rule!r}")
    exact = rule == "mlebench"
    with open(path, encoding="utf-8-sig", newline="") as fh:
        if exact:
            if fh.read(len(GIT_LFS_POINTER)) == GIT_LFS_POINTER:
                raise InvalidArgument(
                    f"{os.fspath(path)} is a git-lfs pointer, not the leaderboard; run `git lfs "
                    "fetch --all && git lfs pull` in the MLE-bench checkout"
                )
            fh.seek(0)
        reader = csv.DictReader(fh)
        names = reader.fieldnames or ()
        fields = {n: n for n in names} if exact else {n.strip().lower(): n for n in names}
        if "score" not in fields:
            raise InvalidArgument(
                f"Expected a 'score' column in {os.fspath(path)} but got columns "
                f"{reader.fieldnames}"
                if exact
                else f"Expected a 'score' column in leaderboard {os.fspath(path)!r} but got "
                f"columns {list(fields)}"
            )
        if exact:
            return [_to_float(row.get("score")) for row in reader]
        rows: list[tuple[float, int, float]] = []
        for i, row in enumerate(reader):
            score = _to_float(row[fields["score"]])
            if not math.isfinite(score):
                continue
            rank = math.inf
            if "rank" in fields:
                try:
                    rank = float(row[fields["rank"]])
                except (TypeError, ValueError):
                    rank = math.inf
            rows.append((rank, i, score))
    rows.sort()
    return [score for _, _, score in rows]
