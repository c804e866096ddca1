"""prepare.py's output comes back through the sandbox as a packed file list; the builder
unpacks plain files under public/ and private/ only (a hostile prepare.py cannot write
elsewhere on the host or smuggle a link into the package)."""

from __future__ import annotations

import base64
import csv
from pathlib import Path

import pytest

from openmle import Split
from openmle.builder._prepare import StageHandle


def _pack(path: Path, rows: list[tuple[str, str, bytes]]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["kind", "path", "data"])
        for kind, rel, data in rows:
            w.writerow([kind, rel, base64.b64encode(data).decode()])
    return path


def test_plain_files_are_unpacked(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    handle = StageHandle(name="prepare", raw_dir=tmp_path, dest=dest)
    sub = _pack(
        tmp_path / "s.csv",
        [("file", "public/train.csv", b"a,b\n1,2\n"), ("file", "private/x.csv", b"")],
    )
    report = handle.grade(sub, Split.TEST)
    assert report.valid and report.score == 0.0
    assert (dest / "public" / "train.csv").read_bytes() == b"a,b\n1,2\n"
    assert handle.private_paths == () and handle.public_dir(Split.VALID) == tmp_path


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (("file", "public/../../escape.txt", b"x"), "outside public/"),
        (("file", "/etc/cron.d/x", b"x"), "outside public/"),
        (("file", "elsewhere/x.csv", b"x"), "outside public/"),
        (("symlink", "public/test.csv", b""), "plain files only"),
        (("other", "public/fifo", b""), "plain files only"),
    ],
)
def test_hostile_entries_are_refused(
    tmp_path: Path, row: tuple[str, str, bytes], reason: str
) -> None:
    dest = tmp_path / "dest"
    handle = StageHandle(name="prepare", raw_dir=tmp_path, dest=dest)
    report = handle.grade(_pack(tmp_path / "s.csv", [row]), Split.TEST)
    assert not report.valid and reason in report.reason
    assert not (tmp_path / "escape.txt").exists()
    assert not [p for p in dest.rglob("*") if p.is_file()] if dest.exists() else True


def test_a_file_that_is_not_a_file_list_is_refused(tmp_path: Path) -> None:
    handle = StageHandle(name="prepare", raw_dir=tmp_path, dest=tmp_path / "dest")
    sub = tmp_path / "s.csv"
    sub.write_text("id,target\n1,2\n")
    assert "no file list" in handle.grade(sub, Split.TEST).reason
