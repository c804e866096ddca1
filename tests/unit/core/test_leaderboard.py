"""MLE-bench medal rules, human rank and the released direction inference."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from openmle._leaderboard import (
    above_median_of,
    human_rank_of,
    infer_higher_is_better,
    leaderboard_rank_of,
    medal_of,
    medal_positions,
    medal_thresholds,
    read_leaderboard,
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


def test_human_rank_and_inference() -> None:
    """Human rank is the share strictly beaten; direction inference mirrors the released rule."""
    scores = [0.9, 0.8, 0.7, 0.6]
    assert human_rank_of(0.85, scores, higher_is_better=True) == 0.75
    assert human_rank_of(0.85, scores, higher_is_better=False) == 0.25
    assert human_rank_of(None, scores, higher_is_better=True) == 0.0
    assert infer_higher_is_better(scores) is True
    assert infer_higher_is_better([0.1, 0.5]) is False
    assert infer_higher_is_better([0.5, 0.5]) is True


def test_human_rank_hand_computed_on_a_known_leaderboard() -> None:
    """3 entries better of 20, no ties: Human Rank 17/20 = 0.85, while the RL reward's
    ``1 - B/(N-1)`` gives 1 - 3/19 = 0.842; ties are not surpassed (they count zero)."""
    board = [float(x) for x in range(20, 0, -1)]  # 20..1, higher is better
    assert human_rank_of(17.5, board, higher_is_better=True) == 0.85
    assert leaderboard_rank_of(17.5, board, higher_is_better=True) == pytest.approx(1 - 3 / 19)
    # a tie with the 4th entry (17): 16 strictly worse of 20, the tie does not count
    assert human_rank_of(17.0, board, higher_is_better=True) == 0.8
    # lower is better: 3.5 on 1..20 is beaten by 1, 2, 3 and beats 17 of 20
    assert human_rank_of(3.5, board[::-1], higher_is_better=False) == 0.85
    assert human_rank_of(100.0, board, higher_is_better=True) == 1.0
    assert human_rank_of(20.0, [20.0], higher_is_better=True) == 0.0


def test_medal_rules_agree_on_a_clean_board_and_differ_only_where_stated(tmp_path: Path) -> None:
    """One thresholds function, the rule passed explicitly: on a board of finite scores in
    rank order the MLE-bench rule and the metadata rule give the same thresholds; a missing
    row counts in MLE-bench's N (and may be a threshold) but is dropped by the metadata rule."""
    board = [0.99, 0.95, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    exact = medal_thresholds(board, rule="mlebench")
    meta = medal_thresholds(board, higher_is_better=True)
    assert exact == meta
    assert (exact.gold, exact.silver, exact.bronze) == (0.99, 0.95, 0.8)
    assert exact.median == pytest.approx(0.65)
    holed = [0.99, None, *board[2:]]
    e2 = medal_thresholds(holed, rule="mlebench")
    m2 = medal_thresholds(holed, higher_is_better=True)
    assert e2.n_entries == 10 and math.isnan(e2.silver)
    assert m2.n_entries == 9 and m2.silver == 0.99  # N=9: silver is row int(0.2 N) = 1
    with pytest.raises(InvalidArgument, match="higher_is_better=None"):
        medal_thresholds(board, higher_is_better=True, rule="mlebench")
    with pytest.raises(InvalidArgument, match="Expected higher_is_better"):
        medal_thresholds(board)
    with pytest.raises(InvalidArgument, match="rule in"):
        medal_thresholds(board, higher_is_better=True, rule="kaggle")
    csv_path = tmp_path / "leaderboard.csv"
    csv_path.write_text("teamName,score\na,0.9\nb,\nc,0.5\n")
    assert read_leaderboard(csv_path) == [0.9, 0.5]
    got = read_leaderboard(csv_path, rule="mlebench")
    assert got[0] == 0.9 and math.isnan(got[1]) and got[2] == 0.5
    csv_path.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\n")
    with pytest.raises(InvalidArgument, match="git-lfs pointer"):
        read_leaderboard(csv_path, rule="mlebench")


def test_mlebench_median_counts_an_infinite_score_as_pandas_does() -> None:
    """MLE-bench's median is pandas' ``Series.median``: NaN rows skipped, an infinite score
    kept. On ``[inf, 2, 1]`` that is 2.0 (it was 1.5, the finite ones', which made 1.8 above
    median where MLE-bench says not); ``[-inf, inf]`` has no median (NaN). The metadata rule
    still takes the finite scores only."""
    board = [math.inf, 2.0, 1.0]
    th = medal_thresholds(board, rule="mlebench")
    assert th.median == 2.0 and not above_median_of(1.8, th)
    assert math.isnan(medal_thresholds([-math.inf, math.inf], rule="mlebench").median)
    assert medal_thresholds([math.nan, 3.0, math.nan], rule="mlebench").median == 3.0
    assert medal_thresholds(board, higher_is_better=True).median == 1.5
