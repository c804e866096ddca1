"""The suite's socket-leak guard (``tests/conftest.py``): how it tells a Ray driver's own
connections from a test's leak."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from tests._sockets import peer_commands
from tests.conftest import _RAY_PROCESS

LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
    "print(s.getsockname()[1], flush=True)\n"
    "conn, _ = s.accept(); time.sleep(60)\n"
)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_connection_is_named_by_its_local_listeners_command() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", LISTEN, "fake-raylet"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as conn:
            fd = conn.fileno()
            found = peer_commands({fd: os.readlink(f"/proc/self/fd/{fd}")})
        assert "fake-raylet" in found[fd]
        assert _RAY_PROCESS.search(found[fd])  # counted as a Ray process's
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize(
    ("command", "ray"),
    [
        ("ray::IDLE", True),
        ("/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --node-ip=1", True),
        ("/venv/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --port 1", True),
        ("python -m openmle serve --port 8000", False),
        ("podman system service --time=0 unix:///tmp/x.sock", False),
        ("python -c import uvicorn; array", False),
    ],
)
def test_only_ray_processes_count_as_ray(command: str, ray: bool) -> None:
    assert bool(_RAY_PROCESS.search(command)) is ray
