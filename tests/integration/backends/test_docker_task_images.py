"""Per-task images: ``DockerSandbox`` builds a task's Dockerfile on the real engine.

The Dockerfiles here are ``FROM`` the sandbox image the session built (no registry is
reachable) and add a Python module with ``RUN``; each carries a fresh nonce so its content hash
is new and the first build really builds. The images are removed at the end of each test.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from attrs import frozen
from tests._files import open_up

from openmle import Job, Outcome, Split
from openmle.backends import DockerSandbox
from openmle.backends._imagebuild import pack_context
from openmle.errors import SandboxError, TaskPackageError
from openmle.testing import TOY_SOLUTION, ToyTask

from .conftest import Engine

pytestmark = [pytest.mark.integration, pytest.mark.docker]


@frozen
class EnvToy:
    """The toy task with a Dockerfile (implements TaskHandle and TaskEnvironment)."""

    toy: ToyTask
    dockerfile: Path | None

    @property
    def name(self) -> str:
        return self.toy.name

    @property
    def private_paths(self) -> tuple[Path, ...]:
        return self.toy.private_paths

    def public_dir(self, split: Split) -> Path:
        return self.toy.public_dir(split)

    def grade(self, submission: Path, split: Split) -> Any:
        return self.toy.grade(submission, split)


@pytest.fixture
def images(docker_engine: Engine) -> Iterator[list[str]]:
    """Tags to remove from the engine after the test."""
    import docker

    made: list[str] = []
    yield made
    api = docker.APIClient(base_url=docker_engine.base_url, version="auto", timeout=60)
    try:
        for tag in made:
            with contextlib.suppress(docker.errors.NotFound):
                api.remove_image(tag, force=True)
    finally:
        api.close()


def _task(tmp_path: Path, dockerfile: str, files: dict[str, str] | None = None) -> EnvToy:
    toy = ToyTask.create(tmp_path / "toy")
    env = tmp_path / "toy" / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text(dockerfile)
    for name, text in (files or {}).items():
        (env / name).write_text(text)
    open_up(tmp_path)
    return EnvToy(toy, env / "Dockerfile")


def _sandbox(engine: Engine, task: EnvToy, tmp_path: Path, **kw: Any) -> DockerSandbox:
    # Podman 4.3's Docker API gives RUN steps the host's network whatever the request says
    # (see test_build_network_is_checked); these tests run trusted Dockerfiles there.
    kw.setdefault("build_network_check", engine.kind != "podman")
    return DockerSandbox(
        image=engine.image,
        base_url=engine.base_url,
        resolver=lambda ref: task,
        gpus=None,
        stop_grace_s=1.0,
        memory_mb=512,
        build_log_dir=tmp_path / "builds",
        **kw,
    )


GOOD = """\
FROM {image}
LABEL nonce="{nonce}"
COPY envmod_src.py /opt/envmod/envmod.py
RUN cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | sort | tr '\\n' ' ' \\
    | sed 's/ $//' > /opt/envmod/net.txt
