"""Turning a task reference (bundled name or path) into a :class:`Task`.

:func:`resolve_task` is the default :data:`openmle._task_protocol.TaskResolver` every sandbox
uses. Loaded tasks are cached per process by resolved path and by the modification times of
``task.toml`` and ``data/public`` (so an edited package is reloaded), because a sandbox resolves
the same task for every job and the validation view's key hashes ``train.csv``.
"""

from __future__ import annotations

import difflib
import threading
from pathlib import Path

from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.gym._bundled import BUNDLED, bundled_root
from openmle.gym._package import Task, load_task

__all__ = ["bundled", "bundled_names", "resolve_task"]

_LOCK = threading.Lock()
_CACHE: dict[tuple[str, int, int, int, int], Task] = {}
_CACHE_MAX = 256


def bundled_names() -> tuple[str, ...]:
    """Names of the bundled tasks, sorted."""
    return tuple(sorted(BUNDLED))


def bundled(name: str) -> Task:
    """A bundled task, generated into the cache on first use (``$OPENMLE_CACHE`` or
    ``~/.cache/openmle``); deterministic, no downloads.

    Raises:
        InvalidArgument: ``name`` is not one of :func:`bundled_names`.
    """
    return _cached(bundled_root(name))


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _cached(root: Path) -> Task:
    root = root.resolve()
    public = root / "data" / "public"
    key = (
        str(root),
        _mtime(root / "task.toml"),
        _mtime(public),
        _mtime(public / "train.csv"),
        _mtime(public / "sample_submission.csv"),
    )
    with _LOCK:
        task = _CACHE.get(key)
    if task is None:
        task = load_task(root)
        with _LOCK:
            if len(_CACHE) >= _CACHE_MAX:
                _CACHE.clear()
            task = _CACHE.setdefault(key, task)
    return task


def resolve_task(ref: str) -> Task:
    """Resolve a ``Job.task`` reference: a bundled task name or a path to a task package.

    Raises:
        InvalidArgumentType: ``ref`` is not a string.
        InvalidArgument: ``ref`` is neither a bundled name nor an existing directory (the
            message lists the bundled names).
        TaskPackageError: the package's ``task.toml`` is malformed.
    """
    if not isinstance(ref, str):
        raise InvalidArgumentType(f"Expected a str but got ref={ref!r} (type={type(ref).__name__})")
    if ref in BUNDLED:
        return bundled(ref)
    path = Path(ref).expanduser()
    if path.is_dir():
        return _cached(path)
    close = difflib.get_close_matches(ref, bundled_names(), n=1)
    raise InvalidArgument(
        f"Unknown task {ref!r}: {f'did you mean {close[0]!r}? ' if close else ''}not a bundled "
        f"task {list(bundled_names())} and not a directory; pass a bundled name or the path of "
        "a task package"
    )
