"""Grading after a real LocalSandbox run is bounded by the job's timeout and dies with a
cancelled run (issue 12, item 3: "a 5 s job took 38 s"; the grading child outlived the slot)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

import anyio
import pytest
from tests._files import alive, write_csv

from openmle import Job
from openmle.backends import LocalSandbox
from openmle.backends._isolation import bwrap_problem, landlock_abi
from openmle.gym import Task, load_task

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:LocalSandbox is using its weaker:RuntimeWarning"),
]

_PROGRAM = (
    "import os, shutil\n"
    "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'), "
    "'submission.csv')\n"
)


def _sleepy_task(root: Path, pid_file: Path) -> Task:
    rows: list[list[object]] = [[i, i * 0.5, 2.0 * i + 1] for i in range(30)]
    pub, priv = root / "data/public", root / "data/private"
    write_csv(pub / "train.csv", ["id", "x", "y"], rows[:20])
    write_csv(pub / "test.csv", ["id", "x"], [r[:2] for r in rows[20:]])
    write_csv(pub / "sample_submission.csv", ["id", "y"], [[r[0], 0.0] for r in rows[20:]])
    write_csv(priv / "test_answer.csv", ["id", "y"], [[r[0], r[2]] for r in rows[20:]])
    (pub / "description.txt").write_text("Predict y.\n")
    (root / "task.toml").write_text('name = "sleepy"\nhigher_is_better = false\n')
    (root / "utils").mkdir()
    (root / "utils/metric.py").write_text(
        "import os, time\n"
        "class SleepyMetrics:\n"
        "    def __init__(self):\n"
        "        self.higher_is_better = False\n"
        "    def evaluate(self, y_true, y_pred):\n"
        f"        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "        time.sleep(600)\n"
        "        return 0.0\n"
    )
    return load_task(root)


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[LocalSandbox, Path]]:
    mode: Literal["bwrap", "landlock"] = "landlock" if landlock_abi() > 0 else "bwrap"
    if mode == "bwrap" and bwrap_problem(shutil.which("bwrap"), sys.executable):
        pytest.skip("no isolation mode available")
    pid_file = tmp_path / "metric.pid"
    task = _sleepy_task(tmp_path / "sleepy", pid_file)
    sb = LocalSandbox(lambda _name: task, isolation=mode, memory_mb=2048)
    await sb.prepare()
    try:
        yield sb, pid_file
    finally:
        await sb.aclose()


async def test_job_timeout_bounds_grading(setup: tuple[LocalSandbox, Path]) -> None:
    """A 5 s job whose grading never ends returns in about 5 s + 5 s, not the task's
    600 s grade timeout; the grade says which limit it hit and the metric is dead. On a
    machine too slow to start the metric within the bound, the test tries again with 15 s,
    then 40 s (the bound follows the job's timeout and stays far below the task's 600 s)."""
    sb, pid_file = setup
    for timeout_s in (5, 15, 40):
        start = time.monotonic()
        result = await sb.run(Job(code=_PROGRAM, task="sleepy", split="test", timeout_s=timeout_s))
        elapsed = time.monotonic() - start
        if pid_file.exists():
            break
    assert elapsed < 4 * timeout_s + 60, elapsed
    assert result.score is None
    assert f"longer than {timeout_s} s" in result.detail, result
    assert pid_file.exists() and not alive(int(pid_file.read_text()))


async def test_cancelled_run_kills_its_grader(setup: tuple[LocalSandbox, Path]) -> None:
    """Cancelling a run while it grades (the service's timeout + grace) kills the grader."""
    sb, pid_file = setup
    with anyio.move_on_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(sb.run, Job(code=_PROGRAM, task="sleepy", split="test", timeout_s=300))
            while not pid_file.exists():  # noqa: ASYNC110 - the metric writes it, no event
                await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
    assert pid_file.exists(), "the metric never ran"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110 - no event to wait on
        await anyio.sleep(0.1)
    assert not alive(pid), "the grading process outlived the cancelled run"
