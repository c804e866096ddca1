"""Task.prepare: runs utils/prepare.py in a child process; failures leave data untouched."""

from __future__ import annotations

import os

import pytest

from openmle.errors import TaskPackageError
from openmle.gym import load_task

from .conftest import PackageBuilder

_PREPARE = """
import os, random
from pathlib import Path
def prepare(raw, public, private):
    rows = (Path(raw) / "data.csv").read_text().splitlines()
    random.shuffle(rows)  # seeded by the runner: deterministic
    (Path(public) / "train.csv").write_text("\\n".join(rows) + "\\n")
    (Path(public) / "pid.txt").write_text(str(os.getpid()))
    (Path(private) / "test_answer.csv").write_text("id,y\\n")
"""


def test_prepare_runs_in_a_child_and_is_deterministic(make_package: PackageBuilder) -> None:
    """Two prepares give identical files, written by another process."""
    root = make_package()
    (root / "raw").mkdir()
    (root / "raw/data.csv").write_text("\n".join(f"{i},{i}" for i in range(50)) + "\n")
    (root / "utils").mkdir()
    (root / "utils/prepare.py").write_text(_PREPARE)
    task = load_task(root)
    task.prepare()
    first = (root / "data/public/train.csv").read_text()
    assert int((root / "data/public/pid.txt").read_text()) != os.getpid()
    task.prepare()
    assert (root / "data/public/train.csv").read_text() == first
    assert not (root / "data/public/test.csv").exists()  # the public dir was replaced whole
    assert sorted(p.name for p in (root / "data").iterdir()) == ["private", "public"]


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("none", "utils/prepare.py is missing"),
        ("noraw", "raw/ is missing"),
        ("raises", "ZeroDivisionError"),
        ("nofunc", "defines no function prepare"),
        ("empty", "wrote nothing"),
    ],
)
def test_prepare_failures_keep_the_data(
    make_package: PackageBuilder, setup: str, needle: str
) -> None:
    """Each failure is a TaskPackageError with the fix; data/public is left as it was."""
    root = make_package()
    before = (root / "data/public/train.csv").read_text()
    if setup != "noraw":
        (root / "raw").mkdir()
    bodies = {
        "noraw": "def prepare(raw, public, private):\n    pass\n",
        "raises": "def prepare(raw, public, private):\n    1 / 0\n",
        "nofunc": "x = 1\n",
        "empty": "def prepare(raw, public, private):\n    pass\n",
    }
    if setup in bodies:
        (root / "utils").mkdir()
        (root / "utils/prepare.py").write_text(bodies[setup])
    with pytest.raises(TaskPackageError, match=needle):
        load_task(root).prepare()
    assert (root / "data/public/train.csv").read_text() == before
