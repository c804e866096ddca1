"""``prepare.py`` of ``mini-tabular``: every fifth row is a test row."""

from __future__ import annotations

from pathlib import Path

from mlebench.utils import read_rows, split, write


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Write the public and private splits of ``raw``."""
    rows = read_rows(raw / "train.csv")
    train, test = split(rows, 5, 0)
    write(public / "train.csv", ["id", "x1", "x2", "label"], train)
    write(public / "test.csv", ["id", "x1", "x2"], test)
    sample = [dict(id=r["id"], label=0) for r in test]
    write(public / "sample_submission.csv", ["id", "label"], sample)
    write(private / "test.csv", ["id", "label"], test)
