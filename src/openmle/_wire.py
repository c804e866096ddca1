"""The job service's answers, parsed strictly: the one place that reads the wire format.

A job service is a remote party, so its answers are untrusted input (second security review:
a score of ``10**400`` raised ``OverflowError``, logs as an int or an error signature as a dict
crashed the search, a result for another job or split was taken as ours, an AUC of 1.7e308 was
recorded as the best score). Everything here checks type, range and binding, and reports a
problem as :class:`WireError` with a message naming the field; the client turns that into an
``INFRA_ERROR`` result, never a crash. The service (:mod:`openmle.service`) writes the same
shapes; this module is meant to be shared by both ends.

Shapes (``openmle serve``, plus the released routers' fields):

- a job view: ``{"job_id": str, "status": "queued"|"running"|"completed"|"failed"|"cancelled",
  "detail": str, "eval_split": "valid"|"test", "result": {...} | null}``;
- its ``result``: ``run_result`` (a :meth:`RunResult.to_dict`), or the released routers'
  ``result`` word with ``score`` / ``valid_score`` / ``validation_score`` and ``run_log``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from openmle._types import Outcome, RunResult, Split, TaskMeta

__all__ = [
    "MAX_ABS_SCORE",
    "WireError",
    "check_job_id",
    "check_score",
    "parse_job_view",
    "parse_run_result",
]

MAX_ABS_SCORE = 1e100
"""No metric reaches this; scores beyond it (1.7e308 was seen) would overflow arithmetic."""

_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_MAX_TEXT = 16 * 1024 * 1024
_MAX_INT = 2**63


class WireError(ValueError):
    """An answer of the job service breaks the wire format; the message names the field."""


def _text(value: object, field: str, *, optional: bool = False, limit: int = _MAX_TEXT) -> str:
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise WireError(f"{field} is {_kind(value)}, not a string")
    if len(value) > limit:
        raise WireError(f"{field} has {len(value)} characters, over {limit}")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    shown = repr(value)
    return f"a {type(value).__name__} ({shown[:60]}{'...' if len(shown) > 60 else ''})"


def _number(value: object, field: str, *, optional: bool = True) -> float | None:
    """A finite float from a JSON number (never a string, a bool or an overflowing int)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise WireError(f"{field} is {_kind(value)}, not a number")
    try:
        v = float(value)
    except OverflowError:
        raise WireError(f"{field} is an integer too large for a float") from None
    if not math.isfinite(v):
        raise WireError(f"{field} is {v}, not a finite number")
    return v


def _integer(value: object, field: str, *, minimum: int = -_MAX_INT) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < _MAX_INT:
        raise WireError(f"{field} is {_kind(value)}, not an integer in [{minimum}, 2**63)")
    return value


