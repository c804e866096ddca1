"""Validation of ``POST /api/v1/jobs`` bodies, and task-root confinement of ``data_dir``.

Field names are the released clients' (``timeout``, ``resource_type``, ``priority``,
``environment``, ``data_dir``, ``eval_split``, ``idempotency_key``), so their requests work
unchanged; ``task``, ``split``, ``timeout_s`` and ``resources`` are accepted too. Unknown
fields are ignored (forward compatibility).

Shape errors are :class:`PayloadError` with status 422 naming the field; paths that escape the
registered task roots (absolute paths outside them, ``..`` components, symlinks pointing
outside) are refused with 400 and the reason. A ``task`` name is looked up under the task
roots, then among the bundled tasks, and nowhere else (never relative to the server's working
directory); a name found in neither gets the same answer whether or not something of that name
exists elsewhere, so answers reveal nothing outside the roots.

Everything a program would only trip over later is refused here, with 422 naming the field:
environment keys that are empty or hold NUL or ``=``, loader and interpreter variables
(``LD_*``, ``PYTHON*``: they change what runs before the program, outside its isolation),
NUL bytes in values, text that is not encodable as UTF-8 (lone surrogates), and resources
above the service's maxima.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import frozen

from openmle._types import Job, Resources, Split
from openmle.errors import InvalidArgument, OpenMLEError

__all__ = ["Limits", "PayloadError", "SubmitRequest", "confine", "parse_submit"]

_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
# Variables the sandbox sets itself (paths as the client saw them would be wrong here).
_OWNED_ENV = frozenset({"DATA_DIR", "SANDBOX_DATA_DIR", "EXECUTION_MODE", "EVAL_SPLIT"})
_SPLITS = {"valid": Split.VALID, "val": Split.VALID, "validation": Split.VALID, "test": Split.TEST}
# Variables read before the program runs (the dynamic loader, the interpreter): never a client's.
_REFUSED_ENV_PREFIXES = ("LD_", "PYTHON")
_MAX_ENV_BYTES = 128 * 1024
_MAX_ENV_KEYS = 256


@frozen(kw_only=True)
class Limits:
    """The service's caps on one submission (see :class:`~openmle.service.ServiceConfig`)."""

    max_cpus: float = 64.0
    max_memory_mb: int = 262_144
    max_gpus: int = 8
    top_priority: int = 1


class PayloadError(Exception):
    """A refused request: HTTP ``status``, the offending ``field`` and a reason."""

    def __init__(self, status: int, field: str, detail: str, error: str = "invalid_payload"):
        super().__init__(f"{field}: {detail}")
        self.status = status
        self.field = field
        self.detail = detail
        self.error = error

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return {"error": self.error, "field": self.field, "detail": self.detail}


