"""Grading a NatureBench case in a container of its own (optional; Docker Engine API).

:class:`ContainerGrader` (exported as :class:`openmle.bench.ContainerGrader`; its docstring
states the contract) and :func:`tar_stream`, the streamed archive of what it copies in. The
container runs the one evaluator runner, :mod:`openmle.bench.naturebench.child`, in its
container mode; the backends' kit gives the container its sweep labels and its host-side
deadline (:func:`openmle.backends.managed_container_labels`,
:func:`openmle.backends.start_watchdog`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, final

from attrs import field, frozen

from openmle._readback import loads_untrusted
from openmle.bench.naturebench import child
from openmle.errors import InvalidArgument

__all__ = ["ContainerGrader", "tar_stream"]

GRADER_LABEL = "openmle.grader"
"""Label of every grading container (value ``"naturebench"``)."""
WATCHDOG_SLACK_S = 10.0
"""Seconds past ``timeout_s`` at which the host-side watchdog removes the container."""
MAX_LOG_BYTES = 1024 * 1024
"""The most bytes of the container's stdout kept (the tail, where the result is)."""
CHUNK = 1024 * 1024
"""Bytes per chunk of the streamed archive."""


@functools.cache
def _runner_source() -> str:
    return Path(child.__file__).read_text(encoding="utf-8")