def check_job_id(value: object) -> str:
    """A job id safe to put in a URL path: 1-128 of ``A-Z a-z 0-9 . _ : -``, not ``.``/``..``."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _MAX_INT:
        value = str(value)
    if not isinstance(value, str) or not _JOB_ID.fullmatch(value):
        raise WireError(f"job_id is {_kind(value)}, not 1-128 characters of A-Z a-z 0-9 . _ : -")
    return value


def check_score(score: float | None, field: str, meta: TaskMeta | None) -> None:
    """Raise :class:`WireError` when ``score`` is beyond :data:`MAX_ABS_SCORE` or ``meta``'s
    theoretical range (``theoretical_min`` / ``theoretical_max``, where set)."""
    if score is None:
        return
    if abs(score) > MAX_ABS_SCORE:
        raise WireError(f"{field}={score!r} is beyond any metric (|score| > {MAX_ABS_SCORE:g})")
    if meta is None:
        return
    lo, hi = meta.theoretical_min, meta.theoretical_max
    if (lo is not None and score < lo) or (hi is not None and score > hi):
        raise WireError(
            f"{field}={score!r} is outside the task's metric range "
            f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        )


def parse_job_view(data: object, *, job_id: str | None = None) -> Mapping[str, Any]:
    """Check a job view's envelope; returns it as a mapping.

    Args:
        data: the decoded JSON answer.
        job_id: the job this answer must be about; an answer naming another job raises (an
            answer without a ``job_id``, as some released routers send, is accepted).

    Raises:
        WireError: not an object, a ``job_id`` of another job or of a bad shape, a ``status``,
            ``detail`` or ``eval_split`` of the wrong type, a ``result`` that is not an object.
    """
    if not isinstance(data, Mapping):
        raise WireError(f"the answer is {_kind(data)}, not a JSON object")
    if data.get("job_id") is not None:
        got = check_job_id(data["job_id"])
        if job_id is not None and got != job_id:
            raise WireError(f"the answer is about job {got!r}, not job {job_id!r}")
    _text(data.get("status"), "status", optional=True, limit=64)
    _text(data.get("detail"), "detail", optional=True)
    split = data.get("eval_split")
    if split is not None and split not in ("valid", "test"):
        raise WireError(f"eval_split is {_kind(split)}, not 'valid' or 'test'")
    result = data.get("result")
    if result is not None and not isinstance(result, Mapping):
        raise WireError(f"result is {_kind(result)}, not an object")
    return data


def parse_run_result(
    data: object, *, split: Split, meta: TaskMeta | None = None, field: str = "run_result"
) -> RunResult:
    """A :class:`RunResult` from its wire form, checked field by field.

    Args:
        data: the decoded ``run_result`` object.
        split: the split that was asked for; a result for another split raises.
        meta: the task's metric bounds, if known: a score outside them raises.
        field: the name of ``data`` in messages.

    Raises:
        WireError: a missing or unknown outcome, a field of the wrong type or out of range
            (scores finite and within bounds; counts and times non-negative), a score on a
            result that is not a success, or a split other than ``split``.
    """
    if not isinstance(data, Mapping):
        raise WireError(f"{field} is {_kind(data)}, not an object")
    raw_outcome = data.get("outcome")
    if not isinstance(raw_outcome, str) or raw_outcome not in {o.value for o in Outcome}:
        raise WireError(f"{field}.outcome is {_kind(raw_outcome)}, not one of the outcomes")
    outcome = Outcome(raw_outcome)
    raw_split = data.get("split", split.value)
    if raw_split != split.value:
        raise WireError(f"{field}.split is {_kind(raw_split)}, but split {split.value!r} was run")
    score = _number(data.get("score"), f"{field}.score")
    check_score(score, f"{field}.score", meta)
    if outcome is not Outcome.SUCCESS and score is not None:
        raise WireError(f"{field} has a score but outcome {outcome.value!r}")
    printed = _number(data.get("printed_score"), f"{field}.printed_score")
    if printed is not None and abs(printed) > MAX_ABS_SCORE:
        printed = None  # the program's own claim: informative only, never worth a failure
    artifacts = data.get("artifacts", [])
    if not isinstance(artifacts, list) or not all(isinstance(a, str) for a in artifacts):
        raise WireError(f"{field}.artifacts is {_kind(artifacts)}, not a list of strings")
    signature = data.get("error_signature")
    if signature is not None:
        signature = _text(signature, f"{field}.error_signature", limit=4096)
    times = {}
    for key in ("runtime_s", "queue_s"):
        t = _number(data.get(key, 0.0), f"{field}.{key}", optional=False)
        if t is None or t < 0:
            raise WireError(f"{field}.{key} is {t}, not a duration >= 0")
        times[key] = t
    return RunResult(
        outcome=outcome,
        score=score,
        split=split,
        logs=_text(data.get("logs", ""), f"{field}.logs"),
        logs_dropped_bytes=_integer(
            data.get("logs_dropped_bytes", 0), f"{field}.logs_dropped_bytes", minimum=0
        )
        or 0,
        error_signature=signature,
        detail=_text(data.get("detail", ""), f"{field}.detail", optional=True),
        exit_code=_integer(data.get("exit_code"), f"{field}.exit_code"),
        runtime_s=times["runtime_s"],
        queue_s=times["queue_s"],
        printed_score=printed,
        artifacts=tuple(artifacts),
    )
