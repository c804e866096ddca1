"""data_preview: bounded, deterministic, never opens private paths, parses image headers."""

from __future__ import annotations

import io
import json
import struct
import tarfile
import tracemalloc
import zipfile
import zlib
from pathlib import Path
from typing import Any

from openmle.gym import data_preview


def _png(path: Path, w: int, h: int, color: int = 2) -> None:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0, 0, 0))
    )


def _jpeg(path: Path, w: int, h: int) -> None:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x00" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, h, w, 3) + b"\x00" * 9
    path.write_bytes(b"\xff\xd8" + app0 + sof + b"\xff\xd9")


def _data(root: Path) -> Path:
    pub = root / "public"
    (pub / "images").mkdir(parents=True)
    (pub / "train.csv").write_text("id,x,name,label\n1,0.5,a,0\n2,1.5,b,1\n")
    for i in range(20):
        _png(pub / "images" / f"{i:03d}.png", 32, 16)
    _jpeg(pub / "photo.jpg", 640, 480)
    (pub / "meta.json").write_text(json.dumps([{"id": 1, "text": "hi"}]))
    with zipfile.ZipFile(pub / "extra.zip", "w") as zf:
        zf.writestr("inner/a.txt", "hello")
    buf = io.BytesIO(b"x" * 10)
    with tarfile.open(pub / "audio.tar.gz", "w:gz") as tf:
        info = tarfile.TarInfo("clip.wav")
        info.size = 10
        tf.addfile(info, buf)
    (root / "private").mkdir()
    (root / "private" / "answers.csv").write_text("id,label\n1,SECRET\n")
    (pub / "leak").symlink_to(root / "private" / "answers.csv")
    return pub


def test_preview_shows_shapes_and_is_deterministic(tmp_path: Path) -> None:
    pub = _data(tmp_path)
    text = data_preview(pub, exclude=[tmp_path / "private"])
    assert text == data_preview(pub, exclude=[tmp_path / "private"])
    assert "[20 files" in text and ".png 20" in text
    assert "columns (4): id:int, x:float, name:str, label:int" in text
    assert "photo.jpg: JPEG 640x480 RGB" in text
    assert "images/000.png: PNG 32x16 RGB 8-bit" in text
    assert "JSON list of 1; first element keys: id, text" in text
    assert "zip of 1 members: inner/a.txt" in text and "tar members: clip.wav" in text
    assert "leak (symbolic link, not followed)" in text and "SECRET" not in text


def test_preview_never_reads_private_paths_and_keeps_its_budget(tmp_path: Path) -> None:
    pub = _data(tmp_path)
    (pub / "private_copy").mkdir()
    (pub / "private_copy" / "answers.csv").write_text("id,label\n1,SECRET\n")
    text = data_preview(pub, exclude=[pub / "private_copy"])
    assert "private_copy" not in text and "SECRET" not in text
    assert data_preview(pub / "private_copy", exclude=[pub / "private_copy"]) == ""
    short = data_preview(pub, max_chars=300)
    assert len(short) <= 300 and short.endswith("budget ...]")
    assert data_preview(tmp_path / "absent") == ""


def test_json_nested_past_the_recursion_limit_is_described_not_raised(tmp_path: Path) -> None:
    """A task's JSON data nested deeper than Python can parse made the preview (and so the
    search's first prompt) raise ``RecursionError``."""
    nested = "[" * 30_000 + "]" * 30_000
    (tmp_path / "train.jsonl").write_text(nested + "\n")
    (tmp_path / "test.json").write_text(nested)
    text = data_preview(tmp_path)
    assert "first line not JSON" in text and "JSON (not parsable)" in text


def test_a_compressed_tar_is_listed_without_decompressing_a_bomb(tmp_path: Path) -> None:
    """Listing a .tar.gz decompresses every member before the one listed: a 37 MB archive of
    two 4 GiB zero members took 12 s; the listing now stops at the first 256 MiB of content."""

    class Zeros(io.RawIOBase):
        def __init__(self, n: int) -> None:
            self.n = n

        def readable(self) -> bool:
            return True

        def readinto(self, b: Any) -> int:
            k = min(len(b), self.n)
            b[:k] = bytes(k)
            self.n -= k
            return k

    pub = tmp_path / "public"
    pub.mkdir()
    size = (256 << 20) + 1
    with tarfile.open(pub / "bomb.tar.gz", "w:gz", compresslevel=1) as tf:
        for name in ("big.bin", "after.bin"):
            info = tarfile.TarInfo(name)
            info.size = size
            tf.addfile(info, io.BufferedReader(Zeros(size), 1 << 20))
    text = data_preview(pub)
    assert "tar members: big.bin (" in text and "after.bin" not in text


def _many_empty_members(path: Path, n: int) -> None:
    """A zip64 of ``n`` empty stored members named 000000, 000001, ... written as bytes (its
    central directory only: a listing never reads the members' local headers)."""
    entry = struct.Struct("<4s4B4HL2L5H2L")
    names = [f"{i:06d}".encode() for i in range(n)]
    directory = b"".join(
        entry.pack(b"PK\x01\x02", 20, 3, 20, 0, 0, 0, 0, 0x21, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0) + name
        for name in names
    )
    end64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(directory), 0)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(directory), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    path.write_bytes(directory + end64 + locator + end)


def test_a_zip_of_many_members_is_listed_from_a_bounded_read(tmp_path: Path) -> None:
    """zipfile parses a zip's whole central directory into objects (846 MB of memory and 27 s
    for a 129 MB zip of 1.5 million empty members); the preview reads the count from the end
    record and at most 1 MiB of the directory, so 100,000 members cost well under 4 MiB."""
    pub = tmp_path / "public"
    pub.mkdir()
    _many_empty_members(pub / "many.zip", 100_000)
    tracemalloc.start()
    try:
        text = data_preview(pub)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "many.zip: zip of 100000 members: 000000 (0 B), 000001 (0 B)," in text
    assert "000007 (0 B)" in text and "000008" not in text
    assert peak < 4 << 20, f"listing took {peak} bytes"
