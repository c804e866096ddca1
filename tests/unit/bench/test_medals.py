"""MLE-bench's medal rule against an oracle written here from its description.

The oracle reads the board as a pandas Series in file order, takes the thresholds at the
1-indexed rows of the four size bands, the pandas median, rounds the score to 5 decimals and
compares inclusively (medals) and strictly (above median); lower is better when the first row
is lower than the last.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from openmle.bench import (
    MLEBENCH_REPORT_FIELDS,
    Leaderboard,
    competition_report,
    rank_score,
    round_score,
)
from openmle.bench._medals import bench_dict
from openmle.errors import InvalidArgument
from openmle.gym import GradeReport

pd = pytest.importorskip("pandas")

SIZES = (1, 9, 10, 99, 100, 249, 250, 999, 1000, 5000)


def oracle(score: float | None, board: list[float]) -> dict[str, Any]:
    s = pd.Series(board, dtype="float64")
    n = len(s)
    lower = bool(s.iloc[0] < s.iloc[-1])
    if n < 100:
        rows = (max(1, int(n * 0.1)), max(1, int(n * 0.2)), max(1, int(n * 0.4)))
    elif n < 250:
        rows = (10, max(1, int(n * 0.2)), max(1, int(n * 0.4)))
    elif n < 1000:
        rows = (10 + int(n * 0.002), 50, 100)
    else:
        rows = (10 + int(n * 0.002), max(1, int(n * 0.05)), max(1, int(n * 0.1)))
    gold, silver, bronze = (float(s.iloc[r - 1]) for r in rows)
    median = float(s.median())
    out: dict[str, Any] = {
        "gold_threshold": gold,
        "silver_threshold": silver,
        "bronze_threshold": bronze,
        "median_threshold": median,
        "is_lower_better": lower,
    }
    if score is None:
        return out | dict(gold=False, silver=False, bronze=False, above=False, score=None)
    sc = round(score, 5)

    def ok(t: float) -> bool:
        return sc <= t if lower else sc >= t

    g = ok(gold)
    sv = not g and ok(silver)
    b = not g and not sv and ok(bronze)
    above = sc < median if lower else sc > median
    return out | dict(gold=g, silver=sv, bronze=b, above=above, score=sc)


def board_of(n: int, *, lower: bool, ties: bool = False) -> list[float]:
    """A best-first board of n rows with 5-decimal scores (ties: runs of three equal scores)."""
    vals = [round(0.9 - 0.00013 * (i // 3 if ties else i), 5) for i in range(n)]
    return [round(1 - v, 5) for v in vals] if lower else vals


def probes(board: list[float]) -> list[float | None]:
    """Scores at, around and within 1e-7 of every threshold, plus None and the extremes."""
    th = oracle(None, board)
    out: list[float | None] = [None, board[0], board[-1], board[0] + 1, board[-1] - 1]
    for key in ("gold_threshold", "silver_threshold", "bronze_threshold", "median_threshold"):
        t = th[key]
        out.extend(t + d for d in (0.0, 1e-7, -1e-7, 4e-6, -4e-6, 6e-6, -6e-6, 1e-5, -1e-5))
    return out


def check(score: float | None, board: list[float]) -> None:
    want = oracle(score, board)
    got = competition_report("c", score, board, submission_exists=True)
    assert got.gold_threshold == want["gold_threshold"]
    assert got.silver_threshold == want["silver_threshold"]
    assert got.bronze_threshold == want["bronze_threshold"]
    assert got.median_threshold == want["median_threshold"]
    assert got.is_lower_better is want["is_lower_better"]
    assert (got.gold_medal, got.silver_medal, got.bronze_medal) == (
        want["gold"],
        want["silver"],
        want["bronze"],
    ), (score, board[:3], len(board))
    assert got.any_medal == (want["gold"] or want["silver"] or want["bronze"])
    assert got.above_median == want["above"]
    assert got.score == want["score"]
    assert got.valid_submission == (score is not None)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("ties", [False, True])
def test_medal_rule_matches_oracle(n: int, lower: bool, ties: bool) -> None:
    """Every size band, both directions, with and without ties at the thresholds."""
    board = board_of(n, lower=lower, ties=ties)
    for score in probes(board):
        check(score, board)


def test_rounding_decides_at_the_threshold() -> None:
    """A raw score 1e-7 short of a threshold rounds onto it and earns the medal (inclusive)."""
    board = [float(x) for x in range(100, 0, -1)]  # higher is better, gold at row 10 = 91
    just_short = competition_report("c", 91 - 1e-7, board, submission_exists=True)
    assert just_short.gold_medal and just_short.score == 91.0
    short = competition_report("c", 91 - 1e-4, board, submission_exists=True)
    assert not short.gold_medal and short.silver_medal
    at_median = competition_report("c", 50.5, board, submission_exists=True)
    assert at_median.median_threshold == 50.5 and not at_median.above_median
    assert competition_report("c", 50.50001, board, submission_exists=True).above_median


def test_direction_from_leaderboard_order() -> None:
    """Lower is better iff the first row < the last row; a flat board is higher-is-better."""
    assert Leaderboard(scores=[1.0, 2.0, 3.0]).lower_is_better
    assert not Leaderboard(scores=[3.0, 2.0, 1.0]).lower_is_better
    assert not Leaderboard(scores=[2.0, 2.0, 2.0]).lower_is_better
    flat = rank_score(2.0, [2.0, 2.0, 2.0])
    assert flat.gold_medal and not flat.above_median


def test_missing_and_non_finite_scores() -> None:
    """None, NaN and inf are invalid: no medal, not above median, human rank 0."""
    board = board_of(50, lower=False)
    for bad in (None, math.nan, math.inf, -math.inf):
        r = competition_report("c", bad, board, submission_exists=bad is not None)
        assert not (r.any_medal or r.above_median or r.valid_submission)
        assert r.score is None and r.human_rank == 0.0
    assert round_score(None) is None and round_score(0.123456789) == 0.12346


def test_nan_rows_count_in_n_and_are_skipped_by_median() -> None:
    """A row without a score still counts in N; the median skips it (pandas)."""
    board = [5.0, 4.0, math.nan, 2.0, 1.0]
    want = oracle(3.0, board)
    got = competition_report("c", 3.0, board, submission_exists=True)
    assert got.median_threshold == want["median_threshold"] == 3.0
    assert got.leaderboard_size == 5 and not got.above_median


def test_report_fields_and_round_trip(tmp_path: Path) -> None:
    """to_mlebench has exactly MLE-bench's keys and values; to_dict/from_dict round-trip
    (MLE-bench's own dict and the bench's stored dict load too); JSON-ready."""
    r = competition_report(
        "comp", 0.7, [0.9, 0.8, 0.7, 0.6], submission_exists=True, submission_path="s.csv", seed=2
    )
    assert isinstance(r, GradeReport)
    ml = r.to_mlebench()
    assert tuple(ml) == MLEBENCH_REPORT_FIELDS
    assert ml["competition_id"] == "comp" and ml["valid_submission"] is True
    assert ml["is_lower_better"] is False and ml["submission_path"] == "s.csv"
    assert (r.competition_id, r.valid_submission, r.is_lower_better) == ("comp", True, False)
    assert GradeReport.from_dict(json.loads(json.dumps(r.to_dict()))) == r
    assert GradeReport.from_dict(json.loads(json.dumps(bench_dict(r)))) == r
    # MLE-bench's dict alone: every field it has, the rest at their defaults
    back = GradeReport.from_dict(json.loads(json.dumps(ml)))
    assert back.to_mlebench() == ml and back.seed is None
    lower = GradeReport.from_dict({**ml, "is_lower_better": True})
    assert not lower.higher_is_better
    with pytest.raises(InvalidArgument, match="unknown key 'bogus'"):
        GradeReport.from_dict({**ml, "bogus": 1})
    with pytest.raises(InvalidArgument, match="both"):
        GradeReport.from_dict({**ml, "task": "other"})
    # Human Rank: entries strictly worse / N = 1/4 (0.7 ties itself: not surpassed)
    assert r.human_rank == pytest.approx(1 / 4)
    missing = GradeReport.missing("comp", seed=1)
    assert not missing.submission_exists and not missing.valid_submission
    assert (
        bench_dict(missing)["human_rank"] == 0.0 and missing.to_mlebench()["submission_path"] == ""
    )


def test_competition_report_is_a_deprecated_alias_of_grade_report() -> None:
    """openmle.bench.CompetitionReport (one report value now: gym's GradeReport) still works
    for one release, warning with the removal version; so does to_mlebench_dict()."""
    import openmle.bench

    assert "CompetitionReport" not in openmle.bench.__all__
    with pytest.warns(DeprecationWarning, match=r"removed in openmle 0\.2\.0.*GradeReport"):
        old: object = openmle.bench.CompetitionReport
    assert old is GradeReport
    r = GradeReport.missing("comp")
    with pytest.warns(DeprecationWarning, match=r"to_mlebench\(\)"):
        assert r.to_mlebench_dict() == r.to_mlebench()


def test_leaderboard_csv_and_lfs_pointer(tmp_path: Path) -> None:
    """The score column in file order; a git-lfs pointer is named with the fix."""
    p = tmp_path / "leaderboard.csv"
    p.write_text("teamId,score,rank\n1,0.5,1\n2,,2\n3,0.7,3\n")
    assert Leaderboard.from_csv(p).scores[0] == 0.5 and math.isnan(
        Leaderboard.from_csv(p).scores[1]
    )
    p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:ab\nsize 12\n")
    with pytest.raises(InvalidArgument, match="git lfs pull"):
        Leaderboard.from_csv(p)
    p.write_text("teamId,Score\n1,2\n")
    with pytest.raises(InvalidArgument, match="'score' column"):
        Leaderboard.from_csv(p)
