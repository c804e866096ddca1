"""``mlebench/utils.py`` of the miniature registry: the CSV reading and writing of its
preparers."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file as dicts."""
    with open(path) as fh:
        return list(csv.DictReader(fh))


def write(path: Path, header: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write ``header`` and each row's values in that order."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([r[h] for h in header])


def split(
    rows: list[dict[str, str]], every: int, at: int
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(train, test): every ``every``-th row from the ``at``-th is a test row."""
    test = [r for i, r in enumerate(rows) if i % every == at]
    train = [r for i, r in enumerate(rows) if i % every != at]
    return train, test
