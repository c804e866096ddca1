"""The shared sandbox suites on ``DockerSandbox`` and ``RaySandbox``.

``openmle.testing.check_sandbox`` (conformance) and ``openmle.testing.run_hostile_battery``
(hostile programs) run as they run on ``LocalSandbox``; every hostile program must end as
expected and leave nothing behind (no list of tolerated gaps: a gap is a failing test). One
probe's target is not the host's under Docker: ``file_attributes_outside`` sets the inode flags
of the interpreter, which in a container is the container's own copy (copied up from the
image); ``test_a_programs_inode_flags_stay_in_its_container`` checks what matters there
instead: the image and the next run see the flags unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests._files import open_up

from openmle import Job, Split
from openmle.testing import (
    HOSTILE_PROGRAMS,
    HostileReport,
    ToyTask,
    check_sandbox,
    run_hostile_battery,
)

from .conftest import Engine

pytestmark = [pytest.mark.integration, pytest.mark.conformance]


def _assert_clean(reports: list[HostileReport]) -> None:
    """Every hostile program ended as expected and left nothing behind."""
    failures = {r.name: r.problems for r in reports if not r.ok}
    assert not failures, failures


@pytest.fixture
def toy(tmp_path: Path) -> ToyTask:
    """A toy task readable by any container user."""
    task = ToyTask.create(tmp_path / "toy")
    open_up(tmp_path)
    return task


def _docker(engine: Engine, toy: ToyTask) -> Any:
    from openmle.backends import DockerSandbox

    return DockerSandbox(
        image=engine.image,
        base_url=engine.base_url,
        resolver=ToyTask.resolver({toy.name: toy}),
        gpus=None,
        stop_grace_s=1.0,
        memory_mb=512,
    )


@pytest.mark.docker
@pytest.mark.anyio
async def test_docker_sandbox_conforms(docker_engine: Engine, toy: ToyTask) -> None:
    """DockerSandbox passes the shared conformance suite."""
    sandbox = _docker(docker_engine, toy)
    try:
        await check_sandbox(sandbox, task=toy.name, private_paths=toy.private_paths)
    finally:
        await sandbox.aclose()


@pytest.mark.docker
@pytest.mark.anyio
async def test_docker_sandbox_survives_the_hostile_battery(
    docker_engine: Engine, toy: ToyTask, managed_containers: Callable[[], list[str]]
) -> None:
    """DockerSandbox passes every hostile program and leaves no container behind."""
    sandbox = _docker(docker_engine, toy)
    try:
        reports = await run_hostile_battery(
            sandbox,
            task=toy.name,
            private_paths=toy.private_paths,
            task_root=toy.root,
            programs=[p for p in HOSTILE_PROGRAMS if p.name not in _ENGINES_OWN],
        )
    finally:
        await sandbox.aclose()
    _assert_clean(reports)
    assert managed_containers() == []


_ENGINES_OWN = ("file_attributes_outside", "module_autoload", "core_dump_helper")
"""What the engine's seccomp profile and ulimits decide, not DockerSandbox (the Docker how-to
says how to set them): inode flags, socket families whose modules load on demand, and a core
limit the program may lower."""


_FLAGS = (
    "import array, fcntl, os, sys\n"
    "fd = os.open(os.path.realpath(sys.executable), os.O_RDONLY)\n"
    "flags = array.array('l', [0])\n"
    "fcntl.ioctl(fd, 0x80086601, flags)  # FS_IOC_GETFLAGS\n"
    "print('FLAGS-BEFORE', flags[0])\n"
    "if os.environ.get('SET') == '1':\n"
    "    flags[0] |= 0x40  # FS_NODUMP_FL\n"
    "    try:\n"
    "        fcntl.ioctl(fd, 0x40086602, flags)  # FS_IOC_SETFLAGS\n"
    "    except OSError as exc:\n"
    "        print('refused', exc.errno)\n"
)


@pytest.mark.docker
@pytest.mark.anyio
async def test_a_programs_inode_flags_stay_in_its_container(
    docker_engine: Engine, toy: ToyTask
) -> None:
    """A program that sets its interpreter's inode flags (``FS_IOC_SETFLAGS``, allowed to the
    file's owner) changes its container's copy only: the next run sees the image's flags."""
    sandbox = _docker(docker_engine, toy)
    try:
        first = await sandbox.run(
            Job(code=_FLAGS, task=toy.name, split=Split.VALID, env={"SET": "1"})
        )
        second = await sandbox.run(Job(code=_FLAGS, task=toy.name, split=Split.VALID))
    finally:
        await sandbox.aclose()

    def before(logs: str) -> int:
        return int(logs.split("FLAGS-BEFORE", 1)[1].split()[0])

    assert before(second.logs) == before(first.logs), (first.logs, second.logs)
    assert not before(second.logs) & 0x40


@pytest.mark.ray
@pytest.mark.anyio
async def test_ray_sandbox_conforms(ray_cluster: Any, toy: ToyTask) -> None:
    """RaySandbox (local inner sandbox on the workers) passes the shared conformance suite."""
    from openmle.backends import RaySandbox

    sandbox = RaySandbox(inner="local", resolver=ToyTask.resolver({toy.name: toy}))
    await check_sandbox(sandbox, task=toy.name, private_paths=toy.private_paths)


@pytest.mark.ray
@pytest.mark.anyio
async def test_ray_sandbox_survives_the_hostile_battery(ray_cluster: Any, toy: ToyTask) -> None:
    """RaySandbox (local inner sandbox on the workers) passes every hostile program."""
    from openmle.backends import RaySandbox

    sandbox = RaySandbox(inner="local", resolver=ToyTask.resolver({toy.name: toy}))
    reports = await run_hostile_battery(
        sandbox,
        task=toy.name,
        private_paths=toy.private_paths,
        task_root=toy.root,
    )
    _assert_clean(reports)
