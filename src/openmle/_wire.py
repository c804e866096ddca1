"""The job service's wire format, both ends: the one place that writes and reads it (sans-I/O).

Requests (``POST /api/v1/jobs``): the client builds a :class:`SubmitBody` from its
:class:`~openmle.Job` (:func:`submit_body`) and sends :func:`encode_submit`; the service reads it
with :func:`decode_submit`, which checks every field's shape and names the field it refuses, then
applies its own policy (task roots, size and resource limits: :mod:`openmle.service`).
``decode_submit(encode_submit(b)) == b`` for every valid body.

Answers: the service writes a job view with :func:`encode_job_view`; the client reads it with
:func:`parse_job_view` and :func:`view_result` (which also understands the released routers'
answers). :func:`retry_after_seconds` reads the ``Retry-After`` of any HTTP answer (the job
service's and the model servers'). Nothing here does I/O or imports an HTTP library.

A job service is a remote party, so its answers are untrusted input (second security review:
a score of ``10**400`` raised ``OverflowError``, logs as an int or an error signature as a dict
crashed the search, a result for another job or split was taken as ours, an AUC of 1.7e308 was
recorded as the best score). Everything here checks type, range and binding, and reports a
problem as :class:`WireError` with a message naming the field; the client turns that into an
``INFRA_ERROR`` result, never a crash.

Shapes (``openmle serve``, plus the released routers' fields):

- a job view: ``{"job_id": str, "status": "queued"|"running"|"completed"|"failed"|"cancelled",
  "detail": str, "eval_split": "valid"|"test", "result": {...} | null}``;
- its ``result``: ``run_result`` (a :meth:`RunResult.to_dict`), or the released routers'
  ``result`` word with ``score`` / ``valid_score`` / ``validation_score`` and ``run_log``.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import json
import math
import os
import re
import time
from collections.abc import Mapping
from typing import Any

import attrs
from attrs import field, frozen

from openmle._signature import error_signature
from openmle._types import Job, Outcome, Resources, RunResult, Split, TaskMeta
from openmle.errors import InvalidArgument

__all__ = [
    "MAX_ABS_SCORE",
    "OWNED_ENV",
    "SubmitBody",
    "WireError",
    "check_job_id",
    "check_score",
    "decode_json",
    "decode_submit",
    "encode_job_view",
    "encode_submit",
    "parse_job_view",
    "parse_run_result",
    "retry_after_seconds",
    "submit_body",
    "view_result",
]

MAX_ABS_SCORE = 1e100
"""No metric reaches this; scores beyond it (1.7e308 was seen) would overflow arithmetic."""

_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_MAX_TEXT = 16 * 1024 * 1024
_MAX_INT = 2**63


class WireError(ValueError):
    """A request or an answer breaks the wire format; the message names the field.

    ``field`` and ``detail`` are set apart for requests (the service answers 422 with them).
    """

    def __init__(self, detail: str, *, field: str | None = None) -> None:
        super().__init__(detail if field is None else f"{field}: {detail}")
        self.field = field
        self.detail = detail


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
    theoretical range (``theoretical_min`` / ``theoretical_max``, where set).
    """
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


# -- Requests: POST /api/v1/jobs -----------------------------------------------------------------

OWNED_ENV = frozenset({"DATA_DIR", "SANDBOX_DATA_DIR", "EXECUTION_MODE", "EVAL_SPLIT"})
"""Variables the sandbox sets itself: dropped from a request's environment (both ends)."""

# Read before the program runs (the dynamic loader, the interpreter): never a client's.
_REFUSED_ENV_PREFIXES = ("LD_", "PYTHON")
_MAX_ENV_BYTES = 128 * 1024
_MAX_ENV_KEYS = 256
_SPLITS = {"valid": Split.VALID, "val": Split.VALID, "validation": Split.VALID, "test": Split.TEST}


_ABSENT: Any = object()


def _bad(field: str, detail: str) -> WireError:
    return WireError(detail, field=field)


