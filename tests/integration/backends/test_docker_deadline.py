"""Containers never outlive the process that started them (issue 25, item 6): a task image
that puts a fake ``timeout`` first on ``PATH`` cannot disable a :class:`DockerSandbox`
container's deadline: with its driver SIGKILLed the container is still removed at
``timeout_s + stop_grace_s`` plus the slack (10 s by default; 2 s here).

The NatureBench grading container's part (labelled, removed at its deadline after its grader
is killed; ``DOCKER_HOST`` honoured) is with the grader's tests,
``tests/integration/bench/test_naturebench_docker.py``.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from tests._docker_engine import Engine, _client, driving, kill_outlived, wait_for_containers

pytestmark = [pytest.mark.integration, pytest.mark.docker]


RUN = """
import sys, anyio
from openmle import Job
from openmle.backends import DockerSandbox
from openmle.testing import ToyTask
image, base_url, root = sys.argv[1:4]
import openmle.backends._docker as docker_module
docker_module.CONTAINER_DEADLINE_SLACK_S = 2.0  # past timeout + grace (10 s by default)
from pathlib import Path
task = ToyTask.create(Path(root))
async def main():
    sb = DockerSandbox(image=image, base_url=base_url, resolver=lambda ref: task,
                       stop_grace_s=1.0)
    await sb.run(Job(code="import time; time.sleep(600)", task="toy", timeout_s=3.0))
anyio.run(main)
"""


def _fake_timeout_image(engine: Engine) -> str:
    """The sandbox image with a ``timeout`` first on PATH that drops the deadline."""
    tag = "localhost/openmle-fake-timeout:test"
    dockerfile = (
        f"FROM {engine.image}\n"
        "RUN printf '#!/bin/sh\\nshift 3\\nexec \"$@\"\\n' > /usr/local/bin/timeout "
        "&& chmod 755 /usr/local/bin/timeout\n"
    )
    api = _client(engine.base_url, timeout=60)
    try:
        for _ in api.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, decode=True):
            pass
    finally:
        api.close()
    return tag


def test_a_fake_timeout_in_the_image_does_not_disable_the_deadline(
    docker_engine: Engine, tmp_path: Path
) -> None:
    image = _fake_timeout_image(docker_engine)
    args = (image, docker_engine.base_url, str(tmp_path / "toy"))
    with driving(docker_engine, "openmle.managed", RUN, *args) as driver:
        assert wait_for_containers(docker_engine, "openmle.managed", present=True, within_s=120)
        # Deadline: 3 s + 1 s grace + 2 s slack, enforced from the host.
        why = "the container outlived its driver: the image's fake timeout disabled the deadline"
        kill_outlived(docker_engine, driver, "openmle.managed", 60, why)
