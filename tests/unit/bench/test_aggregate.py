"""Suite aggregation against MLE-bench's aggregate_grading_reports.py rules (oracle here)."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from openmle.bench import aggregate_seeds, build_seeds
from openmle.errors import InvalidArgument
from openmle.gym import GradeReport


def rep(
    cid: str, *, medal: str | None = None, valid: bool = True, above: bool = False
) -> GradeReport:
    return GradeReport(
        task=cid,
        score=1.0 if valid else None,
        gold_medal=medal == "gold",
        silver_medal=medal == "silver",
        bronze_medal=medal == "bronze",
        any_medal=medal is not None,
        above_median=above,
        submission_exists=True,
        valid=valid,
        human_rank=0.5 if valid else 0.0,
    )


IDS = ["a", "b", "c"]
REPORTS = [
    rep("a", medal="gold", above=True),
    rep("b", valid=False),
    rep("c", medal="bronze", above=True),
    rep("a", medal="silver", above=True),
    rep("b"),
    rep("a"),  # a has 3 reports, b 2, c 1
]


def test_complete_seeds_without_padding() -> None:
    """Seed i takes the i-th report of each competition; only complete seeds (min count)."""
    seeds = build_seeds(REPORTS, IDS)
    assert [[r.competition_id for r in s] for s in seeds] == [IDS]
    seeds2 = build_seeds([*REPORTS, rep("c")], IDS)
    assert len(seeds2) == 2 and seeds2[1][0].silver_medal and seeds2[1][2].valid_submission
    with pytest.raises(InvalidArgument, match="Missing reports"):
        build_seeds(REPORTS, [*IDS, "d"])


def test_padding_counts_missing_runs_as_failures() -> None:
    """With padding: max count seeds, the holes are no-submission failures."""
    seeds = build_seeds(REPORTS, [*IDS, "d"], pad_missing=True)
    assert len(seeds) == 3
    assert not seeds[2][1].submission_exists and not seeds[2][3].valid_submission
    assert len(build_seeds(REPORTS, IDS, pad_missing=True, requested=2)) == 2
    suite = aggregate_seeds(seeds)
    # seed 3: a (valid, no medal), b missing, c missing, d missing
    assert suite.seeds[2].valid_submissions_percentage == 25.0
    assert suite.seeds[2].submission_exists_percentage == 25.0


def test_metrics_match_scipy_sem_and_population_sd() -> None:
    """Mean, SEM (ddof=1, scipy) and population sd of the per-seed percentages."""
    seeds = build_seeds(REPORTS, [*IDS, "d"], pad_missing=True)
    suite = aggregate_seeds(seeds)
    any_medal = [
        sum(r.gold_medal or r.silver_medal or r.bronze_medal for r in s) / len(s) * 100
        for s in seeds
    ]
    m = suite.metrics["any_medal_percentage"]
    assert m.per_seed == tuple(any_medal) == (50.0, 25.0, 0.0)
    assert m.mean == pytest.approx(statistics.fmean(any_medal))
    assert m.sem == pytest.approx(float(stats.sem(any_medal, ddof=1)))
    assert m.sd == pytest.approx(statistics.pstdev(any_medal))
    assert m.ci_upper == pytest.approx(m.mean + 1.96 * m.sem)
    above = suite.metrics["above_median_percentage"]
    assert above.per_seed == (50.0, 25.0, 0.0)
    one = aggregate_seeds(seeds[:1]).metrics["gold_medal_percentage"]
    assert one.sem == 0.0 and one.sd == 0.0 and one.mean == 25.0
    assert math.isclose(suite.metrics["human_rank"].per_seed[0], (0.5 + 0 + 0.5 + 0) / 4)


def test_bad_inputs_are_named() -> None:
    with pytest.raises(InvalidArgument, match="No complete seeds"):
        aggregate_seeds([])
    with pytest.raises(InvalidArgument, match="requested"):
        build_seeds(REPORTS, IDS, requested=0)
    with pytest.raises(InvalidArgument, match="at least one competition"):
        build_seeds(REPORTS, [])