def _utf8(text: str, field: str) -> bytes:
    """``text`` as UTF-8, or refused (a lone surrogate cannot be written to a file or an env)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad(
            field, f"not valid Unicode text (character {exc.start}: a lone surrogate)"
        ) from None


def _opt_str(body: Mapping[str, Any], key: str, limit: int = 256) -> str | None:
    v = body.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v or len(v) > limit:
        raise _bad(key, f"expected a non-empty string of at most {limit} characters, got {v!r}")
    _utf8(v, key)
    return v


def _environment(env_in: object) -> dict[str, str]:
    """The request's environment variables, refused when unusable or dangerous."""
    if not isinstance(env_in, Mapping):
        raise _bad("environment", "expected an object of string values")
    if len(env_in) > _MAX_ENV_KEYS:
        raise _bad("environment", f"more than {_MAX_ENV_KEYS} variables")
    env: dict[str, str] = {}
    size = 0
    for k, v in env_in.items():
        shown = repr(k)[1:-1][:64] if isinstance(k, str) else repr(k)
        where = f"environment.{shown}"
        if not isinstance(k, str) or not isinstance(v, str):
            raise _bad(where, f"expected a string value, got {v!r:.64}")
        if not k or "=" in k or "\x00" in k:
            raise _bad(where, "a variable name must be non-empty, without '=' or NUL")
        if k.upper().startswith(_REFUSED_ENV_PREFIXES):
            raise _bad(
                where,
                f"{shown!r} is a loader or interpreter variable (LD_*, PYTHON*), which would act "
                "outside the program's isolation; it is never accepted",
            )
        if "\x00" in v:
            raise _bad(where, "the value contains a NUL character")
        size += len(_utf8(k, where)) + len(_utf8(v, where)) + 2
        if k not in OWNED_ENV:
            env[k] = v
    if size > _MAX_ENV_BYTES:
        raise _bad("environment", f"the variables take over {_MAX_ENV_BYTES} bytes")
    return env


def _env_copy(value: Mapping[str, str]) -> dict[str, str]:
    return dict(value)


@frozen(kw_only=True)
class SubmitBody:
    """A job submission as it travels: what :func:`encode_submit` writes and
    :func:`decode_submit` reads back (equal). Build one from a job with :func:`submit_body`.

    ``task`` is a task name (sent as ``task``) or a task directory (``task_is_path``: sent as
    ``data_dir``); the service resolves it under its task roots. ``timeout_s`` None leaves the
    timeout to the service. The service drops the variables the sandbox sets itself
    (:data:`OWNED_ENV`) from ``environment``.
    """

    code: str
    task: str
    task_is_path: bool
    timeout_s: float | None = None
    resource_type: str = "cpu"
    priority: int = 1
    environment: Mapping[str, str] = field(factory=dict, converter=_env_copy)
    split: Split = Split.VALID
    resources: Resources = field(factory=Resources)
    idempotency_key: str | None = None
    name: str | None = None


def submit_body(
    job: Job, *, resource_type: str | None, priority: int, idempotency_key: str
) -> SubmitBody:
    """The submission of ``job`` (a :class:`~openmle.Job`) as a client sends it.

    ``resource_type`` None picks ``"gpu"`` for a job that asks for GPUs; the job's name is its
    task when unnamed; a task holding a path separator or starting with ``.`` is a directory.
    The environment is sent whole (released routers may read any of it).
    """
    task = job.task
    return SubmitBody(
        code=job.code,
        task=task,
        task_is_path=os.sep in task or "/" in task or task.startswith("."),
        timeout_s=job.timeout_s,
        resource_type=resource_type or ("gpu" if job.resources.gpu_count > 0 else "cpu"),
        priority=priority,
        environment=dict(job.env),
        split=job.split,
        resources=job.resources,
        idempotency_key=idempotency_key,
        name=job.name or task,
    )


def encode_submit(body: SubmitBody) -> dict[str, Any]:
    """The JSON object of a submission (the released clients' field names)."""
    out: dict[str, Any] = {
        "name": body.name,
        "code": body.code,
        "resource_type": body.resource_type,
        "priority": body.priority,
        "environment": dict(body.environment),
        "eval_split": body.split.value,
        "resources": body.resources.to_dict(),
        "idempotency_key": body.idempotency_key,
    }
    out["data_dir" if body.task_is_path else "task"] = body.task
    if body.timeout_s is not None:
        out["timeout"] = body.timeout_s
    return out


def _submit_code(data: Mapping[str, Any]) -> str:
    code = data.get("code")
    if not isinstance(code, str) or not code.strip():
        raise _bad("code", "expected the program as a non-empty string")
    _utf8(code, "code")
    if "\x00" in code:
        raise _bad("code", "the program contains a NUL character")
    return code


def _submit_task(data: Mapping[str, Any]) -> tuple[str, bool]:
    """(task reference, whether it is a path)."""
    data_dir = data.get("data_dir")
    task = data.get("task")
    if data_dir is not None:
        if not isinstance(data_dir, str) or not data_dir:
            raise _bad("data_dir", f"expected a path string, got {data_dir!r}")
        _utf8(data_dir, "data_dir")
        return data_dir, True
    if task is not None:
        if not isinstance(task, str) or not task:
            raise _bad("task", f"expected a task name, got {task!r}")
        _utf8(task, "task")
        return task, False
    raise _bad("data_dir", "give the task as data_dir (a task directory) or task (a name)")


