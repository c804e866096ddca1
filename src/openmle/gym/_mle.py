"""Metrics for judging an agent over many tasks and runs (MLE-bench and NatureBench style).

A *run* is one attempt of the agent at a set of tasks: a sequence of :class:`GradeReport`, one
per task. Every metric is computed per run, then aggregated over runs with the one convention
of :mod:`openmle.gym._aggregation` (the bench uses it too): ``mean``, ``sem`` (sample sd,
ddof 1, over sqrt(runs): MLE-bench's "any medal %" mean ± SEM) and ``sd`` (population sd,
ddof 0: the paper's ±).

- valid rate: share of tasks whose submission graded.
- medal rate: share of tasks with a medal (any, or exactly gold/silver/bronze) or above the
  leaderboard median, by MLE-bench's rules; invalid submissions count as no medal.
- Human Rank: mean over tasks of the fraction of leaderboard entries strictly worse than the
  score (0 when invalid).
- relative gap (NatureBench): ``g = (s - s*) / |s*|`` when higher is better and
  ``g = (s* - s) / |s*|`` when lower is better, so ``g >= 0`` means the agent's score ``s``
  matches or beats the state of the art ``s*`` (Match-SOTA) and ``g > 0.1`` means it beats it
  by more than 10 % (Surpass-SOTA). ``s*`` comes from the caller's mapping, else the
  report's best leaderboard score; tasks without a usable SOTA (missing, zero or not finite)
  are left out. The mean gap of a run averages over its valid tasks; the Match/Surpass rates
  count an invalid task as a miss.

All functions are pure: no I/O, no randomness, input order does not matter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import final

from attrs import frozen

from openmle.errors import InvalidArgument
from openmle.gym._aggregation import Aggregate, aggregate
from openmle.gym._reports import GradeReport

__all__ = [
    "MLESummary",
    "human_rank",
    "match_sota_rate",
    "mean_relative_gap",
    "medal_rate",
    "relative_gap",
    "summarize",
    "surpass_sota_rate",
    "valid_rate",
]

Runs = Sequence[Sequence[GradeReport]]
SURPASS_MARGIN = 0.1
"""NatureBench's Surpass-SOTA margin on the relative gap."""


def _per_run(
    runs: Runs, name: str, fn: Callable[[Sequence[GradeReport]], float | None]
) -> Aggregate:
    if isinstance(runs, GradeReport) or not isinstance(runs, Sequence):
        raise InvalidArgument(
            f"Expected {name}'s runs as a sequence of runs (each a sequence of GradeReport) "
            f"but got {type(runs).__name__}"
        )
    if not runs:
        raise InvalidArgument(f"Expected at least one run for {name} but got none")
    values: list[float] = []
    for k, run in enumerate(runs):
        if not run:
            raise InvalidArgument(
                f"Expected run {k} to hold at least one GradeReport but it is empty"
            )
        for r in run:
            if not isinstance(r, GradeReport):
                raise InvalidArgument(
                    f"Expected GradeReport entries but run {k} holds {type(r).__name__}"
                )
        v = fn(run)
        if v is not None:
            values.append(v)
    if not values:
        raise InvalidArgument(
            f"{name} is undefined for these runs (no run has a report it applies to); "
            "grade on the test split of tasks with a leaderboard"
        )
    return aggregate(values)


def valid_rate(runs: Runs) -> Aggregate:
    """Share of tasks per run whose submission graded to a finite score."""
    return _per_run(runs, "valid_rate", lambda run: sum(r.valid for r in run) / len(run))


_MEDALS: dict[str, str] = {
    "any": "any_medal",
    "gold": "gold_medal",
    "silver": "silver_medal",
    "bronze": "bronze_medal",
    "above_median": "above_median",
}


def medal_rate(runs: Runs, medal: str = "any") -> Aggregate:
    """Share of tasks per run with ``medal`` (any, gold, silver, bronze, above_median).

    Only reports with a leaderboard count; an invalid submission is no medal.

    Raises:
        InvalidArgument: unknown ``medal``, or no report with a leaderboard.
    """
    if medal not in _MEDALS:
        raise InvalidArgument(f"Expected medal in {sorted(_MEDALS)} but got medal={medal!r}")
    attr = _MEDALS[medal]

    def one(run: Sequence[GradeReport]) -> float | None:
        ranked = [r for r in run if r.leaderboard_size > 0]
        return sum(bool(getattr(r, attr)) for r in ranked) / len(ranked) if ranked else None

    return _per_run(runs, f"medal_rate({medal!r})", one)


def human_rank(runs: Runs) -> Aggregate:
    """Mean Human Rank per run: the fraction of leaderboard entries strictly worse than each
    task's score (0 for an invalid submission).
    """

    def one(run: Sequence[GradeReport]) -> float | None:
        ranked = [r for r in run if r.leaderboard_size > 0]
        if not ranked:
            return None
        return math.fsum(r.human_rank or 0.0 for r in ranked) / len(ranked)

    return _per_run(runs, "human_rank", one)


