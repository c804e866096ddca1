"""NatureBench leaderboard arithmetic and its submission files (pure functions, no I/O beyond
the files named).

NatureBench (``FrontisAI/NatureBench``, MIT) scores each case by the normalised gap ``g`` of
the best evaluator-produced score to the paper's state of the art, and its submission
specification (``submit-results/SUBMISSION_SPEC.md``) defines the public metrics over the
reviewed per-case rows of a track's ``N`` official cases:

- Score Rate: cases with a numeric score / ``N``;
- Completion Rate: valid-scored cases (numeric score and judge verdict ``valid``) / ``N``;
- Match-SOTA: valid-scored cases with ``g >= 0`` / ``N``;
- Surpass-SOTA: valid-scored cases with ``g > 0.1`` / ``N``;
- mean and median ``g`` over all ``N`` cases, an invalid or unscored case counting as
  ``g = -1``;
- median ``g`` over the valid-scored cases (None when there are none);
- the same per domain.

Rates here are fractions in [0, 1] (the harness prints them as percentages). ``results.csv``
has exactly the columns :data:`RESULTS_COLUMNS`; :func:`check_results` implements the
specification's rules for it (written from the specification, not from the harness's code).

This module is the arithmetic and file layer of the NatureBench adapter; running cases is
:mod:`openmle.bench.naturebench._registry`'s, reading the harness's case lists
:mod:`openmle.bench.naturebench._cases`'s.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from attrs import field, frozen

from openmle.errors import InvalidArgument

__all__ = [
    "RESULTS_COLUMNS",
    "CaseResult",
    "NatureBenchMetrics",
    "check_results",
    "leaderboard_metrics",
    "metrics_by_domain",
    "write_results_csv",
    "write_submission_yaml",
]

RESULTS_COLUMNS = ("case_id", "final_status", "best_score", "judge_verdict", "judge_reason")
"""The exact header of NatureBench's ``results.csv``."""
VERDICTS = ("valid", "invalid", "not_applicable")
MATCH_THRESHOLD = 0.0
SURPASS_THRESHOLD = 0.1
_NOT_NUMBERS = {"-", "none", "null", "nan", "inf", "-inf", "+inf", "infinity", "-infinity"}


