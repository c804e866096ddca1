"""Byte-level writers for the file formats MLE-bench's Lite competitions ship, standard
library only: PNG, baseline JPEG, TIFF, BMP, AIFF, WAV, DICOM, TFRecord, and CSV as pandas'
``to_csv`` writes it.

The images are tiny and made of flat 8x8 blocks (JPEG: DC coefficients only), which keeps
each encoder short while every file opens in the usual decoders (Pillow, libjpeg, pydicom).
"""

from __future__ import annotations

import csv
import io
import math
import struct
import wave
import zlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = [
    "Pixel",
    "aiff",
    "bmp",
    "dicom",
    "jpeg",
    "png",
    "png_gray",
    "tfrecord",
    "tiff",
    "wav",
    "write_csv",
]

Pixel = tuple[int, int, int]
"""An RGB pixel, each channel 0..255."""


def _grid(width: int, height: int, color: Pixel | Sequence[Sequence[Pixel]]) -> list[list[Pixel]]:
    """Rows of pixels: one colour, or one colour per 8x8 block (``color[by][bx]``)."""
    if isinstance(color, tuple) and all(isinstance(c, int) for c in color):
        flat: Pixel = color
        return [[flat] * width for _ in range(height)]
    blocks: Sequence[Sequence[Pixel]] = color  # type: ignore[assignment]
    rows: list[list[Pixel]] = []
    for y in range(height):
        by = min(y // 8, len(blocks) - 1)
        rows.append([blocks[by][min(x // 8, len(blocks[by]) - 1)] for x in range(width)])
    return rows


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(
    width: int,
    height: int,
    color: Pixel | Sequence[Sequence[Pixel]],
    *,
    gray: bool = False,
) -> bytes:
    """A PNG (8-bit grayscale or RGB) of flat 8x8 blocks."""
    raw = bytearray()
    for row in _grid(width, height, color):
        raw.append(0)
        for r, g, b in row:
            raw.extend((r,) if gray else (r, g, b))
    head = struct.pack(">IIBBBBB", width, height, 8, 0 if gray else 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", head)
        + _chunk(b"IDAT", zlib.compress(bytes(raw)))
        + _chunk(b"IEND", b"")
    )


def png_gray(rows: Sequence[Sequence[int]]) -> bytes:
    """An 8-bit grayscale PNG of the given pixel rows (each 0..255)."""
    raw = b"".join(b"\x00" + bytes(r) for r in rows)
    head = struct.pack(">IIBBBBB", len(rows[0]), len(rows), 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", head)
        + _chunk(b"IDAT", zlib.compress(raw))
        + _chunk(b"IEND", b"")
    )


# ---------------------------------------------------------------------------- JPEG

_DC_COUNTS = (0, 1, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0)  # ITU T.81 table K.3
_DC_VALUES = tuple(range(12))


def _huffman_codes(counts: Sequence[int], values: Sequence[int]) -> dict[int, tuple[int, int]]:
    """Canonical Huffman codes: symbol -> (code, length)."""
    codes: dict[int, tuple[int, int]] = {}
    code = 0
    k = 0
    for length, n in enumerate(counts, start=1):
        for _ in range(n):
            codes[values[k]] = (code, length)
            code += 1
            k += 1
        code <<= 1
    return codes


class _Bits:
    def __init__(self) -> None:
        self.out = bytearray()
        self.acc = 0
        self.n = 0

    def put(self, code: int, length: int) -> None:
        for i in range(length - 1, -1, -1):
            self.acc = (self.acc << 1) | ((code >> i) & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0)  # byte stuffing
                self.acc = 0
                self.n = 0

    def flush(self) -> bytes:
        if self.n:
            self.put((1 << (8 - self.n)) - 1, 8 - self.n)
        return bytes(self.out)


def _segment(marker: int, body: bytes) -> bytes:
    return struct.pack(">HH", 0xFF00 | marker, len(body) + 2) + body


def jpeg(
    width: int,
    height: int,
    color: Pixel | Sequence[Sequence[Pixel]],
    *,
    gray: bool = False,
) -> bytes:
    """A baseline JFIF JPEG of flat 8x8 blocks (``width`` and ``height`` multiples of 8).

    Each block is coded by its DC coefficient alone (quantiser 1), so the colours survive
    exactly up to YCbCr rounding.
    """
    if width % 8 or height % 8:
        raise ValueError("jpeg(): width and height must be multiples of 8")
    grid = _grid(width, height, color)
    comps = 1 if gray else 3
    dc = _huffman_codes(_DC_COUNTS, _DC_VALUES)
    eob = (0, 1)  # the AC table holds one symbol, end-of-block, coded "0"
    bits = _Bits()
    pred = [0] * comps
    for by in range(height // 8):
        for bx in range(width // 8):
            r, g, b = grid[by * 8][bx * 8]
            ycc = (
                0.299 * r + 0.587 * g + 0.114 * b,
                128 - 0.168736 * r - 0.331264 * g + 0.5 * b,
                128 + 0.5 * r - 0.418688 * g - 0.081312 * b,
            )
            for c in range(comps):
                value = round(8 * (ycc[c] - 128))
                diff = value - pred[c]
                pred[c] = value
                size = abs(diff).bit_length()
                bits.put(*dc[size])
                if size:
                    bits.put(diff if diff > 0 else diff + (1 << size) - 1, size)
                bits.put(*eob)
    sof = struct.pack(">BHHB", 8, height, width, comps) + b"".join(
        struct.pack(">BBB", c + 1, 0x11, 0) for c in range(comps)
    )
    sos = struct.pack(">B", comps) + b"".join(struct.pack(">BB", c + 1, 0) for c in range(comps))
    return (
        b"\xff\xd8"
        + _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
        + _segment(0xDB, b"\x00" + b"\x01" * 64)
        + _segment(0xC0, sof)
        + _segment(0xC4, b"\x00" + bytes(_DC_COUNTS) + bytes(_DC_VALUES))
        + _segment(0xC4, b"\x10" + bytes([1] + [0] * 15) + b"\x00")
        + _segment(0xDA, sos + b"\x00\x3f\x00")
        + bits.flush()
        + b"\xff\xd9"
    )


# ---------------------------------------------------------------------------- TIFF, BMP


def tiff(width: int, height: int, color: Pixel | Sequence[Sequence[Pixel]]) -> bytes:
    """An uncompressed little-endian RGB TIFF (one strip)."""
    pixels = b"".join(bytes(p) for row in _grid(width, height, color) for p in row)
    entries = [
        (256, 3, 1, width),
        (257, 3, 1, height),
        (258, 3, 3, 0),  # BitsPerSample: offset filled below
        (259, 3, 1, 1),
        (262, 3, 1, 2),
        (273, 4, 1, 0),  # StripOffsets: filled below
        (277, 3, 1, 3),
        (278, 3, 1, height),
        (279, 4, 1, len(pixels)),
        (284, 3, 1, 1),
    ]
    ifd_size = 2 + 12 * len(entries) + 4
    bps_at = 8 + ifd_size
    data_at = bps_at + 6
    out = bytearray(b"II*\x00" + struct.pack("<I", 8) + struct.pack("<H", len(entries)))
    for tag, kind, count, value in entries:
        if tag == 258:
            value = bps_at
        elif tag == 273:
            value = data_at
        if kind == 3 and count == 1:
            out += struct.pack("<HHIHH", tag, kind, count, value, 0)
        else:
            out += struct.pack("<HHII", tag, kind, count, value)
    out += struct.pack("<I", 0) + struct.pack("<HHH", 8, 8, 8) + pixels
    return bytes(out)


def bmp(width: int, height: int, color: Pixel | Sequence[Sequence[Pixel]]) -> bytes:
    """A 24-bit uncompressed Windows BMP."""
    pad = (4 - (width * 3) % 4) % 4
    rows = _grid(width, height, color)
    body = b"".join(
        b"".join(bytes((b, g, r)) for r, g, b in row) + b"\x00" * pad for row in reversed(rows)
    )
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(body), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + 40 + len(body), 0, 0, 54) + info + body


# ---------------------------------------------------------------------------- audio


def _tone(n: int, rate: int, freq: float, amplitude: float) -> list[int]:
    return [round(amplitude * 32767 * math.sin(2 * math.pi * freq * i / rate)) for i in range(n)]


def aiff(rate: int, seconds: float, freq: float, amplitude: float = 0.3) -> bytes:
    """A mono 16-bit AIFF of one sine tone."""
    samples = _tone(round(rate * seconds), rate, freq, amplitude)
    exponent = rate.bit_length() - 1
    rate80 = struct.pack(">HQ", 16383 + exponent, rate << (63 - exponent))
    comm = struct.pack(">hIh", 1, len(samples), 16) + rate80
    ssnd = struct.pack(">II", 0, 0) + struct.pack(f">{len(samples)}h", *samples)
    body = b"AIFF" + b"COMM" + struct.pack(">I", len(comm)) + comm
    body += b"SSND" + struct.pack(">I", len(ssnd)) + ssnd
    return b"FORM" + struct.pack(">I", len(body)) + body


def wav(rate: int, seconds: float, freq: float, amplitude: float = 0.3) -> bytes:
    """A mono 16-bit PCM WAV of one sine tone."""
    samples = _tone(round(rate * seconds), rate, freq, amplitude)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(struct.pack(f"<{len(samples)}h", *samples))
    return buf.getvalue()


# ---------------------------------------------------------------------------- DICOM


def _element(group: int, elem: int, vr: str, value: bytes) -> bytes:
    if len(value) % 2:
        value += b"\x00" if vr in ("UI", "OB") else b" "
    if vr in ("OB", "OW", "SQ", "UN", "UT"):
        return struct.pack("<HH2sHI", group, elem, vr.encode(), 0, len(value)) + value
    return struct.pack("<HH2sH", group, elem, vr.encode(), len(value)) + value


def dicom(
    width: int, height: int, gray: int, *, patient_id: str, sop_uid: str, sex: str, age: int
) -> bytes:
    """A minimal DICOM Part 10 file (explicit VR little endian, 8-bit MONOCHROME2)."""
    secondary = b"1.2.840.10008.5.1.4.1.1.7"  # Secondary Capture Image Storage
    uid = sop_uid.encode()
    meta = b"".join(
        (
            _element(0x0002, 0x0001, "OB", b"\x00\x01"),
            _element(0x0002, 0x0002, "UI", secondary),
            _element(0x0002, 0x0003, "UI", uid),
            _element(0x0002, 0x0010, "UI", b"1.2.840.10008.1.2.1"),
        )
    )
    header = _element(0x0002, 0x0000, "UL", struct.pack("<I", len(meta))) + meta
    body = b"".join(
        (
            _element(0x0008, 0x0016, "UI", secondary),
            _element(0x0008, 0x0018, "UI", uid),
            _element(0x0008, 0x0060, "CS", b"OT"),
            _element(0x0010, 0x0020, "LO", patient_id.encode()),
            _element(0x0010, 0x0040, "CS", b"M" if sex == "male" else b"F"),
            _element(0x0010, 0x1010, "AS", f"{age:03d}Y".encode()),
            _element(0x0028, 0x0002, "US", struct.pack("<H", 1)),
            _element(0x0028, 0x0004, "CS", b"MONOCHROME2"),
            _element(0x0028, 0x0010, "US", struct.pack("<H", height)),
            _element(0x0028, 0x0011, "US", struct.pack("<H", width)),
            _element(0x0028, 0x0100, "US", struct.pack("<H", 8)),
            _element(0x0028, 0x0101, "US", struct.pack("<H", 8)),
            _element(0x0028, 0x0102, "US", struct.pack("<H", 7)),
            _element(0x0028, 0x0103, "US", struct.pack("<H", 0)),
            _element(0x7FE0, 0x0010, "OB", bytes([gray]) * (width * height)),
        )
    )
    return b"\x00" * 128 + b"DICM" + header + body


# ---------------------------------------------------------------------------- TFRecord


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def _masked_crc(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _example(features: Mapping[str, bytes | int]) -> bytes:
    """A serialised ``tf.train.Example`` of bytes and int64 features."""
    entries = b""
    for key, value in features.items():
        if isinstance(value, bytes):
            feature = _field(1, _field(1, value))  # bytes_list { value }
        else:
            feature = _field(3, _field(1, _varint(value)))  # int64_list { packed value }
        entries += _field(1, _field(1, key.encode()) + _field(2, feature))
    return _field(1, entries)


def tfrecord(records: Iterable[Mapping[str, bytes | int]]) -> bytes:
    """A TFRecord file of ``tf.train.Example`` records."""
    out = bytearray()
    for rec in records:
        data = _example(rec)
        length = struct.pack("<Q", len(data))
        out += length + struct.pack("<I", _masked_crc(length))
        out += data + struct.pack("<I", _masked_crc(data))
    return bytes(out)


# ---------------------------------------------------------------------------- CSV

Cell = str | int | float | None
"""A CSV cell: None (or NaN) is written empty, floats by ``repr``."""


def _cell(v: object) -> object:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return v


def write_csv(
    path: Path,
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    nonnumeric: bool = False,
) -> None:
    """Write CSV as pandas' ``to_csv(index=False)`` does: newline line ends, minimal quoting
    (``nonnumeric``: ``csv.QUOTE_NONNUMERIC``), floats by ``repr``, None/NaN empty.
    """
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(
            fh,
            lineterminator="\n",
            quoting=csv.QUOTE_NONNUMERIC if nonnumeric else csv.QUOTE_MINIMAL,
        )
        w.writerow(header)
        for row in rows:
            w.writerow([_cell(v) for v in row])