def relative_gap(score: float, sota: float, *, higher_is_better: bool) -> float:
    """NatureBench's relative gap ``g``: positive when ``score`` beats ``sota``.

    Raises:
        InvalidArgument: a non-finite input, or ``sota == 0`` (no relative scale).
    """
    if not (math.isfinite(score) and math.isfinite(sota)):
        raise InvalidArgument(
            f"Expected finite score and sota but got score={score!r}, sota={sota!r}"
        )
    if sota == 0:
        raise InvalidArgument(
            "Expected a non-zero sota: the relative gap divides by |sota|; compare raw scores"
        )
    diff = score - sota if higher_is_better else sota - score
    return diff / abs(sota)


def _gaps(run: Sequence[GradeReport], sota: Mapping[str, float] | None) -> list[float | None]:
    """Per-task gaps of a run (None for invalid ones); tasks without a SOTA are skipped."""
    out: list[float | None] = []
    for r in run:
        ref = sota.get(r.task) if sota is not None else r.leaderboard_best
        if ref is None or ref == 0 or not math.isfinite(ref):
            continue
        if not r.valid or r.score is None:
            out.append(None)
            continue
        out.append(relative_gap(r.score, ref, higher_is_better=r.higher_is_better))
    return out


def mean_relative_gap(runs: Runs, sota: Mapping[str, float] | None = None) -> Aggregate:
    """Mean relative gap over each run's valid tasks that have a SOTA."""

    def one(run: Sequence[GradeReport]) -> float | None:
        gaps = [g for g in _gaps(run, sota) if g is not None]
        return math.fsum(gaps) / len(gaps) if gaps else None

    return _per_run(runs, "mean_relative_gap", one)


def _rate(
    runs: Runs, sota: Mapping[str, float] | None, name: str, ok: Callable[[float], bool]
) -> Aggregate:
    def one(run: Sequence[GradeReport]) -> float | None:
        gaps = _gaps(run, sota)
        return sum(g is not None and ok(g) for g in gaps) / len(gaps) if gaps else None

    return _per_run(runs, name, one)


def match_sota_rate(runs: Runs, sota: Mapping[str, float] | None = None) -> Aggregate:
    """Share of tasks per run with ``g >= 0`` (Match-SOTA); invalid tasks are misses."""
    return _rate(runs, sota, "match_sota_rate", lambda g: g >= 0)


def surpass_sota_rate(
    runs: Runs, sota: Mapping[str, float] | None = None, *, margin: float = SURPASS_MARGIN
) -> Aggregate:
    """Share of tasks per run with ``g > margin`` (Surpass-SOTA, margin 0.1)."""
    return _rate(runs, sota, "surpass_sota_rate", lambda g: g > margin)


@final
@frozen(kw_only=True)
class MLESummary:
    """Every MLE metric over the same runs; a field is None where it is undefined (for
    example medals without leaderboards).
    """

    n_runs: int
    valid_rate: Aggregate
    any_medal_rate: Aggregate | None
    gold_rate: Aggregate | None
    silver_rate: Aggregate | None
    bronze_rate: Aggregate | None
    above_median_rate: Aggregate | None
    human_rank: Aggregate | None
    relative_gap: Aggregate | None
    match_sota_rate: Aggregate | None
    surpass_sota_rate: Aggregate | None

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (None stays None)."""
        out: dict[str, object] = {"n_runs": self.n_runs}
        for key in (
            "valid_rate",
            "any_medal_rate",
            "gold_rate",
            "silver_rate",
            "bronze_rate",
            "above_median_rate",
            "human_rank",
            "relative_gap",
            "match_sota_rate",
            "surpass_sota_rate",
        ):
            agg = getattr(self, key)
            out[key] = None if agg is None else agg.to_dict()
        return out


def _maybe(fn: Callable[[], Aggregate]) -> Aggregate | None:
    try:
        return fn()
    except InvalidArgument as exc:
        if "undefined" in str(exc):
            return None
        raise


def summarize(runs: Runs, sota: Mapping[str, float] | None = None) -> MLESummary:
    """Compute every metric of this module over ``runs``.

    Raises:
        InvalidArgument: no runs, an empty run, or an entry that is not a GradeReport.
    """
    return MLESummary(
        n_runs=len(runs),
        valid_rate=valid_rate(runs),
        any_medal_rate=_maybe(lambda: medal_rate(runs, "any")),
        gold_rate=_maybe(lambda: medal_rate(runs, "gold")),
        silver_rate=_maybe(lambda: medal_rate(runs, "silver")),
        bronze_rate=_maybe(lambda: medal_rate(runs, "bronze")),
        above_median_rate=_maybe(lambda: medal_rate(runs, "above_median")),
        human_rank=_maybe(lambda: human_rank(runs)),
        relative_gap=_maybe(lambda: mean_relative_gap(runs, sota)),
        match_sota_rate=_maybe(lambda: match_sota_rate(runs, sota)),
        surpass_sota_rate=_maybe(lambda: surpass_sota_rate(runs, sota)),
    )
