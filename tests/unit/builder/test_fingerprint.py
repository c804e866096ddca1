"""Decontamination by content: ``table:`` fingerprints and ``openmle task blocklist``.

A blocklisted miniature competition (made here) is refused when a copy of it comes back
renamed (folder and files), and when it comes back renamed and re-saved (line endings, BOM,
TSV, number format, shuffled rows and columns, JSON records); other data is not.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from openmle.backends import OfflineModel
from openmle.builder import (
    BuildOptions,
    build_task,
    check_contamination,
    fingerprint_lines,
    intake,
    load_blocklist,
    table_fingerprint,
)
from openmle.errors import InvalidArgument

_HEADER = ["id", "x", "y", "label"]


def _rows(seed: int = 0, n: int = 40) -> list[list[str]]:
    rng = random.Random(seed)
    return [
        [str(k), f"{rng.uniform(0, 5):.3f}", str(rng.randint(0, 9)), rng.choice("ab")]
        for k in range(n)
    ]


def _competition(root: Path) -> Path:
    """A miniature competition folder: train.csv, test.csv (no label), description.txt."""
    root.mkdir(parents=True)
    rows = _rows()
    (root / "train.csv").write_text(
        "\n".join(",".join(r) for r in [_HEADER, *rows[:30]]) + "\n", encoding="utf-8"
    )
    (root / "test.csv").write_text(
        "\n".join(",".join(r[:3]) for r in [_HEADER, *rows[30:]]) + "\n", encoding="utf-8"
    )
    (root / "description.txt").write_text("Predict label.\n", encoding="utf-8")
    return root


def _blocklist(tmp_path: Path, raw: Path) -> Path:
    """``openmle task blocklist RAW --to FILE --name ...``, as a user runs it."""
    out = tmp_path / "mine.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "openmle", "task", "blocklist", str(raw), "--to", str(out),
         "--name", "Tiny Holdout Cup"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "appended 6 line(s)" in proc.stdout  # name, 3 sha256, 2 tables
    return out


def test_a_table_fingerprint_survives_resaving_but_not_a_changed_cell(tmp_path: Path) -> None:
    rows = _rows()
    base = tmp_path / "a.csv"
    base.write_text("\n".join(",".join(r) for r in [_HEADER, *rows]) + "\n", encoding="utf-8")
    fp = table_fingerprint(base)
    assert fp is not None and len(fp) == 64
    # Re-saved: BOM, CRLF, quotes, the float 1.500 as 1.5, columns and rows reordered.
    order = [3, 0, 2, 1]
    shuffled = rows[:]
    random.Random(1).shuffle(shuffled)
    resaved = tmp_path / "copy.csv"
    lines = [",".join(f'"{[*_HEADER][j]}"' for j in order)]
    lines += [",".join(f"{float(r[j]):g}" if j == 1 else r[j] for j in order) for r in shuffled]
    resaved.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    tsv = tmp_path / "copy.tsv"
    tsv.write_text("\n".join("\t".join(r) for r in [_HEADER, *rows]) + "\n", encoding="utf-8")
    records = tmp_path / "copy.json"
    records.write_text(
        json.dumps(
            [
                {h: (float(v) if h == "x" else v) for h, v in zip(_HEADER, r, strict=True)}
                for r in rows
            ]
        )
    )
    assert table_fingerprint(resaved) == table_fingerprint(tsv) == table_fingerprint(records) == fp
    changed = tmp_path / "changed.csv"
    edited = [r[:] for r in rows]
    edited[7][3] = "c"
    changed.write_text("\n".join(",".join(r) for r in [_HEADER, *edited]) + "\n", encoding="utf-8")
    assert table_fingerprint(changed) != fp
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "bad.csv").write_text("a,b\n1\n")
    assert table_fingerprint(tmp_path / "notes.txt") is None
    assert table_fingerprint(tmp_path / "bad.csv") is None


def test_a_renamed_copy_of_blocklisted_data_is_refused(tmp_path: Path) -> None:
    original = _competition(tmp_path / "tiny-holdout-cup")
    listed = load_blocklist([_blocklist(tmp_path, original)], shipped=False)
    copy = tmp_path / "fresh-sources" / "s0001"
    copy.mkdir(parents=True)
    (copy / "data.csv").write_bytes((original / "train.csv").read_bytes())
    (copy / "notes.md").write_bytes((original / "description.txt").read_bytes())
    result = check_contamination(intake(copy), listed)
    assert "sha256 of data.csv" in result.matches
    assert "sha256 of notes.md" in result.matches
    # The whole build stops at decontamination, before any model or sandbox runs.
    built = anyio.run(
        lambda: build_task(
            copy, tmp_path / "pkg", OfflineModel(), options=BuildOptions(blocklist=listed)
        )
    )
    assert (built.status, built.stage) == ("rejected", "decontam")
    assert "sha256 of data.csv" in built.reason and not (tmp_path / "pkg").exists()


def test_a_renamed_and_resaved_copy_is_refused_by_its_table_fingerprint(tmp_path: Path) -> None:
    original = _competition(tmp_path / "orig")
    listed = load_blocklist([_blocklist(tmp_path, original)], shipped=False)
    text = (original / "train.csv").read_text(encoding="utf-8").splitlines()
    body = text[1:]
    random.Random(2).shuffle(body)
    copy = tmp_path / "other"
    copy.mkdir()
    (copy / "table.tsv").write_text(
        "\r\n".join(line.replace(",", "\t") for line in [text[0], *body]) + "\r\n",
        encoding="utf-8",
    )
    result = check_contamination(intake(copy), listed)
    assert result.matches == ("table fingerprint of table.tsv",)
    # Other data with the same columns is clean; so is everything without table: lines.
    clean = tmp_path / "clean"
    clean.mkdir()
    rows = _rows(seed=9)
    (clean / "train.csv").write_text(
        "\n".join(",".join(r) for r in [_HEADER, *rows]) + "\n", encoding="utf-8"
    )
    assert check_contamination(intake(clean), listed).clean
    names_only = load_blocklist(shipped=True)
    assert check_contamination(intake(copy), names_only).clean


def test_fingerprint_lines_name_each_file_and_refuse_a_missing_path(tmp_path: Path) -> None:
    raw = _competition(tmp_path / "raw")
    lines = fingerprint_lines([raw], name="Tiny Cup")
    assert lines[0] == "name:Tiny Cup"
    assert sum(line.startswith("sha256:") for line in lines) == 3
    assert [line.split("# ")[1] for line in lines if line.startswith("table:")] == [
        "test.csv (table)",
        "train.csv (table)",
    ]
    single = fingerprint_lines([raw / "train.csv"])
    assert single[0].endswith("# train.csv")
    with pytest.raises(InvalidArgument, match="PATH"):
        fingerprint_lines([tmp_path / "nope"])
    bad = tmp_path / "bad.txt"
    bad.write_text("table:xyz\n")
    with pytest.raises(InvalidArgument, match="table:<64 hex digits>"):
        load_blocklist([bad], shipped=False)
