"""The Docker Engine fixtures, a pytest plugin (``pytest_plugins`` in ``tests/conftest.py``), so
every test folder that drives containers (the backends' and the bench's integration tests)
shares one definition and so one engine per session.

``docker_engine`` finds a Docker Engine API for the whole session: ``DOCKER_HOST`` or
``/var/run/docker.sock`` when a real daemon answers there, otherwise it starts
``podman system service`` on a private Unix socket (installed and configured by
``scripts/system.d/20-podman.sh``) and stops it at the end. It makes sure the sandbox image
exists, and at the end asserts that no container made by ``DockerSandbox`` is left behind.
``managed_containers`` lists the managed containers a test made. Both are in the ``docker``
serial group (``SERIAL_GROUPS`` in ``tests/conftest.py``). The helpers at the end drive a
process that starts containers and SIGKILL it, to check that none outlives it.

When no engine can be set up the Docker tests *fail* with the reason (CI must not go green by
skipping them); set ``OPENMLE_ALLOW_NO_DOCKER=1`` to skip them instead on a laptop.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from attrs import frozen

REPO = Path(__file__).resolve().parents[1]
DEFAULT_IMAGE = "localhost/openmle-sandbox:bookworm"
MANAGED_LABEL = "openmle.managed"


@frozen(kw_only=True)
class Engine:
    """A Docker Engine API endpoint the tests may use."""

    base_url: str
    kind: str
    """``"docker"`` or ``"podman"``."""
    image: str


def _no_engine(reason: str) -> None:
    if os.environ.get("OPENMLE_ALLOW_NO_DOCKER") == "1":
        pytest.skip(f"no Docker Engine API (OPENMLE_ALLOW_NO_DOCKER=1): {reason}")
    pytest.fail(
        f"no Docker Engine API for the Docker tests: {reason}. Run scripts/system.d/20-podman.sh "
        "as root (or start a Docker daemon); set OPENMLE_ALLOW_NO_DOCKER=1 to skip locally.",
        pytrace=False,
    )


def _client(base_url: str, timeout: float = 10.0) -> Any:
    import docker

    return docker.APIClient(base_url=base_url, version="auto", timeout=timeout)


def _answers(base_url: str) -> bool:
    """Whether ``GET /_ping`` at ``base_url`` answers OK (Unix socket or tcp)."""
    try:
        if base_url.startswith("unix://"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(3.0)
                sock.connect(base_url.removeprefix("unix://"))
                sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: engine\r\n\r\n")
                head = sock.recv(64)
            return head.startswith(b"HTTP/1.") and head.split(b" ")[1:2] == [b"200"]
        url = base_url.replace("tcp://", "http://", 1)
        return httpx.get(f"{url.rstrip('/')}/_ping", timeout=3.0).status_code == 200
    except (httpx.HTTPError, OSError):
        return False


def _engine_kind(base_url: str) -> str:
    api = _client(base_url)
    try:
        components = api.version().get("Components") or []
    finally:
        api.close()
    names = " ".join(str(c.get("Name", "")) for c in components)
    return "podman" if "podman" in names.lower() else "docker"


def _ensure_image(base_url: str, kind: str, image: str) -> None:
    import docker.errors

    api = _client(base_url)
    try:
        api.inspect_image(image)
        return
    except docker.errors.ImageNotFound:
        pass
    finally:
        api.close()
    script = REPO / "scripts" / "build-sandbox-image.sh"
    if shutil.which(kind) is None or shutil.which("debootstrap") is None or os.geteuid() != 0:
        _no_engine(
            f"image {image!r} is missing and cannot be built here (needs root, {kind} "
            "and debootstrap)"
        )
    proc = subprocess.run(
        [str(script), kind],
        env={**os.environ, "OPENMLE_SANDBOX_IMAGE": image},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if proc.returncode != 0:
        _no_engine(f"building {image!r} failed: {proc.stderr[-2000:]}")


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[Engine]:
    """A Docker Engine API with the sandbox image; checks nothing is left behind at the end."""
    pytest.importorskip("docker", reason="the 'docker' extra is not installed")
    image = os.environ.get("OPENMLE_SANDBOX_IMAGE", DEFAULT_IMAGE)
    service: subprocess.Popen[bytes] | None = None
    sock_dir: str | None = None
    base_url = os.environ.get("DOCKER_HOST")
    if base_url:
        if not _answers(base_url):
            _no_engine(f"DOCKER_HOST={base_url!r} does not answer")
    elif _answers("unix:///var/run/docker.sock"):
        base_url = "unix:///var/run/docker.sock"
    else:
        podman = shutil.which("podman")
        if podman is None:
            _no_engine("no daemon at DOCKER_HOST or /var/run/docker.sock and podman is missing")
        assert podman is not None
        sock_dir = tempfile.mkdtemp(prefix="openmle-podman-", dir="/tmp")
        base_url = f"unix://{sock_dir}/podman.sock"
        log = Path(sock_dir) / "service.log"
        with log.open("wb") as out:
            service = subprocess.Popen(
                [podman, "system", "service", "--time=0", base_url],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=sock_dir,  # conmon drops files (e.g. "oom") in its working directory
            )
        deadline = time.monotonic() + 30
        while not _answers(base_url):
            if service.poll() is not None or time.monotonic() > deadline:
                service.kill()
                service.wait()
                text = log.read_text(errors="replace")[-2000:]
                shutil.rmtree(sock_dir, ignore_errors=True)
                _no_engine(f"`podman system service` did not come up: {text}")
            time.sleep(0.1)
    kind = _engine_kind(base_url)
    try:
        _ensure_image(base_url, kind, image)
        before = set(_managed_containers(base_url))
        yield Engine(base_url=base_url, kind=kind, image=image)
        left = set(_managed_containers(base_url)) - before
        assert not left, f"DockerSandbox left containers behind: {sorted(left)}"
    finally:
        if service is not None:
            service.send_signal(signal.SIGTERM)
            try:
                service.wait(timeout=20)
            except subprocess.TimeoutExpired:
                service.kill()
                service.wait()
        if sock_dir is not None:
            shutil.rmtree(sock_dir, ignore_errors=True)


def _managed_containers(base_url: str) -> list[str]:
    api = _client(base_url)
    try:
        found = api.containers(all=True, filters={"label": MANAGED_LABEL})
    finally:
        api.close()
    return [str(c["Id"]) for c in found]


@pytest.fixture
def managed_containers(docker_engine: Engine) -> Any:
    """A function listing the ids of the containers carrying DockerSandbox's label that this
    test made: those present when the test started are left out.

    An earlier test's container can outlive that test for a while by design (one whose driver
    was SIGKILLed goes at its deadline, removed by its watchdog or by the next sandbox's sweep);
    counting it here made a later test fail for a container it never made. The engine tests run
    one at a time on one worker (the ``engines`` group), so no other test makes containers
    meanwhile; the session's end still checks that nothing made during the session is left.
    """
    before = set(_managed_containers(docker_engine.base_url))
    return lambda: [c for c in _managed_containers(docker_engine.base_url) if c not in before]


# A process that starts containers, SIGKILLed: none of its containers may outlive it.


def find_containers(engine: Engine, label: str) -> list[dict[str, Any]]:
    """The containers (running or not) carrying ``label``."""
    api = _client(engine.base_url, timeout=60)
    try:
        return list(api.containers(all=True, filters={"label": label}))
    finally:
        api.close()


def wait_for_containers(engine: Engine, label: str, *, present: bool, within_s: float) -> bool:
    """Whether containers labelled ``label`` are there (``present``) or gone within
    ``within_s`` seconds."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if bool(find_containers(engine, label)) == present:
            return True
        time.sleep(0.5)
    return False


def _remove_labelled(engine: Engine, label: str) -> None:
    api = _client(engine.base_url, timeout=60)
    try:
        for c in api.containers(all=True, filters={"label": label}):
            api.remove_container(c["Id"], force=True)
    finally:
        api.close()


@contextlib.contextmanager
def driving(
    engine: Engine, label: str, script: str, *args: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A driver process running ``python -c script args`` (this checkout's ``src`` on its path,
    in a session of its own); on exit it is killed if still running and the containers
    labelled ``label`` are removed."""
    import openmle

    src = str(Path(openmle.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(src).parent}"}
    driver = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        yield driver
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        _remove_labelled(engine, label)


def kill_outlived(
    engine: Engine, driver: subprocess.Popen[bytes], label: str, within_s: float, why: str
) -> None:
    """SIGKILL ``driver``'s process group after a second of running; the containers labelled
    ``label`` must be gone within ``within_s`` (else fail with ``why``)."""
    time.sleep(1.0)  # running now
    os.killpg(driver.pid, signal.SIGKILL)  # the driver dies; nothing stops its container
    driver.wait()
    assert wait_for_containers(engine, label, present=False, within_s=within_s), why
