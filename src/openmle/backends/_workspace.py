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
- :func:`copy_outputs` copies a program's output directory out of its workspace for grading,
  bounded (``OutputLimits``: entries, bytes by apparent or allocated size, depth), through
  directory file descriptors with ``O_NOFOLLOW``: a symlink, hard link, FIFO, socket, device
  or sparse file (at any size: a hole would be written out in full on the host) anywhere in
  it refuses the whole copy.

Removing a workspace is :func:`openmle._trees.remove_tree`'s (the one remover of trees that
untrusted code wrote, the grading processes' scratch directories included).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection
from pathlib import Path

from attrs import frozen

from openmle._readback import is_sparse
from openmle._trees import remove_tree
from openmle._types import Job, Outcome, RunResult

__all__ = [
    "ArtifactLimits",
    "OutputLimits",
    "copy_outputs",
    "encode_program",
    "list_artifacts",
    "over_quota",
]


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


@frozen(kw_only=True)
class OutputLimits:
    """Bounds of :func:`copy_outputs` (a program's output directory handed to a grader).

    Args:
        max_entries: files and directories at most.
        max_bytes: total size of the files at most, each counted at its apparent or allocated
            size, whichever is larger (a huge sparse file is refused before it is read, and
            a sparse file of any size is refused: see :func:`is_sparse`).
        max_depth: directory levels below the output directory at most.
    """

    max_entries: int = 10_000
    max_bytes: int = 2 * 1024 * 1024 * 1024
    max_depth: int = 16


DEFAULT_OUTPUT_LIMITS = OutputLimits()


class _Refused(Exception):
    """Internal: the output directory cannot be copied (the message says why)."""


_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _cost(st: os.stat_result) -> int:
    """What a file costs the output budget: its apparent or allocated size, the larger."""
    return max(st.st_size, st.st_blocks * 512)


class _OutputCopy:
    """One bounded copy (see :func:`copy_outputs`): its budget and the recursive walk."""

    def __init__(self, label: str, limits: OutputLimits) -> None:
        self.label = label
        self.limits = limits
        self.entries = 0
        self.bytes = 0

    def where(self, rel: str) -> str:
        return _printable(f"{self.label}/{rel}")

    def copy_dir(self, fd: int, dst: str, rel: str, depth: int) -> None:
        os.mkdir(dst, 0o700)
        with os.scandir(fd) as it:
            for entry in it:
                self.entries += 1
                if self.entries > self.limits.max_entries:
                    raise _Refused(
                        f"{self.label}/ holds more than {self.limits.max_entries} files and "
                        "directories; write fewer"
                    )
                name = entry.name
                sub_rel = f"{rel}/{name}" if rel else name
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    if depth + 1 > self.limits.max_depth:
                        raise _Refused(
                            f"{self.where(sub_rel)} is nested deeper than "
                            f"{self.limits.max_depth} levels"
                        )
                    sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    try:
                        self.copy_dir(sub, os.path.join(dst, name), sub_rel, depth + 1)
                    finally:
                        os.close(sub)
                elif stat.S_ISREG(st.st_mode):
                    self.copy_file(fd, name, st, os.path.join(dst, name), sub_rel)
                elif stat.S_ISLNK(st.st_mode):
                    raise _Refused(
                        f"{self.where(sub_rel)} is a symbolic link; write regular files only"
                    )
                else:
                    raise _Refused(
                        f"{self.where(sub_rel)} is not a regular file (a FIFO, socket or "
                        "device); write regular files only"
                    )

    def copy_file(self, fd: int, name: str, st: os.stat_result, dst: str, rel: str) -> None:
        if st.st_nlink != 1:
            raise _Refused(f"{self.where(rel)} is a hard link; write regular files only")
        room = self.limits.max_bytes - self.bytes
        too_big = _Refused(
            f"{self.label}/ is larger than {self.limits.max_bytes} bytes (apparent or allocated "
            f"size, whichever is larger; {self.where(rel)} passes it); write smaller files"
        )
        if _cost(st) > room:
            raise too_big
        src = os.open(name, _FILE_FLAGS, dir_fd=fd)
        try:
            now = os.fstat(src)
            if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                raise _Refused(f"{self.where(rel)} changed while it was copied")
            if is_sparse(src, now):
                raise _Refused(
                    f"{self.where(rel)} is a sparse file ({now.st_blocks * 512} bytes allocated "
                    f"of {now.st_size}); a copy would write its holes out in full: write every "
                    "byte of your files"
                )
            room -= _cost(now) - now.st_size  # allocated beyond the apparent size counts too
            if room < 0:
                raise too_big
            os.set_blocking(src, True)
            with open(dst, "xb") as out:
                while True:
                    chunk = os.read(src, min(1024 * 1024, room + 1))
                    if not chunk:
                        break
                    room -= len(chunk)
                    if room < 0:  # grew after the size check
                        raise too_big
                    out.write(chunk)
        finally:
            os.close(src)
        self.bytes = self.limits.max_bytes - room


def copy_outputs(
    src: Path | str, dst: Path | str, *, limits: OutputLimits = DEFAULT_OUTPUT_LIMITS
) -> str | None:
    """Copy the directory ``src`` (written by a program) to the new directory ``dst``.

    Never follows a link: directories are opened beneath their parent's descriptor with
    ``O_NOFOLLOW``, files with ``O_NOFOLLOW`` and checked to be the file examined. Anything
    but directories and single-link regular files, or a tree beyond ``limits``, refuses the
    whole copy (``dst`` is removed).

    Returns:
        None when copied; otherwise why it was refused (names the path, never its content).
        Never raises for anything found in ``src``.
    """
    label = _printable(os.path.basename(os.fspath(src)))
    job = _OutputCopy(label, limits)
    why: str | None = None
    try:
        top = os.open(os.fspath(src), _DIR_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return f"{label} must be a directory, not a symbolic link or a file"
        return f"{label}/ is unreadable: {exc.strerror}"
    try:
        job.copy_dir(top, os.fspath(dst), "", 0)
    except _Refused as exc:
        why = str(exc)
    except (OSError, ValueError) as exc:
        cause = getattr(exc, "strerror", None) or type(exc).__name__
        why = f"{label}/ could not be copied: {cause}"
    except RecursionError:  # pragma: no cover - max_depth keeps the walk shallow
        why = f"{label}/ is nested too deeply"
    finally:
        os.close(top)
    if why is not None:
        remove_tree(dst)
    return why
