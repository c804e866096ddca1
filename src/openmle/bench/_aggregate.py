"""Suite metrics over seeds, by MLE-bench's ``experiments/aggregate_grading_reports.py`` rules.

- A *seed* holds exactly one report per competition of the suite. From a flat list of reports,
  seed ``i`` takes the ``i``-th report of each competition, in the order given
  (:func:`build_seeds`). Without padding only complete seeds are kept (the smallest number of
  reports any competition has; a competition with none is an error); with padding the number
  of seeds is the largest count and missing reports are failures (no submission, no medal).
  ``requested`` caps the number of seeds (-1: all).
- Per seed: the percentage of competitions with a submission, a valid submission, above
  median, gold, silver, bronze, any medal; plus the mean Human Rank (the fraction of
  leaderboard entries strictly worse, :func:`openmle.gym.human_rank`'s definition).
- Over seeds: :class:`openmle.gym.Aggregate`, the one convention shared with
  :func:`openmle.gym.summarize`: the mean, the standard error of the mean with ``ddof=1``
  (MLE-bench's ``scipy.stats.sem``; 0 for one seed), MLE-bench's 95 % interval
  ``mean +- 1.96 SEM``, and the population standard deviation (``ddof=0``; the paper's "+-").
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any, final

from attrs import frozen

from openmle.errors import InvalidArgument
from openmle.gym import Aggregate, GradeReport

__all__ = ["METRICS", "Metric", "SeedMetrics", "SuiteMetrics", "aggregate_seeds", "build_seeds"]

METRICS: tuple[str, ...] = (
    "submission_exists_percentage",
    "valid_submissions_percentage",
    "above_median_percentage",
    "gold_medal_percentage",
    "silver_medal_percentage",
    "bronze_medal_percentage",
    "any_medal_percentage",
    "human_rank",
)
"""Per-seed metrics, in report order (percentages in 0-100; human rank in [0, 1])."""


def build_seeds(
    reports: Sequence[GradeReport],
    competition_ids: Sequence[str],
    *,
    requested: int = -1,
    pad_missing: bool = False,
) -> list[list[GradeReport]]:
    """Group ``reports`` into seeds of one report per competition (see the module doc).

    Raises:
        InvalidArgument: no competitions; a competition without reports (without padding);
            no report at all; ``requested`` is 0 or below -1.
    """
    ids = list(competition_ids)
    if not ids:
        raise InvalidArgument("Expected at least one competition id but got none")
    if requested == 0 or requested < -1:
        raise InvalidArgument(f"Expected requested=-1 (all) or >= 1 but got {requested}")
    by_id: dict[str, list[GradeReport]] = defaultdict(list)
    for r in reports:
        by_id[r.competition_id].append(r)
    missing = [c for c in ids if not by_id[c]]
    if missing and not pad_missing:
        raise InvalidArgument(
            f"Missing reports for competitions {missing}; cannot build complete seeds "
            "(pad_missing=True counts them as failures)"
        )
    counts = [len(by_id[c]) for c in ids]
    available = max(counts) if pad_missing else min(counts)
    if available == 0:
        raise InvalidArgument("No reports available to form any seed")
    n = available if requested == -1 else min(requested, available)
    return [
        [
            by_id[c][i] if i < len(by_id[c]) else GradeReport.missing(c, reason="missing")
            for c in ids
        ]
        for i in range(n)
    ]


@final
@frozen(kw_only=True)
class SeedMetrics:
    """One seed's metrics (percentages 0-100)."""

    total_competitions: int
    submission_exists_percentage: float
    valid_submissions_percentage: float
    above_median_percentage: float
    gold_medal_percentage: float
    silver_medal_percentage: float
    bronze_medal_percentage: float
    any_medal_percentage: float
    human_rank: float

    @classmethod
    def of(cls, reports: Sequence[GradeReport]) -> SeedMetrics:
        """Metrics of one seed's reports.

        Raises:
            InvalidArgument: no reports.
        """
        n = len(reports)
        if n == 0:
            raise InvalidArgument("Expected at least one report in a seed but got none")

        def pct(attr: str) -> float:
            return sum(bool(getattr(r, attr)) for r in reports) / n * 100

        return cls(
            total_competitions=n,
            submission_exists_percentage=pct("submission_exists"),
            valid_submissions_percentage=pct("valid_submission"),
            above_median_percentage=pct("above_median"),
            gold_medal_percentage=pct("gold_medal"),
            silver_medal_percentage=pct("silver_medal"),
            bronze_medal_percentage=pct("bronze_medal"),
            any_medal_percentage=sum(
                r.gold_medal or r.silver_medal or r.bronze_medal for r in reports
            )
            / n
            * 100,
            human_rank=math.fsum((r.human_rank or 0.0) if r.valid else 0.0 for r in reports) / n,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"total_competitions": self.total_competitions} | {
            k: getattr(self, k) for k in METRICS
        }


Metric = Aggregate
"""One metric over seeds: :class:`openmle.gym.Aggregate` (mean, SEM with ddof 1, population sd,
MLE-bench's 95 % interval; the per-seed values as ``per_seed``)."""


@final
@frozen(kw_only=True)
class SuiteMetrics:
    """Every metric of a suite over its seeds."""

    num_seeds: int
    num_competitions: int
    seeds: tuple[SeedMetrics, ...]
    metrics: Mapping[str, Metric]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "num_seeds": self.num_seeds,
            "num_competitions": self.num_competitions,
            "seeds": [s.to_dict() for s in self.seeds],
            "metrics": {k: m.to_dict() for k, m in self.metrics.items()},
        }


def aggregate_seeds(seeds: Sequence[Sequence[GradeReport]]) -> SuiteMetrics:
    """Per-seed metrics and their mean, SEM and sd over ``seeds`` (see :func:`build_seeds`).

    Raises:
        InvalidArgument: no seeds, or seeds of different sizes.
    """
    if not seeds:
        raise InvalidArgument(
            "No complete seeds; each seed needs one report per competition (build_seeds)"
        )
    sizes = {len(s) for s in seeds}
    if len(sizes) != 1:
        raise InvalidArgument(f"Expected seeds of one size but got sizes {sorted(sizes)}")
    per = tuple(SeedMetrics.of(s) for s in seeds)
    metrics = {k: Metric.of([getattr(p, k) for p in per]) for k in METRICS}
    return SuiteMetrics(
        num_seeds=len(per), num_competitions=sizes.pop(), seeds=per, metrics=metrics
    )
