"""Writing into a run or bench directory that came from elsewhere: no link followed, no file shared.

A run directory can come from anywhere (a colleague's upload, an archive), so what it already
holds is untrusted, and that includes the names openmle writes to: ``report.html``,
``score.png``, ``nodes.jsonl``, ``sessions.jsonl``, ``board.json.tmp`` or ``nodes/`` may be
symbolic links (to ``~/.bashrc``, to a directory outside) or hard links to a file elsewhere.
Writing through one would overwrite or append to a file outside the directory. The writers here
never do:

- :func:`write_file` writes a new file under a fresh random name created with ``O_EXCL`` and
  ``O_NOFOLLOW``, then renames it over the target: a link at the target is replaced, never
  followed, and a hard link keeps its old content (the target gets a new inode);
- :func:`append_file` / :func:`open_append` open with ``O_NOFOLLOW`` and refuse anything but a
  regular file with a single link;
- :func:`ensure_dir` creates the directories below a root and refuses one that is a symbolic
  link (``nodes -> /home/me``) or not a directory.

Refusals are :class:`OSError` with an ``errno`` (``ELOOP``: a link, ``EINVAL``: not a regular
file or directory, ``EMLINK``: a file with another hard link) and a message naming the path, so
callers that turn a failed write into their own error keep doing so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["append_file", "ensure_dir", "open_append", "write_file"]

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _refuse(code: int, path: Path, why: str) -> OSError:
    return OSError(code, f"{path} {why}", str(path))


def ensure_dir(root: str | os.PathLike[str], *parts: str) -> Path:
    """``root/parts...``, each part created if missing and checked to be a real directory.

    ``root`` itself is the caller's choice and is not checked (it may be a link the user made).

    Raises:
        OSError: a part is a symbolic link (``ELOOP``) or not a directory (``EINVAL``), or
            cannot be created.
    """
    p = Path(root)
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\0" in part:
            raise _refuse(errno.EINVAL, p / part, "is not a plain directory name; refused")
        p = p / part
        with contextlib.suppress(FileExistsError):
            p.mkdir(mode=0o755)
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            raise _refuse(
                errno.ELOOP,
                p,
                "is a symbolic link; openmle writes only into real directories (replace the link "
                "with a copy of its directory)",
            )
        if not stat.S_ISDIR(st.st_mode):
            raise _refuse(errno.EINVAL, p, "is not a directory; refused")
    return p


def write_file(
    path: str | os.PathLike[str],
    data: bytes | Callable[[BinaryIO], object],
    *,
    fsync: bool = False,
) -> None:
    """Replace ``path`` with a new regular file holding ``data`` (bytes, or a function that
    writes to the open file), atomically: a link or file at ``path`` is replaced, not followed.

    Raises:
        OSError: the file cannot be written (nothing is left behind but the old ``path``).
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, _NEW, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                data(f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_append(path: str | os.PathLike[str]) -> int:
    """A descriptor appending to the regular file ``path`` (created if missing); the caller
    closes it.

    Raises:
        OSError: ``path`` is a symbolic link (``ELOOP``), not a regular file (``EINVAL``), a
            file with another hard link (``EMLINK``: appending would change that file too), or
            cannot be opened.
    """
    p = Path(path)
    try:
        fd = os.open(p, _APPEND, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(
                errno.ELOOP,
                p,
                "is a symbolic link; openmle appends only to regular files (replace the link with "
                "a copy of its file)",
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(errno.EINVAL, p, "is not a regular file; refused")
        if st.st_nlink > 1:
            raise _refuse(
                errno.EMLINK,
                p,
                "has another hard link (appending would change that file too); replace it with "
                "a copy (cp FILE FILE.new && mv FILE.new FILE)",
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def append_file(path: str | os.PathLike[str], data: bytes) -> None:
    """Append ``data`` to ``path`` as :func:`open_append` opens it."""
    fd = open_append(path)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
