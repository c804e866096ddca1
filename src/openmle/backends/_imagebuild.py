"""Per-task images: build a task's Dockerfile through the Docker Engine API, cached by content.

A task package may ship its own environment (``environment/Dockerfile``, or the file named by
``[environment] dockerfile`` in ``task.toml``). The Dockerfile's folder is the build context
and it is untrusted task content, so:

- the context is packed here, not by the SDK: regular files and directories only, symbolic
  links only when they point inside the folder (stored as links, never followed), no device
  or FIFO, at most ``max_context_bytes`` of file data (counted from the sizes on disk before
  anything is read, so a sparse giant is refused without reading it); nothing outside the
  folder can enter the context, and the builder refuses ``ADD``/``COPY`` of a path outside
  the context itself;
- the build runs without network (``network_mode="none"``), pulls nothing (``pull=False``),
  removes intermediate containers even on failure, and is bounded in time (each read of the
  build's output by the remaining time, and the whole build by ``timeout_s``);
- the image is tagged ``localhost/openmle-task:<hash>`` where ``<hash>`` is the SHA-256 of the
  packed context (a deterministic tar: sorted names, zeroed times and owners) and the
  Dockerfile's name: the same content is built once and found by its tag afterwards;
- the build's output is kept in ``<log_dir>/<hash>.log``; a failed build raises
  :class:`~openmle.errors.TaskPackageError` naming the failing step, the builder's error and
  the log's tail (a task error: retrying cannot fix a Dockerfile).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any, TextIO

from openmle._compat import require
from openmle._trees import walk
from openmle.errors import SandboxError, TaskPackageError

__all__ = [
    "IMAGE_REPOSITORY",
    "BuiltImage",
    "build_isolates_network",
    "build_task_image",
    "pack_context",
]

IMAGE_REPOSITORY = "localhost/openmle-task"
TASK_LABEL = "openmle.task-image"
_STEP = re.compile(r"^\s*(?:step|STEP)\s+\d+(?:/\d+)?\s*:?\s*(.*)$")
_LOG_TAIL_CHARS = 2000
_MAX_ENTRIES = 10_000
_MAX_DEPTH = 64
"""Folders a build context may nest (a deeper path is refused, not walked)."""


class BuiltImage:
    """The result of :func:`build_task_image`: the tag, whether it was built now, the log."""

    __slots__ = ("built", "log_path", "tag")

    def __init__(self, tag: str, built: bool, log_path: Path | None) -> None:
        self.tag = tag
        self.built = built
        self.log_path = log_path

    def __repr__(self) -> str:
        return f"BuiltImage(tag={self.tag!r}, built={self.built}, log_path={self.log_path!r})"


def _refuse(dockerfile: Path, what: str, fix: str) -> TaskPackageError:
    return TaskPackageError(f"The task's environment {dockerfile.parent} {what}; {fix}")


def pack_context(dockerfile: Path, *, max_bytes: int) -> tuple[bytes, str]:
    """Pack the Dockerfile's folder into a deterministic tar; return it and its content hash.

    Raises:
        TaskPackageError: the folder holds something that may not enter a build context (a
            link leaving it, a special file), too many entries, folders nested more than
            64 deep, or more than ``max_bytes`` of file data; or the Dockerfile is missing.
    """
    context = dockerfile.parent
    if not dockerfile.is_file() or dockerfile.is_symlink():
        raise _refuse(dockerfile, f"has no regular file {dockerfile.name}", "add the Dockerfile")
    root = context.resolve()
    entries: list[tuple[str, Path, os.stat_result]] = []
    total = 0
    for dirpath, dirnames, filenames in walk(context):
        dirnames.sort()
        if dirnames and Path(dirpath).relative_to(context).as_posix().count("/") >= _MAX_DEPTH:
            raise _refuse(
                dockerfile, f"nests folders more than {_MAX_DEPTH} deep", "flatten the folder"
            )
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            rel = path.relative_to(context).as_posix()
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = (path.parent / os.readlink(path)).resolve()
                if not target.is_relative_to(root):
                    raise _refuse(
                        dockerfile,
                        f"holds a symbolic link {rel!r} pointing outside it",
                        "copy the file into the environment folder instead",
                    )
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > max_bytes:
                    raise _refuse(
                        dockerfile,
                        f"holds more than {max_bytes} bytes (at {rel!r})",
                        "keep the build context small; download large data at run time",
                    )
            elif not stat.S_ISDIR(st.st_mode):
                raise _refuse(
                    dockerfile,
                    f"holds {rel!r}, which is not a regular file, folder or link",
                    "remove it",
                )
            entries.append((rel, path, st))
            if len(entries) > _MAX_ENTRIES:
                raise _refuse(
                    dockerfile, f"holds more than {_MAX_ENTRIES} entries", "pack fewer files"
                )
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel, path, st in entries:
            info = tarfile.TarInfo(rel)
            info.mtime = 0
            info.mode = stat.S_IMODE(st.st_mode) & 0o755
            if stat.S_ISLNK(st.st_mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                tar.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                info.mode |= 0o755
                tar.addfile(info)
            else:
                with path.open("rb") as fh:
                    data = fh.read(max_bytes + 1)
                if len(data) > max_bytes:  # grew since lstat
                    raise _refuse(dockerfile, f"holds more than {max_bytes} bytes", "shrink it")
                info.size = len(data)
                info.mode |= 0o644
                tar.addfile(info, io.BytesIO(data))
    packed = buf.getvalue()
    digest = hashlib.sha256(packed)
    digest.update(b"\0dockerfile=" + dockerfile.name.encode("utf-8", "surrogateescape"))
    return packed, digest.hexdigest()


def _image_exists(api: Any, tag: str) -> bool:
    docker_errors = require("docker.errors", "docker")
    try:
        api.inspect_image(tag)
    except docker_errors.ImageNotFound:
        return False
    except docker_errors.NotFound:
        return False
    return True


def build_task_image(
    connect: Any,
    dockerfile: Path,
    *,
    task_name: str,
    log_dir: Path,
    timeout_s: float,
    max_context_bytes: int,
    network: bool = False,
) -> BuiltImage:
    """Build (or find) the image of ``dockerfile``'s folder; blocking.

    Args:
        connect: ``connect(timeout)`` returns a Docker ``APIClient`` whose reads time out after
            ``timeout`` seconds (clients of their own, closed here).
        dockerfile: the task's Dockerfile; its folder is the build context.
        task_name: for messages and the image's label.
        log_dir: where ``<hash>.log`` (the build's output) is written.
        timeout_s: the longest the build may take.
        max_context_bytes: the most file data the context may hold.
        network: give the build network access (off by default).

    Raises:
        TaskPackageError: the context is refused, or the build failed or ran out of time (the
            message names the failing step and holds the log's tail).
        SandboxError: the engine could not be reached.
    """
    context, digest = pack_context(dockerfile, max_bytes=max_context_bytes)
    tag = f"{IMAGE_REPOSITORY}:{digest[:32]}"
    errors = (
        require("docker.errors", "docker").DockerException,
        require("requests.exceptions", "docker").RequestException,
        require("urllib3.exceptions", "docker").HTTPError,
        OSError,  # socket timeouts, a reset connection
    )
    started = time.monotonic()
    api = connect(60.0)  # engine queries; the build's own reads are bounded by timeout_s
    clients: list[Any] = [api]  # closed here, in this order
    try:
        try:
            if _image_exists(api, tag):
                return BuiltImage(tag, False, None)
        except errors as exc:
            raise SandboxError(f"the engine could not be asked for image {tag}: {exc}") from exc
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{digest[:32]}.log"
        with log_path.open("w", encoding="utf-8", errors="replace") as log:
            log.write(f"# task {task_name!r}: building {dockerfile.name} as {tag}\n")
            step, failure = _stream_build(
                connect,
                clients,
                log,
                context=context,
                dockerfile=dockerfile,
                tag=tag,
                task_name=task_name,
                timeout_s=timeout_s,
                network=network,
                started=started,
                errors=errors,
            )
            if not failure:
                try:
                    if not _image_exists(api, tag):
                        failure = "the builder finished without producing the image"
                except errors as exc:
                    raise SandboxError(f"the engine failed after building {tag}: {exc}") from exc
            if failure:
                log.write(f"\n# FAILED: {failure}\n")
        if failure:
            raise _build_failed(task_name, dockerfile, log_path, step, failure)
        return BuiltImage(tag, True, log_path)
    finally:
        for client in clients:
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close()


def _stream_build(
    connect: Any,
    clients: list[Any],
    log: TextIO,
    *,
    context: bytes,
    dockerfile: Path,
    tag: str,
    task_name: str,
    timeout_s: float,
    network: bool,
    started: float,
    errors: tuple[type[BaseException], ...],
) -> tuple[str, str]:
    """Run the build, copying its output into ``log``; returns ``(last step, failure)``.

    The build's client is appended to ``clients`` (the caller closes it). ``failure`` is empty
    when the engine reported no error and the build kept within ``timeout_s`` (counted from
    ``started``).

    Raises:
        SandboxError: the engine failed other than by a timeout.
    """
    step = ""
    failure = ""
    try:
        builder = connect(timeout_s)
        clients.append(builder)
        stream = builder.build(
            fileobj=io.BytesIO(context),
            custom_context=True,
            dockerfile=dockerfile.name,
            tag=tag,
            rm=True,
            forcerm=True,
            pull=False,
            nocache=False,
            network_mode=None if network else "none",
            labels={TASK_LABEL: "1", "openmle.task": task_name[:200]},
            decode=True,
            timeout=max(1, int(timeout_s)),
        )
        for chunk in stream:
            text = _chunk_text(chunk)
            if text:
                log.write(text)
                for line in text.splitlines():
                    if _STEP.match(line):
                        step = line.strip()
            if isinstance(chunk, dict) and chunk.get("error"):
                failure = str(chunk.get("error")).strip()
            if time.monotonic() - started > timeout_s:
                failure = f"the build ran past its {timeout_s:g}-second limit"
                with contextlib.suppress(Exception):
                    stream.close()
                break
    except errors as exc:
        if "timed out" in str(exc).lower() or "timeout" in type(exc).__name__.lower():
            failure = f"the build ran past its {timeout_s:g}-second limit ({exc})"
        else:
            raise SandboxError(f"the engine failed while building {tag}: {exc}") from exc
    return step, failure


def _build_failed(
    task_name: str, dockerfile: Path, log_path: Path, step: str, failure: str
) -> TaskPackageError:
    """The error for a failed build: the failing step, the reason, the fix and the log's tail."""
    tail = log_path.read_text(encoding="utf-8", errors="replace")[-_LOG_TAIL_CHARS:]
    where = f"at step {step!r}" if step else "before its first step"
    return TaskPackageError(
        f"Building the environment of task {task_name!r} ({dockerfile}) failed {where}: "
        f"{failure}. Fix the Dockerfile (builds have no network; files must come from "
        f"the environment folder). Full log: {log_path}\n--- log tail ---\n{tail}"
    )


def _chunk_text(chunk: Any) -> str:
    if isinstance(chunk, dict):
        for key in ("stream", "error", "status"):
            value = chunk.get(key)
            if isinstance(value, str) and value:
                return value if value.endswith("\n") else value + "\n"
        return ""
    if isinstance(chunk, bytes):
        return chunk.decode("utf-8", "replace")
    return json.dumps(chunk) + "\n" if chunk else ""


_PROBE = """\
FROM {image}
LABEL openmle.build-probe="1"
RUN test "$(grep -c : /proc/net/dev)" -le 1
"""


def build_isolates_network(connect: Any, image: str, *, timeout_s: float) -> bool:
    """Whether the engine's build API runs ``RUN`` steps without network when asked to.

    Builds a one-line probe ``FROM image`` (``network_mode="none"``) whose ``RUN`` fails when
    it sees any network interface but the loopback one. Podman 4.3's Docker API ignores
    ``networkmode`` for builds (``RUN`` steps share the host's network namespace), so there
    this is False. A passing probe is an image (tagged by content), so the check is free once
    it has passed; blocking.
    """
    with tempfile.TemporaryDirectory(prefix="openmle-probe-") as tmp:
        dockerfile = Path(tmp) / "Dockerfile"
        dockerfile.write_text(_PROBE.format(image=image))
        try:
            build_task_image(
                connect,
                dockerfile,
                task_name="network-isolation-probe",
                log_dir=Path(tmp) / "logs",
                timeout_s=timeout_s,
                max_context_bytes=4096,
            )
        except TaskPackageError:
            return False
    return True
