"""``RaySandbox`` on a real local Ray cluster (2 CPUs), with real inner sandboxes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._files import open_up

from openmle import Job, Outcome, Resources, RunResult
from openmle.backends import RaySandbox
from openmle.errors import InvalidArgument, SandboxError
from openmle.testing import TOY_SOLUTION, ToyTask

from ._ray_helpers import SubprocessFactory, stuck_factory
from .conftest import Engine

pytestmark = [pytest.mark.integration, pytest.mark.ray]


@pytest.fixture
def toy(tmp_path: Path) -> ToyTask:
    """A toy task on a path every (local) worker can read."""
    return ToyTask.create(tmp_path / "toy")


def _sandbox(toy: ToyTask, **kw: Any) -> RaySandbox:
    kw.setdefault("inner", SubprocessFactory(ToyTask.resolver({"toy": toy})))
    kw.setdefault("cancel_grace_s", 10.0)
    return RaySandbox(**kw)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _read_when_written(path: Path) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


async def _wait_for_file(path: Path) -> str:
    return await anyio.to_thread.run_sync(_read_when_written, path)


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + 30
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _pid_alive(pid)


@pytest.mark.anyio
async def test_jobs_run_on_ray_workers(ray_cluster: Any, toy: ToyTask) -> None:
    """Solutions and failures come back classified from the workers, several at once."""
    async with _sandbox(toy) as sandbox:
        results: dict[str, Any] = {}

        async def one(name: str, code: str) -> None:
            results[name] = await sandbox.run(
                Job(code=code, task="toy", name=name, resources=Resources(cpus=1))
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "ok", TOY_SOLUTION)
            tg.start_soon(one, "crash", "raise KeyError('nope')\n")
            tg.start_soon(one, "nothing", "print('hi')\n")
    assert results["ok"].outcome is Outcome.SUCCESS and results["ok"].score == 1.0
    assert results["crash"].outcome is Outcome.RUNTIME_ERROR
    assert "KeyError" in results["crash"].logs
    assert results["nothing"].outcome is Outcome.MISSING_SUBMISSION


@pytest.mark.anyio
async def test_program_timeout_comes_from_the_inner_sandbox(ray_cluster: Any, toy: ToyTask) -> None:
    """A program past its limit is a TIMEOUT result (not a lost worker)."""
    async with _sandbox(toy) as sandbox:
        result = await sandbox.run(
            Job(code="import time\ntime.sleep(60)\n", task="toy", timeout_s=1.0)
        )
    assert result.outcome is Outcome.TIMEOUT


@pytest.mark.anyio
async def test_stuck_worker_hits_the_ray_deadline(ray_cluster: Any, toy: ToyTask) -> None:
    """An inner sandbox that never returns is cancelled at timeout + slack: INFRA_ERROR."""
    async with RaySandbox(inner=stuck_factory, deadline_slack_s=1.0, cancel_grace_s=2.0) as sb:
        result = await sb.run(Job(code="", task="toy", timeout_s=1.0))
    assert result.outcome is Outcome.INFRA_ERROR
    assert "did not finish" in result.detail


async def _worker_killed_midjob(
    toy: ToyTask, code: str, pidfile: Path, *, max_retries: int
) -> RunResult:
    """The result of ``code`` (which writes its worker's pid to ``pidfile``) in a RaySandbox
    with ``max_retries``, its worker killed (SIGKILL) once the pid is there."""
    async with _sandbox(toy, max_retries=max_retries) as sandbox, anyio.create_task_group() as tg:
        out: list[RunResult] = []

        async def job() -> None:
            out.append(await sandbox.run(Job(code=code, task="toy", timeout_s=60)))

        tg.start_soon(job)
        worker = int(await _wait_for_file(pidfile))
        os.kill(worker, signal.SIGKILL)
    return out[0]


@pytest.mark.anyio
async def test_killed_worker_is_infra_error_without_retries(
    ray_cluster: Any, toy: ToyTask, tmp_path: Path
) -> None:
    """SIGKILL to the worker mid-job gives INFRA_ERROR when no retry is allowed."""
    pidfile = tmp_path / "worker.pid"
    code = (
        f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getppid()))\ntime.sleep(60)\n"
    )
    result = await _worker_killed_midjob(toy, code, pidfile, max_retries=0)
    assert result.outcome is Outcome.INFRA_ERROR
    assert "lost" in result.detail


@pytest.mark.anyio
async def test_killed_worker_is_retried(ray_cluster: Any, toy: ToyTask, tmp_path: Path) -> None:
    """With a retry left, a job whose worker died runs again and succeeds."""
    pidfile = tmp_path / "worker.pid"
    code = (
        "import os, time\n"
        f"p = {str(pidfile)!r}\n"
        "if not os.path.exists(p):\n"
        "    open(p, 'w').write(str(os.getppid()))\n"
        "    time.sleep(60)\n"
    ) + TOY_SOLUTION
    result = await _worker_killed_midjob(toy, code, pidfile, max_retries=1)
    assert result.outcome is Outcome.SUCCESS, result


@pytest.mark.anyio
async def test_cancellation_stops_the_program_on_the_worker(
    ray_cluster: Any, toy: ToyTask, tmp_path: Path
) -> None:
    """Cancelling ``run`` cancels the Ray task, and the program process is gone afterwards."""
    pidfile = tmp_path / "program.pid"
    code = f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)\n"
    async with _sandbox(toy) as sandbox, anyio.create_task_group() as tg:

        async def job() -> None:
            await sandbox.run(Job(code=code, task="toy", timeout_s=60))

        tg.start_soon(job)
        program = int(await _wait_for_file(pidfile))
        assert _pid_alive(program)
        tg.cancel_scope.cancel()
    assert await anyio.to_thread.run_sync(_wait_gone, program)


@pytest.mark.anyio
async def test_inner_errors_for_bad_input_are_raised_here(ray_cluster: Any, toy: ToyTask) -> None:
    """An unknown task raises the inner sandbox's InvalidArgument in the caller."""
    async with _sandbox(toy) as sandbox:
        with pytest.raises(InvalidArgument, match="Unknown task"):
            await sandbox.run(Job(code="", task="no-such-task"))


@pytest.mark.docker
@pytest.mark.anyio
async def test_docker_inner_sandbox_on_a_worker(
    ray_cluster: Any, docker_engine: Engine, toy: ToyTask
) -> None:
    """``inner="docker"`` runs the job in a container on the worker and grades it there."""
    open_up(toy.root.parent)
    async with RaySandbox(
        inner="docker",
        inner_options={"base_url": docker_engine.base_url, "image": docker_engine.image},
        resolver=ToyTask.resolver({"toy": toy}),
    ) as sandbox:
        result = await sandbox.run(Job(code=TOY_SOLUTION, task="toy"))
    assert result.outcome is Outcome.SUCCESS, result
    assert result.score == 1.0


def test_task_options_carry_the_job_resources() -> None:
    """CPUs, GPUs and memory of the job become the Ray task's resource request."""
    sandbox = RaySandbox(inner=stuck_factory, max_retries=2)
    job = Job(code="", task="t", name="j", resources=Resources(cpus=2, gpus=1, memory_mb=512))
    assert sandbox.task_options(job) == {
        "num_cpus": 2.0,
        "num_gpus": 1,
        "max_retries": 0,  # retried by RaySandbox.run, OOM kills included
        "retry_exceptions": False,
        "name": "openmle:j",
        "memory": 512 * 1024 * 1024,
    }


def test_bad_settings_name_the_field() -> None:
    """Unknown inner names and negative retries are refused with the field name."""
    with pytest.raises(InvalidArgument, match=r"RaySandbox\.inner"):
        RaySandbox(inner="kubernetes")
    with pytest.raises(InvalidArgument, match=r"RaySandbox\.max_retries"):
        RaySandbox(max_retries=-1)


@pytest.mark.anyio
async def test_run_after_aclose_raises() -> None:
    """A closed sandbox refuses new jobs."""
    sandbox = RaySandbox(inner=stuck_factory)
    await sandbox.aclose()
    with pytest.raises(SandboxError, match="aclose"):
        await sandbox.run(Job(code="", task="t"))


OOM_DRIVER = r"""
import os, sys, time
import anyio, ray
from openmle import Job
from openmle.backends import RaySandbox

# A memory monitor that finds the node over its threshold at once: every task is OOM-killed.
ray.init(num_cpus=1, include_dashboard=False, object_store_memory=80 * 1024 * 1024,
         logging_level="warning", log_to_driver=False,
         _system_config={"memory_usage_threshold": 0.01, "memory_monitor_refresh_ms": 50},
         runtime_env={"env_vars": {"PYTHONPATH": os.environ["PYTHONPATH"]}})

def never_ends():
    time.sleep(600)

async def main():
    sandbox = RaySandbox(inner=never_ends, max_retries=1, deadline_slack_s=60.0)
    result = await sandbox.run(Job(code="", task="t", timeout_s=20.0))
    print("RESULT", result.outcome.value, result.detail[:200].replace("\n", " "))

anyio.run(main)
"""


@pytest.mark.slow
def test_oom_kills_are_retried_only_max_retries_times(tmp_path: Path) -> None:
    """Ray retries a task its memory monitor kills without bound by default; RaySandbox bounds
    them by ``max_retries`` like any lost worker (INFRA_ERROR after 1 + max_retries tries)."""
    pytest.importorskip("ray", reason="the 'ray' extra is not installed")
    import openmle

    src = str(Path(openmle.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", OOM_DRIVER],
        env={**os.environ, "PYTHONPATH": path},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert lines, proc.stderr[-3000:]
    # Unbounded retries would run into the Ray deadline (20 + 60 s): "did not finish".
    assert lines[0].startswith("RESULT infra_error the Ray worker was lost 2 time(s)"), lines
    assert "OutOfMemoryError" in lines[0]
