"""The host-side container watchdog (``openmle.backends._watchdog``) against a fake engine.

The watchdog's decisions (container gone, exited with its owner alive or dead, past the
deadline, an engine that errors) are checked in-process with a fake ``docker.APIClient``; the
integration tests (test_docker_deadline.py, test_docker_lifecycle.py, and the bench's
test_naturebench_docker.py for the grading container) run it on a real engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from openmle.backends import _watchdog

docker_errors = pytest.importorskip(
    "docker.errors", reason="needs docker: pip install 'openmle[docker]'"
)


class FakeEngine:
    """Answers ``wait`` with the given steps (an exception to raise, or None: exited)."""

    def __init__(self, *steps: BaseException | None) -> None:
        self.steps = list(steps)
        self.waits: list[int] = []
        self.removed: list[str] = []
        self.closed = False

    def wait(self, container: str, timeout: int) -> dict[str, int]:
        self.waits.append(timeout)
        step = self.steps.pop(0) if self.steps else None
        if step is not None:
            raise step
        return {"StatusCode": 0}

    def remove_container(self, container: str, *, force: bool, v: bool) -> None:
        assert force and v
        self.removed.append(container)

    def close(self) -> None:
        self.closed = True


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(*steps: BaseException | None) -> FakeEngine:
        fake = FakeEngine(*steps)
        monkeypatch.setattr(_watchdog, "_client", lambda base_url: fake)
        return fake

    return install


def test_a_container_gone_before_the_deadline_is_left_alone(engine: Any) -> None:
    fake = engine(docker_errors.NotFound("no such container"))
    assert _watchdog.watch("unix:///x.sock", "c1", 30.0, _dead_pid()) == "gone"
    assert fake.removed == [] and fake.closed


def test_an_exited_container_is_removed_only_when_its_owner_is_gone(engine: Any) -> None:
    fake = engine(None)
    assert _watchdog.watch("", "c1", 30.0, owner=os.getpid()) == "exited"
    assert fake.removed == []  # the owner (alive) removes it
    fake = engine(None)
    assert _watchdog.watch("", "c2", 30.0, owner=_dead_pid()) == "exited"
    assert fake.removed == ["c2"] and fake.closed


def test_engine_hiccups_are_retried_and_the_deadline_removes_the_container(engine: Any) -> None:
    """A wait that times out (or any engine error) is retried until the deadline, then the
    container is force-removed; each wait asks for at most the time left (>= 1 s, <= 30 s)."""
    fake = engine(*[TimeoutError("read timed out")] * 1000)
    assert _watchdog.watch("", "c1", 0.5, owner=os.getpid()) == "removed"
    assert fake.removed == ["c1"] and fake.closed
    assert len(fake.waits) >= 2 and all(1 <= t <= 30 for t in fake.waits)


def test_a_deadline_already_past_removes_at_once(engine: Any) -> None:
    fake = engine()
    assert _watchdog.watch("", "c1", 0.0, owner=os.getpid()) == "removed"
    assert fake.waits == [] and fake.removed == ["c1"]


def test_main_exits_0_whatever_the_engine_does(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(base_url: str) -> Any:
        raise ConnectionError("no engine")

    monkeypatch.setattr(_watchdog, "_client", broken)
    assert _watchdog.main(["watchdog", "unix:///x.sock", "c1", "5", "1"]) == 0


def test_the_started_watchdog_runs_alone_and_exits_0_without_an_engine(tmp_path: Any) -> None:
    """start_watchdog runs the module's source in its own session with a fixed environment;
    with no engine at the address it ends at once with status 0."""
    proc = _watchdog.start_watchdog(f"unix://{tmp_path}/none.sock", "c1", 5.0)
    try:
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    args = list(proc.args)  # type: ignore[arg-type]  # Popen.args: a list here
    assert args[1:3] == ["-I", "-c"] and args[-1] == str(os.getpid())
