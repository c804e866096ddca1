"""Validation of ``POST /api/v1/jobs`` bodies, and task-root confinement of ``data_dir``.

Field names are the released clients' (``timeout``, ``resource_type``, ``priority``,
``environment``, ``data_dir``, ``eval_split``, ``idempotency_key``), so their requests work
unchanged; ``task``, ``split``, ``timeout_s`` and ``resources`` are accepted too. Unknown
fields are ignored (forward compatibility).

Shape errors are :class:`PayloadError` with status 422 naming the field; paths that escape the
registered task roots (absolute paths outside them, ``..`` components, symlinks pointing
outside) are refused with 400 and the reason.
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
from openmle.errors import InvalidArgument

__all__ = ["PayloadError", "SubmitRequest", "confine", "parse_submit"]

_TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
# Variables the sandbox sets itself (paths as the client saw them would be wrong here).
_OWNED_ENV = frozenset({"DATA_DIR", "SANDBOX_DATA_DIR", "EXECUTION_MODE", "EVAL_SPLIT"})
_SPLITS = {"valid": Split.VALID, "val": Split.VALID, "validation": Split.VALID, "test": Split.TEST}


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
) -> SubmitRequest:
    """Validate a submission body; raises :class:`PayloadError` (422 shape, 400 path)."""
    if not isinstance(body, Mapping):
        raise _bad("body", "expected a JSON object")
    code = body.get("code")
    if not isinstance(code, str) or not code.strip():
        raise _bad("code", "expected the program as a non-empty string")
    if len(code.encode("utf-8", errors="replace")) > max_code_bytes:
        raise _bad("code", f"the program is larger than the limit of {max_code_bytes} bytes")

    data_dir = body.get("data_dir")
    task = body.get("task")
    if data_dir is not None:
        if not isinstance(data_dir, str) or not data_dir:
            raise _bad("data_dir", f"expected a path string, got {data_dir!r}")
        task_ref = data_dir
        resolved = str(confine(data_dir, roots))
    elif task is not None:
        if not isinstance(task, str) or not task:
            raise _bad("task", f"expected a task name, got {task!r}")
        task_ref = task
        if _TASK_NAME.match(task) is None:
            # Paths given as ``task`` get the same confinement as data_dir.
            resolved = str(confine(task, roots, field="task"))
        else:
            found = [r / task for r in roots if (r / task).is_dir()]
            resolved = str(confine(task, roots, field="task")) if found else task
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

    env_in = body.get("environment", {}) or {}
    if not isinstance(env_in, Mapping):
        raise _bad("environment", "expected an object of string values")
    env: dict[str, str] = {}
    for k, v in env_in.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise _bad(f"environment.{k}", f"expected a string value, got {v!r}")
        if k not in _OWNED_ENV:
            env[k] = v

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

    key = _opt_str(body, "idempotency_key") or header_key
    if header_key is not None and (not header_key or len(header_key) > 256):
        raise _bad("Idempotency-Key", "expected a header of 1 to 256 characters")
    name = _opt_str(body, "name", limit=1024)
    job = Job(
        code=code,
        task=resolved,
        split=split,
        timeout_s=float(timeout),
        resources=resources,
        env=env,
        name=name,
    )
    return SubmitRequest(
        job=job, pool=pool, priority=int(priority), task_ref=task_ref, idempotency_key=key
    )
