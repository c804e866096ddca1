"""Containers never outlive the process that started them (issue 25, items 5 and 6).

- A NatureBench grading container (:class:`ContainerGrader`) carries the managed labels, and
  when the grading process is SIGKILLed mid-grade the container is removed at its deadline by
  the host-side watchdog (it kept running with no deadline and no label before).
- A task image that puts a fake ``timeout`` first on ``PATH`` cannot disable a
  :class:`DockerSandbox` container's deadline: with its driver SIGKILLed the container is
  still removed at ``timeout_s + stop_grace_s + 10`` s.
- ``ContainerGrader()`` without ``base_url`` honours ``DOCKER_HOST``.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.bench._mininb import build

import openmle
from openmle import Split
from openmle.backends._docker_grade import ContainerGrader
from openmle.bench import NatureBench

from .conftest import Engine

pytestmark = [pytest.mark.integration, pytest.mark.docker]

SRC = str(Path(openmle.__file__).resolve().parents[1])


def _api(engine: Engine) -> Any:
    import docker

    return docker.APIClient(base_url=engine.base_url, version="auto", timeout=60)


def _find(engine: Engine, label: str) -> list[dict[str, Any]]:
    api = _api(engine)
    try:
        return list(api.containers(all=True, filters={"label": label}))
    finally:
        api.close()


def _wait_for(engine: Engine, label: str, *, present: bool, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if bool(_find(engine, label)) == present:
            return True
        time.sleep(0.5)
    return False


def _cleanup(engine: Engine, label: str) -> None:
    api = _api(engine)
    try:
        for c in api.containers(all=True, filters={"label": label}):
            api.remove_container(c["Id"], force=True)
    finally:
        api.close()


def _driver(script: str, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{Path(SRC).parent}"}
    return subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


@contextlib.contextmanager
def _driving(
    engine: Engine, label: str, script: str, *args: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A driver running ``script`` with ``args``; on exit it is killed if still running and
    the containers labelled ``label`` are removed."""
    driver = _driver(script, *args)
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        _cleanup(engine, label)


def _kill_outlived(
    engine: Engine, driver: subprocess.Popen[bytes], label: str, within_s: float, why: str
) -> None:
    """SIGKILL ``driver``'s process group after a second of running; the containers labelled
    ``label`` must be gone within ``within_s`` (else fail with ``why``)."""
    time.sleep(1.0)  # running now
    os.killpg(driver.pid, signal.SIGKILL)  # the driver dies; nothing stops its container
    driver.wait()
    assert _wait_for(engine, label, present=False, within_s=within_s), why


GRADE = """
import sys
from pathlib import Path
from openmle import Split
from openmle.backends._docker_grade import ContainerGrader
from openmle.bench import NatureBench
from openmle.gym import GradeLimits
root, image, base_url, sub = sys.argv[1:5]
grader = ContainerGrader(image=image, base_url=base_url)
nb = NatureBench(Path(root), grader=grader, grade_limits=GradeLimits(timeout_s=6.0))
nb.task("nb-cpu-bio").evaluate(Path(sub))
"""


def test_a_grading_container_is_labelled_and_removed_after_its_grader_is_killed(
    docker_engine: Engine, tmp_path: Path
) -> None:
    root = build(tmp_path / "nb")
    evaluator = root / "tasks" / "nb-cpu-bio" / "evaluation" / "evaluator.py"
    evaluator.write_text("def run_evaluation():\n    while True:\n        pass\n")
    sub = tmp_path / "submission.csv"
    sub.write_text("id,label\n")
    args = (str(root), docker_engine.image, docker_engine.base_url, str(sub))
    with _driving(docker_engine, "openmle.grader", GRADE, *args) as driver:
        assert _wait_for(docker_engine, "openmle.grader", present=True, within_s=120)
        (found,) = _find(docker_engine, "openmle.grader")
        labels = found.get("Labels") or {}
        assert labels.get("openmle.managed") == "1" and labels.get("openmle.owner")
        # Removed by the watchdog at 6 s + 10 s slack (it kept running before).
        why = "the grading container outlived its killed grader"
        _kill_outlived(docker_engine, driver, "openmle.grader", 60, why)


def test_container_grader_honours_docker_host(
    docker_engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = build(tmp_path / "nb")
    answers = root / "tasks" / "nb-gpu-chem" / "evaluation" / "ground_truth" / "answers.csv"
    sub = tmp_path / "submission.csv"
    sub.write_text(answers.read_text())
    monkeypatch.setenv("DOCKER_HOST", docker_engine.base_url)
    got = NatureBench(root, grader=ContainerGrader(image=docker_engine.image))
    report = got.task("nb-gpu-chem").grade(sub, Split.VALID)
    assert report.valid, report.reason
    assert report.score == NatureBench(root).task("nb-gpu-chem").grade(sub, Split.VALID).score


RUN = """
import sys, anyio
from openmle import Job
from openmle.backends import DockerSandbox
from openmle.testing import ToyTask
image, base_url, root = sys.argv[1:4]
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
    api = _api(engine)
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
    with _driving(docker_engine, "openmle.managed", RUN, *args) as driver:
        assert _wait_for(docker_engine, "openmle.managed", present=True, within_s=120)
        # Deadline: 3 s + 1 s grace + 10 s slack, enforced from the host.
        why = "the container outlived its driver: the image's fake timeout disabled the deadline"
        _kill_outlived(docker_engine, driver, "openmle.managed", 60, why)
