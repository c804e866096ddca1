"""Properties of MLE-bench's medal rule and the seed aggregation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.bench import (
    Leaderboard,
    aggregate_seeds,
    build_seeds,
    competition_report,
)
from openmle.gym import GradeReport

score = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False).map(lambda x: round(x, 5))


@st.composite
def boards(draw: st.DrawFn) -> list[float]:
    """A best-first leaderboard in either direction (file order as Kaggle lists it)."""
    xs = draw(st.lists(score, min_size=1, max_size=300))
    lower = draw(st.booleans())
    return sorted(xs) if lower else sorted(xs, reverse=True)


RANK = {"gold": 3, "silver": 2, "bronze": 1, None: 0}


@settings(deadline=None)
@given(boards(), score, score)
def test_a_better_score_never_earns_less(board: list[float], a: float, b: float) -> None:
    """Medals and above-median are monotone in the score (by the board's direction);
    medals are exclusive; any_medal is their union; human rank is in [0, 1]."""
    lower = Leaderboard(scores=board).lower_is_better
    better, worse = (min(a, b), max(a, b)) if lower else (max(a, b), min(a, b))
    rb = competition_report("c", better, board, submission_exists=True)
    rw = competition_report("c", worse, board, submission_exists=True)
    assert RANK[rb.medal] >= RANK[rw.medal]
    assert rb.above_median >= rw.above_median
    assert rb.human_rank is not None and rw.human_rank is not None  # a board: a rank
    assert rb.human_rank >= rw.human_rank
    for r in (rb, rw):
        assert r.human_rank is not None
        assert r.gold_medal + r.silver_medal + r.bronze_medal <= 1
        assert r.any_medal == (r.gold_medal or r.silver_medal or r.bronze_medal)
        assert 0.0 <= r.human_rank <= 1.0
    # the best entry of the board always earns gold
    assert competition_report("c", board[0], board, submission_exists=True).gold_medal


def _report(cid: str, medal: bool, valid: bool) -> GradeReport:
    return GradeReport(
        task=cid,
        score=1.0 if valid else None,
        gold_medal=medal and valid,
        any_medal=medal and valid,
        valid=valid,
        submission_exists=valid,
        human_rank=0.5 if valid else 0.0,
    )


@settings(deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.booleans()),
        min_size=1,
        max_size=30,
    )
)
def test_padding_counts_failures_and_sem_bounds(rows: list[tuple[str, bool, bool]]) -> None:
    """Padded seeds hold every competition; the padded mean never exceeds the share of
    reports with a medal; SEM (ddof 1) >= population sd / sqrt(n) and both are finite."""
    reports = [_report(c, m, v) for c, m, v in rows]
    ids = ["a", "b", "c"]
    seeds = build_seeds(reports, ids, pad_missing=True)
    assert all([r.competition_id for r in s] == ids for s in seeds)
    suite = aggregate_seeds(seeds)
    m = suite.metrics["any_medal_percentage"]
    medals = sum(r.any_medal for r in reports)
    assert m.mean * len(seeds) * len(ids) / 100 == pytest.approx(medals)
    n = m.n
    assert math.isfinite(m.sem) and math.isfinite(m.sd)
    if n > 1:
        assert m.sem >= m.sd / math.sqrt(n) - 1e-9
    complete = [c for c in ids if any(r.competition_id == c for r in reports)]
    if len(complete) == len(ids):
        unpadded = build_seeds(reports, ids)
        assert len(unpadded) <= len(seeds)