def _submit_timeout(data: Mapping[str, Any]) -> float | None:
    """The timeout in seconds, or None when absent (the service's default applies)."""
    # Absent: the service's default; present (null included) it must be a duration.
    timeout = data["timeout"] if "timeout" in data else data.get("timeout_s", _ABSENT)
    if timeout is not _ABSENT and (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (math.isfinite(timeout) and timeout > 0)
    ):
        raise _bad("timeout", f"expected seconds > 0, got {timeout!r}")
    return None if timeout is _ABSENT else float(timeout)


def _submit_resources(res_in: object, pool: str) -> Resources:
    try:
        if res_in is None:
            return Resources(gpus=1 if pool == "gpu" else 0)
        if isinstance(res_in, Mapping):
            return Resources.from_dict(res_in)
    except (InvalidArgument, TypeError) as exc:
        raise _bad("resources", str(exc)) from None
    raise _bad("resources", "expected an object with cpus, gpus, memory_mb")


def decode_submit(data: object, *, header_key: str | None = None) -> SubmitBody:
    """Read a submission, checking the shape of every field (not the service's policy).

    Accepts the released clients' names (``timeout``, ``eval_split``, ``data_dir``) and ours
    (``timeout_s``, ``split``, ``task``); unknown fields are ignored (forward compatibility).

    Args:
        data: the decoded JSON body.
        header_key: the ``Idempotency-Key`` header, used when the body names no key.

    Raises:
        WireError: with ``field`` naming the first field refused and ``detail`` the reason.
    """
    if not isinstance(data, Mapping):
        raise _bad("body", "expected a JSON object")
    code = _submit_code(data)
    ref, is_path = _submit_task(data)
    timeout = _submit_timeout(data)

    rtype = data.get("resource_type", "cpu")
    if not isinstance(rtype, str) or rtype.lower() not in ("cpu", "gpu"):
        raise _bad("resource_type", f"expected 'cpu' or 'gpu', got {rtype!r}")
    pool = rtype.lower()

    priority = data.get("priority", 1)
    if isinstance(priority, bool) or priority not in (1, 2):
        raise _bad("priority", f"expected 1 (runs first) or 2, got {priority!r}")

    env_in = data.get("environment", {}) or {}
    env = _environment(env_in)

    split_raw = data.get("eval_split", data.get("split", env_in.get("EVAL_SPLIT", "valid")))
    if not isinstance(split_raw, str) or split_raw.lower() not in _SPLITS:
        where = "eval_split" if "eval_split" in data else "split"
        raise _bad(where, f"expected 'valid' or 'test', got {split_raw!r}")

    resources = _submit_resources(data.get("resources"), pool)

    key = _opt_str(data, "idempotency_key") or header_key
    if header_key is not None and (not header_key or len(header_key) > 256):
        raise _bad("Idempotency-Key", "expected a header of 1 to 256 characters")
    if key is not None:
        _utf8(key, "idempotency_key")
    return SubmitBody(
        code=code,
        task=ref,
        task_is_path=is_path,
        timeout_s=timeout,
        resource_type=pool,
        priority=int(priority),
        environment=env,
        split=_SPLITS[split_raw.lower()],
        resources=resources,
        idempotency_key=key,
        name=_opt_str(data, "name", limit=1024),
    )


# -- Answers: job views --------------------------------------------------------------------------


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    stamp = dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat(timespec="microseconds")
    return stamp.replace("+00:00", "Z")


def encode_job_view(
    *,
    job_id: str,
    status: str,
    split: str,
    run_result: Mapping[str, Any] | None,
    detail: str = "",
    name: str | None = None,
    priority: int = 1,
    resource_type: str = "cpu",
    task: str | None = None,
    timeout_s: float | None = None,
    idempotency_key: str | None = None,
    attempts: int = 0,
    created_at: float | None = None,
    started_at: float | None = None,
    completed_at: float | None = None,
) -> dict[str, Any]:
    """The wire form of a job (the released clients' field names, plus ``run_result``).

    ``run_result`` is a :meth:`RunResult.to_dict`; its score is also written under the
    released routers' names (``score``, ``valid_score``, ``test_score``, ...). Times are Unix
    seconds, written as ISO 8601 UTC.
    """
    result: dict[str, Any] | None = None
    if run_result is not None:
        r = run_result
        rsplit = r.get("split", split)
        score = r.get("score")
        result = {
            "result": r["outcome"],
            "outcome": r["outcome"],
            "score": score,
            "valid_score": score if rsplit == "valid" else None,
            "validation_score": score if rsplit == "valid" else None,
            "test_score": score if rsplit == "test" else None,
            "scores_by_split": {rsplit: score},
            "eval_split": rsplit,
            "run_log": r.get("logs", ""),
            "detail": r.get("detail", ""),
            "run_result": dict(r),
        }
    return {
        "job_id": job_id,
        "name": name,
        "status": status,
        "priority": priority,
        "resource_type": resource_type,
        "task": task,
        "timeout": timeout_s,
        "eval_split": split,
        "idempotency_key": idempotency_key,
        "attempts": attempts,
        "created_at": _iso(created_at),
        "started_at": _iso(started_at),
        "completed_at": _iso(completed_at),
        "detail": detail,
        "result": result,
    }