ENV PYTHONPATH=/opt/envmod
"""

USES_MODULE = (
    "import envmod, pathlib\n"
    "assert envmod.MAGIC == 42\n"
    "print('interfaces during build:', pathlib.Path('/opt/envmod/net.txt').read_text())\n"
    + TOY_SOLUTION
)


@pytest.mark.anyio
async def test_dockerfile_builds_once_is_reused_and_its_module_imports(
    docker_engine: Engine, tmp_path: Path, images: list[str]
) -> None:
    """The image is built by the first sandbox, found by its tag by the second (no build, same
    tag); a program importing the module the Dockerfile added scores; the build saw no
    network interface but the loopback one; the build log is kept."""
    task = _task(
        tmp_path,
        GOOD.format(image=docker_engine.image, nonce=uuid.uuid4().hex),
        {"envmod_src.py": "MAGIC = 42\n"},
    )
    async with _sandbox(docker_engine, task, tmp_path) as first:
        tag = await first.task_image(task)
        images.append(tag)
        assert first.builds == 1
        assert tag.startswith("localhost/openmle-task:")
        result = await first.run(Job(code=USES_MODULE, task="toy", timeout_s=120.0))
        assert result.outcome is Outcome.SUCCESS, result.detail + result.logs
        assert result.score == 1.0
        if docker_engine.kind == "docker":  # Podman 4.3 ignores networkmode for builds
            assert "interfaces during build: lo\n" in result.logs + "\n"
        assert first.builds == 1  # the run reused the image
    logs = list((tmp_path / "builds").glob("*.log"))
    assert len(logs) == 1 and "envmod" in logs[0].read_text()
    async with _sandbox(docker_engine, task, tmp_path) as second:
        result = await second.run(Job(code=USES_MODULE, task="toy", timeout_s=120.0))
        assert result.outcome is Outcome.SUCCESS, result.detail + result.logs
        assert second.builds == 0
        assert await second.task_image(task) == tag
    # Without the Dockerfile the same program fails: the module comes from the task's image.
    plain = EnvToy(task.toy, None)
    async with _sandbox(docker_engine, plain, tmp_path) as third:
        result = await third.run(Job(code=USES_MODULE, task="toy", timeout_s=60.0))
        assert result.outcome is Outcome.RUNTIME_ERROR
        assert "ModuleNotFoundError" in result.logs


@pytest.mark.anyio
async def test_broken_dockerfile_is_a_task_error_naming_the_step(
    docker_engine: Engine, tmp_path: Path, images: list[str]
) -> None:
    """A failing RUN raises TaskPackageError naming that step, with the log's tail; the next
    job fails the same way without building again."""
    nonce = uuid.uuid4().hex
    task = _task(
        tmp_path,
        f"FROM {docker_engine.image}\nLABEL nonce={nonce}\nRUN echo about-to-fail-9137 && exit 3\n",
    )
    async with _sandbox(docker_engine, task, tmp_path) as sandbox:
        with pytest.raises(TaskPackageError) as first:
            await sandbox.run(Job(code=TOY_SOLUTION, task="toy", timeout_s=60.0))
        text = str(first.value)
        assert "RUN echo about-to-fail-9137 && exit 3" in text
        assert "about-to-fail-9137\n" in text  # the log's tail
        assert str(tmp_path / "builds") in text
        with anyio.fail_after(60):  # the same error object and no build say it was not rebuilt
            with pytest.raises(TaskPackageError) as again:
                await sandbox.run(Job(code=TOY_SOLUTION, task="toy", timeout_s=60.0))
        assert again.value is first.value
        assert sandbox.builds == 0


@pytest.mark.anyio
async def test_add_of_a_path_outside_the_context_fails(
    docker_engine: Engine, tmp_path: Path, images: list[str]
) -> None:
    """``ADD ../secret`` cannot reach the package (the context is the environment folder
    only): the build fails at that step and the secret is in no message."""
    task = _task(
        tmp_path,
        f"FROM {docker_engine.image}\nLABEL nonce={uuid.uuid4().hex}\nADD ../secret.txt /s\n",
    )
    (tmp_path / "toy" / "secret.txt").write_text("SECRET-ANSWER-5521\n")
    async with _sandbox(docker_engine, task, tmp_path) as sandbox:
        with pytest.raises(TaskPackageError) as caught:
            await sandbox.task_image(task)
    assert "ADD ../secret.txt /s" in str(caught.value)
    assert "SECRET-ANSWER-5521" not in str(caught.value)
    assert sandbox.builds == 0


@pytest.mark.anyio
async def test_build_past_its_time_limit_is_a_task_error(
    docker_engine: Engine, tmp_path: Path, images: list[str]
) -> None:
    """A RUN that sleeps past ``build_timeout_s`` fails the build with the limit named. The
    limit is the client's: the engine may finish the step on its own (Podman does), so the
    test waits for that before the session stops the engine (which would strand the build's
    working container in storage)."""
    import docker

    task = _task(
        tmp_path,
        f"FROM {docker_engine.image}\nLABEL nonce={uuid.uuid4().hex}\nRUN sleep 8\n",
    )
    assert task.dockerfile is not None
    _, digest = pack_context(task.dockerfile, max_bytes=1 << 20)
    images.append(f"localhost/openmle-task:{digest[:32]}")
    async with _sandbox(docker_engine, task, tmp_path, build_timeout_s=2.0) as sandbox:
        with anyio.fail_after(60):
            with pytest.raises(TaskPackageError, match="2-second limit"):
                await sandbox.task_image(task)
    api = docker.APIClient(base_url=docker_engine.base_url, version="auto", timeout=30)
    try:
        for _ in range(120):  # the engine may finish the step on its own: wait for it
            try:
                api.inspect_image(images[-1])
                break
            except docker.errors.NotFound:
                await anyio.sleep(0.1)
    finally:
        api.close()


@pytest.mark.anyio
async def test_build_network_is_checked(
    docker_engine: Engine, tmp_path: Path, images: list[str]
) -> None:
    """By default a sandbox builds only on an engine whose builds really run without network:
    on Podman 4.3 (which ignores ``networkmode``) it refuses, naming the fix; on Docker the
    image builds and its RUN step saw only the loopback interface."""
    task = _task(
        tmp_path,
        f"FROM {docker_engine.image}\nLABEL nonce={uuid.uuid4().hex}\n"
        'RUN test "$(grep -c : /proc/net/dev)" -le 1\n',
    )
    async with _sandbox(docker_engine, task, tmp_path, build_network_check=True) as sandbox:
        if docker_engine.kind == "podman":
            with pytest.raises(SandboxError, match="build_network_check=False"):
                await sandbox.task_image(task)
            assert sandbox.builds == 0
        else:
            images.append(await sandbox.task_image(task))
            assert sandbox.builds == 1
