"""Validation of ``POST /api/v1/jobs`` bodies, and task-root confinement of ``data_dir``.

The shape of a body is the wire format's (:func:`openmle._wire.decode_submit`, which the client's
encoder mirrors); this module adds the service's policy on top. Field names are the released
clients' (``timeout``, ``resource_type``, ``priority``, ``environment``, ``data_dir``,
``eval_split``, ``idempotency_key``), so their requests work unchanged; ``task``, ``split``,
``timeout_s`` and ``resources`` are accepted too. Unknown fields are ignored (forward
compatibility).

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
import os
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from attrs import frozen

from openmle._types import Job, Resources
from openmle._wire import WireError, decode_submit
from openmle.errors import OpenMLEError

__all__ = ["Limits", "PayloadError", "SubmitRequest", "confine", "parse_submit"]

_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


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


_PATH_MAX = 4096
_NAME_MAX = 255


def confine(ref: str, roots: Sequence[Path], *, field: str = "data_dir") -> Path:
    """Resolve a task directory reference inside ``roots`` or refuse it (HTTP 400).

    Relative references are looked up under each root in turn; absolute ones must lie inside a
    root. Any ``..`` component is refused outright, and the fully resolved path (symlinks
    followed) must still lie inside the root it was found under.
    """
    if "\x00" in ref:
        raise PayloadError(400, field, "the path contains a NUL byte", "bad_path")
    parts = PurePosixPath(ref).parts
    if len(ref) > _PATH_MAX or any(len(p.encode("utf-8", "replace")) > _NAME_MAX for p in parts):
        raise PayloadError(
            400,
            field,
            f"the path is longer than {_PATH_MAX} characters or has a name longer than "
            f"{_NAME_MAX} bytes; name a task directory under a task root",
            "bad_path",
        )
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
        if os.path.isdir(real):  # False for any OSError (a link loop, a name too long)
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
    """Validate a submission body; raises :class:`PayloadError` (422 shape, 400 path).

    The shape of every field is checked by the wire format (:func:`openmle._wire.decode_submit`,
    shared with the client); this adds the service's policy: the task roots, the program size,
    the timeout and resource maxima, the GPU pool and the key's top priority.
    """
    limits = Limits() if limits is None else limits
    try:
        req = decode_submit(body, header_key=header_key)
    except WireError as exc:
        raise _bad(exc.field or "body", exc.detail) from None
    if len(req.code.encode("utf-8")) > max_code_bytes:
        raise _bad("code", f"the program is larger than the limit of {max_code_bytes} bytes")
    resolved = _resolve_task(req.task, is_path=req.task_is_path, roots=roots)

    timeout = default_timeout_s if req.timeout_s is None else req.timeout_s
    if timeout > max_timeout_s:
        raise _bad(
            "timeout",
            f"{timeout} s is above this service's limit of {max_timeout_s} s "
            "(not clamped: shorten the job or raise --max-job-timeout)",
        )
    if req.resource_type == "gpu" and gpu_slots < 1:
        raise _bad("resource_type", "this service has no GPU slots; send 'cpu' or add --gpu-slots")
    if req.priority < limits.top_priority:
        raise _bad(
            "priority",
            f"this API key may use priority {limits.top_priority} or lower, not {req.priority} "
            "(ask the operator to raise it in the key file)",
        )
    _check_resources(req.resources, limits)
    try:
        job = Job(
            code=req.code,
            task=resolved,
            split=req.split,
            timeout_s=float(timeout),
            resources=req.resources,
            env=req.environment,
            name=req.name,
        )
    except OpenMLEError as exc:  # Job's own checks: refused as bad input, never a 500
        raise _bad("job", str(exc)) from None
    return SubmitRequest(
        job=job,
        pool=req.resource_type,
        priority=req.priority,
        task_ref=req.task,
        idempotency_key=req.idempotency_key,
    )


def _resolve_task(ref: str, *, is_path: bool, roots: Sequence[Path]) -> str:
    """The task a submission names: confined under the roots, or a bundled task's name."""
    if is_path:
        return str(confine(ref, roots))
    if _TASK_NAME.match(ref) is None:
        # Paths given as ``task`` get the same confinement as data_dir.
        return str(confine(ref, roots, field="task"))
    # lexists: an entry under a root (even a dangling link) is confined like a path, so the
    # answer never depends on what exists outside the roots.
    if any(os.path.lexists(r / ref) for r in roots):
        return str(confine(ref, roots, field="task"))
    if ref in _bundled_names():
        return ref
    # Never looked up anywhere else (the server's working directory): the same answer whether
    # or not a directory of that name exists outside the roots.
    raise PayloadError(
        400,
        "task",
        f"no task directory {ref!r} under the task roots and no bundled task of that name",
        "bad_path",
    )


def _bundled_names() -> frozenset[str]:
    # The public name list, not gym's internals: the service depends on openmle.gym's API only.
    from openmle.gym import bundled_names

    return frozenset(bundled_names())


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