def decode_json(raw: bytes) -> Any:
    """The JSON value of an answer's body; :class:`WireError` when it is not JSON."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        shown = raw[:200].decode("utf-8", "replace")
        raise WireError(f"the answer is not JSON ({exc}): {shown!r}") from None


_SUCCESS_WORDS = frozenset({"ok", "passed", "success", "successful", "valid", "completed"})
_OUTCOME_WORDS = {
    "timeout": Outcome.TIMEOUT,
    "submission_missing": Outcome.MISSING_SUBMISSION,
    "scoring_failed": Outcome.INVALID_SUBMISSION,
    "invalid": Outcome.INVALID_SUBMISSION,
    "buggy": Outcome.RUNTIME_ERROR,
    "error": Outcome.RUNTIME_ERROR,
    "failed": Outcome.RUNTIME_ERROR,
    "failure": Outcome.RUNTIME_ERROR,
}


def view_result(data: Mapping[str, Any], *, split: Split, meta: TaskMeta | None) -> RunResult:
    """The result of a finished job's view (checked by :func:`parse_job_view`).

    A ``cancelled`` job, and a ``failed`` one, are ``INFRA_ERROR`` results; a ``run_result`` is
    read by :func:`parse_run_result`; a released router's ``result`` word and scores are mapped
    onto outcomes.

    Raises:
        WireError: a field of the wrong type or out of range, or a result for another split.
    """
    status = data.get("status")
    vsplit = data.get("eval_split")
    if vsplit is not None and vsplit != split.value:
        raise WireError(f"eval_split is {vsplit!r}, but split {split.value!r} was run")
    res = data.get("result") or {}
    detail = str(data.get("detail") or "")
    if status == "cancelled":
        return RunResult.infra_error(
            f"the job was cancelled on the service{': ' + detail if detail else ''}",
            split=split,
        )
    run_result = res.get("run_result")
    if run_result is not None:
        result = parse_run_result(run_result, split=split, meta=meta)
        if status == "failed" and not result.outcome.is_infra:
            return RunResult.infra_error(result.detail or "the job failed", split=split)
        return result
    if status == "failed":
        return RunResult.infra_error(detail or "the job service failed the job", split=split)
    return _foreign_result(res, split, meta)


def _score_field(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        v = float(value)
    except ValueError:
        return None
    except OverflowError:  # an integer beyond any float: a broken service, not a program
        raise WireError("a score is an integer too large for a float") from None
    return v if math.isfinite(v) else None


def _foreign_result(res: Mapping[str, Any], split: Split, meta: TaskMeta | None) -> RunResult:
    """Map a released-router result (``result``, ``score``, ``valid_score``, ``run_log``)."""
    word = res.get("result", "")
    if not isinstance(word, str):
        raise WireError(f"result.result is a {type(word).__name__}, not a string")
    text = word.strip().lower()
    logs = res.get("run_log") or ""
    if not isinstance(logs, str):
        raise WireError(f"result.run_log is a {type(logs).__name__}, not a string")
    rsplit = res.get("eval_split")
    if rsplit is not None and rsplit != split.value:
        raise WireError(f"result.eval_split is {rsplit!r}, but split {split.value!r} was run")
    key = next((k for k in ("valid_score", "validation_score") if res.get(k) is not None), "score")
    if split.value == "test" and res.get("test_score") is not None:
        key = "test_score"
    score = _score_field(res.get(key))
    check_score(score, f"result.{key}", meta)
    if text in _SUCCESS_WORDS and score is not None:
        return RunResult(outcome=Outcome.SUCCESS, score=score, split=split, logs=logs)
    outcome = _OUTCOME_WORDS.get(text)
    if outcome is None and text in _SUCCESS_WORDS:
        outcome = Outcome.INVALID_SUBMISSION  # ran, but no finite score
    if outcome is None:
        return RunResult.infra_error(
            f"the job service returned an unrecognised result {text[:100]!r}",
            split=split,
            logs=logs,
        )
    signature = "timeout" if outcome is Outcome.TIMEOUT else error_signature(logs, fallback=text)
    return attrs.evolve(
        RunResult(outcome=outcome, split=split, logs=logs, detail=f"service result {text!r}"),
        error_signature=signature,
    )


# -- Any HTTP answer -----------------------------------------------------------------------------


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds a server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date. Returns None when neither header
    is present or parseable (or the number is not finite); never negative. Header names match
    in any case.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(0.0, ms / 1000.0)
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        s = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, OverflowError):
            return None
        s = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, s) if math.isfinite(s) else None
