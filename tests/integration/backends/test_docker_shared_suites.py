"""The shared sandbox suites on ``DockerSandbox`` and ``RaySandbox``.

``openmle.testing.check_sandbox`` (conformance) and ``openmle.testing.run_hostile_battery``
(hostile programs) run as they run on ``LocalSandbox``; every hostile program must end as
expected and leave nothing behind (no list of tolerated gaps: a gap is a failing test).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests._files import open_up

from openmle.testing import HostileReport, ToyTask, check_sandbox, run_hostile_battery

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
        )
    finally:
        await sandbox.aclose()
    _assert_clean(reports)
    assert managed_containers() == []


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
