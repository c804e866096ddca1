"""Emit: write the task package and the builder's full record, atomically.

Layout (what ``openmle task validate`` reads, plus the builder's files)::

    PKG/task.toml                 name, built-in metric, direction, id column, leaderboard
    PKG/data/public/...           from prepare.py
    PKG/data/private/...          from prepare.py
    PKG/utils/prepare.py          the model's prepare.py (prepare(raw, public, private))
    PKG/utils/metric.py           the model's metric, when no vetted metric fits (checked)
    PKG/raw/...                   the raw data prepare.py reads
    PKG/leaderboard.csv           synthetic (see the solvability stage), when there is one
    PKG/builder/record.json       intake/provenance, inventory, spec, prepare runs, gate
                                  findings, baseline scores, quality scores, checksums
    PKG/builder/inventory.txt     the bounded inventory text the model read
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openmle.builder._spec import TaskSpec

__all__ = ["publish", "stage_package", "write_record"]

RECORD = Path("builder") / "record.json"


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def stage_package(
    root: Path, spec: TaskSpec, name: str, prepared: Path, prepare_source: str, raw_dir: Path
) -> None:
    """Lay out a package at ``root`` from prepare's output in ``prepared`` (public/private)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    for part in ("public", "private"):
        shutil.copytree(prepared / part, root / "data" / part, symlinks=True)
    (root / "utils").mkdir(exist_ok=True)
    (root / "utils" / "prepare.py").write_text(prepare_source, encoding="utf-8")
    shutil.copytree(raw_dir, root / "raw", symlinks=True)
    write_toml(root, spec, name, leaderboard=False)


def write_toml(root: Path, spec: TaskSpec, name: str, *, leaderboard: bool) -> None:
    """Write ``task.toml`` with the spec's built-in metric and direction."""
    metric = spec.grader_metric  # None: utils/metric.py grades (a checked custom metric)
    lines = [
        f"name = {_toml_str(name)}",
        *([f"metric = {_toml_str(metric)}"] if metric is not None else []),
        f"higher_is_better = {'true' if spec.higher_is_better else 'false'}",
        f"id_column = {_toml_str(spec.submission_id)}",
        "time_limit_s = 600",
    ]
    if leaderboard:
        lines.append('leaderboard = "leaderboard.csv"')
    (root / "task.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_leaderboard(root: Path, scores: Sequence[float]) -> None:
    """Write ``leaderboard.csv`` (a ``score`` column)."""
    text = "score\n" + "".join(f"{s:.6g}\n" for s in scores)
    (root / "leaderboard.csv").write_text(text, encoding="utf-8")


def write_record(root: Path, record: Mapping[str, Any], inventory_text: str) -> None:
    """Write the builder's record and inventory text under ``builder/``."""
    (root / "builder").mkdir(exist_ok=True)
    (root / RECORD).write_text(
        json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    (root / "builder" / "inventory.txt").write_text(inventory_text + "\n", encoding="utf-8")


def publish(staged: Path, out: Path) -> None:
    """Move the finished package ``staged`` to ``out`` with one rename (same file system).

    Raises:
        FileExistsError: ``out`` exists (a finished package is never overwritten).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        raise FileExistsError(str(out))
    fd = os.open(staged, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(staged, out)


def staging_dir(out: Path) -> Path:
    """A fresh temporary directory next to ``out`` (same file system for the final rename)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