@frozen(kw_only=True)
class SubmitRequest:
    """A validated submission."""

    job: Job
    pool: str
    priority: int
    task_ref: str
    idempotency_key: str | None

    def spec(self) -> dict[str, Any]:
        """What the store keeps to rebuild the job after a restart."""
        return {"job": self.job.to_dict(), "task_ref": self.task_ref}

    def request_hash(self) -> str:
        """A digest of everything that defines the job (to catch reused idempotency keys)."""
        blob = json.dumps([self.spec(), self.pool, self.priority], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()


def _bad(field: str, detail: str) -> PayloadError:
    return PayloadError(422, field, detail)


def _opt_str(body: Mapping[str, Any], key: str, limit: int = 256) -> str | None:
    v = body.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v or len(v) > limit:
        raise _bad(key, f"expected a non-empty string of at most {limit} characters, got {v!r}")
    return v


def confine(ref: str, roots: Sequence[Path], *, field: str = "data_dir") -> Path:
    """Resolve a task directory reference inside ``roots`` or refuse it (HTTP 400).

    Relative references are looked up under each root in turn; absolute ones must lie inside a
    root. Any ``..`` component is refused outright, and the fully resolved path (symlinks
    followed) must still lie inside the root it was found under.
    """
    if "\x00" in ref:
        raise PayloadError(400, field, "the path contains a NUL byte", "bad_path")
    parts = PurePosixPath(ref).parts
    if ".." in parts:
        raise PayloadError(
            400, field, f"{ref!r} contains '..'; name a path inside a task root", "bad_path"
        )
    if not roots:
        raise PayloadError(
            400, field, "this service has no task roots; start it with --task-root DIR", "bad_path"
        )
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    candidates: list[tuple[Path, Path]] = []
    if os.path.isabs(ref):
        p = Path(ref)
        inside = [
            rr
            for r, rr in zip(roots, real_roots, strict=True)
            if p.is_relative_to(r) or p.is_relative_to(rr)
        ]
        if not inside:
            raise PayloadError(
                400, field, f"{ref!r} is outside the registered task roots", "bad_path"
            )
        candidates = [(p, rr) for rr in inside]
    else:
        candidates = [(rr / ref, rr) for rr in real_roots]
    escaped = False
    for path, root in candidates:
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            escaped = True
            continue
        if real.is_dir():
            return real
    if escaped:
        raise PayloadError(
            400, field, f"{ref!r} escapes the task roots through a symbolic link", "bad_path"
        )
    raise PayloadError(400, field, f"no task directory {ref!r} under the task roots", "bad_path")


def parse_submit(
    body: object,
    *,
    roots: Sequence[Path],
    default_timeout_s: float,
    max_timeout_s: float,
    max_code_bytes: int,
    gpu_slots: int,
    header_key: str | None = None,
    limits: Limits | None = None,
) -> SubmitRequest:
    """Validate a submission body; raises :class:`PayloadError` (422 shape, 400 path)."""
    limits = Limits() if limits is None else limits
    if not isinstance(body, Mapping):
        raise _bad("body", "expected a JSON object")
    code = body.get("code")
    if not isinstance(code, str) or not code.strip():
        raise _bad("code", "expected the program as a non-empty string")
    if len(_utf8(code, "code")) > max_code_bytes:
        raise _bad("code", f"the program is larger than the limit of {max_code_bytes} bytes")
    if "\x00" in code:
        raise _bad("code", "the program contains a NUL character")

    data_dir = body.get("data_dir")
    task = body.get("task")
    if data_dir is not None:
        if not isinstance(data_dir, str) or not data_dir:
            raise _bad("data_dir", f"expected a path string, got {data_dir!r}")
        _utf8(data_dir, "data_dir")
        task_ref = data_dir
        resolved = str(confine(data_dir, roots))
    elif task is not None:
        if not isinstance(task, str) or not task:
            raise _bad("task", f"expected a task name, got {task!r}")
        task_ref = task
        _utf8(task, "task")
        if _TASK_NAME.match(task) is None:
            # Paths given as ``task`` get the same confinement as data_dir.
            resolved = str(confine(task, roots, field="task"))
        else:
            # lexists: an entry under a root (even a dangling link) is confined like a path, so
            # the answer never depends on what exists outside the roots.
            found = [r / task for r in roots if os.path.lexists(r / task)]
            if found:
                resolved = str(confine(task, roots, field="task"))
            elif task in _bundled_names():
                resolved = task
            else:
                # Never looked up anywhere else (the server's working directory): the same
                # answer whether or not a directory of that name exists outside the roots.
                raise PayloadError(
                    400,
                    "task",
                    f"no task directory {task!r} under the task roots and no bundled task of "
                    "that name",
                    "bad_path",
                )
    else:
        raise _bad("data_dir", "give the task as data_dir (a task directory) or task (a name)")

    timeout = body.get("timeout", body.get("timeout_s", default_timeout_s))
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not (math.isfinite(timeout) and timeout > 0)
    ):
        raise _bad("timeout", f"expected seconds > 0, got {timeout!r}")
    if timeout > max_timeout_s:
        raise _bad(
            "timeout",
            f"{timeout} s is above this service's limit of {max_timeout_s} s "
            "(not clamped: shorten the job or raise --max-job-timeout)",
        )

    rtype = body.get("resource_type", "cpu")
    if not isinstance(rtype, str) or rtype.lower() not in ("cpu", "gpu"):
        raise _bad("resource_type", f"expected 'cpu' or 'gpu', got {rtype!r}")
    pool = rtype.lower()
    if pool == "gpu" and gpu_slots < 1:
        raise _bad("resource_type", "this service has no GPU slots; send 'cpu' or add --gpu-slots")

    priority = body.get("priority", 1)
    if isinstance(priority, bool) or priority not in (1, 2):
        raise _bad("priority", f"expected 1 (runs first) or 2, got {priority!r}")
    if priority < limits.top_priority:
        raise _bad(
            "priority",
            f"this API key may use priority {limits.top_priority} or lower, not {priority} "
            "(ask the operator to raise it in the key file)",
        )

    env = _environment(body.get("environment", {}) or {})
    env_in = body.get("environment", {}) or {}

    split_raw = body.get("eval_split", body.get("split", env_in.get("EVAL_SPLIT", "valid")))
    if not isinstance(split_raw, str) or split_raw.lower() not in _SPLITS:
        field = "eval_split" if "eval_split" in body else "split"
        raise _bad(field, f"expected 'valid' or 'test', got {split_raw!r}")
    split = _SPLITS[split_raw.lower()]

    res_in = body.get("resources")
    try:
        if res_in is None:
            resources = Resources(gpus=1 if pool == "gpu" else 0)
        elif isinstance(res_in, Mapping):
            resources = Resources.from_dict(res_in)
        else:
            raise _bad("resources", "expected an object with cpus, gpus, memory_mb")
    except (InvalidArgument, TypeError) as exc:
        raise _bad("resources", str(exc)) from None
    _check_resources(resources, limits)

    key = _opt_str(body, "idempotency_key") or header_key
    if header_key is not None and (not header_key or len(header_key) > 256):
        raise _bad("Idempotency-Key", "expected a header of 1 to 256 characters")
    name = _opt_str(body, "name", limit=1024)
    for label, text in (("idempotency_key", key), ("name", name)):
        if text is not None:
            _utf8(text, label)
    try:
        job = Job(
            code=code,
            task=resolved,
            split=split,
            timeout_s=float(timeout),
            resources=resources,
            env=env,
            name=name,
        )
    except OpenMLEError as exc:  # Job's own checks: refused as bad input, never a 500
        raise _bad("job", str(exc)) from None
    return SubmitRequest(
        job=job, pool=pool, priority=int(priority), task_ref=task_ref, idempotency_key=key
    )


