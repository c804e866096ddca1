"""Properties of the MLE metrics: bounds, order invariance, SEM identity, gap sign."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.gym import (
    GradeReport,
    aggregate,
    human_rank,
    match_sota_rate,
    medal_rate,
    relative_gap,
    surpass_sota_rate,
    valid_rate,
)

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
nonzero = finite.filter(lambda x: abs(x) > 1e-3)
board = st.lists(nonzero, min_size=1, max_size=40).map(lambda xs: tuple(sorted(xs, reverse=True)))


@st.composite
def runs(draw: st.DrawFn) -> list[list[GradeReport]]:
    lb = draw(board)
    out = []
    for _ in range(draw(st.integers(1, 5))):
        run = []
        for k in range(draw(st.integers(1, 4))):
            score = draw(st.one_of(st.none(), finite))
            r = GradeReport(task=f"t{k}", split="test", score=score, valid=score is not None)
            run.append(r.with_leaderboard(lb))
        out.append(run)
    return out


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(st.lists(finite, min_size=1, max_size=30))
def test_aggregate_identities(values: list[float]) -> None:
    """Mean lies within the range, sd >= 0, sem = sd * sqrt(1 / (n - 1)) (ddof 1 vs 0), and
    order does not matter."""
    a = aggregate(values)
    assert min(values) - 1e-6 <= a.mean <= max(values) + 1e-6
    want = a.sd / math.sqrt(a.n - 1) if a.n > 1 else 0.0
    assert a.sd >= 0 and math.isclose(a.sem, want, rel_tol=1e-9, abs_tol=1e-9)
    b = aggregate(list(reversed(values)))
    assert math.isclose(a.mean, b.mean, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(a.sd, b.sd, rel_tol=1e-9, abs_tol=1e-9)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(runs())
def test_rates_are_shares(rs: list[list[GradeReport]]) -> None:
    """Every rate is in [0, 1]; surpass <= match; gold <= any medal; invalid never medals."""
    for agg in (valid_rate(rs), medal_rate(rs), human_rank(rs), match_sota_rate(rs)):
        assert all(0.0 <= v <= 1.0 for v in agg.per_run)
    for s, m in zip(surpass_sota_rate(rs).per_run, match_sota_rate(rs).per_run, strict=True):
        assert s <= m
    for g, a in zip(medal_rate(rs, "gold").per_run, medal_rate(rs).per_run, strict=True):
        assert g <= a
    assert all(not r.any_medal and r.human_rank == 0.0 for run in rs for r in run if not r.valid)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(runs())
def test_rates_ignore_run_order(rs: list[list[GradeReport]]) -> None:
    """Reversing the runs, or the tasks inside runs, leaves the means unchanged."""
    flipped = [list(reversed(run)) for run in reversed(rs)]
    for fn in (valid_rate, medal_rate, human_rank, match_sota_rate):
        assert math.isclose(fn(rs).mean, fn(flipped).mean, abs_tol=1e-12)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(finite, nonzero, st.booleans())
def test_relative_gap_sign(score: float, sota: float, hib: bool) -> None:
    """g >= 0 exactly when the score is at least as good as SOTA in the task's direction."""
    g = relative_gap(score, sota, higher_is_better=hib)
    better_or_equal = score >= sota if hib else score <= sota
    assert (g >= 0) == better_or_equal
    assert relative_gap(sota, sota, higher_is_better=hib) == 0.0
