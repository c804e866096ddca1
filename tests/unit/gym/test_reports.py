"""GradeReport leaderboard fields and ValidationReport bookkeeping."""

from __future__ import annotations

import pytest

from openmle.gym import GradeReport, Problem, Severity, ValidationReport

ASCENDING = tuple(float(x) for x in range(1, 101))  # lower is better: best first


def test_lower_is_better_medals() -> None:
    """With lower-is-better scores, small scores take gold and the thresholds are small."""
    r = GradeReport(task="t", split="test", score=5.0, valid=True, higher_is_better=False)
    ranked = r.with_leaderboard(ASCENDING)
    assert ranked.gold_medal and ranked.any_medal and not ranked.silver_medal
    assert ranked.medal == "gold" and ranked.is_lower_better
    assert ranked.gold_threshold == 10.0 and ranked.bronze_threshold == 40.0
    assert ranked.above_median and ranked.human_rank == pytest.approx(95 / 100)
    assert ranked.leaderboard_best == 1.0 and ranked.leaderboard_size == 100


def test_medals_are_exclusive_and_invalid_gets_none() -> None:
    """A silver is not also a bronze; an invalid submission has no medal and rank 0."""
    r = GradeReport(task="t", split="test", score=15.0, valid=True, higher_is_better=False)
    ranked = r.with_leaderboard(ASCENDING)
    assert (ranked.gold_medal, ranked.silver_medal, ranked.bronze_medal) == (False, True, False)
    bad = GradeReport(task="t", split="test", reason="x", higher_is_better=False)
    ranked_bad = bad.with_leaderboard(ASCENDING)
    assert ranked_bad.medal is None and ranked_bad.human_rank == 0.0
    assert not ranked_bad.above_median


def test_one_human_rank_definition() -> None:
    """GradeReport.human_rank is the fraction of participants strictly surpassed (W / N), not
    the RL reward ``openmle.rewards.leaderboard_rank`` (1 - B/(N-1)): 4 on the
    higher-is-better board [4, 3, 2, 1] surpasses 3 of 4 (0.75; the reward says 1.0)."""
    from openmle.rewards import leaderboard_rank

    board = (4.0, 3.0, 2.0, 1.0)
    want = {4.5: 1.0, 4.0: 0.75, 3.5: 0.75, 3.0: 0.5, 2.0: 0.25, 0.5: 0.0}
    for score, rank in want.items():
        r = GradeReport(task="t", split="test", score=score, valid=True).with_leaderboard(board)
        assert r.human_rank == rank
    top = GradeReport(task="t", split="test", score=4.0, valid=True).with_leaderboard(board)
    assert leaderboard_rank(4.0, board, higher_is_better=True) == 1.0 != top.human_rank


def test_validation_report_orders_and_counts() -> None:
    """ok ignores warnings; errors and warnings are split; to_dict is JSON-ready."""
    warn = Problem(severity="warning", file="a", message="m.", fix="f.")
    err = Problem(severity=Severity.ERROR, file="b", message="m.", fix="f.")
    report = ValidationReport(task="t", path="/p", problems=(err, warn))
    assert not report.ok and report.errors == (err,) and report.warnings == (warn,)
    assert ValidationReport(task="t", path="/p", problems=(warn,)).ok
    assert report.to_dict()["problems"][0]["severity"] == "error"
    assert str(err) == "error: b: m. Fix: f."
