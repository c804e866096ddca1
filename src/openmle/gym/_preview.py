"""A bounded, deterministic preview of a task's public data, for the Draft prompt.

What it shows (AIDE's data preview, written from scratch): the directory tree with file counts
and sizes (a folder of many files is summarised by count, size and extensions), then for a few
files their content's shape: CSV/TSV header, column types guessed from the first rows and the
first rows themselves; PNG/JPEG width, height and mode (parsed from the file header, no Pillow);
JSON top-level keys (or list length and the first element's keys), JSONL first record's keys;
ZIP and TAR member lists. Everything is cut to a character budget.

Bounds: at most :data:`MAX_ENTRIES` directory entries are listed, at most :data:`HEAD_BYTES`
of any file are read, an archive names its first 8 members (a zip's count is its end record's,
and at most 1 MiB of its central directory plus 64 KiB of its tail are read; a compressed tar is
read through its first 256 MiB of content), symbolic links are never followed (shown as links),
and nothing under a
path of ``exclude`` (a task's private answers) is opened or listed. The text depends only on
the files (names sorted), so the same data gives the same preview.
"""

from __future__ import annotations

import csv
import io
import os
import stat
import struct
import tarfile
import zipfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from openmle._readback import loads_untrusted

__all__ = ["data_preview"]

MAX_ENTRIES = 2_000
"""Directory entries examined at most (the rest is counted as "more")."""
HEAD_BYTES = 64 * 1024
"""Bytes read at most from any one file."""
_DETAILED = 8
"""Files whose content is described (the rest are listed)."""
_LISTED = 6
"""Entries named per directory before the rest is summarised."""
_ARCHIVE_MEMBERS = 8
_ARCHIVE_SCAN_BYTES = 256 << 20
"""A compressed tar is listed only as far as its first 256 MiB of content: reaching a member
means decompressing every byte before it (a 37 MB .tar.gz of zeros holds 8 GiB)."""
_ZIP_DIRECTORY_BYTES = 1 << 20
"""A zip is listed from at most the first 1 MiB of its central directory (its member count is the
end record's): zipfile parses the whole directory into objects, 846 MB of memory and 27 s for a
129 MB zip of 1.5 million empty members."""
_ZIP_END = struct.Struct("<4s4H2LH")  # end of central directory record
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_END = struct.Struct("<4sQ2H2L4Q")
_ZIP_ENTRY = struct.Struct("<4s4B4HL2L5H2L")  # central directory file header


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def _head(path: Path, limit: int = HEAD_BYTES) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return b""
        return os.read(fd, limit)
    finally:
        os.close(fd)


def _guess(values: list[str]) -> str:
    kinds = set()
    for v in values:
        if v == "":
            continue
        try:
            int(v)
            kinds.add("int")
            continue
        except ValueError:
            pass
        try:
            float(v)
            kinds.add("float")
        except ValueError:
            kinds.add("str")
    if not kinds:
        return "empty"
    if "str" in kinds:
        return "str"
    return "float" if "float" in kinds else "int"


def _csv(path: Path) -> str:
    text = _head(path).decode("utf-8", errors="replace")
    lines = text.splitlines()
    if len(text.encode()) >= HEAD_BYTES and lines:
        lines = lines[:-1]  # the last line may be cut
    if not lines:
        return "empty"
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    rows = list(csv.reader(io.StringIO("\n".join(lines[:21])), delimiter=delimiter))
    header, body = rows[0], rows[1:]
    cols = []
    for i, name in enumerate(header[:30]):
        cols.append(f"{name[:40]}:{_guess([r[i] for r in body if i < len(r)])}")
    more = f" (+{len(header) - 30} more columns)" if len(header) > 30 else ""
    out = [f"columns ({len(header)}): " + ", ".join(cols) + more]
    out += ["  " + line[:200] for line in lines[1:4]]
    return "\n".join(out)


_PNG_MODES = {0: "L", 2: "RGB", 3: "P", 4: "LA", 6: "RGBA"}


def _image(path: Path) -> str:
    data = _head(path, 128 * 1024)
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 26:
        w, h, depth, color = struct.unpack(">IIBB", data[16:26])
        return f"PNG {w}x{h} {_PNG_MODES.get(color, '?')} {depth}-bit"
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            (length,) = struct.unpack(">H", data[i + 2 : i + 4])
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                h, w = struct.unpack(">HH", data[i + 5 : i + 9])
                comps = data[i + 9] if i + 9 < len(data) else 0
                mode = {1: "L", 3: "RGB", 4: "CMYK"}.get(comps, "?")
                return f"JPEG {w}x{h} {mode}"
            i += 2 + length
        return "JPEG (size not in the first 128 KB)"
    return "image (unknown header)"