def _positive(_inst: Any, attribute: Any, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InvalidArgument(f"Expected ContainerGrader.{attribute.name} > 0 but got {value!r}")


def _dir_header(name: str) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o777
    return info.tobuf(format=tarfile.PAX_FORMAT)


def _file_blocks(name: str, fd: int, size: int) -> Iterator[bytes]:
    info = tarfile.TarInfo(name)
    info.size, info.mode = size, 0o644
    yield info.tobuf(format=tarfile.PAX_FORMAT)
    left = size
    while left > 0:
        chunk = os.read(fd, min(CHUNK, left))
        if not chunk:
            raise OSError(f"{name} shrank while it was archived")
        left -= len(chunk)
        yield chunk
    if size % tarfile.BLOCKSIZE:
        yield tarfile.NUL * (tarfile.BLOCKSIZE - size % tarfile.BLOCKSIZE)


def _open_file(path: Path) -> tuple[int, int]:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(f"{path.name} is not a regular file")
    os.set_blocking(fd, True)
    return fd, st.st_size


def tar_stream(submission: Path) -> Iterator[bytes]:
    """The archive of ``/nb/output/`` for ``submission`` (a file, or the sandbox's vetted copy
    of an output directory), as a stream of chunks of at most :data:`CHUNK` bytes (plus the
    headers): memory stays at one chunk whatever the tree's size. Only directories and regular
    files are archived; a link or special file anywhere raises :class:`OSError`.
    """
    yield _dir_header("nb")
    yield _dir_header("nb/output")
    if not submission.is_dir() or submission.is_symlink():
        fd, size = _open_file(submission)
        try:
            yield from _file_blocks("nb/output/submission.csv", fd, size)
        finally:
            os.close(fd)
    else:
        stack = [(submission, "nb/output")]
        while stack:
            folder, arc = stack.pop()
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                name = f"{arc}/{entry.name}"
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    yield _dir_header(name)
                    stack.append((Path(entry.path), name))
                elif stat.S_ISREG(mode):
                    fd, size = _open_file(Path(entry.path))
                    try:
                        yield from _file_blocks(name, fd, size)
                    finally:
                        os.close(fd)
                else:
                    raise OSError(f"{name} is a link or special file")
    yield tarfile.NUL * (2 * tarfile.BLOCKSIZE)


def _connect(base_url: str | None) -> Any:
    import docker

    kwargs: dict[str, Any] = {"base_url": base_url} if base_url else docker.utils.kwargs_from_env()
    kwargs.setdefault("base_url", "unix:///var/run/docker.sock")
    return docker.APIClient(version="auto", timeout=120, **kwargs)


@final
@frozen(kw_only=True)
class ContainerGrader:
    """A NatureBench grader that runs a case's evaluator in a container of its own.

    Use it as ``NatureBench(..., grader=ContainerGrader(image=...))``: each grade runs the
    case's ``evaluation/evaluator.py`` in a fresh container made from ``image`` (the case's
    environment image, so the evaluator has what it imports):

    - ``evaluation/`` (evaluator and ground truth) is bind-mounted **read-only** at
      ``/nb/evaluation`` in this container and nowhere else; the program's containers never
      see it;
    - the program's submission is *copied* in (``put_archive``) as
      ``/nb/output/submission.csv`` (or, given the sandbox's copy of its output directory,
      that tree as ``/nb/output/``), never mounted, so nothing of the program's workspace is
      reachable from here; the archive is streamed (tar headers and 1 MiB chunks,
      :func:`tar_stream`), never built whole in memory, and only directories and regular
      files go in (no link is followed);
    - no network, all capabilities dropped, ``no-new-privileges``, a memory and process limit;
    - a wall-clock limit after which the container is removed, kept twice: by the grading
      process, and by a host-side watchdog (:func:`openmle.backends.start_watchdog`, its own
      session) that removes the container at ``timeout_s`` plus :data:`WATCHDOG_SLACK_S` even
      when the grading process was killed. The deadline never runs from the image (a task's
      image can shadow ``timeout`` or the interpreter), only from the host and the engine;
    - the container carries the managed and owner labels
      (:func:`openmle.backends.managed_container_labels`), so the stale-container sweep of any
      :class:`~openmle.backends.DockerSandbox` removes it once the grading process is gone; it
      is removed in every normal case;
    - the engine is ``base_url``, else ``DOCKER_HOST`` (and ``DOCKER_TLS_VERIFY``/
      ``DOCKER_CERT_PATH``), else the local socket, as for
      :class:`~openmle.backends.DockerSandbox`.

    The container runs the one evaluator runner, :mod:`openmle.bench.naturebench.child` (its
    source with the image's ``python -I -c``, in its container mode: the image has no
    openmle). The evaluator's result is its return value, written by the runner after the
    evaluator's own printing (which goes to stderr); at most the last :data:`MAX_LOG_BYTES` of
    the container's stdout are kept.

    Args:
        image: the image to run (the case's environment image); it needs ``python3``.
        base_url: the Docker Engine API (default: ``DOCKER_HOST`` and the other ``DOCKER_*``
            variables, else the local socket).
        memory_mb: the container's memory limit.
        pids: the container's process limit.
        python: the interpreter in the image.
    """

    image: str
    base_url: str | None = None
    memory_mb: int = field(default=16_384, validator=_positive)
    pids: int = field(default=512, validator=_positive)
    python: str = "python3"

    def __call__(self, evaluation: Path, submission: Path, timeout_s: float) -> dict[str, Any]:
        """``{"raw": dict}``, ``{"error": text}``, or with it ``"limit": "time"`` (or
        ``"memory"``).
        """
        api = _connect(self.base_url)
        try:
            return self._run(api, Path(evaluation), Path(submission), float(timeout_s))
        finally:
            api.close()

    def _run(
        self, api: Any, evaluation: Path, submission: Path, timeout_s: float
    ) -> dict[str, Any]:
        from openmle.backends import managed_container_labels, start_watchdog

        host = api.create_host_config(
            binds={str(evaluation.resolve()): {"bind": child.CONTAINER_EVALUATION, "mode": "ro"}},
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=f"{int(self.memory_mb)}m",
            pids_limit=int(self.pids),
        )
        created = api.create_container(
            self.image,
            command=[self.python, "-I", "-c", _runner_source(), child.CONTAINER_FLAG],
            environment={"OUTPUT_DIR": child.CONTAINER_OUTPUT_DIR, "HOME": "/tmp"},
            working_dir="/tmp",
            host_config=host,
            labels={GRADER_LABEL: "naturebench", **managed_container_labels()},
        )
        cid = created["Id"]
        watchdog = None
        try:
            api.put_archive(cid, "/", tar_stream(submission))
            watchdog = start_watchdog(self.base_url, cid, timeout_s + WATCHDOG_SLACK_S)
            api.start(cid)
            deadline = time.monotonic() + timeout_s
            timed_out = True
            while time.monotonic() < deadline:
                if not api.inspect_container(cid)["State"]["Running"]:
                    timed_out = False
                    break
                time.sleep(0.2)
            if timed_out:
                why = f"the evaluator hit its time limit ({timeout_s:g} s)"
                return {"error": why, "limit": "time"}
            logs = _log_tail(api, cid)
        finally:
            with contextlib.suppress(Exception):  # gone already is fine
                api.remove_container(cid, force=True)
            if watchdog is not None:
                try:
                    watchdog.wait(timeout=30)  # it ends once the container is gone
                except Exception:
                    watchdog.kill()
                    watchdog.wait()
        at = logs.rfind(child.MARK)
        if at < 0:
            return {"error": "the evaluator container ended without a result"}
        try:
            found = loads_untrusted(logs[at + len(child.MARK) :].strip().splitlines()[0])
        except (ValueError, IndexError):
            return {"error": "the evaluator container wrote an unreadable result"}
        return found if isinstance(found, dict) else {"error": "unreadable result"}


def _log_tail(api: Any, cid: str) -> str:
    """The last :data:`MAX_LOG_BYTES` of the container's stdout, read streaming."""
    tail = b""
    for chunk in api.logs(cid, stdout=True, stderr=False, stream=True, follow=False):
        tail = (tail + chunk)[-MAX_LOG_BYTES:]
    return tail.decode("utf-8", "replace")
