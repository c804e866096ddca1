"""What grading and validation return: :class:`GradeReport` and :class:`ValidationReport`.

``GradeReport`` is the one report value of a graded submission, for task packages and for
every benchmark (``openmle.bench.CompetitionReport`` is its deprecated alias). It carries
MLE-bench's grading-report fields (medal thresholds and flags, above-median, lower-is-better)
plus the split the score came from, the human rank (``1 - entries strictly better / (N - 1)``,
the paper's definition) and a bench run's seed. :meth:`GradeReport.to_mlebench` exports
exactly MLE-bench's ``CompetitionReport.to_dict`` keys (``competition_id``,
``valid_submission``, ``is_lower_better``, ...), and :meth:`GradeReport.from_dict` reads
those too. Leaderboard fields are filled only for the ``test`` split of a task with a
leaderboard: a validation score is measured on different rows, so placing it on the test
leaderboard would mislead.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, ClassVar, final

from attrs import field, frozen

from openmle._exports import warn_deprecated
from openmle._leaderboard import (
    MedalThresholds,
    above_median_of,
    human_rank_of,
    medal_of,
    medal_thresholds,
)
from openmle._types import Split, check_split
from openmle.errors import InvalidArgument

__all__ = ["GradeReport", "Problem", "Severity", "ValidationReport"]

MLEBENCH_REPORT_FIELDS: tuple[str, ...] = (
    "competition_id",
    "score",
    "gold_threshold",
    "silver_threshold",
    "bronze_threshold",
    "median_threshold",
    "any_medal",
    "gold_medal",
    "silver_medal",
    "bronze_medal",
    "above_median",
    "submission_exists",
    "valid_submission",
    "is_lower_better",
    "created_at",
    "submission_path",
)
"""The keys of one competition report in MLE-bench's grading report, in its order
(MLE-bench's ``CompetitionReport.to_dict``): :meth:`GradeReport.to_mlebench`'s keys."""

_MLEBENCH_NAMES = {"competition_id": "task", "valid_submission": "valid"}
"""MLE-bench's field name -> the report's (``is_lower_better`` is ``not higher_is_better``)."""


MAX_REASON_CHARS = 1000
"""Longest reason or message a report keeps; a longer one is cut, marked, where it is built."""


def _clip(value: object) -> str:
    text = str(value)
    if len(text) <= MAX_REASON_CHARS:
        return text
    keep = MAX_REASON_CHARS - 40
    return f"{text[:keep]}... [{len(text) - keep} more characters]"


def _path_text(value: object) -> str:
    return "" if value is None else str(value)


def _finite_or_none(value: object) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


@final
@frozen(kw_only=True)
class GradeReport:
    """The grade of one submission on one split of one task: the one report value.

    Task packages and every benchmark return it. MLE-bench's names are :meth:`to_mlebench`'s
    keys and read-only properties (``competition_id``, ``valid_submission``,
    ``is_lower_better``); :meth:`from_dict` reads them.

    Args:
        task: the task name (MLE-bench's ``competition_id``).
        split: the split whose answers the score was computed against (default ``test``,
            the split a benchmark grades).
        score: the metric value (finite) when ``valid``, else None.
        valid: whether the submission had the task's format and graded to a finite number
            (MLE-bench's ``valid_submission``).
        reason: why it is invalid, naming the problem and the fix (empty when valid). Never
            holds answer values; at most 1,000 characters (longer ones are cut, marked).
        higher_is_better: the metric's direction.
        submission_path: the graded file (a bench: relative to its directory); ``""`` when
            none was kept (None, as older reports wrote it, reads as ``""``).
        submission_exists: whether that file existed.
        gold_threshold, silver_threshold, bronze_threshold, median_threshold: leaderboard
            thresholds in score units (None without a leaderboard or on the valid split).
        gold_medal, silver_medal, bronze_medal, any_medal, above_median: MLE-bench's flags
            (medals are exclusive: a gold is not also a silver).
        human_rank: Human Rank, the fraction of the leaderboard's N finite entries strictly
            worse than the score, in [0, 1] (the paper's definition; ties are not surpassed;
            0.0 when invalid), or None without a leaderboard. Not the RL reward
            :func:`openmle.rewards.leaderboard_rank`.
        leaderboard_size: entries on the leaderboard (0 without one).
        leaderboard_best: the best leaderboard score (the SOTA default for relative gaps).
        grade_s: wall-clock seconds of the grading process (None when no process ran).
        seed: the bench run's seed (None outside a bench).
        created_at: when the report was made, ISO 8601 (``""`` when not recorded).
    """

    MLEBENCH_FIELDS: ClassVar[tuple[str, ...]] = MLEBENCH_REPORT_FIELDS

    task: str
    split: Split = field(default=Split.TEST, converter=check_split)
    score: float | None = field(default=None, converter=_finite_or_none)
    valid: bool = False
    reason: str = field(default="", converter=_clip)
    higher_is_better: bool = True
    submission_path: str = field(default="", converter=_path_text)
    submission_exists: bool = True
    gold_threshold: float | None = None
    silver_threshold: float | None = None
    bronze_threshold: float | None = None
    median_threshold: float | None = None
    gold_medal: bool = False
    silver_medal: bool = False
    bronze_medal: bool = False
    any_medal: bool = False
    above_median: bool = False
    human_rank: float | None = None
    leaderboard_size: int = 0
    leaderboard_best: float | None = None
    grade_s: float | None = field(default=None, converter=_finite_or_none)
    seed: int | None = None
    created_at: str = ""

    def __attrs_post_init__(self) -> None:
        if self.valid and self.score is None:
            object.__setattr__(self, "valid", False)
            if not self.reason:
                object.__setattr__(self, "reason", "the metric gave no finite score")

    @classmethod
    def missing(cls, task: str, *, seed: int | None = None, reason: str = "") -> GradeReport:
        """A run that produced nothing (counted as a failure, never dropped): no submission,
        no score, on the test split.
        """
        return cls(task=task, seed=seed, reason=reason or "no result", submission_exists=False)

    @property
    def competition_id(self) -> str:
        """MLE-bench's name for ``task``."""
        return self.task

    @property
    def valid_submission(self) -> bool:
        """MLE-bench's name for ``valid``."""
        return self.valid

    @property
    def is_lower_better(self) -> bool:
        """MLE-bench's name for ``not higher_is_better``."""
        return not self.higher_is_better

    @property
    def medal(self) -> str | None:
        """``"gold"``, ``"silver"``, ``"bronze"`` or None."""
        for name in ("gold", "silver", "bronze"):
            if getattr(self, f"{name}_medal"):
                return name
        return None

    def with_leaderboard(self, scores_best_first: tuple[float, ...]) -> GradeReport:
        """This report with the leaderboard fields filled from ``scores_best_first``."""
        th: MedalThresholds = medal_thresholds(
            scores_best_first, higher_is_better=self.higher_is_better
        )
        s = self.score if self.valid else None
        medal = medal_of(s, th)
        above = above_median_of(s, th)
        return GradeReport(
            **{
                **self.to_dict(),
                "gold_threshold": th.gold,
                "silver_threshold": th.silver,
                "bronze_threshold": th.bronze,
                "median_threshold": th.median,
                "gold_medal": medal == "gold",
                "silver_medal": medal == "silver",
                "bronze_medal": medal == "bronze",
                "any_medal": medal is not None,
                "above_median": above,
                "human_rank": human_rank_of(
                    s, scores_best_first, higher_is_better=self.higher_is_better
                ),
                "leaderboard_size": th.n_entries,
                "leaderboard_best": (
                    max(scores_best_first) if self.higher_is_better else min(scores_best_first)
                ),
            }
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``split`` as its string value)."""
        return {
            "task": self.task,
            "split": self.split.value,
            "score": self.score,
            "valid": self.valid,
            "reason": self.reason,
            "higher_is_better": self.higher_is_better,
            "submission_path": self.submission_path,
            "submission_exists": self.submission_exists,
            "gold_threshold": self.gold_threshold,
            "silver_threshold": self.silver_threshold,
            "bronze_threshold": self.bronze_threshold,
            "median_threshold": self.median_threshold,
            "gold_medal": self.gold_medal,
            "silver_medal": self.silver_medal,
            "bronze_medal": self.bronze_medal,
            "any_medal": self.any_medal,
            "above_median": self.above_median,
            "human_rank": self.human_rank,
            "leaderboard_size": self.leaderboard_size,
            "leaderboard_best": self.leaderboard_best,
            "grade_s": self.grade_s,
            "seed": self.seed,
            "created_at": self.created_at,
        }

    def to_mlebench(self) -> dict[str, Any]:
        """Exactly MLE-bench's ``CompetitionReport.to_dict`` keys
        (:data:`MLEBENCH_REPORT_FIELDS`, in its order): ``competition_id`` is ``task``,
        ``valid_submission`` is ``valid``, ``is_lower_better`` is ``not higher_is_better``.
        """
        d = self.to_dict()
        d.update(
            competition_id=self.task,
            valid_submission=self.valid,
            is_lower_better=self.is_lower_better,
        )
        return {k: d[k] for k in MLEBENCH_REPORT_FIELDS}

    def to_mlebench_dict(self) -> dict[str, Any]:
        """Deprecated (removed in openmle 0.2.0): :meth:`to_mlebench`."""
        warn_deprecated("GradeReport.to_mlebench_dict()", "call .to_mlebench()")
        return self.to_mlebench()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GradeReport:
        """Inverse of :meth:`to_dict`; MLE-bench's dicts (:meth:`to_mlebench`'s keys, with
        or without the extra fields of this report) load too.

        Raises:
            InvalidArgument: an unknown key, or a field named both ways.
        """
        names = {a.name for a in cls.__attrs_attrs__}
        out: dict[str, Any] = {}
        for key, value in data.items():
            if key == "is_lower_better":
                name, value = "higher_is_better", not value
            else:
                name = _MLEBENCH_NAMES.get(key, key)
            if name not in names:
                raise InvalidArgument(
                    f"Expected a grade report's fields but got unknown key {key!r}; "
                    f"the fields are {sorted(names)} (or MLE-bench's names)"
                )
            if name in out:
                raise InvalidArgument(f"Expected one of {key!r} and {name!r} but got both")
            out[name] = value
        return cls(**out)


class Severity(enum.StrEnum):
    """How bad a validation problem is: errors make a package unusable, warnings do not."""

    ERROR = "error"
    WARNING = "warning"


@final
@frozen(kw_only=True)
class Problem:
    """One validation finding.

    Args:
        severity: error or warning.
        file: the file or directory at fault, relative to the package root.
        message: what is wrong (never holds answer values).
        fix: what to do about it.

    ``str()`` is ``SEVERITY: FILE: MESSAGE Fix: FIX``, without ``FILE:`` when the message
    starts by naming the file.
    """

    severity: Severity = field(converter=Severity)
    file: str
    message: str = field(converter=_clip)
    fix: str

    def __str__(self) -> str:
        where = "" if self.message.startswith(self.file + " ") else f"{self.file}: "
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.severity.value}: {where}{self.message}{fix}"

    def to_dict(self) -> dict[str, str]:
        """A JSON-ready dict."""
        return {
            "severity": self.severity.value,
            "file": self.file,
            "message": self.message,
            "fix": self.fix,
        }


@final
@frozen(kw_only=True)
class ValidationReport:
    """The deterministic checks of a task package.

    Args:
        task: the task name (the directory name when the package cannot be loaded).
        path: the package root.
        problems: every finding, errors first.
        sample_score: what the sample submission grades to on the test split, if it graded.
        checks: names of the checks that ran.
    """

    task: str
    path: str
    problems: tuple[Problem, ...] = ()
    sample_score: float | None = field(default=None, converter=_finite_or_none)
    checks: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True when there is no error (warnings allowed)."""
        return not self.errors

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The problems of severity error."""
        return tuple(p for p in self.problems if p.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """The problems of severity warning."""
        return tuple(p for p in self.problems if p.severity is Severity.WARNING)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "task": self.task,
            "path": self.path,
            "ok": self.ok,
            "problems": [p.to_dict() for p in self.problems],
            "sample_score": self.sample_score,
            "checks": list(self.checks),
        }
