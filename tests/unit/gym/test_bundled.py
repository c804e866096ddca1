"""Bundled tasks: generated deterministically, small, gradeable, with synthetic leaderboards."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import openmle
from openmle import Split
from openmle._task_protocol import TaskHandle
from openmle.errors import InvalidArgument
from openmle.gym import bundled, bundled_names
from openmle.gym._bundled import bundled_root

NAMES = ("tabular-binary", "tabular-multiclass", "tabular-regression")


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_names() -> None:
    """Three bundled tasks; an unknown name lists them."""
    assert bundled_names() == NAMES
    with pytest.raises(InvalidArgument, match="tabular-binary"):
        bundled("mnist")


@pytest.mark.parametrize("name", NAMES)
def test_bundled_task_is_complete_and_grades(name: str) -> None:
    """Each task has the layout, a description, bounds, a leaderboard and gradeable samples."""
    task = bundled(name)
    assert isinstance(task, TaskHandle)
    for rel in (
        "data/public/train.csv",
        "data/public/test.csv",
        "data/public/sample_submission.csv",
        "data/public/description.txt",
        "data/private/test_answer.csv",
        "utils/prepare.py",
        "utils/metric.py",
        "raw/data.csv",
        "task.toml",
        "leaderboard.csv",
    ):
        assert (task.root / rel).is_file(), rel
    size = sum(p.stat().st_size for p in task.root.rglob("*") if p.is_file())
    assert size < 2_000_000
    assert "Submission" in task.description and task.meta.theoretical_min == 0.0
    board = task.leaderboard
    assert board is not None and len(board) == 120
    for split in Split:
        report = task.grade(task.public_dir(split) / "sample_submission.csv", split)
        assert report.valid, report.reason
        assert report.score is not None
        if split is Split.TEST:
            assert report.leaderboard_size == 120 and report.human_rank == 0.0
            assert report.gold_threshold is not None and not report.any_medal
        else:
            assert report.leaderboard_size == 0 and report.human_rank is None


@pytest.mark.parametrize("name", NAMES)
def test_generation_is_deterministic_and_race_free(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four threads generating into a fresh cache get one directory, byte-identical to ours."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path))
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(bundled_root(name))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(results)) == 1
    assert [p.name for p in (tmp_path / "tasks").iterdir()] == [results[0].name]
    monkeypatch.undo()
    assert _digest(results[0]) == _digest(bundled(name).root)


def test_generation_is_identical_in_another_process(tmp_path: Path) -> None:
    """A fresh interpreter (another hash seed) generates byte-identical files."""
    env = {
        **os.environ,
        "OPENMLE_CACHE": str(tmp_path),
        "PYTHONHASHSEED": "12345",
        "PYTHONPATH": str(Path(openmle.__file__).parents[1]),
    }
    code = (
        "from openmle.gym._bundled import bundled_root; print(bundled_root('tabular-multiclass'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert _digest(Path(out.stdout.strip())) == _digest(bundled("tabular-multiclass").root)


def test_prepare_reproduces_the_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Running utils/prepare.py in a child process rewrites byte-identical data."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path))
    task = bundled("tabular-regression")
    before = _digest(task.root / "data")
    task.prepare()
    assert _digest(task.root / "data") == before


@pytest.mark.parametrize("name", NAMES)
def test_answers_beat_the_sample_and_take_gold(name: str, tmp_path: Path) -> None:
    """The answers themselves beat the sample submission, take gold and beat every entry."""
    task = bundled(name)
    answers = (task.root / "data/private/test_answer.csv").read_text().splitlines()
    sample = task.grade(task.public_dir("test") / "sample_submission.csv")
    header = (task.public_dir("test") / "sample_submission.csv").read_text().splitlines()[0]
    sub = tmp_path / "sub.csv"
    lines = [header]
    classes = header.split(",")[1:]
    for line in answers[1:]:
        i, y = line.split(",")
        if name == "tabular-multiclass":
            lines.append(",".join([i, *("0.97" if c == y else "0.01" for c in classes)]))
        else:
            lines.append(f"{i},{y}")
    sub.write_text("\n".join(lines) + "\n")
    best = task.grade(sub)
    assert best.valid and sample.score is not None and best.score is not None
    assert best.any_medal and best.human_rank == 1.0
    assert (best.score > sample.score) == task.higher_is_better
