"""Walking and removing a program's workspace: bounded, iterative, never defeated by the program.

A workspace is written by untrusted code, so everything here assumes the worst: directories
nested thousands deep (deeper than ``PATH_MAX`` and than Python's recursion limit), names that
are not UTF-8, directories without read or search permission, millions of files, symlinks
pointing anywhere. Used by :class:`~openmle.backends.LocalSandbox`,
:class:`~openmle.backends.DockerSandbox` and (through the local sandbox on its workers)
:class:`~openmle.backends.RaySandbox`.

- :func:`list_artifacts` lists what a program left, iteratively, never following a symlink,
  and stops at limits on depth, entries visited, paths listed and their total size, so a
  :class:`~openmle.RunResult` stays small (``ArtifactLimits``).
- :func:`remove_tree` deletes a tree through directory file descriptors (``openat`` /
  ``unlinkat`` relative to the parent, so no path ever grows past ``PATH_MAX``), holding at
  most two descriptors whatever the depth, making unreadable directories readable as it goes;
  ``rm -rf`` is the fallback. It never raises.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
from collections.abc import Collection
from pathlib import Path

from attrs import frozen

from openmle._types import Job, Outcome, RunResult

__all__ = ["ArtifactLimits", "encode_program", "list_artifacts", "over_quota", "remove_tree"]


@frozen(kw_only=True)
class ArtifactLimits:
    """Bounds of :func:`list_artifacts` (the artifact list of every ``RunResult``).

    Args:
        max_count: paths listed at most.
        max_path_bytes: total UTF-8 bytes of the listed paths at most.
        max_depth: directories deeper than this are not entered.
        max_visited: directory entries examined at most (bounds the time spent).
    """

    max_count: int = 1000
    max_path_bytes: int = 64 * 1024
    max_depth: int = 64
    max_visited: int = 100_000


DEFAULT_LIMITS = ArtifactLimits()


def encode_program(job: Job, *, queue_s: float = 0.0) -> bytes | RunResult:
    """The program's source as UTF-8 bytes, or the outcome of a program that cannot be written.

    Model output can hold text that has no UTF-8 form (a lone surrogate): such a program is
    never run, and that is the program's outcome (``RUNTIME_ERROR`` with the reason), never an
    exception out of a sandbox's ``run``. Shared by every sandbox that writes ``main.py``.
    """
    try:
        return job.code.encode("utf-8")
    except UnicodeEncodeError as exc:  # e.g. a lone surrogate in model output
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR,
            split=job.split,
            detail=(
                f"the program is not valid UTF-8 text ({exc.reason} at character "
                f"{exc.start}); it was not run"
            ),
            error_signature="UnicodeEncodeError: program source is not UTF-8",
            queue_s=queue_s,
        )


def _printable(name: str) -> str:
    r"""A name as valid UTF-8 text (undecodable bytes become ``\xNN``)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def list_artifacts(
    root: Path | str,
    *,
    limits: ArtifactLimits = DEFAULT_LIMITS,
    exclude: Collection[str] = (),
) -> tuple[str, ...]:
    """Sorted relative paths of the files (and symlinks) under ``root``, within ``limits``.

    Iterative and breadth-first, so a bounded listing prefers shallow paths; symlinks are
    listed, never followed; unreadable directories are skipped; ``exclude`` names top-level
    entries to leave out. Never raises for anything found in the tree (a missing ``root``
    gives an empty tuple).
    """
    out: list[str] = []
    total = visited = 0
    queue: list[tuple[str, str, int]] = [(os.fspath(root), "", 0)]
    head = 0
    while head < len(queue):
        path, rel, depth = queue[head]
        head += 1
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (OSError, ValueError):
            continue
        for entry in entries:
            visited += 1
            if visited > limits.max_visited:
                return tuple(sorted(out))
            if not rel and entry.name in exclude:
                continue
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                if depth + 1 < limits.max_depth and len(entry.path) < 3500:
                    queue.append((entry.path, name, depth + 1))
                continue
            shown = _printable(name)
            size = len(shown.encode())
            if len(out) >= limits.max_count or total + size > limits.max_path_bytes:
                return tuple(sorted(out))
            out.append(shown)
            total += size
    return tuple(sorted(out))


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, parent: int) -> int:
    """Open directory ``name`` beneath ``parent``, granting ourselves access if needed."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        # Only a directory reaches here (O_NOFOLLOW|O_DIRECTORY refuse anything else).
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            raise
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _first_subdir(fd: int) -> str | None:
    """Unlink every non-directory in ``fd``; return one remaining subdirectory, if any."""
    with os.scandir(fd) as it:
        for entry in it:
            try:
                if entry.is_dir(follow_symlinks=False):
                    return entry.name
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except PermissionError:
                    os.fchmod(fd, stat.S_IRWXU)  # make the directory writable, then retry
                    os.unlink(entry.name, dir_fd=fd)
            except FileNotFoundError:
                continue
    return None


def _remove_iteratively(path: str) -> None:
    """Depth-first removal via ``openat``; two descriptors at most, any depth."""
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(path)
        return
    parent_path, base = os.path.split(os.path.abspath(path))
    top_parent = os.open(parent_path or "/", _DIR_FLAGS)
    try:
        names: list[str] = [base]  # the chain of names from top_parent down to ``fd``
        fd = _open_dir(base, top_parent)
        try:
            steps = 0
            while True:
                steps += 1
                if steps > 50_000_000:  # pragma: no cover - a tree that keeps growing
                    raise OSError(errno.ELOOP, "workspace keeps changing under removal")
                sub = _first_subdir(fd)
                if sub is not None:
                    child = _open_dir(sub, fd)
                    os.close(fd)
                    fd = child
                    names.append(sub)
                    continue
                # ``fd`` is empty now: go up and remove it.
                done = names.pop()
                if not names:
                    os.close(fd)
                    fd = -1
                    os.rmdir(done, dir_fd=top_parent)
                    return
                up = os.open("..", _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = up
                try:
                    os.rmdir(done, dir_fd=fd)
                except PermissionError:
                    os.fchmod(fd, stat.S_IRWXU)
                    os.rmdir(done, dir_fd=fd)
        finally:
            if fd >= 0:
                os.close(fd)
    finally:
        os.close(top_parent)


def remove_tree(path: Path | str) -> bool:
    """Delete ``path`` and everything beneath it; True when it is gone. Never raises.

    Handles any depth, any names, read-only and unsearchable directories; falls back to
    ``rm -rf`` when the iterative removal could not finish.
    """
    p = os.fspath(path)
    if not os.path.lexists(p):
        return True
    with contextlib.suppress(OSError, ValueError):
        _remove_iteratively(p)
    if not os.path.lexists(p):
        return True
    rm = shutil.which("rm")
    if rm is not None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [rm, "-rf", "--one-file-system", "--", p],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=600,
                check=False,
            )
    return not os.path.lexists(p)


def over_quota(root: Path | str, *, max_bytes: int, max_files: int) -> str | None:
    """Why the tree under ``root`` exceeds a quota (allocated bytes, entries), or None.

    Iterative; stops as soon as a limit is passed, so it costs at most ``max_files`` entries.
    Used where a size-limited mount cannot be made (a watchdog polls it).
    """
    used = files = 0
    stack = [os.fspath(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    files += 1
                    if files > max_files:
                        return f"more than {max_files} files and directories"
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    used += st.st_blocks * 512
                    if used > max_bytes:
                        return f"more than {max_bytes // (1024 * 1024)} MiB"
                    if stat.S_ISDIR(st.st_mode):
                        stack.append(entry.path)
        except (OSError, ValueError):
            continue
    return None
