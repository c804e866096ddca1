"""NatureBench's case rules: the harness's task lists, each case's GPUs and its domain.

The harness (``FrontisAI/NatureBench``, MIT) lists its cases in ``task-set/<suite>.txt``
(``all``, ``cpu``, ``gpu_low``, ``gpu_high``; also under ``task-set/<track>/``); a ``cpu`` case
gets no GPU, a ``gpu_low``/``gpu_high`` case one (the reference setup); a case's domain is its
``metadata.json``'s ``domain_metadata.primary_domain``. The one home of these rules: the
registry (:class:`openmle.bench.NatureBench`) and the report read them from here.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from openmle._types import Resources
from openmle.errors import InvalidArgument, TaskPackageError

__all__ = [
    "REFERENCE_TIMEOUT_S",
    "SUITES",
    "case_domain",
    "case_resources",
    "read_json_object",
    "read_suite",
]

SUITES = ("all", "cpu", "gpu_low", "gpu_high")
"""The harness's ``task-set/<suite>.txt`` lists (also under ``task-set/<track>/``)."""
REFERENCE_TIMEOUT_S = 14_400.0
"""The specification's reference per-task solve budget (4 hours)."""
_MAX_LIST_BYTES = 1 << 20
_MAX_METADATA_BYTES = 4 << 20


def read_suite(task_set: Path, suite: str = "all", *, track: str | None = None) -> tuple[str, ...]:
    """The case ids of ``task-set/[<track>/]<suite>.txt`` (one a line; blank lines and ``#``
    comments skipped), in file order.

    Raises:
        InvalidArgument: ``suite`` is not one of :data:`SUITES`, or ``track`` is not a plain
            folder name.
        TaskPackageError: the list is missing, too large, or names an id twice.
    """
    if suite not in SUITES:
        raise InvalidArgument(f"Expected suite in {SUITES} but got {suite!r}")
    folder = task_set
    if track is not None:
        if not track or "/" in track or "\\" in track or track in (".", ".."):
            raise InvalidArgument(f"Expected track to be a folder name but got {track!r}")
        folder = task_set / track
    path = folder / f"{suite}.txt"
    try:
        with path.open("rb") as fh:
            raw = fh.read(_MAX_LIST_BYTES + 1)
    except OSError as exc:
        raise TaskPackageError(
            f"No NatureBench task list at {path} ({exc.strerror}); give the harness's task-set "
            "folder"
        ) from None
    if len(raw) > _MAX_LIST_BYTES:
        raise TaskPackageError(f"{path} is larger than {_MAX_LIST_BYTES} bytes")
    ids: list[str] = []
    for line in raw.decode("utf-8", "replace").splitlines():
        case_id = line.split("#", 1)[0].strip()
        if not case_id:
            continue
        if case_id in ids:
            raise TaskPackageError(f"{path} names case {case_id!r} twice")
        ids.append(case_id)
    return tuple(ids)


def case_resources(case_id: str, task_set: Path, *, track: str | None = None) -> Resources:
    """What one run of ``case_id`` gets: one GPU for a ``gpu_low``/``gpu_high`` case (the
    reference setup gives each GPU task one GPU; ``gpu_high`` ones a larger card), none for a
    ``cpu`` case.

    Raises:
        TaskPackageError: the case is in none of the resource lists.
    """
    for suite, gpus in (("cpu", 0), ("gpu_low", 1), ("gpu_high", 1)):
        with contextlib.suppress(TaskPackageError):
            if case_id in read_suite(task_set, suite, track=track):
                return Resources(gpus=gpus)
    raise TaskPackageError(
        f"Case {case_id!r} is in none of cpu.txt, gpu_low.txt, gpu_high.txt under {task_set}"
    )


def read_json_object(path: Path) -> dict[str, Any]:
    """A case's JSON object file (``metadata.json``), read bounded (4 MiB).

    Raises:
        TaskPackageError: missing, too large, not JSON or not an object.
    """
    try:
        with path.open("rb") as fh:
            data = fh.read(_MAX_METADATA_BYTES + 1)
        if len(data) > _MAX_METADATA_BYTES:
            raise TaskPackageError(f"{path} is larger than {_MAX_METADATA_BYTES} bytes")
        loaded = json.loads(data)
    except (OSError, ValueError) as exc:
        raise TaskPackageError(f"{path} cannot be read as JSON ({type(exc).__name__})") from None
    if not isinstance(loaded, dict):
        raise TaskPackageError(f"{path} is not a JSON object")
    return loaded


def case_domain(case_dir: Path) -> str:
    """``metadata.json``'s ``domain_metadata.primary_domain`` (``"Other"`` when absent).

    Raises:
        TaskPackageError: ``metadata.json`` is missing, too large or not a JSON object.
    """
    domain = read_json_object(case_dir / "metadata.json").get("domain_metadata")
    name = domain.get("primary_domain") if isinstance(domain, dict) else None
    return name.strip()[:100] if isinstance(name, str) and name.strip() else "Other"
