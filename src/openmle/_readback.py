"""Reading a file back from a run or bench directory: a regular file, bounded, no link followed.

A run or bench directory can come from anywhere (a colleague's upload, an archive, a directory a
program could write to), so every file read back from one is untrusted. :func:`read_back` is the
one way to read such a file:

- the file is opened with ``O_NOFOLLOW`` (a symbolic link as the last component is refused, so
  ``manifest.json -> /dev/zero`` or ``-> ~/.ssh/id_rsa`` reads nothing) and ``O_NONBLOCK`` (a
  FIFO does not block the open);
- the open descriptor must be a regular file (``fstat``, ``S_ISREG``): a FIFO, socket, device or
  directory is refused before a byte is read, so ``export``, ``report`` and ``resume`` never
  hang on a FIFO;
- at most ``max_bytes`` are read: a larger file is refused (checked on the size and again while
  reading, so a file growing under us is refused too).

Refusals are :class:`OSError` with an ``errno`` (``ELOOP``: a link, ``EINVAL``: not a regular
file, ``EFBIG``: too large) and a message naming the file, so callers that already turn an
unreadable file into their own error (``RunDirError``, ``InvalidArgument``) keep doing so.

:func:`loads_untrusted` is ``json.loads`` for any text from elsewhere (a file read back, a
model's answer, a line a grading process or container printed): JSON nested deeper than
Python's recursion limit (``[[[[...``, a few hundred kilobytes) raises ``RecursionError`` from
``json.loads``, which no ``except ValueError`` catches; here it is a ``ValueError`` like any
other text that is not JSON. :func:`object_in_answer` reads the JSON object a model's answer
holds somewhere in its prose.

:func:`is_sparse` tells whether an open file has holes (a copy would write them out in full):
program outputs and submissions are refused for it at any size.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

__all__ = [
    "is_sparse",
    "loads_untrusted",
    "object_in_answer",
    "open_back",
    "read_back",
    "read_back_json",
    "read_back_text",
]

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_CHUNK = 1 << 20


def _refuse(code: int, path: Path, why: str) -> OSError:
    return OSError(code, f"{path} {why}", str(path))


def open_back(path: str | os.PathLike[str], *, max_bytes: int, follow: bool = False) -> int:
    """An open read-only descriptor on ``path``, checked as :func:`read_back` checks it.

    ``follow=True`` follows a symbolic link (a file the user named, which may be a link they
    made) but still requires a regular file within ``max_bytes``.
    The caller closes it. Raises :class:`OSError` (see the module doc).
    """
    p = Path(path)
    try:
        fd = os.open(p, _FLAGS & ~os.O_NOFOLLOW if follow else _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse(
                errno.ELOOP,
                p,
                "is a symbolic link; run and bench files are read only as regular files",
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _refuse(
                errno.EINVAL,
                p,
                "is not a regular file (a FIFO, device, socket or directory); refused",
            )
        if st.st_size > max_bytes:
            raise _refuse(
                errno.EFBIG, p, f"is {st.st_size} bytes, above the {max_bytes}-byte limit; refused"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_back(path: str | os.PathLike[str], *, max_bytes: int, follow: bool = False) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` of them (``follow``: as
    in :func:`open_back`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        OSError: ``path`` is a symbolic link (``ELOOP``), not a regular file (``EINVAL``),
            larger than ``max_bytes`` (``EFBIG``), or cannot be read.
    """
    fd = open_back(path, max_bytes=max_bytes, follow=follow)
    try:
        parts: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            parts.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise _refuse(
                    errno.EFBIG, Path(path), f"grew past the {max_bytes}-byte limit; refused"
                )
        return b"".join(parts)
    finally:
        os.close(fd)


def read_back_text(
    path: str | os.PathLike[str], *, max_bytes: int, errors: str = "strict", follow: bool = False
) -> str:
    """:func:`read_back` decoded as UTF-8 (``errors`` as in :meth:`bytes.decode`).

    Raises:
        OSError: as :func:`read_back`.
        UnicodeDecodeError: not UTF-8 (with ``errors="strict"``).
    """
    return read_back(path, max_bytes=max_bytes, follow=follow).decode("utf-8", errors)


def read_back_json(path: str | os.PathLike[str], *, max_bytes: int) -> Any:
    """:func:`read_back` parsed as JSON.

    Raises:
        OSError: as :func:`read_back`.
        ValueError: not UTF-8 or not JSON (``RecursionError`` for absurd nesting is turned
            into a ``ValueError``).
    """
    try:
        return loads_untrusted(read_back(path, max_bytes=max_bytes))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def loads_untrusted(data: str | bytes | bytearray) -> Any:
    """``json.loads(data)`` for text from elsewhere: every way it is not JSON is a ValueError.

    Raises:
        ValueError: not UTF-8, not JSON, or nested too deeply to parse (``json.loads`` raises
            ``RecursionError`` there).
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def object_in_answer(text: str) -> dict[str, Any] | None:
    """The JSON object from the first ``{`` to the last ``}`` of a model's answer, or None
    where there is none, it is not JSON (too deep included) or not an object. Linear time.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = loads_untrusted(text[start : end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def is_sparse(fd: int, st: os.stat_result) -> bool:
    """Whether the open regular file ``fd`` (``st`` its ``fstat``) has a hole, at any size.

    A file allocating fewer bytes than its apparent size (``st_blocks * 512 < st_size``) is a
    candidate; ``SEEK_HOLE`` then tells a hole (sparse: refused) from data the file system
    stores compactly (a tiny file kept in its inode, a compressed extent). Where ``SEEK_HOLE``
    is not supported, a candidate counts as sparse. The file offset is left at 0.
    """
    if st.st_size == 0 or st.st_blocks * 512 >= st.st_size:
        return False
    try:
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
    except (OSError, AttributeError):
        return True
    finally:
        with contextlib.suppress(OSError):
            os.lseek(fd, 0, os.SEEK_SET)
    return hole < st.st_size
