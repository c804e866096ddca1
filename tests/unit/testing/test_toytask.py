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