def _json(path: Path, size: int) -> str:
    if path.suffix.lower() == ".jsonl":
        first = _head(path).split(b"\n", 1)[0]
        try:
            rec = loads_untrusted(first)
        except ValueError:
            return "JSON lines (first line not JSON)"
        keys = list(rec)[:30] if isinstance(rec, dict) else []
        return f"JSON lines; first record keys: {', '.join(map(str, keys))}"
    if size > HEAD_BYTES:
        return f"JSON, {_size(size)} (too large to parse for the preview)"
    try:
        data = loads_untrusted(_head(path).decode("utf-8", errors="replace"))
    except ValueError:
        return "JSON (not parsable)"
    if isinstance(data, dict):
        return "JSON object; keys: " + ", ".join(str(k)[:40] for k in list(data)[:30])
    if isinstance(data, list):
        head = data[0] if data else None
        names = ", ".join(str(k)[:40] for k in list(head)[:30]) if isinstance(head, dict) else ""
        return f"JSON list of {len(data)}" + (f"; first element keys: {names}" if names else "")
    return f"JSON {type(data).__name__}"


def _zip_end(fd: int, size: int) -> tuple[int, int, int]:
    """``(members, directory offset, directory size)`` from a zip's end records (zip64 too)."""
    tail_len = min(size, _ZIP_END.size + 0xFFFF)  # the record and the longest comment
    tail = os.pread(fd, tail_len, size - tail_len)
    if tail[-_ZIP_END.size : -_ZIP_END.size + 4] == b"PK\x05\x06" and tail[-2:] == b"\0\0":
        at = len(tail) - _ZIP_END.size
    else:
        at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + _ZIP_END.size > len(tail):
        raise zipfile.BadZipFile("File is not a zip file")
    end = _ZIP_END.unpack_from(tail, at)
    at += size - tail_len
    count, cd_size, cd_end = end[4], end[5], at
    if at >= _ZIP64_LOCATOR.size + _ZIP64_END.size:
        locator = os.pread(fd, _ZIP64_LOCATOR.size, at - _ZIP64_LOCATOR.size)
        if locator[:4] == b"PK\x06\x07":
            cd_end = at - _ZIP64_LOCATOR.size - _ZIP64_END.size
            end64 = _ZIP64_END.unpack(os.pread(fd, _ZIP64_END.size, cd_end))
            if end64[0] != b"PK\x06\x06":
                raise zipfile.BadZipFile("Corrupt zip64 end of central directory record")
            count, cd_size = end64[7], end64[8]
    if cd_size > cd_end:
        raise zipfile.BadZipFile("Bad offset for central directory")
    return count, cd_end - cd_size, cd_size


def _zip64_size(extra: bytes) -> int | None:
    """The uncompressed size in a zip64 extra field, if there is one."""
    i = 0
    while i + 4 <= len(extra):
        kind, length = struct.unpack_from("<HH", extra, i)
        if kind == 1 and length >= 8 and i + 12 <= len(extra):
            return int(struct.unpack_from("<Q", extra, i + 4)[0])
        i += 4 + length
    return None


