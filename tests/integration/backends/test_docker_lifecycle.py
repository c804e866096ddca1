"""``DockerSandbox`` when its driver dies, is interrupted or terminated, and what it leaves.

Each test runs a real driver process against the engine and kills, interrupts or terminates
it, then checks the containers (by their owner label), the engine log and the files left.
"""

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

import openmle
from openmle import Job, Outcome
from openmle.backends import DockerSandbox
from openmle.testing import TOY_SOLUTION, ToyTask

from .conftest import Engine, _client

pytestmark = [pytest.mark.integration, pytest.mark.docker]

SRC = str(Path(openmle.__file__).resolve().parents[1])

DRIVER = r"""
import os, sys
from pathlib import Path
import anyio
from openmle import Job
from openmle.backends import DockerSandbox
from openmle.testing import ToyTask

base_url, image, root, timeout = sys.argv[1], sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
if len(sys.argv) > 5:  # the deadline's slack past timeout + grace (10 s by default)
    import openmle.backends._docker as docker_module
    docker_module.CONTAINER_DEADLINE_SLACK_S = float(sys.argv[5])
toy = ToyTask.create(root / "toy")
(root / "ws").mkdir(exist_ok=True)
for dirpath, dirs, files in os.walk(root):
    for name in dirs + files:
        os.chmod(os.path.join(dirpath, name), 0o755)
os.chmod(root, 0o755)

async def main() -> None:
    async with DockerSandbox(image=image, base_url=base_url, gpus=None, stop_grace_s=1.0,
                             memory_mb=256, resolver=ToyTask.resolver({"toy": toy}),
                             workspace_root=root / "ws") as sandbox:
        code = "import time\nprint('started', flush=True)\ntime.sleep(600)\n"
        result = await sandbox.run(Job(code=code, task="toy", timeout_s=timeout))
    print("RETURNED", result.outcome.value, flush=True)

try:
    anyio.run(main)
except KeyboardInterrupt:
    print("KEYBOARD-INTERRUPT", flush=True)
    sys.exit(130)
"""


def _env(**extra: str) -> dict[str, str]:
    path = os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


def _owned_by(base_url: str, under: Path) -> list[dict[str, Any]]:
    """Sandbox containers whose workspace lies under ``under`` (this test's driver's)."""
    api = _client(base_url)
    try:
        found = api.containers(all=True, filters={"label": "openmle.managed"})
    finally:
        api.close()
    return [
        c
        for c in found
        if any(str(m.get("Source", "")).startswith(str(under)) for m in c.get("Mounts") or [])
    ]


def _wait_running(
    base_url: str, under: Path, limit_s: float = 90.0, settle_s: float = 1.0
) -> dict[str, Any]:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        running = [c for c in _owned_by(base_url, under) if c.get("State") == "running"]
        if running:
            time.sleep(settle_s)  # let the program start inside
            return running[0]
        time.sleep(0.2)
    raise AssertionError(f"no running container with a workspace under {under} in {limit_s} s")


def _flooded(workspaces: Path) -> bool:
    """Whether the flooding program has written all its output (its workspace's marker)."""
    return any(workspaces.glob("*/workspace/flooded"))


def _toy(tmp_path: Path) -> ToyTask:
    task = ToyTask.create(tmp_path / "toy")
    open_up(tmp_path)
    return task


def test_container_of_a_killed_driver_stops_by_itself_and_is_swept(
    docker_engine: Engine, tmp_path: Path
) -> None:
    """SIGKILL of the driver: the container dies at its deadline (timeout + grace + slack;
    the slack, 10 s by default, is 2 s here), by its own ``timeout`` or removed by the
    host-side watchdog (whichever acts first), and nothing of it is left once the next sandbox
    has started (its owner process is gone)."""
    base = docker_engine.base_url
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, base, docker_engine.image, str(tmp_path), "5", "2"],
        env=_env(),
    )
    try:
        # Killed well before its own 5 s limit would make it stop the container.
        container = _wait_running(base, tmp_path, settle_s=0.0)
    finally:
        driver.kill()
        driver.wait()
    api = _client(base)
    try:
        # 5 s limit + 1 s grace + 2 s slack from the start; generous for a loaded machine.
        deadline = time.monotonic() + 60
        state: dict[str, Any] = {}
        import docker.errors

        while time.monotonic() < deadline:
            try:
                state = api.inspect_container(container["Id"])["State"]
            except docker.errors.APIError:  # Podman may answer 500 "no such container"
                if api.containers(all=True, filters={"id": container["Id"]}):
                    raise
                state = {"Running": False, "removed": True}  # by the watchdog
            if not state.get("Running"):
                break
            time.sleep(0.5)
        assert not state.get("Running"), "the container outlived its driver and its deadline"
        # SIGKILL from its own ``timeout``, or removed by the watchdog at the same deadline.
        assert state.get("removed") or state.get("ExitCode") == 137, state
    finally:
        api.close()

    toy = _toy(tmp_path / "next")

    async def start_another() -> Any:
        async with DockerSandbox(
            image=docker_engine.image,
            base_url=base,
            gpus=None,
            resolver=ToyTask.resolver({"toy": toy}),
        ) as sandbox:
            return await sandbox.run(Job(code=TOY_SOLUTION, task="toy"))

    assert anyio.run(start_another).outcome is Outcome.SUCCESS
    assert _owned_by(base, tmp_path) == []


