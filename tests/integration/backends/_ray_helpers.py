"""Picklable inner sandboxes for the Ray tests (until ``LocalSandbox`` lands).

``SubprocessSandbox`` runs the program as a child process in a fresh directory with
``$DATA_DIR`` set, kills its process group at the timeout, and grades on the host with the
shared classifier: a small but honest local sandbox. It dies with its parent (PDEATHSIG), so a
worker killed mid-job does not leave the program running.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from attrs import define, field

from openmle import Job, RunResult
from openmle._runlog import LogCap, classify_run
from openmle._task_protocol import TaskResolver


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    os.setsid()
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@define(eq=False)
class SubprocessSandbox:
    """Runs ``python main.py`` in a temp dir; grading on the host via the task's grader."""

    resolver: TaskResolver
    closed: bool = field(default=False, init=False)

    async def run(self, job: Job) -> RunResult:
        """Run, classify, clean up (the process group is killed on every path)."""
        task = self.resolver(job.task)
        work = Path(tempfile.mkdtemp(prefix="openmle-sub-"))
        (work / "main.py").write_text(job.code)
        env = {**os.environ, **job.env, "DATA_DIR": str(task.public_dir(job.split))}
        cap = LogCap()
        proc = subprocess.Popen(  # noqa: ASYNC220 - starting is quick; waiting is in a thread
            [sys.executable, "main.py"],
            cwd=work,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        started = time.monotonic()
        try:

            def drain() -> None:
                assert proc.stdout is not None
                for line in proc.stdout:
                    cap.feed(line)

            timed_out = False
            with anyio.move_on_after(job.timeout_s) as scope:
                await anyio.to_thread.run_sync(drain, abandon_on_cancel=True)
                await anyio.to_thread.run_sync(proc.wait, abandon_on_cancel=True)
            if scope.cancelled_caught:
                timed_out = True
            runtime = time.monotonic() - started
            sub = work / "submission.csv"
            grade = None
            if not timed_out and proc.returncode == 0 and sub.is_file():
                grade = await anyio.to_thread.run_sync(task.grade, sub, job.split)
            return classify_run(
                split=job.split,
                exit_code=proc.returncode,
                timed_out=timed_out,
                oom=False,
                submission=sub if sub.is_file() else None,
                grade=grade,
                logs=cap.text(),
                runtime_s=runtime,
            )
        finally:
            with anyio.CancelScope(shield=True):
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    await anyio.to_thread.run_sync(proc.wait)
                if proc.stdout is not None:
                    proc.stdout.close()
                shutil.rmtree(work, ignore_errors=True)

    async def aclose(self) -> None:
        """Nothing to release."""
        self.closed = True


@define(eq=False)
class SubprocessFactory:
    """A picklable factory for :class:`SubprocessSandbox`."""

    resolver: TaskResolver

    def __call__(self) -> SubprocessSandbox:
        return SubprocessSandbox(self.resolver)


@define(eq=False)
class StuckSandbox:
    """A broken inner sandbox that never returns (to test the Ray-level deadline)."""

    async def run(self, job: Job) -> RunResult:
        """Hang."""
        await anyio.sleep(3600)
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        """Nothing to release."""


def stuck_factory() -> StuckSandbox:
    """A picklable factory for :class:`StuckSandbox`."""
    return StuckSandbox()