def _zip_members(path: Path) -> tuple[int, list[tuple[str, int]]]:
    """A zip's member count and its first members' ``(name, size)``, reading only its end
    records and the first :data:`_ZIP_DIRECTORY_BYTES` of its central directory.

    Raises:
        zipfile.BadZipFile: ``path`` is not a zip (or its directory is corrupt).
        OSError: ``path`` cannot be read (a link is not followed).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise zipfile.BadZipFile("not a regular file")
        count, offset, cd_size = _zip_end(fd, st.st_size)
        data = os.pread(fd, min(cd_size, _ZIP_DIRECTORY_BYTES), offset)
    finally:
        os.close(fd)
    members: list[tuple[str, int]] = []
    i = 0
    while len(members) < _ARCHIVE_MEMBERS and i + _ZIP_ENTRY.size <= len(data):
        entry = _ZIP_ENTRY.unpack_from(data, i)
        if entry[0] != b"PK\x01\x02":
            raise zipfile.BadZipFile("Bad magic number for central directory")
        start = i + _ZIP_ENTRY.size
        i = start + entry[12] + entry[13] + entry[14]  # name, extra field, comment
        if i > len(data):
            break  # the entry runs past what is read
        raw = data[start : start + entry[12]]
        name = raw.decode("utf-8" if entry[5] & 0x800 else "cp437", errors="replace")
        size = entry[11]
        if size == 0xFFFFFFFF:
            extra = data[start + entry[12] : start + entry[12] + entry[13]]
            size = _zip64_size(extra) or size
        members.append((name.split("\0", 1)[0], size))
    return count, members


def _archive(path: Path) -> str:
    name = path.name.lower()
    try:
        if name.endswith(".zip"):
            count, members = _zip_members(path)
            shown = [f"{n} ({_size(size)})" for n, size in members]
            return f"zip of {count} members: " + ", ".join(shown)
        with tarfile.open(path) as tf:
            shown = []
            compressed = not name.endswith(".tar")
            while (member := tf.next()) is not None:
                if len(shown) == _ARCHIVE_MEMBERS:
                    shown.append("...")
                    break
                shown.append(f"{member.name} ({_size(member.size)})")
                if compressed and member.offset_data + member.size > _ARCHIVE_SCAN_BYTES:
                    shown.append("...")  # the next member lies beyond what is decompressed
                    break
            return "tar members: " + ", ".join(shown)
    except (OSError, zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        return f"archive (unreadable: {type(exc).__name__})"


_IMAGES = (".png", ".jpg", ".jpeg")
_ARCHIVES = (".zip", ".tar", ".tgz", ".tar.gz", ".tar.bz2", ".tar.xz")


def _describe(path: Path, size: int) -> str | None:
    name = path.name.lower()
    if name.endswith((".csv", ".tsv")):
        return _csv(path)
    if name.endswith(_IMAGES):
        return _image(path)
    if name.endswith((".json", ".jsonl")):
        return _json(path, size)
    if name.endswith(_ARCHIVES):
        return _archive(path)
    return None


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def data_preview(
    root: str | os.PathLike[str],
    *,
    exclude: Sequence[str | os.PathLike[str]] = (),
    max_chars: int = 6_000,
) -> str:
    """A preview of the data directory ``root`` (see the module doc), at most ``max_chars``.

    Args:
        root: the public data directory a program reads.
        exclude: paths never opened or listed (a task's private answers); a ``root`` inside
            one of them gives an empty preview.
        max_chars: the character budget of the whole preview.

    Returns:
        The preview text, or "" when ``root`` is not a directory.
    """
    base = Path(root).absolute()
    banned = [Path(os.path.abspath(p)) for p in exclude]
    if not base.is_dir() or base.is_symlink() or _inside(base, banned):
        return ""
    tree: list[str] = []
    details: list[str] = []
    seen = 0

    def walk(d: Path, depth: int) -> None:
        nonlocal seen
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        entries = [e for e in entries if not _inside(Path(e.path), banned)]
        files = [e for e in entries if e.is_file(follow_symlinks=False)]
        dirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
        links = [e for e in entries if e.is_symlink()]
        pad = "  " * depth
        if len(files) > _LISTED:
            total = sum(e.stat(follow_symlinks=False).st_size for e in files[:MAX_ENTRIES])
            exts = Counter(Path(e.name).suffix.lower() or "(none)" for e in files[:MAX_ENTRIES])
            kinds = ", ".join(f"{k} {n}" for k, n in sorted(exts.items(), key=lambda x: -x[1]))
            tree.append(
                f"{pad}[{len(files)} files, {_size(total)}"
                f"{' (first ' + str(MAX_ENTRIES) + ')' if len(files) > MAX_ENTRIES else ''}; "
                f"{kinds}; e.g. {', '.join(e.name for e in files[:3])}]"
            )
            shown_files = files[:2]
        else:
            shown_files = files
            tree.extend(
                f"{pad}{e.name} ({_size(e.stat(follow_symlinks=False).st_size)})" for e in files
            )
        for e in shown_files:
            if len(details) < _DETAILED and seen < MAX_ENTRIES:
                try:
                    text = _describe(Path(e.path), e.stat(follow_symlinks=False).st_size)
                except OSError:
                    text = None
                if text:
                    rel = Path(e.path).relative_to(base)
                    details.append(f"{rel}: {text}")
        tree.extend(f"{pad}{e.name} (symbolic link, not followed)" for e in links)
        seen += len(entries)
        for e in dirs:
            if seen >= MAX_ENTRIES:
                tree.append(f"{pad}... (more entries not examined)")
                return
            tree.append(f"{pad}{e.name}/")
            walk(Path(e.path), depth + 1)

    walk(base, 1)
    text = "Files (under the data directory):\n" + "\n".join(tree)
    if details:
        text += "\n\nContents:\n" + "\n".join(details)
    if len(text) > max_chars:
        cut = "\n[... preview cut to its character budget ...]"
        text = text[: max(0, max_chars - len(cut))] + cut
    return text
