"""``prepare.py`` of ``mini-jsonl``: every fifth row from the second is a test row; the answers
are JSONL."""

from __future__ import annotations

import json
from pathlib import Path

from mlebench.utils import read_rows, split, write


def prepare(raw: Path, public: Path, private: Path) -> None:
    """Write the public and private splits of ``raw``."""
    rows = read_rows(raw / "train.csv")
    train, test = split(rows, 5, 1)
    write(public / "train.csv", ["id", "text", "label"], train)
    write(public / "test.csv", ["id", "text"], test)
    sample = [dict(id=r["id"], label="a") for r in test]
    write(public / "sample_submission.csv", ["id", "label"], sample)
    with open(private / "answers.jsonl", "w") as fh:
        for r in test:
            fh.write(json.dumps({"id": int(r["id"]), "label": r["label"]}) + "\n")
