"""Per-task images without an engine: the build context, the package key, the refusals."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from tests._files import deep_tree

from openmle.backends import DockerSandbox
from openmle.backends._imagebuild import pack_context
from openmle.errors import TaskPackageError
from openmle.gym import load_task
from openmle.testing import ToyTask


def _env(tmp_path: Path, text: str = "FROM scratch\n") -> Path:
    env = tmp_path / "pkg" / "environment"
    env.mkdir(parents=True)
    (env / "Dockerfile").write_text(text)
    return env / "Dockerfile"


def test_context_hash_is_deterministic_and_follows_content(tmp_path: Path) -> None:
    """Same content (different mtimes) packs to the same hash; a changed file changes it."""
    dockerfile = _env(tmp_path)
    (dockerfile.parent / "mod.py").write_text("X = 1\n")
    packed, first = pack_context(dockerfile, max_bytes=1 << 20)
    os.utime(dockerfile.parent / "mod.py", (1, 1))
    assert pack_context(dockerfile, max_bytes=1 << 20) == (packed, first)
    (dockerfile.parent / "mod.py").write_text("X = 2\n")
    assert pack_context(dockerfile, max_bytes=1 << 20)[1] != first


def test_symlink_leaving_the_folder_is_refused(tmp_path: Path) -> None:
    """A link to a file outside the environment folder (the answers) never enters the context."""
    dockerfile = _env(tmp_path)
    secret = tmp_path / "pkg" / "answers.csv"
    secret.write_text("id,target\n1,SECRET\n")
    (dockerfile.parent / "leak").symlink_to(secret)
    with pytest.raises(TaskPackageError, match="symbolic link 'leak' pointing outside") as caught:
        pack_context(dockerfile, max_bytes=1 << 20)
    assert "SECRET" not in str(caught.value)


def test_huge_context_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A sparse 64 GiB file is refused from its size alone (reading it would take minutes)."""
    dockerfile = _env(tmp_path)
    with (dockerfile.parent / "huge.bin").open("wb") as fh:
        fh.truncate(64 << 30)
    with pytest.raises(TaskPackageError, match="more than 1048576 bytes"):
        pack_context(dockerfile, max_bytes=1 << 20)


def test_special_files_are_refused(tmp_path: Path) -> None:
    """A FIFO in the context (which would block the packer) is refused."""
    dockerfile = _env(tmp_path)
    os.mkfifo(dockerfile.parent / "pipe")
    with pytest.raises(TaskPackageError, match="'pipe', which is not a regular file"):
        pack_context(dockerfile, max_bytes=1 << 20)


def test_deep_folders_are_refused(deep_tmp_path: Path) -> None:
    """Folders nested past Python's recursion limit made packing raise ``RecursionError``
    (``os.walk`` recurses); deeper than 64 is refused now, before any path gets long."""
    dockerfile = _env(deep_tmp_path)
    deep_tree(dockerfile.parent, 1500)
    with pytest.raises(TaskPackageError, match="nests folders more than 64 deep"):
        pack_context(dockerfile, max_bytes=1 << 20)
    shallow = _env(deep_tmp_path / "ok")
    deep_tree(shallow.parent, 63)
    assert pack_context(shallow, max_bytes=1 << 20)[0]


def test_package_dockerfile_default_and_key(tmp_path: Path) -> None:
    """``environment/Dockerfile`` is found by default; ``[environment] dockerfile`` names
    another file; without either the task has none."""
    root = tmp_path / "pkg"
    root.mkdir()
    assert load_task(root).dockerfile is None
    _env(tmp_path)
    assert load_task(root).dockerfile == root.resolve() / "environment" / "Dockerfile"
    (root / "environment" / "Dockerfile.v3").write_text("FROM scratch\n")
    (root / "task.toml").write_text('[environment]\ndockerfile = "environment/Dockerfile.v3"\n')
    assert load_task(root).dockerfile == root.resolve() / "environment" / "Dockerfile.v3"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ('"/etc/Dockerfile"', "relative path inside a folder"),
        ('"../Dockerfile"', "relative path inside a folder"),
        ('"Dockerfile"', "relative path inside a folder"),  # the package root as context
        ('"data/private/Dockerfile"', "outside data/, utils/ and raw/"),
        ('"utils/Dockerfile"', "outside data/, utils/ and raw/"),
        ("3", "a string"),
    ],
)
def test_bad_dockerfile_key_is_refused(tmp_path: Path, value: str, message: str) -> None:
    """A Dockerfile whose folder would send the answers or the grader to the builder, or
    that is outside the package, is refused with the key named."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "task.toml").write_text(f"[environment]\ndockerfile = {value}\n")
    with pytest.raises(TaskPackageError, match=r"environment\.dockerfile") as caught:
        load_task(root)
    assert message in str(caught.value)


def test_unknown_environment_key_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "task.toml").write_text('[environment]\nimage = "x"\n')
    with pytest.raises(TaskPackageError, match=r"\[environment\] has unknown key"):
        load_task(root)


class _Overlapping:
    """A task whose environment folder is its private answers folder."""

    def __init__(self, toy: ToyTask) -> None:
        self.toy = toy
        self.name = toy.name
        self.private_paths = toy.private_paths
        self.dockerfile = toy.private_paths[0] / "Dockerfile"
        self.dockerfile.write_text("FROM scratch\nCOPY answers.csv /\n")

    def public_dir(self, split: object) -> Path:
        raise AssertionError("not reached")

    def grade(self, submission: Path, split: object) -> object:
        raise AssertionError("not reached")


def test_environment_overlapping_the_answers_is_refused_before_any_engine(
    tmp_path: Path,
) -> None:
    """The check runs before the engine is contacted (the base_url answers nothing)."""
    task = _Overlapping(ToyTask.create(tmp_path / "toy"))
    sandbox = DockerSandbox(base_url="unix:///nonexistent.sock", gpus=None)

    async def main() -> None:
        with pytest.raises(TaskPackageError, match="would expose the hidden answers"):
            await sandbox.task_image(task)  # type: ignore[arg-type]

    anyio.run(main)


def test_task_without_dockerfile_uses_the_sandbox_image(tmp_path: Path) -> None:
    toy = ToyTask.create(tmp_path / "toy")
    sandbox = DockerSandbox(image="img:1", base_url="unix:///nonexistent.sock", gpus=None)
    assert anyio.run(sandbox.task_image, toy) == "img:1"
    with_images = DockerSandbox(
        image="img:1", task_images={"toy": "img:2"}, base_url="unix:///x.sock", gpus=None
    )
    assert anyio.run(with_images.task_image, toy) == "img:2"
