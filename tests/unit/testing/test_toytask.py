"""The toy task writes a package layout and grades out of process, without leaking answers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openmle import Split
from openmle._task_protocol import TaskHandle
from openmle.testing import TOY_SOLUTION, ToyTask


def test_toy_task_layout_and_grades(tmp_path: Path) -> None:
    """The solution scores 1.0 on both splits; a bad submission is invalid with a reason."""
    task = ToyTask.create(tmp_path / "toy")
    assert isinstance(task, TaskHandle)
    for split in Split:
        pub = task.public_dir(split)
        assert {p.name for p in pub.iterdir()} == {
            "train.csv",
            "test.csv",
            "sample_submission.csv",
            "description.txt",
        }
        assert "target" not in (pub / "test.csv").read_text().splitlines()[0]
        work = tmp_path / f"work-{split}"
        work.mkdir()
        subprocess.run(
            [sys.executable, "-c", TOY_SOLUTION],
            cwd=work,
            check=True,
            env={**os.environ, "DATA_DIR": str(pub)},
            capture_output=True,
        )
        grade = task.grade(work / "submission.csv", split)
        assert grade.valid and grade.score == 1.0
        sample = task.grade(pub / "sample_submission.csv", split)
        assert sample.valid and sample.score is not None and 0 <= sample.score < 1
    bad = tmp_path / "bad.csv"
    bad.write_text("id,label\n1,0\n")
    g = task.grade(bad, Split.TEST)
    assert not g.valid and g.score is None and "columns" in g.reason
    assert all(p.is_dir() for p in task.private_paths)
    assert ToyTask.resolver({"toy": task})("toy") is task


def test_a_hostile_submission_is_invalid_at_once(tmp_path: Path) -> None:
    """A 60 MiB line of commas took the grader 88 s and 6.5 GB; a line or a file past the
    grader's bounds is invalid, with the bound in the reason."""
    task = ToyTask.create(tmp_path / "toy")
    long_line = tmp_path / "line.csv"
    long_line.write_bytes(b"id,target\n" + b"," * (8 * 1024 * 1024) + b"\n")
    g = task.grade(long_line, Split.VALID)
    assert not g.valid and g.score is None and "a line longer than 65536 bytes" in g.reason
    big = tmp_path / "big.csv"
    big.write_bytes(b"id,target\n" + b"1,0\n" * (5 * 1024 * 1024))
    g = task.grade(big, Split.VALID)
    assert not g.valid and "larger than 16777216 bytes" in g.reason
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,target\n" + "".join(f"{i}\n" for i in range(2)))
    g = task.grade(ragged, Split.VALID)
    assert not g.valid and g.reason != "grader crashed"
