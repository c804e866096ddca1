"""``prepare.py`` of ``mini-images``: every fourth image is a test image."""

from __future__ import annotations

import shutil
from pathlib import Path

from mlebench.utils import read_rows, split, write


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Write the public and private splits of ``raw``."""
    rows = read_rows(raw / "train.csv")
    (public / "train").mkdir()
    (public / "test").mkdir()
    train, test = split(rows, 4, 0)
    for r in train:
        shutil.copyfile(raw / "train" / (r["id"] + ".png"), public / "train" / (r["id"] + ".png"))
    for r in test:
        shutil.copyfile(raw / "train" / (r["id"] + ".png"), public / "test" / (r["id"] + ".png"))
    write(public / "train.csv", ["id", "bright"], train)
    sample = [dict(id=r["id"], bright=0.5) for r in test]
    write(public / "sample_submission.csv", ["id", "bright"], sample)
    write(private / "test.csv", ["id", "bright"], test)
