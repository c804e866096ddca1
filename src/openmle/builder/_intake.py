"""Intake: a raw directory (files as downloaded) and its provenance, recorded with checksums."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle.errors import InvalidArgument

__all__ = ["Intake", "RawFile", "intake", "sha256_file"]

MAX_RAW_FILES = 1000
"""Most files a raw directory may hold (a corpus source is one dataset, not a dump)."""


def sha256_file(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    return _hashes(path)[0]


def _hashes(path: Path) -> tuple[str, str]:
    """The SHA-256 and the MD5 of a file's bytes, as hex, in one pass."""
    h = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            m.update(block)
    return h.hexdigest(), m.hexdigest()


@frozen(kw_only=True)
class RawFile:
    """One raw file: its path relative to the raw directory, size, SHA-256 and MD5 (the
    MD5 is what MLE-bench's ``checksums.yaml`` records, and so the shipped exclusion list).
    """

    path: str
    size: int
    sha256: str
    md5: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"path": self.path, "size": self.size, "sha256": self.sha256, "md5": self.md5}


@frozen(kw_only=True)
class Intake:
    """The intake stage's record: where the raw data is, where it came from, what it holds.

    Args:
        raw_dir: the raw directory (absolute).
        source: a URL or name saying where the data came from.
        licence: the data's licence as the user gave it.
        files: every regular file under ``raw_dir``, sorted by path.
    """

    raw_dir: Path
    source: str
    licence: str
    files: tuple[RawFile, ...]

    @property
    def total_bytes(self) -> int:
        """Bytes of all raw files."""
        return sum(f.size for f in self.files)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the raw directory's name only, not the host path)."""
        return {
            "raw_dir_name": self.raw_dir.name,
            "source": self.source,
            "licence": self.licence,
            "files": [f.to_dict() for f in self.files],
            "total_bytes": self.total_bytes,
        }


def intake(raw_dir: Path | str, *, source: str = "", licence: str = "") -> Intake:
    """Record a raw directory: its regular files with sizes and checksums, and provenance.

    Raises:
        InvalidArgument: ``raw_dir`` is not a directory, holds a symbolic link, no file or
            more than :data:`MAX_RAW_FILES` files.
    """
    root = Path(raw_dir).expanduser().absolute()
    if not root.is_dir():
        raise InvalidArgument(
            f"raw_dir={str(raw_dir)!r} is not a directory; pass the raw data's folder"
        )
    files: list[RawFile] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            raise InvalidArgument(
                f"raw_dir holds a symbolic link at {rel!r}; copy the data in as regular files"
            )
        if path.is_file():
            sha, md5 = _hashes(path)
            files.append(RawFile(path=rel, size=path.stat().st_size, sha256=sha, md5=md5))
            if len(files) > MAX_RAW_FILES:
                raise InvalidArgument(
                    f"raw_dir holds more than {MAX_RAW_FILES} files; give one dataset per directory"
                )
    if not files:
        raise InvalidArgument(f"raw_dir={str(raw_dir)!r} holds no file; put the raw data in it")
    return Intake(raw_dir=root, source=source, licence=licence, files=tuple(files))
