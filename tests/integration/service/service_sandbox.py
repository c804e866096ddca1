"""Real sandboxes for the job-service integration tests and benchmark.

``make`` builds a small one that runs the program in a child process against a
:class:`~openmle.testing.ToyTask` and grades it out of process; ``make_local`` builds
``openmle.backends.LocalSandbox`` (isolated runs) over the same toy tasks.

The server subprocess loads it by name (``--sandbox service_sandbox:make``). Every execution
appends ``start <name>`` and ``end <name>`` lines to the ledger file named by
``$OPENMLE_TEST_LEDGER`` (if set), so tests can count how often each job really ran;
``make_counted``'s sandbox also appends ``sandbox built N``, ``sandbox preflight N`` and
``sandbox closed N`` (N: which construction), so tests can count how often the service builds
and closes its sandbox.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path
from typing import ClassVar, Literal, final

import anyio
from attrs import define, field

from openmle import Job, RunResult
from openmle._protocols import Sandbox
from openmle._runlog import classify_run
from openmle.errors import SandboxError
from openmle.testing import ToyTask

__all__ = [
    "CountedSandbox",
    "ToyProcessSandbox",
    "make",
    "make_counted",
    "make_landlock",
    "make_local",
]


def _ledger(line: str) -> None:
    path = os.environ.get("OPENMLE_TEST_LEDGER")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)


def _artifacts(work: str) -> tuple[str, ...]:
    return tuple(sorted(str(p.relative_to(work)) for p in Path(work).rglob("*") if p.is_file()))


@final
@define(eq=False)
class ToyProcessSandbox(Sandbox):
    """Runs ``job.code`` with this Python in a fresh directory; ``job.task`` is a toy task root."""

    closed: bool = field(default=False, init=False)

    async def run(self, job: Job) -> RunResult:
        """Run, grade and classify one job."""
        if self.closed:
            raise SandboxError("ToyProcessSandbox.run called after aclose()")
        task = ToyTask(root=Path(job.task))
        _ledger(f"start {job.name}")
        with tempfile.TemporaryDirectory(prefix="openmle-svc-") as work:
            env = {**os.environ, **job.env, "DATA_DIR": str(task.public_dir(job.split))}
            t0 = time.monotonic()
            timed_out = False
            proc = None
            with anyio.move_on_after(job.timeout_s) as scope:
                proc = await anyio.run_process(
                    [sys.executable, "-c", job.code], cwd=work, env=env, check=False
                )
            timed_out = scope.cancelled_caught
            runtime = time.monotonic() - t0
            logs = "" if proc is None else (proc.stdout + proc.stderr).decode(errors="replace")
            sub = Path(work) / "submission.csv"
            exists = proc is not None and proc.returncode == 0 and sub.exists()
            grade = await anyio.to_thread.run_sync(task.grade, sub, job.split) if exists else None
            artifacts = await anyio.to_thread.run_sync(_artifacts, work)
            result = classify_run(
                split=job.split,
                exit_code=None if proc is None else proc.returncode,
                timed_out=timed_out,
                oom=False,
                submission=sub if exists else None,
                grade=grade,
                logs=logs,
                runtime_s=runtime,
                artifacts=artifacts,
            )
        _ledger(f"end {job.name}")
        return result

    async def aclose(self) -> None:
        """Mark closed."""
        self.closed = True


def make() -> ToyProcessSandbox:
    """The ``module:callable`` factory the service calls."""
    return ToyProcessSandbox()


@final
@define(eq=False)
class CountedSandbox(Sandbox):
    """A :class:`ToyProcessSandbox` that writes its construction, ``preflight()`` and
    ``aclose()`` calls to the ledger, numbered by construction in this process.
    """

    number: int
    inner: ToyProcessSandbox = field(factory=ToyProcessSandbox, init=False)
    built: ClassVar[int] = 0

    @classmethod
    def make(cls) -> CountedSandbox:
        """Build the next one (and say so in the ledger)."""
        cls.built += 1
        _ledger(f"sandbox built {cls.built}")
        return cls(cls.built)

    async def preflight(self) -> None:
        """Say so in the ledger."""
        _ledger(f"sandbox preflight {self.number}")

    async def run(self, job: Job) -> RunResult:
        """Run on the toy sandbox."""
        return await self.inner.run(job)

    async def aclose(self) -> None:
        """Close the toy sandbox (and say so in the ledger)."""
        _ledger(f"sandbox closed {self.number}")
        await self.inner.aclose()


def make_counted() -> CountedSandbox:
    """The ``module:callable`` factory whose every construction and close is in the ledger."""
    return CountedSandbox.make()


def make_local(
    workdir: Path | None = None, isolation: Literal["auto", "bwrap", "landlock"] = "auto"
) -> Sandbox:
    """``openmle.backends.LocalSandbox`` resolving every task reference as a toy-task root.

    The service passes its work directory as ``workdir`` (run directories go there).
    """
    from openmle.backends import LocalSandbox  # type: ignore[attr-defined,unused-ignore]

    sandbox: Sandbox = LocalSandbox(
        resolver=lambda ref: ToyTask(root=Path(ref)), workdir=workdir, isolation=isolation
    )
    return sandbox


def make_landlock(workdir: Path | None = None) -> Sandbox:
    """:func:`make_local` in Landlock mode (programs share the host's PID namespace)."""
    return make_local(workdir, isolation="landlock")
