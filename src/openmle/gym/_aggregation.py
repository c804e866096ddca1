"""The one aggregation convention of openmle's evaluation outputs (gym metrics, bench reports).

A per-run (per-seed) quantity over runs is reported as three named numbers:

- ``mean``: the arithmetic mean;
- ``sem``: the standard error of the mean with the *sample* standard deviation, ``ddof=1``
  (``sd_sample / sqrt(n)``; MLE-bench's ``scipy.stats.sem``; 0 for one run), and MLE-bench's
  95 % interval ``mean -+ 1.96 sem``;
- ``sd``: the *population* standard deviation, ``ddof=0`` (the paper's "+-").

Example: any-medal counts 13, 17 and 17 of 22 competitions (59.09 %, 77.27 %, 77.27 %) give
mean 71.21, population sd 8.57 and SEM 6.06 (the sample sd, 10.50, divided by sqrt(3)).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import final

from attrs import frozen

from openmle.errors import InvalidArgument

__all__ = ["AGGREGATION", "Aggregate", "aggregate"]

AGGREGATION = (
    "mean; sem = sample standard deviation (ddof 1) / sqrt(n); sd = population standard "
    "deviation (ddof 0); ci = mean -+ 1.96 sem"
)
"""The convention in words (printed with every aggregate table)."""


@final
@frozen(kw_only=True)
class Aggregate:
    """A per-run (or per-seed) quantity over runs (see the module doc for the convention).

    Args:
        mean: mean over runs.
        sem: standard error of the mean, sample sd (ddof 1) / sqrt(n); 0 for one run.
        sd: population standard deviation (ddof 0); 0 for one run.
        ci_lower, ci_upper: ``mean -+ 1.96 sem`` (MLE-bench's interval).
        values: the per-run values, in the order given.
    """

    mean: float
    sem: float
    sd: float
    ci_lower: float
    ci_upper: float
    values: tuple[float, ...]

    @property
    def n(self) -> int:
        """Runs (seeds) aggregated."""
        return len(self.values)

    @property
    def per_run(self) -> tuple[float, ...]:
        """The per-run values (gym's name for :attr:`values`)."""
        return self.values

    @property
    def per_seed(self) -> tuple[float, ...]:
        """The per-seed values (the bench's name for :attr:`values`)."""
        return self.values

    @classmethod
    def of(cls, values: Sequence[float]) -> Aggregate:
        """Same as :func:`aggregate`."""
        return aggregate(values)

    def __str__(self) -> str:
        return f"{self.mean:.4g} (SEM {self.sem:.2g}, population sd {self.sd:.2g}, n={self.n})"

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict; ``sem_ddof`` (1) and ``sd_ddof`` (0) name the convention."""
        return {
            "mean": self.mean,
            "sem": self.sem,
            "sem_ddof": 1,
            "sd": self.sd,
            "sd_ddof": 0,
            "ci_lower": self.ci_lower,
            "ci_upper": self.ci_upper,
            "n": self.n,
            "values": list(self.values),
        }


def aggregate(values: Sequence[float]) -> Aggregate:
    """Mean, SEM (ddof 1) and population sd of per-run ``values``.

    Raises:
        InvalidArgument: no values, or a non-finite value.
    """
    vals = tuple(float(v) for v in values)
    if not vals:
        raise InvalidArgument("Expected at least one run but got none; grade some runs first")
    if not all(math.isfinite(v) for v in vals):
        raise InvalidArgument(f"Expected finite per-run values but got {vals!r}")
    n = len(vals)
    mean = math.fsum(vals) / n
    ss = math.fsum((v - mean) ** 2 for v in vals)
    sem = math.sqrt(ss / (n - 1)) / math.sqrt(n) if n > 1 else 0.0
    return Aggregate(
        mean=mean,
        sem=sem,
        sd=math.sqrt(ss / n),
        ci_lower=mean - 1.96 * sem,
        ci_upper=mean + 1.96 * sem,
        values=vals,
    )