def _check_score(value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgument(
            f"Expected CaseResult.best_score to be a finite number or None but got {value!r}"
        )
    return float(value)


@frozen(kw_only=True)
class CaseResult:
    """One row of ``results.csv`` (plus the case's domain, for per-domain metrics).

    ``best_score`` is the best ``g`` the evaluator produced (None: no score).
    ``judge_verdict`` is ``valid``/``invalid`` for a scored case, ``not_applicable`` for an
    unscored one unless a judge was run; ``judge_reason`` is the judge's reason, or
    ``not_applicable``.
    """

    case_id: str
    domain: str = ""
    final_status: str = ""
    best_score: float | None = field(default=None, converter=_check_score)
    judge_verdict: str = "not_applicable"
    judge_reason: str = "not_applicable"

    def __attrs_post_init__(self) -> None:
        if not self.case_id.strip():
            raise InvalidArgument("Expected CaseResult.case_id to be a non-empty id")
        if self.judge_verdict not in VERDICTS:
            raise InvalidArgument(
                f"Expected CaseResult.judge_verdict in {VERDICTS} but got {self.judge_verdict!r}"
            )
        if self.best_score is not None and self.judge_verdict == "not_applicable":
            raise InvalidArgument(
                f"Case {self.case_id!r} has a score, so its judge_verdict must be 'valid' or "
                "'invalid' (not 'not_applicable'); without a judge, use 'valid'"
            )

    @property
    def valid_scored(self) -> bool:
        """A numeric score the judge accepted."""
        return self.best_score is not None and self.judge_verdict == "valid"

    @property
    def g(self) -> float:
        """``g`` for the all-case statistics: the score if valid-scored, else -1."""
        return self.best_score if self.valid_scored and self.best_score is not None else -1.0


@frozen(kw_only=True)
class NatureBenchMetrics:
    """The specification's metrics over one track (or one domain of it)."""

    task_count: int
    scored_count: int
    valid_count: int
    invalid_count: int
    no_score_count: int
    score_rate: float
    completion_rate: float
    match_sota: float
    surpass_sota: float
    mean_g_all: float | None
    median_g_all: float | None
    median_g_valid: float | None


def leaderboard_metrics(rows: Sequence[CaseResult]) -> NatureBenchMetrics:
    """The metrics over ``rows`` (every official case of the track, once each).

    Raises:
        InvalidArgument: a case id appears twice.
    """
    ids = [r.case_id for r in rows]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        raise InvalidArgument(f"Expected each case once but got duplicates {dup}")
    n = len(rows)
    scored = [r for r in rows if r.best_score is not None]
    valid = [
        r.best_score for r in scored if r.judge_verdict == "valid" and r.best_score is not None
    ]
    every = [r.g for r in rows]

    def rate(k: int) -> float:
        return k / n if n else 0.0

    return NatureBenchMetrics(
        task_count=n,
        scored_count=len(scored),
        valid_count=len(valid),
        invalid_count=sum(r.judge_verdict == "invalid" for r in scored),
        no_score_count=n - len(scored),
        score_rate=rate(len(scored)),
        completion_rate=rate(len(valid)),
        match_sota=rate(sum(g >= MATCH_THRESHOLD for g in valid)),
        surpass_sota=rate(sum(g > SURPASS_THRESHOLD for g in valid)),
        mean_g_all=statistics.fmean(every) if every else None,
        median_g_all=statistics.median(every) if every else None,
        median_g_valid=statistics.median(valid) if valid else None,
    )


def metrics_by_domain(rows: Sequence[CaseResult]) -> dict[str, NatureBenchMetrics]:
    """:func:`leaderboard_metrics` for each domain (sorted by name)."""
    domains = sorted({r.domain for r in rows})
    return {d: leaderboard_metrics([r for r in rows if r.domain == d]) for d in domains}


def _score_text(score: float | None) -> str:
    return "" if score is None else repr(float(score))


def write_results_csv(path: Path, rows: Iterable[CaseResult]) -> Path:
    """Write ``results.csv`` (exact columns, sorted by case id, an empty field for no score)."""
    ordered = sorted(rows, key=lambda r: r.case_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh, lineterminator="\n")
        out.writerow(RESULTS_COLUMNS)
        for r in ordered:
            out.writerow(
                [
                    r.case_id,
                    r.final_status,
                    _score_text(r.best_score),
                    r.judge_verdict,
                    r.judge_reason,
                ]
            )
    return path


def check_results(path: Path, case_ids: Iterable[str]) -> list[str]:
    """The problems of ``results.csv`` against the specification, for the track's official
    ``case_ids`` (empty when it passes).

    Rules: the header is exactly :data:`RESULTS_COLUMNS`; every official id appears exactly
    once and no other; ``best_score`` is empty or a finite number (never ``-``, ``None``,
    ``null``, ``NaN``); ``judge_verdict`` is ``valid``/``invalid`` with a score and
    ``not_applicable``/``valid``/``invalid`` without; ``judge_reason`` is non-empty, and
    ``not_applicable`` for a ``not_applicable`` verdict.
    """
    problems: list[str] = []
    official = set(case_ids)
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None or tuple(header) != RESULTS_COLUMNS:
                return [f"header is {header!r}; it must be exactly {','.join(RESULTS_COLUMNS)}"]
            seen: set[str] = set()
            for line, row in enumerate(reader, start=2):
                if len(row) != len(RESULTS_COLUMNS):
                    problems.append(f"line {line}: {len(row)} fields, expected 5")
                    continue
                case_id, _status, score, verdict, reason = (c.strip() for c in row)
                if case_id in seen:
                    problems.append(f"line {line}: case {case_id!r} appears again")
                seen.add(case_id)
                if case_id not in official:
                    problems.append(f"line {line}: {case_id!r} is not an official case id")
                has_score = bool(score)
                if has_score:
                    try:
                        ok = score.lower() not in _NOT_NUMBERS and math.isfinite(float(score))
                    except ValueError:
                        ok = False
                    if not ok:
                        problems.append(
                            f"line {line}: best_score {score!r} is not a finite number; leave "
                            "it empty for no score"
                        )
                allowed = ("valid", "invalid") if has_score else VERDICTS
                if verdict not in allowed:
                    problems.append(
                        f"line {line}: judge_verdict {verdict!r} must be one of {allowed}"
                    )
                if not reason:
                    problems.append(f"line {line}: judge_reason is required")
                elif verdict == "not_applicable" and reason != "not_applicable":
                    problems.append(
                        f"line {line}: judge_reason must be 'not_applicable' for a "
                        "not_applicable verdict"
                    )
            missing = sorted(official - seen)
            if missing:
                problems.append(f"missing official cases: {missing}")
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        problems.append(f"cannot read {path.name}: {type(exc).__name__}")
    return problems


_SUBMISSION_KEYS = ("model", "agent", "organization", "url", "submission_date", "contact")
_EVALUATION_DEFAULTS: Mapping[str, object] = {
    "track": "full",
    "evaluation_pipeline": "custom",
    "timeout_seconds": 14400,
    "web_search": False,
    "compute": "",
    "judge_model": "",
    "human_intervention": "none",
    "deviations_from_reference": "none",
}


def write_submission_yaml(
    path: Path, submission: Mapping[str, str], evaluation: Mapping[str, object] | None = None
) -> Path:
    """Write ``submission.yaml`` with the specification's two sections.

    ``evaluation`` overrides the defaults (``evaluation_pipeline`` is ``custom``: openmle's
    runner is not the harness's pipeline). Values are written as JSON scalars, which YAML reads
    as the same values.

    Raises:
        InvalidArgument: a ``submission`` key is missing or unknown, or an evaluation key is
            unknown.
    """
    missing = [k for k in _SUBMISSION_KEYS if not str(submission.get(k, "")).strip()]
    unknown = sorted(set(submission) - set(_SUBMISSION_KEYS))
    if missing or unknown:
        raise InvalidArgument(
            f"Expected submission keys {list(_SUBMISSION_KEYS)} but {missing} are missing and "
            f"{unknown} are unknown"
        )
    evaluation = dict(evaluation or {})
    unknown = sorted(set(evaluation) - set(_EVALUATION_DEFAULTS))
    if unknown:
        raise InvalidArgument(
            f"Unknown evaluation keys {unknown}; use {list(_EVALUATION_DEFAULTS)}"
        )
    lines = ["submission:"]
    lines += [f"  {k}: {json.dumps(str(submission[k]))}" for k in _SUBMISSION_KEYS]
    lines.append("")
    lines.append("evaluation:")
    for k, default in _EVALUATION_DEFAULTS.items():
        lines.append(f"  {k}: {json.dumps(evaluation.get(k, default))}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
