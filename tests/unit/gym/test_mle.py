"""MLE metrics over runs: hand-computed values and the error contract."""

from __future__ import annotations

import math

import pytest

from openmle.errors import InvalidArgument
from openmle.gym import (
    GradeReport,
    aggregate,
    human_rank,
    match_sota_rate,
    mean_relative_gap,
    medal_rate,
    relative_gap,
    summarize,
    surpass_sota_rate,
    valid_rate,
)

BOARD = tuple(float(x) for x in range(100, 0, -1))  # 100 entries, higher is better


def _report(task: str, score: float | None, *, board: bool = True) -> GradeReport:
    r = GradeReport(
        task=task,
        split="test",
        score=score,
        valid=score is not None,
        reason="" if score is not None else "bad",
    )
    return r.with_leaderboard(BOARD) if board else r


def test_aggregate_hand_values() -> None:
    """Mean, SEM (sample sd, ddof 1, over sqrt n) and population sd (ddof 0) by hand."""
    a = aggregate([0.0, 1.0, 1.0, 0.0])
    assert a.mean == 0.5 and a.sd == 0.5 and a.n == 4
    assert a.sem == pytest.approx(math.sqrt(1 / 3) / 2)
    one = aggregate([0.3])
    assert one.sd == 0.0 and one.sem == 0.0 and "n=1" in str(one)
    d = a.to_dict()
    assert (d["sem_ddof"], d["sd_ddof"]) == (1, 0) and d["values"] == [0.0, 1.0, 1.0, 0.0]
    with pytest.raises(InvalidArgument, match="at least one run"):
        aggregate([])
    with pytest.raises(InvalidArgument, match="finite"):
        aggregate([float("nan")])


def test_one_convention_with_the_bench() -> None:
    """Medals 13, 17 and 17 of 22 over three seeds: mean 71.21 %, population sd 8.57 (the
    paper's), SEM 6.06 (ddof 1); gym's summary and the bench's suite metrics agree."""
    from openmle.bench import aggregate_seeds

    per_seed = [13, 17, 17]
    gym_runs = [[_report(f"t{i}", 100.0 if i < k else 1.0) for i in range(22)] for k in per_seed]
    g = summarize(gym_runs).any_medal_rate
    assert g is not None
    seeds = [
        [GradeReport(task=f"t{i}", gold_medal=i < k, any_medal=i < k) for i in range(22)]
        for k in per_seed
    ]
    b = aggregate_seeds(seeds).metrics["any_medal_percentage"]
    assert round(b.mean, 2) == 71.21 and round(b.sd, 2) == 8.57 and round(b.sem, 2) == 6.06
    assert g.mean * 100 == pytest.approx(b.mean) and g.sd * 100 == pytest.approx(b.sd)
    assert g.sem * 100 == pytest.approx(b.sem) and type(g) is type(b)


def test_rates_over_runs() -> None:
    """Valid, medal and human-rank rates are per-run shares, aggregated over runs."""
    run1 = [_report("a", 100.0), _report("b", None)]  # gold, invalid
    run2 = [_report("a", 60.0), _report("b", 95.0)]  # no medal (41st of 100), gold
    runs = [run1, run2]
    assert valid_rate(runs).per_run == (0.5, 1.0)
    assert medal_rate(runs).per_run == (0.5, 0.5)
    assert medal_rate(runs, "gold").mean == 0.5
    assert medal_rate(runs, "above_median").per_run == (0.5, 1.0)
    hr = human_rank(runs)
    # Human Rank = entries strictly worse / N: 100 -> 99/100, 60 -> 59/100, 95 -> 94/100
    assert hr.per_run == pytest.approx(((0.99 + 0) / 2, (0.59 + 0.94) / 2))
    with pytest.raises(InvalidArgument, match="medal"):
        medal_rate(runs, "platinum")


def test_relative_gap_and_sota_rates() -> None:
    """g is positive when beating SOTA in either direction; match/surpass count invalid as miss."""
    assert relative_gap(110.0, 100.0, higher_is_better=True) == pytest.approx(0.1)
    assert relative_gap(0.9, 1.0, higher_is_better=False) == pytest.approx(0.1)
    assert relative_gap(-2.0, -1.0, higher_is_better=True) == pytest.approx(-1.0)
    with pytest.raises(InvalidArgument, match="non-zero"):
        relative_gap(1.0, 0.0, higher_is_better=True)
    runs = [[_report("a", 120.0), _report("b", 100.0), _report("c", None)]]
    sota = {"a": 100.0, "b": 100.0, "c": 100.0}
    assert mean_relative_gap(runs, sota).mean == pytest.approx(0.1)
    assert match_sota_rate(runs, sota).mean == pytest.approx(2 / 3)
    assert surpass_sota_rate(runs, sota).mean == pytest.approx(1 / 3)
    # Without a mapping, SOTA is the best leaderboard score (100).
    assert match_sota_rate(runs).mean == pytest.approx(2 / 3)


def test_summarize_without_leaderboards() -> None:
    """Leaderboard metrics are None when no report has a leaderboard; valid rate still works."""
    runs = [[_report("a", 1.0, board=False)], [_report("a", None, board=False)]]
    s = summarize(runs)
    assert s.valid_rate.mean == 0.5 and s.any_medal_rate is None and s.relative_gap is None
    assert s.to_dict()["human_rank"] is None and s.n_runs == 2


def test_bad_inputs_raise_invalid_argument() -> None:
    """No runs, an empty run or a stray object are usage errors naming the problem."""
    with pytest.raises(InvalidArgument, match="at least one run"):
        valid_rate([])
    with pytest.raises(InvalidArgument, match="empty"):
        valid_rate([[]])
    with pytest.raises(InvalidArgument, match="GradeReport"):
        valid_rate([[1.0]])  # type: ignore[list-item]