def _bundled_names() -> frozenset[str]:
    # The public name list, not gym's internals: the service depends on openmle.gym's API only.
    from openmle.gym import bundled_names

    return frozenset(bundled_names())


def _utf8(text: str, field: str) -> bytes:
    """``text`` as UTF-8, or 422 (a lone surrogate cannot be written to a file or an env)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _bad(
            field, f"not valid Unicode text (character {exc.start}: a lone surrogate)"
        ) from None


def _environment(env_in: object) -> dict[str, str]:
    """The client's environment variables, refused with 422 when unusable or dangerous."""
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
        if k not in _OWNED_ENV:
            env[k] = v
    if size > _MAX_ENV_BYTES:
        raise _bad("environment", f"the variables take over {_MAX_ENV_BYTES} bytes")
    return env


def _check_resources(res: Resources, limits: Limits) -> None:
    """422 naming the first resource above the service's maxima."""
    over = [
        ("cpus", res.cpus, limits.max_cpus),
        ("memory_mb", res.memory_mb, limits.max_memory_mb),
        ("gpus", res.gpu_count, limits.max_gpus),
    ]
    for name, value, cap in over:
        if value is not None and value > cap:
            raise _bad(
                f"resources.{name}",
                f"{value} is above this service's maximum of {cap} "
                f"(ask for less, or raise --max-{name.replace('_', '-')})",
            )
