"""A container's deadline, kept on the host (this module's source, run with ``python -I -c``).

A container's own deadline (``timeout`` inside it) runs from the image, which a task controls:
an image can put a fake ``timeout`` first on ``PATH`` (or replace the interpreter) and so keep
its container running after the process that started it is gone. This watchdog runs on the
host instead, in a session of its own (it survives a SIGKILL of the grading process that
started it), and talks only to the engine:

- it waits for the container to exit (the engine's ``wait``), at most ``seconds``;
- at the deadline it force-removes the container (the engine kills what runs in it);
- when the container exits earlier and the owner process is gone, it removes it too (nobody
  else would); otherwise the owner removes it.

Arguments: ``BASE_URL CONTAINER SECONDS OWNER_PID`` (``BASE_URL`` empty: ``DOCKER_HOST`` and
the other ``DOCKER_*`` variables, else the local socket). Exit status 0 in every case; it
never outlives ``SECONDS`` plus one engine call.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess


def pid_alive(pid: object) -> bool:
    """Whether process ``pid`` of this host still runs (a zombie counts as ended).

    Alive: signal 0 reaches it (or it belongs to another user) and ``/proc/PID/stat`` does not
    say ``Z`` (a zombie has ended; only its exit status is left). False for anything but an
    int above 1 (no ``bool``, never ``init`` or a process group). Standard library only:
    this module runs as a program of its own; :mod:`openmle.backends` exports it as the one
    liveness check (the bench's launch status uses it).
    """
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # a zombie has ended
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True


def _client(base_url: str) -> Any:
    import docker

    kwargs: dict[str, Any] = {"base_url": base_url} if base_url else docker.utils.kwargs_from_env()
    kwargs.setdefault("base_url", "unix:///var/run/docker.sock")
    return docker.APIClient(version="auto", timeout=60, **kwargs)


def watch(base_url: str, container: str, seconds: float, owner: int) -> str:
    """Wait for ``container`` at most ``seconds``; ``"exited"``, ``"gone"`` or ``"removed"``."""
    import docker.errors

    deadline = time.monotonic() + seconds
    api = _client(base_url)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                api.wait(container, timeout=max(1, min(int(left) + 1, 30)))
            except docker.errors.NotFound:
                return "gone"
            except Exception:  # the wait's read timeout, or a hiccup of the engine: again
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.2)
                continue
            if not pid_alive(owner):
                with contextlib.suppress(Exception):
                    api.remove_container(container, force=True, v=True)
            return "exited"
        with contextlib.suppress(Exception):
            api.remove_container(container, force=True, v=True)
        return "removed"
    finally:
        api.close()


def main(argv: Sequence[str]) -> int:
    """Entry point: ``BASE_URL CONTAINER SECONDS OWNER_PID``."""
    base_url, container, seconds, owner = argv[1], argv[2], float(argv[3]), int(argv[4])
    with contextlib.suppress(Exception):
        watch(base_url, container, seconds, owner)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))


_ENGINE_ENV = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_CONFIG")


def start_watchdog(base_url: str | None, container: str, seconds: float) -> subprocess.Popen[bytes]:
    """Start the host-side watchdog that removes ``container`` at its deadline.

    It removes the container ``seconds`` from now (or once it exits, if the caller is gone by
    then), whatever the image holds. Returns its :class:`subprocess.Popen`; the caller reaps
    it (``wait()``: it ends once the container is gone).

    ``base_url`` is the Docker Engine API (``None``: ``DOCKER_HOST`` and the other
    ``DOCKER_*`` variables, else the local socket). It runs this module's source with
    ``python -I -c`` (standard library and ``docker`` only, so it starts in a fraction of a
    second) in a new session with a fixed environment (``PATH`` and the engine's ``DOCKER_*``
    variables only), so it outlives a SIGKILL of the caller and never depends on the
    container's image (a task's image can shadow ``timeout`` or the interpreter).
    """
    import subprocess

    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    env.update({k: os.environ[k] for k in _ENGINE_ENV if k in os.environ})
    return subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-c",
            Path(__file__).read_text(encoding="utf-8"),
            base_url or "",
            container,
            repr(float(seconds)),
            str(os.getpid()),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
