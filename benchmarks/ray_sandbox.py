"""Throughput of trivial jobs through ``RaySandbox`` on a local Ray cluster vs the inner sandbox.

Both sides run the same N trivial jobs (``print``; no submission, so nothing is graded) two at
a time: directly on the inner sandbox (capped at 2 concurrent jobs), and through ``RaySandbox``
on a local cluster started with 2 CPUs (each job asks for 1 CPU). The inner sandbox is
``openmle.backends.LocalSandbox`` when it is available, else a minimal subprocess sandbox
defined here (``--inner subprocess``). The difference is Ray's per-task cost: scheduling,
serialising the job and result, and a fresh inner sandbox per task on the worker.

Usage: python benchmarks/ray_sandbox.py [--jobs 40] [--inner local|subprocess]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from attrs import define

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from benchmarks._common import emit  # noqa: E402

from openmle import Job, Outcome, Resources, RunResult, Sandbox  # noqa: E402
from openmle._runlog import classify_run  # noqa: E402
from openmle._task_protocol import TaskResolver  # noqa: E402
from openmle.backends import RaySandbox  # noqa: E402
from openmle.testing import ToyTask  # noqa: E402

TRIVIAL = "print('hello')\n"


@define(eq=False)
class SubprocessSandbox(Sandbox):
    """Runs ``python main.py`` in a temp dir with ``$DATA_DIR`` set (no isolation at all)."""

    resolver: TaskResolver

    async def run(self, job: Job) -> RunResult:
        """Run and classify (nothing is graded unless a submission appears)."""
        task = self.resolver(job.task)
        work = Path(tempfile.mkdtemp(prefix="openmle-bench-"))
        try:
            (work / "main.py").write_text(job.code)
            env = {**os.environ, "DATA_DIR": str(task.public_dir(job.split))}
            t0 = time.monotonic()
            proc = await anyio.run_process(
                [sys.executable, "main.py"], cwd=work, env=env, check=False,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            sub = work / "submission.csv"
            grade = task.grade(sub, job.split) if sub.is_file() else None
            return classify_run(
                split=job.split,
                exit_code=proc.returncode,
                timed_out=False,
                oom=False,
                submission=sub if sub.is_file() else None,
                grade=grade,
                logs=proc.stdout.decode(errors="replace"),
                runtime_s=time.monotonic() - t0,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)

    async def aclose(self) -> None:
        """Nothing to release."""


@define(eq=False)
class SubprocessFactory:
    """Picklable factory (this module is ``__main__``, so Ray pickles it by value)."""

    resolver: TaskResolver

    def __call__(self) -> SubprocessSandbox:
        return SubprocessSandbox(self.resolver)


def inner_sandbox(kind: str, resolver: TaskResolver) -> tuple[Sandbox, Any]:
    """The inner sandbox for the direct side and what ``RaySandbox(inner=...)`` gets."""
    if kind == "local":
        import openmle.backends as backends

        local = backends.LocalSandbox(resolver=resolver)
        return local, "local"
    return SubprocessSandbox(resolver), SubprocessFactory(resolver)


async def throughput(sandbox: Sandbox, n: int, concurrency: int) -> float:
    """Jobs per second for ``n`` trivial jobs, ``concurrency`` at a time."""
    limiter = anyio.CapacityLimiter(concurrency)
    outcomes: list[Outcome] = []

    async def one(i: int) -> None:
        async with limiter:
            job = Job(code=TRIVIAL, task="toy", name=f"j{i}", resources=Resources(cpus=1))
            outcomes.append((await sandbox.run(job)).outcome)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    took = time.perf_counter() - t0
    assert outcomes == [Outcome.MISSING_SUBMISSION] * n, outcomes
    return n / took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--inner", choices=["local", "subprocess"], default=None)
    args = parser.parse_args()
    import openmle.backends as backends

    kind = args.inner or ("local" if "LocalSandbox" in backends.__all__ else "subprocess")
    import ray

    root = Path(tempfile.mkdtemp(prefix="openmle-bench-task-"))
    task = ToyTask.create(root / "toy")
    resolver = ToyTask.resolver({"toy": task})
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        object_store_memory=100 * 1024 * 1024,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT / "src")}},
        logging_level=logging.WARNING,
    )
    try:
        direct, spec = inner_sandbox(kind, resolver)
        via_ray = RaySandbox(inner=spec, resolver=resolver if kind == "local" else None)
        anyio.run(throughput, via_ray, 4, 2)  # warm up workers
        anyio.run(throughput, direct, 4, 2)
        direct_jps = anyio.run(throughput, direct, args.jobs, 2)
        ray_jps = anyio.run(throughput, via_ray, args.jobs, 2)
    finally:
        ray.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    ratio = ray_jps / direct_jps
    print(f"inner sandbox ({kind}) directly: {direct_jps:6.2f} jobs/s")
    print(f"RaySandbox on a local cluster:  {ray_jps:6.2f} jobs/s   ratio {ratio:.2f}x")
    emit(
        "ray_sandbox",
        {
            "inner": kind,
            "jobs": args.jobs,
            "concurrency": 2,
            "direct_jobs_per_s": round(direct_jps, 2),
            "ray_jobs_per_s": round(ray_jps, 2),
            "ray_over_direct": round(ratio, 3),
        },
    )


if __name__ == "__main__":
    main()
