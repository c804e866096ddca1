"""Trees that untrusted code or a sender made: walking them, removing them, scratch directories.

Candidate programs write their workspaces; a task's grader, metric, ``utils/prepare.py`` or a
benchmark's evaluator writes its scratch home and working directory; a run or bench directory
from elsewhere holds what its sender put there. Any of them can leave directories nested
thousands deep (deeper than ``PATH_MAX`` and than Python's recursion limit: ``shutil.rmtree``
and ``tempfile.TemporaryDirectory`` raise ``RecursionError`` there), names that are not UTF-8,
directories without read or search permission, or symlinks pointing anywhere (``os.walk``
and ``Path.rglob`` recurse too, on Python 3.11). This is the one place that walks and removes
such trees:

- :func:`walk` is ``os.walk`` (top-down, prunable, never following a symlink) without the
  recursion: any depth, one open directory at a time.

- :func:`remove_tree` deletes a tree through directory file descriptors (``openat`` /
  ``unlinkat`` relative to the parent, so no path ever grows past ``PATH_MAX``), holding at
  most two descriptors whatever the depth, never following a symlink, making unreadable
  directories readable as it goes; ``rm -rf --one-file-system`` is the fallback. It never
  raises.
- :func:`scratch_dir` is ``tempfile.TemporaryDirectory`` for a directory that untrusted code
  gets to write: made private (``mkdtemp``), removed by :func:`remove_tree`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["remove_tree", "scratch_dir", "walk"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def walk(top: str | os.PathLike[str]) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(dirpath, dirnames, filenames)`` for ``top`` and every directory below it, top-down,
    as ``os.walk(top, followlinks=False)`` gives them, without recursion.

    As with ``os.walk``: a symbolic link to a directory is listed in ``dirnames`` but never
    entered, and removing a name from ``dirnames`` prunes it. A directory that cannot be listed
    (vanished, no permission, a path past ``PATH_MAX``) is skipped; ``top`` not being a
    directory yields nothing.
    """
    stack = [os.fspath(top)]
    while stack:
        dirpath = stack.pop()
        dirs: list[str] = []
        files: list[str] = []
        links: set[str] = set()
        try:
            with os.scandir(dirpath) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                        if is_dir and entry.is_symlink():
                            links.add(entry.name)
                    except OSError:
                        is_dir = False
                    (dirs if is_dir else files).append(entry.name)
        except OSError:
            continue
        yield dirpath, dirs, files
        stack.extend(os.path.join(dirpath, d) for d in reversed(dirs) if d not in links)


@contextlib.contextmanager
def scratch_dir(
    prefix: str = "openmle-", dir: str | os.PathLike[str] | None = None
) -> Iterator[Path]:
    """A new private directory (mode 0700, under ``dir`` or the system's temporary directory),
    removed with everything in it when the block ends, however it ends.

    Raises:
        OSError: the directory cannot be made.
    """
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=dir))
    try:
        yield path
    finally:
        remove_tree(path)


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