def test_sigint_while_awaiting_run_propagates_and_removes_the_container(
    docker_engine: Engine, tmp_path: Path
) -> None:
    """Ctrl-C while a script awaits ``run``: KeyboardInterrupt reaches the script (no TIMEOUT
    result), and the container is gone."""
    base = docker_engine.base_url
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, base, docker_engine.image, str(tmp_path), "60"],
        env=_env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_running(base, tmp_path)
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=60)
    finally:
        driver.kill()
        driver.wait()
    assert "KEYBOARD-INTERRUPT" in out and "RETURNED" not in out, out
    assert driver.returncode == 130
    assert _owned_by(base, tmp_path) == []
    assert list((tmp_path / "ws").iterdir()) == []


def test_cli_search_handles_sigterm_like_sigint_and_closes_the_sandbox(
    docker_engine: Engine, tmp_path: Path
) -> None:
    """``openmle search --sandbox docker`` under SIGTERM: exit 130 like Ctrl-C, no container
    left, no seccomp profile directory left, and the run directory is resumable."""
    base = docker_engine.base_url
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = tmp_path / "run"
    cli = subprocess.Popen(
        [
            *(sys.executable, "-m", "openmle", "search", "--task", "tabular-binary"),
            *("--model", "offline-numpy", "--sandbox", "docker", "--budget", "steps=30"),
            *("--workers", "1", "--timeout", "120", "--out", str(out), "--quiet"),
        ],
        env=_env(DOCKER_HOST=base, TMPDIR=str(scratch)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_running(base, scratch, limit_s=180)
        cli.send_signal(signal.SIGTERM)
        _, err = cli.communicate(timeout=120)
    finally:
        cli.kill()
        cli.wait()
    assert cli.returncode == 130, err
    assert "interrupted" in err
    assert _owned_by(base, scratch) == []
    assert [p.name for p in scratch.iterdir() if p.name.startswith("openmle-seccomp-")] == []
    assert (out / "manifest.json").exists()


@pytest.mark.anyio
async def test_engine_keeps_no_log_of_the_output(docker_engine: Engine, tmp_path: Path) -> None:
    """The output is read through attach only: the container's log driver is ``none`` and
    megabytes of output leave no engine log file."""
    toy = _toy(tmp_path)
    workspaces = tmp_path / "ws"
    workspaces.mkdir()
    code = (
        "import sys, time\n"
        "line = b'x' * 1023 + b'\\n'\n"
        "for _ in range(20 * 1024):\n"
        "    sys.stdout.buffer.write(line)\n"
        "sys.stdout.flush()\n"
        "print('FLOODED', flush=True)\n"
        "open('flooded', 'w').close()\n"
        "time.sleep(600)\n"
    )
    async with (
        DockerSandbox(
            image=docker_engine.image,
            base_url=docker_engine.base_url,
            gpus=None,
            stop_grace_s=1.0,
            resolver=ToyTask.resolver({"toy": toy}),
            workspace_root=workspaces,
        ) as sandbox,
        anyio.create_task_group() as tg,
    ):

        async def job() -> None:
            await sandbox.run(Job(code=code, task="toy", timeout_s=120))

        tg.start_soon(job)
        # This test's container (by its workspace), not another process's.
        found = await anyio.to_thread.run_sync(_wait_running, docker_engine.base_url, workspaces)
        with anyio.fail_after(120):  # the whole flood is out once the program says so
            while not await anyio.to_thread.run_sync(_flooded, workspaces):  # noqa: ASYNC110 - a file, no event
                await anyio.sleep(0.1)
        api = _client(docker_engine.base_url)
        try:
            info = await anyio.to_thread.run_sync(api.inspect_container, found["Id"])
        finally:
            api.close()
        tg.cancel_scope.cancel()
    assert info["HostConfig"]["LogConfig"]["Type"] == "none"
    log = Path(info.get("LogPath") or "/nonexistent")
    size = log.stat().st_size if log.is_file() else 0  # noqa: ASYNC240 - after the run
    assert size < 1024 * 1024, f"the engine logged {size} bytes at {log}"


@pytest.mark.anyio
@pytest.mark.parametrize("user", [None, "65534:65534"])
async def test_workspace_is_writable_and_removed_for_any_container_user(
    docker_engine: Engine, tmp_path: Path, user: str | None
) -> None:
    """With the image's user or a non-root one, the program writes its submission and what it
    leaves (nested, read-only and unreadable directories) is removed after the job."""
    toy = _toy(tmp_path)
    workspaces = tmp_path / "ws"
    workspaces.mkdir()
    code = (
        "import os\n"
        "os.makedirs('a/b/c/d')\n"
        "open('a/b/c/d/f.txt', 'w').write('x')\n"
        "os.makedirs('locked/inner')\n"
        "open('locked/inner/g.bin', 'wb').write(b'y' * 1000)\n"
        "os.chmod('locked/inner', 0o000)\n"
        "os.chmod('locked', 0o500)\n"
        "print('UID', os.getuid())\n"
    ) + TOY_SOLUTION
    async with DockerSandbox(
        image=docker_engine.image,
        base_url=docker_engine.base_url,
        gpus=None,
        user=user,
        resolver=ToyTask.resolver({"toy": toy}),
        workspace_root=workspaces,
    ) as sandbox:
        result = await sandbox.run(Job(code=code, task="toy"))
    assert result.outcome is Outcome.SUCCESS, result.logs
    assert f"UID {'65534' if user else '0'}" in result.logs
    assert list(workspaces.iterdir()) == []
