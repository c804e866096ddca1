"""``DockerSandbox``: one fresh container per job, over the Docker Engine API.

Each job runs ``python3 main.py`` in a new container made from a configurable image (per
sandbox, or per task through ``task_images``). The task's public data for the job's split is
bind-mounted read-only at ``/data`` (passed as ``$DATA_DIR``); a fresh host directory is mounted
read-write at ``/workspace`` (the working directory, where ``submission.csv`` goes). The task's
private paths are never mounted. The network is off, memory, CPU and PIDs are limited, every
capability is dropped and privilege escalation is refused. Grading happens outside the
container, on the host, through ``task.grade``; the outcome comes from the shared
:func:`openmle._runlog.classify_run`, so a run is classified exactly as the local sandbox would.

Lifecycle guarantees (the failure modes seen in peers, see ``peers.md``):

- the container is removed on every path, cancellation included (shielded cleanup), so none is
  leaked (SWE-ReX leaked containers when a start timed out);
- the program's output is read through ``attach`` into :class:`openmle._runlog.LogCap` (head and
  tail kept), so a chatty program can neither block nor exhaust memory, and the engine keeps no
  log of its own (``LogConfig`` type ``none``), so it cannot fill the host's disk either;
- a timeout stops the *container* (SIGTERM, then SIGKILL after ``stop_grace_s``), so no process
  outlives the job (killing a ``docker exec`` client does not, as NeMo Gym found);
- the limit holds without us too: at ``timeout_s + stop_grace_s + CONTAINER_DEADLINE_SLACK_S``
  a host-side watchdog (:mod:`openmle.backends._watchdog`, its own session) removes the
  container through the engine, so a container whose driver died (SIGKILL) is stopped even when
  the task's image shadows ``timeout`` or the interpreter; the command also runs under the
  image's ``timeout -s KILL`` at that limit (which covers a watchdog lost with its host, e.g. a
  lost Ray worker, when the image is honest); every container is labelled with its sandbox and
  its owner process, and containers whose owner is gone are removed when a sandbox starts and by
  :meth:`DockerSandbox.aclose`;
- engine failures give ``INFRA_ERROR``, never a program failure.

Departures from the released system: the released search and RL talked to an external HTTP job
service and never ran containers themselves; the paper's pool was Docker workers with one GPU
each. Here the container engine is driven directly, and GPUs are requested per job through
``DeviceRequests`` (see :class:`DockerSandbox`).
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import shutil
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, final

import anyio
import anyio.from_thread
import anyio.lowlevel
from attrs import define, field

from openmle._compat import require
from openmle._exports import publish_one
from openmle._protocols import Sandbox
from openmle._runlog import LogCap
from openmle._task_protocol import TaskEnvironment, TaskHandle, TaskResolver
from openmle._trees import remove_tree
from openmle._types import Job, RunResult
from openmle._validation import check_positive, fail
from openmle.backends._gpu import GpuPool, visible_gpus
from openmle.backends._kit import (
    default_resolver,
    grade_outside,
    output_dir_name,
    signal_exit_code,
)
from openmle.backends._plan import program_env
from openmle.backends._watchdog import start_watchdog
from openmle.backends._workspace import encode_program, over_quota
from openmle.errors import InvalidArgument, SandboxError, TaskPackageError

__all__ = ["DEFAULT_IMAGE", "DockerSandbox", "managed_container_labels"]

DEFAULT_IMAGE = "localhost/openmle-sandbox:bookworm"
"""The image built by ``scripts/build-sandbox-image.sh`` (Debian bookworm, python3, numpy)."""

DATA_MOUNT = "/data"
WORKSPACE_MOUNT = "/workspace"
MANAGED_LABEL = "openmle.managed"
"""Every container the sandbox makes carries this label (value ``"1"``)."""
SANDBOX_LABEL = "openmle.sandbox"
"""The id of the :class:`DockerSandbox` instance that made the container."""
OWNER_LABEL = "openmle.owner"
"""``HOST/PID/START``: the host, pid and start time (clock ticks) of the process that made it."""
CONTAINER_DEADLINE_SLACK_S = 10.0
"""Seconds past ``timeout_s + stop_grace_s`` at which the container's own ``timeout`` kills the
program; the driver stops a timed-out container well before that, so this only acts when the
driver is gone (or stalled)."""


def _visible_gpus_from_env() -> tuple[str, ...] | None:
    """The inherited ``CUDA_VISIBLE_DEVICES`` entries (read as CUDA does), None when unset.

    Set but empty, it hides every GPU, as it does from CUDA: an empty pool, not the engine's
    choice.
    """
    if "CUDA_VISIBLE_DEVICES" not in os.environ:
        return None
    return visible_gpus(os.environ)


def _gpu_pool(value: Sequence[int | str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes):
        raise fail("a sequence of GPU ids or None", "DockerSandbox.gpus", value)
    return tuple(str(v) for v in value)


def _engine_errors() -> tuple[type[BaseException], ...]:
    docker_errors = require("docker.errors", "docker")
    requests_exc = require("requests.exceptions", "docker")
    return (docker_errors.DockerException, requests_exc.RequestException, ConnectionError)


_QUOTA_POLL_S = 0.5
"""How often the quota watchdog measures a workspace (where no quota tmpfs is mounted)."""


def _owner_token(pid: int) -> str | None:
    """``HOST/PID/START`` for a live process (START tells a reused pid apart), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        start = stat.rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
    return f"{socket.gethostname()}/{pid}/{start}"


def managed_container_labels() -> dict[str, str]:
    """The labels that put a container this process owns under the stale-container sweep.

    For a container made outside a sandbox (the bench's NatureBench grading container):
    ``openmle.managed`` (``"1"``) and ``openmle.owner`` (this process's ``HOST/PID/START``;
    empty when ``/proc`` cannot tell it, and then nothing sweeps it).

    A container carrying them is swept like a :class:`DockerSandbox` container: once this
    process is gone, the stale-container sweep of any :class:`DockerSandbox` (when it starts and
    when it closes) removes it. The owner still removes it on every normal path; add a
    :func:`~openmle.backends.start_watchdog` for its deadline.
    """
    return {MANAGED_LABEL: "1", OWNER_LABEL: _owner_token(os.getpid()) or ""}


def _owner_gone(owner: str) -> bool:
    """Whether the process named by an ``OWNER_LABEL`` value has exited (on this host only)."""
    parts = owner.split("/")
    if len(parts) < 3 or not parts[-2].isdigit():
        return False
    host = "/".join(parts[:-2])
    if host != socket.gethostname():
        return False  # another machine's process: we cannot tell
    return _owner_token(int(parts[-2])) != owner


def _sweep(api: Any, sandbox_id: str | None, live: set[str]) -> list[str]:
    """Remove the containers whose owner process is gone (and, with ``sandbox_id``, that
    sandbox's own containers not in ``live``). Returns the removed ids.
    """
    errors = _engine_errors()
    removed: list[str] = []
    for found in api.containers(all=True, filters={"label": MANAGED_LABEL}):
        cid = str(found.get("Id"))
        labels = found.get("Labels") or {}
        owner = labels.get(OWNER_LABEL)
        mine = sandbox_id is not None and labels.get(SANDBOX_LABEL) == sandbox_id
        if (mine and cid not in live) or (owner and _owner_gone(str(owner))):
            with contextlib.suppress(*errors):
                _remove(api, cid)
                removed.append(cid)
    return removed


def _public_dir(task: TaskHandle, job: Job) -> Path:
    public = Path(task.public_dir(job.split))
    if not public.is_dir():
        raise TaskPackageError(
            f"Task {task.name!r} has no public directory for split {job.split.value!r} "
            f"(expected {public})"
        )
    _check_disjoint(public, task.private_paths)
    return public


def _check_disjoint(public: Path, private: Sequence[Path]) -> None:
    pub = public.resolve()
    for p in private:
        q = Path(p).resolve()
        if pub == q or pub.is_relative_to(q) or q.is_relative_to(pub):
            raise TaskPackageError(
                f"The public data directory {pub} overlaps the private path {q}; mounting it "
                "would expose the hidden answers. Keep private answers outside the public "
                "directory."
            )


@final
@define(eq=False)
class DockerSandbox(Sandbox):
    """Runs each job in a fresh container through the Docker Engine API (Docker or Podman).

    Args:
        image: image for every job (``python3`` on its PATH), unless ``task_images`` names one
            for the job's task. Default: the image ``scripts/build-sandbox-image.sh`` builds.
        task_images: per-task images, keyed by task name.
        base_url: engine URL (``unix:///run/podman/podman.sock``, ``tcp://host:2375``); None
            reads ``DOCKER_HOST`` (and ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``), falling back
            to ``/var/run/docker.sock``. Bind mounts need the engine on this host.
        resolver: turns ``Job.task`` into a :class:`~openmle._task_protocol.TaskHandle`;
            default ``openmle.gym.resolve_task``.
        max_concurrency: jobs running at once; others wait (their wait is ``queue_s``).
        memory_mb: memory limit when the job does not set ``resources.memory_mb`` (MiB; swap
            is disabled, so this is the whole budget).
        pids_limit: most processes/threads in the container.
        seccomp: the seccomp profile. ``"auto"`` (default) keeps Docker's default profile
            (which already refuses user namespaces and keyrings without ``CAP_SYS_ADMIN``) and,
            on Podman, uses a copy of Podman's default profile with ``unshare``, ``setns`` and
            ``keyctl`` removed from its allow list (Podman allows them for rootless use),
            ``clone`` refused with any namespace flag and ``clone3`` answered with ``ENOSYS``
            (as Docker's default profile does; threads and subprocesses work as before), and
            ``socket`` allowed only for the families and protocols a kernel has built in
            (Unix, netlink route/uevent, IPv4/IPv6 TCP, UDP, ICMP), ``socketpair`` for Unix;
            ``None`` keeps the engine's default; any other value is a profile path passed as
            ``seccomp=PATH``.
        max_file_mb: largest file the program may write (MiB; None for no limit). Set by the
            image's ``/bin/sh`` (``ulimit -f``) before it execs Python, since lowering a limit
            needs no privilege on any engine (naming ``Ulimits`` in the request makes Podman
            drop its configured defaults). Writing past it kills the program with SIGXFSZ.
        max_workspace_mb, max_workspace_files: the job's disk quota on the host, bytes
            (allocated blocks, so ``fallocate`` reservations count) and files (and
            directories) in its workspace. A watchdog measures the workspace every 0.5 s and
            kills the container past the quota; it can overshoot by what the program writes
            in one interval. The workspace stays on disk (a tmpfs would count against the
            container's memory limit, so a program writing large outputs would be OOM-killed).
        network: allow network access (off by default: ``NetworkMode=none``).
        user: run as this ``uid[:gid]`` (or name known to the image) instead of the image's
            default user, for example ``"65534:65534"``. The workspace is writable for any
            container user (the image's root has no capabilities, so it needs that too when
            this process is not root); what the program leaves is removed after the job by
            this process, which needs the right to (root, or the engine's user namespace
            mapping the container user to this process's uid).
        stop_grace_s: seconds between SIGTERM and SIGKILL when a job times out (> 0).
        container_deadline: also enforce the time limit when this process is gone: a
            host-side watchdog (:mod:`openmle.backends._watchdog`, a session of its own, so a
            SIGKILL of this process does not stop it) removes the container at ``timeout_s +
            stop_grace_s + 10`` seconds through the engine, whatever the image holds (a task's
            image can shadow ``timeout`` or the interpreter), and the command also runs under
            the image's ``timeout`` (coreutils, or busybox 1.30 or later) at that limit. Turn
            it off only for an image without ``timeout``.
        gpus: host GPU ids this sandbox may lease to jobs through the same
            :class:`~openmle.backends._gpu.GpuPool` as ``LocalSandbox`` (a job asking for 2 GPUs
            gets 2 free ids from the pool; it waits when too few are free, and a request the
            pool can never serve raises ``InvalidArgument``). Default: the inherited
            ``CUDA_VISIBLE_DEVICES`` mask if set (read as CUDA reads it: up to the first
            invalid entry; set but empty, no GPU), else no pool. ``Resources.gpu_ids``
            are indices into the pool (relative, like CUDA's), or host ids without a pool.
            Without a pool a count request is passed to the engine as ``Count`` and the engine
            picks, with no coordination between concurrent jobs.
        gpu_driver: the ``DeviceRequests`` driver (``"nvidia"``).
        shm_size_mb: size of ``/dev/shm`` (MiB), None for the engine's default (64 MiB).
        oom_from_sigkill: also classify a SIGKILL we did not send as OOM. Podman's Docker API
            does not report ``OOMKilled`` on cgroup-v1 hosts; None (default) turns this on for
            Podman engines only.
        workspace_root: where job workspaces are created (default: the system temp dir).
        build_task_images: build the image of a task that ships a Dockerfile (see
            :class:`~openmle._task_protocol.TaskEnvironment`; a package's
            ``environment/Dockerfile``) and run its jobs there. The image is tagged by the
            content hash of the task's environment folder and built once (a later sandbox
            finds it by its tag); the build has no network, pulls nothing, and is bounded by
            ``build_timeout_s`` and ``max_context_mb``. A task in ``task_images`` uses that
            image instead; a task without a Dockerfile uses ``image``. False ignores
            Dockerfiles.
        build_network_check: before the first build, check that the engine's build API runs
            ``RUN`` steps without network when asked to (``network_mode="none"``), by building
            a one-line probe from ``image``; refuse to build if it does not (Podman 4.3's Docker
            API ignores it: ``RUN`` steps share the host's network namespace). False skips the
            check and builds anyway: only for Dockerfiles you trust.
        build_timeout_s: longest an image build may take (seconds).
        max_context_mb: most file data a task's environment folder may hold (MiB).
        build_log_dir: where build logs go (``<hash>.log``); default
            ``$OPENMLE_CACHE/docker-builds`` (``~/.cache/openmle/docker-builds``).
        log_head, log_tail: bytes of output kept from the start and the end.
        python: the interpreter command inside the image.

    The container request for a job is :meth:`container_request` (the exact body of
    ``POST /containers/create``).

    GPUs compose with a GPU lease held by the caller: give the leased ids as ``gpus`` (or run
    the sandbox under the leased ``CUDA_VISIBLE_DEVICES``), and each job's relative ids are
    mapped through them, so concurrent runs never collide.
    """

    image: str = DEFAULT_IMAGE
    task_images: Mapping[str, str] = field(factory=dict)
    base_url: str | None = None
    resolver: TaskResolver = field(default=default_resolver)
    max_concurrency: int = 4
    memory_mb: int = 4096
    pids_limit: int = 512
    max_file_mb: int | None = 1024
    max_workspace_mb: int = 2048
    max_workspace_files: int = 100_000
    seccomp: str | None = "auto"
    network: bool = False
    user: str | None = None
    stop_grace_s: float = 5.0
    container_deadline: bool = True
    gpus: tuple[str, ...] | None = field(factory=_visible_gpus_from_env, converter=_gpu_pool)
    gpu_driver: str = "nvidia"
    shm_size_mb: int | None = None
    oom_from_sigkill: bool | None = None
    workspace_root: Path | None = None
    log_head: int = 64 * 1024
    log_tail: int = 64 * 1024
    python: str = "python3"
    build_task_images: bool = True
    build_timeout_s: float = 1800.0
    build_network_check: bool = True
    max_context_mb: int = 256
    build_log_dir: Path | None = None
    _id: str = field(factory=lambda: uuid.uuid4().hex[:12], init=False)
    _api: Any = field(default=None, init=False)
    _engine: str | None = field(default=None, init=False)
    _seccomp_path: str | None = field(default=None, init=False)
    _limiter: anyio.CapacityLimiter | None = field(default=None, init=False)
    _pool: GpuPool | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)
    _live: set[str] = field(factory=set, init=False)
    _watchdogs: dict[str, Any] = field(factory=dict, init=False)
    _owner: str = field(factory=lambda: _owner_token(os.getpid()) or "", init=False)
    _built: dict[str, str] = field(factory=dict, init=False)
    _build_failed: dict[str, TaskPackageError] = field(factory=dict, init=False)
    _build_locks: dict[str, anyio.Lock] = field(factory=dict, init=False)
    _build_isolated: bool | None = field(default=None, init=False)
    builds: int = field(default=0, init=False)
    """Images this sandbox built (not found in the engine's cache)."""

    def __attrs_post_init__(self) -> None:
        for name in (
            "max_concurrency",
            "memory_mb",
            "pids_limit",
            "max_file_mb",
            "max_workspace_mb",
            "max_workspace_files",
            "max_context_mb",
        ):
            value = getattr(self, name)
            if name == "max_file_mb" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise fail("an integer > 0", f"DockerSandbox.{name}", value)
        check_positive(self.stop_grace_s, "DockerSandbox.stop_grace_s")
        check_positive(self.build_timeout_s, "DockerSandbox.build_timeout_s")
        if self.shm_size_mb is not None and (
            isinstance(self.shm_size_mb, bool)
            or not isinstance(self.shm_size_mb, int)
            or self.shm_size_mb <= 0
        ):
            raise fail("an integer > 0 or None", "DockerSandbox.shm_size_mb", self.shm_size_mb)
        if not self.image:
            raise fail("a non-empty image reference", "DockerSandbox.image", self.image)
        if self.gpus is not None:
            self._pool = GpuPool(devices=self.gpus)

    # ---------------------------------------------------------------- the container request

    def image_for(self, task_name: str) -> str:
        """The image a job for ``task_name`` runs in, before any Dockerfile of the task."""
        return self.task_images.get(task_name, self.image)

    async def task_image(self, task: TaskHandle | str) -> str:
        """The image ``task``'s jobs run in, building the task's Dockerfile if it has one.

        Call it before a search to surface a broken environment early: the build runs once per
        content hash (a second call, or a later sandbox, finds the image by its tag), and a
        failed build is remembered, so the jobs of a task whose Dockerfile is broken fail
        immediately with the same error instead of rebuilding.

        Args:
            task: a resolved task, or a reference for ``resolver``.

        Raises:
            TaskPackageError: the environment folder is refused (too large, a link leaving it,
                overlapping the private paths) or its build failed; the message names the
                failing step and holds the build log's tail (the whole log is in
                ``build_log_dir``).
            SandboxError: the sandbox is closed or the engine cannot be reached.
        """
        if isinstance(task, str):
            task = await anyio.to_thread.run_sync(self.resolver, task)
        if task.name in self.task_images or not self.build_task_images:
            return self.image_for(task.name)
        if not isinstance(task, TaskEnvironment):
            return self.image
        dockerfile = task.dockerfile
        if dockerfile is None:
            return self.image
        dockerfile = Path(dockerfile)
        key = str(dockerfile.resolve())
        if key in self._build_failed:
            raise self._build_failed[key]
        lock = self._build_locks.setdefault(key, anyio.Lock())
        async with lock:
            if key in self._build_failed:
                raise self._build_failed[key]
            if key not in self._built:
                if self._closed:
                    raise SandboxError("DockerSandbox.task_image called after aclose()")
                _check_disjoint(dockerfile.parent, task.private_paths)
                from openmle.backends._imagebuild import build_isolates_network, build_task_image
                from openmle.gym import cache_root

                log_dir = self.build_log_dir or cache_root() / "docker-builds"
                if self.build_network_check and self._build_isolated is None:
                    self._build_isolated = await anyio.to_thread.run_sync(
                        lambda: build_isolates_network(
                            self._connect_with_timeout,
                            self.image,
                            timeout_s=min(self.build_timeout_s, 300.0),
                        )
                    )
                if self.build_network_check and not self._build_isolated:
                    raise SandboxError(
                        f"Refusing to build the environment of task {task.name!r}: this "
                        "engine's build API runs RUN steps with network even when asked for "
                        "none (Podman 4.3's Docker API ignores networkmode for builds), so an "
                        "untrusted Dockerfile could reach the host's network. Use a Docker "
                        "daemon (or a Podman that honours it), prebuild the image and pass it "
                        "in task_images, or set DockerSandbox(build_network_check=False) for "
                        "Dockerfiles you trust."
                    )
                try:
                    built = await anyio.to_thread.run_sync(
                        lambda: build_task_image(
                            self._connect_with_timeout,
                            dockerfile,
                            task_name=task.name,
                            log_dir=Path(log_dir),
                            timeout_s=self.build_timeout_s,
                            max_context_bytes=self.max_context_mb * 1024 * 1024,
                        )
                    )
                except TaskPackageError as exc:
                    self._build_failed[key] = exc
                    raise
                self.builds += int(built.built)
                self._built[key] = built.tag
            return self._built[key]

    def device_ids(self, job: Job) -> tuple[str, ...] | None:
        """Host GPU ids for ``job``'s explicit ``gpu_ids`` (mapped through the pool), else None.

        Raises:
            InvalidArgument: an id is outside the pool.
        """
        ids = job.resources.gpu_ids
        if ids is None:
            return None
        if self.gpus is None:
            return tuple(str(i) for i in ids)
        out = []
        for i in ids:
            if i >= len(self.gpus):
                raise InvalidArgument(
                    f"Expected Resources.gpu_ids within the sandbox's {len(self.gpus)} GPUs "
                    f"{list(self.gpus)} but got gpu_ids={list(ids)}; ids are relative to "
                    "DockerSandbox.gpus (or CUDA_VISIBLE_DEVICES)"
                )
            out.append(self.gpus[i])
        return tuple(out)

    def _command(self, job: Job) -> list[str]:
        """The container's command: Python on ``main.py``, under a file-size limit if set and
        under ``timeout -s KILL`` (the container's own deadline) unless turned off.

        With the deadline, ``timeout`` is the container's PID 1: the program cannot signal it
        (the kernel drops signals to a namespace's init that it does not handle, and SIGKILL
        from inside), and when it exits the kernel kills every process left in the container.
        """
        program = f"{shlex.quote(self.python)} main.py"
        if self.container_deadline:
            limit = math.ceil(job.timeout_s + self.stop_grace_s + CONTAINER_DEADLINE_SLACK_S)
            program = f"timeout -s KILL {limit} {program}"
        elif self.max_file_mb is None:
            return [self.python, "main.py"]
        # No core file (the engine's default limit is often unlimited: a crash would write
        # the program's whole memory into its workspace): ``ulimit -c 1`` is one 512-byte
        # block, below the page a core needs. A piped core_pattern is the engine's to stop
        # (``--default-ulimit core=1:1``, see the Docker how-to). Ignored where the
        # container's hard limit is lower already.
        core = "ulimit -c 1 2>/dev/null; "
        if self.max_file_mb is not None:
            blocks = self.max_file_mb * 2048  # ``ulimit -f`` counts 512-byte blocks
            return ["/bin/sh", "-c", f"{core}ulimit -f {blocks} && exec {program}"]
        return ["/bin/sh", "-c", f"{core}exec {program}"]

    def container_request(
        self,
        job: Job,
        *,
        task_name: str,
        public_dir: Path,
        workspace: Path,
        device_ids: Sequence[str] | None = None,
        seccomp_profile: str | None = None,
        image: str | None = None,
        outputs: str | None = None,
    ) -> dict[str, Any]:
        """The exact body of ``POST /containers/create`` for ``job``.

        Args:
            task_name: the resolved task's name (selects the image, labels the container).
            public_dir: host directory mounted read-only at ``/data``.
            workspace: host directory mounted read-write at ``/workspace``.
            device_ids: host GPU ids leased for the job; None requests
                ``job.resources.gpu_count`` GPUs by count (none when the count is 0).
            seccomp_profile: path of a seccomp profile for the engine, or None for its default.
            image: the image (see :meth:`task_image`); None for :meth:`image_for`'s.
            outputs: the task's output directory name: ``OUTPUT_DIR=/workspace/<outputs>``.
        """
        res = job.resources
        memory = (res.memory_mb or self.memory_mb) * 1024 * 1024
        # The same environment as every sandbox's (thread caps, locale, HOME and DATA_DIR
        # owned); the image keeps its PATH, and the engine exposes exactly the leased GPUs.
        env = program_env(
            job,
            info=None,
            data=DATA_MOUNT,
            workspace=WORKSPACE_MOUNT,
            tmp="/tmp",
            gpus=None,
            marker=None,
            outputs=outputs,
        )
        host: dict[str, Any] = {
            "Binds": [
                f"{public_dir}:{DATA_MOUNT}:ro",
                f"{workspace}:{WORKSPACE_MOUNT}:rw",
            ],
            "Memory": memory,
            "MemorySwap": memory,
            "NanoCpus": round(res.cpus * 1e9),
            "PidsLimit": self.pids_limit,
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"]
            + ([f"seccomp={seccomp_profile}"] if seccomp_profile else []),
            # Output is read through ``attach``; an engine log would only fill the host's disk.
            "LogConfig": {"Type": "none", "Config": {}},
        }
        if not self.network:
            host["NetworkMode"] = "none"
        if self.shm_size_mb is not None:
            host["ShmSize"] = self.shm_size_mb * 1024 * 1024
        if device_ids:
            host["DeviceRequests"] = [
                {
                    "Driver": self.gpu_driver,
                    "DeviceIDs": list(device_ids),
                    "Capabilities": [["gpu"]],
                }
            ]
        elif res.gpu_count > 0:
            host["DeviceRequests"] = [
                {"Driver": self.gpu_driver, "Count": res.gpu_count, "Capabilities": [["gpu"]]}
            ]
        body: dict[str, Any] = {
            "Image": image or self.image_for(task_name),
            "Cmd": self._command(job),
            "WorkingDir": WORKSPACE_MOUNT,
            "Env": [f"{k}={v}" for k, v in sorted(env.items())],
            "Labels": {
                MANAGED_LABEL: "1",
                SANDBOX_LABEL: self._id,
                OWNER_LABEL: self._owner,
                "openmle.task": task_name,
                "openmle.job": job.name or "",
            },
            "NetworkDisabled": not self.network,
            "HostConfig": host,
        }
        if self.user is not None:
            body["User"] = self.user
        return body

    # ---------------------------------------------------------------- engine plumbing

    async def preflight(self) -> None:
        """Check that the engine answers (a ping), before a search spends any step.

        Raises:
            SandboxError: no engine answers at the address (the message names it and the fix).
        """
        errors: tuple[type[BaseException], ...] = (OSError, *_engine_errors())
        try:
            api = await self._client()
            await anyio.to_thread.run_sync(api.ping)
        except errors as exc:
            where = self.base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
            raise SandboxError(
                f"no container engine answers at {where} ({_short(exc, 200)}); start it "
                "(dockerd, or `podman system service --time=0 unix:///PATH`) or pass "
                "DockerSandbox(base_url=...) / set DOCKER_HOST"
            ) from None

    def _connect_with_timeout(self, timeout: float) -> Any:
        return self._connect(timeout=timeout)

    def _connect(self, timeout: float = 120) -> Any:
        docker = require("docker", "docker")
        kwargs: dict[str, Any] = (
            {"base_url": self.base_url} if self.base_url else docker.utils.kwargs_from_env()
        )
        kwargs.setdefault("base_url", "unix:///var/run/docker.sock")
        _probe(str(kwargs["base_url"]))
        return docker.APIClient(
            version="auto", timeout=timeout, max_pool_size=2 * self.max_concurrency + 4, **kwargs
        )

    async def _client(self) -> Any:
        if self._api is None:
            api = await anyio.to_thread.run_sync(self._connect)
            if self._api is None:
                self._api = api
                # Sandbox start: remove what dead drivers left (their containers stopped by
                # themselves at their deadline, but still hold their state and mounts).
                with contextlib.suppress(*_engine_errors()):
                    await anyio.to_thread.run_sync(_sweep, api, None, set())
            else:  # pragma: no cover - two first jobs raced; keep one client
                api.close()
        return self._api

    async def _seccomp_profile(self, api: Any) -> str | None:
        """The profile path to request (see ``seccomp``), prepared once per sandbox."""
        if self.seccomp is None:
            return None
        if self.seccomp != "auto":
            return self.seccomp
        if self._seccomp_path is None:
            if await self._engine_name(api) != "podman":
                self._seccomp_path = ""
            else:
                self._seccomp_path = await anyio.to_thread.run_sync(_tightened_podman_profile)
        return self._seccomp_path or None

    async def _engine_name(self, api: Any) -> str:
        if self._engine is None:
            version = await anyio.to_thread.run_sync(api.version)
            names = " ".join(str(c.get("Name", "")) for c in version.get("Components") or [])
            self._engine = "podman" if "podman" in names.lower() else "docker"
        return self._engine

    def _workspace(self, source: bytes, made: list[Path]) -> Path:
        """A fresh workspace holding ``main.py``, inside a private (0700) directory.

        The workspace itself is opened up (0777) so any container user can write it; the
        private parent keeps other host users from reaching files the program leaves.
        """
        holder = Path(tempfile.mkdtemp(prefix="openmle-job-", dir=self.workspace_root))
        made.append(holder)
        workspace = holder / "workspace"
        workspace.mkdir()
        (workspace / "main.py").write_bytes(source)
        # Writable for whichever uid the container runs as: a ``user``, or the image's root,
        # which has no capabilities and so no access to another owner's 0700 directory (a
        # non-root driver on a rootful engine). The 0700 parent keeps host users out.
        workspace.chmod(0o777)
        return workspace

    # ---------------------------------------------------------------- running a job

    async def run(self, job: Job) -> RunResult:
        """Run ``job`` in a fresh container and grade its submission on the host.

        Returns:
            The classified result; engine failures give ``INFRA_ERROR``.

        Raises:
            SandboxError: the sandbox is closed, or the job asks for GPUs and the engine has no
                GPU runtime (Podman's Docker API ignores ``DeviceRequests``; a Docker daemon
                without the NVIDIA Container Toolkit refuses them).
            InvalidArgument: the job's task cannot be resolved or its GPU ids are out of range.
            TaskPackageError: the task's public directory overlaps a private path, or its
                environment cannot be built (see :meth:`task_image`).
        """
        if not isinstance(job, Job):
            raise fail("a Job", "job", job)
        if self._closed:
            raise SandboxError("DockerSandbox.run called after aclose()")
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        task = await anyio.to_thread.run_sync(self.resolver, job.task)
        public = await anyio.to_thread.run_sync(_public_dir, task, job)
        image = await self.task_image(task)
        wanted = self.device_ids(job)
        queued = time.monotonic()
        async with self._limiter:
            if job.resources.gpu_count > 0 and self._pool is not None:
                async with self._pool.lease(job.resources) as ids:
                    return await self._run(job, task, public, ids, time.monotonic() - queued, image)
            return await self._run(job, task, public, wanted, time.monotonic() - queued, image)

    async def _run(
        self,
        job: Job,
        task: TaskHandle,
        public: Path,
        device_ids: tuple[str, ...] | None,
        queue_s: float,
        image: str | None = None,
    ) -> RunResult:
        errors = _engine_errors()
        # Everything made inside a worker thread is recorded there, so a cancellation that
        # lands while the thread runs still finds it to clean up.
        made: list[str] = []
        streams: list[Any] = []
        workspaces: list[Path] = []
        quota_hit: list[str] = []
        split = job.split
        api: Any = None

        def infra(detail: str, logs: str = "") -> RunResult:
            return RunResult.infra_error(detail, split=split, queue_s=queue_s, logs=logs)

        try:
            source = encode_program(job, queue_s=queue_s)
            if isinstance(source, RunResult):
                return source
            workspace = await anyio.to_thread.run_sync(self._workspace, source, workspaces)
            try:
                api = await self._client()
                cid, stream = await self._start_container(
                    api, job, task, public, workspace, device_ids, image, made, streams
                )
            except errors as exc:
                if job.resources.gpu_count > 0 and _no_gpu_runtime(str(exc)):
                    raise SandboxError(
                        f"The engine cannot give job {job.name or job.task!r} GPUs: {exc}. "
                        "Install the NVIDIA Container Toolkit and restart the daemon, or run "
                        "GPU-free jobs."
                    ) from exc
                return infra(f"the engine refused the container: {_short(exc)}")

            cap = LogCap(head=self.log_head, tail=self.log_tail)
            waited = await self._wait_container(api, cid, stream, workspace, job, cap, quota_hit)
            if isinstance(waited, str):
                return infra(waited)
            timed_out, runtime_s = waited
            try:
                state = (await anyio.to_thread.run_sync(api.inspect_container, cid))["State"]
            except errors as exc:
                return infra(f"could not read the finished container: {_short(exc)}")
            exit_code, timed_out, oom, detail = await self._read_exit(
                api, state, job, timed_out, runtime_s, quota_hit
            )
            return await grade_outside(  # graded beside the workspace, removed with it
                job=job,
                task=task,
                workspace=workspace,
                grading_dir=workspace.parent / "graded",
                exit_code=exit_code,
                timed_out=timed_out,
                oom=oom,
                cap=cap,
                runtime_s=runtime_s,
                queue_s=queue_s,
                shell_base=False,  # already -N (signal_exit_code)
                detail=detail,
            )
        finally:
            with anyio.CancelScope(shield=True):
                for opened in streams:
                    await anyio.to_thread.run_sync(_close_stream, opened)
                for container_id in made:
                    # If the engine is gone there is nothing more we can do here (the
                    # container stops at its own deadline; a later sweep removes it).
                    with contextlib.suppress(*errors):
                        await anyio.to_thread.run_sync(_remove, api, container_id)
                    self._live.discard(container_id)
                    watchdog = self._watchdogs.pop(container_id, None)
                    if watchdog is not None:  # it ends once the container is gone
                        await anyio.to_thread.run_sync(_reap, watchdog)
                for path in workspaces:
                    await anyio.to_thread.run_sync(remove_tree, path)

    async def _start_container(
        self,
        api: Any,
        job: Job,
        task: TaskHandle,
        public: Path,
        workspace: Path,
        device_ids: tuple[str, ...] | None,
        image: str | None,
        made: list[str],
        streams: list[Any],
    ) -> tuple[str, Any]:
        """Create the job's container, attach to its output and start it.

        The container's id goes into ``made`` and the output stream into ``streams`` as soon
        as they exist (inside the worker thread), for the caller's cleanup. Returns the
        container's id and its output stream.

        Raises:
            SandboxError: the job asks for GPUs and the engine is Podman.
            Exception: the engine's errors (:func:`_engine_errors`), for the caller to report.
        """
        if job.resources.gpu_count > 0 and await self._engine_name(api) == "podman":
            raise SandboxError(
                f"Job {job.name or job.task!r} asks for {job.resources.gpu_count} GPU(s) "
                "but the engine is Podman, whose Docker API ignores DeviceRequests (the "
                "job would silently run without GPUs). Use a Docker daemon with the "
                "NVIDIA Container Toolkit for GPU jobs."
            )
        body = self.container_request(
            job,
            task_name=task.name,
            public_dir=public,
            workspace=workspace,
            device_ids=device_ids,
            seccomp_profile=await self._seccomp_profile(api),
            image=image,
            outputs=output_dir_name(task),
        )

        def create() -> str:
            made.append(str(api.create_container_from_config(body)["Id"]))
            self._live.add(made[0])
            if self.container_deadline:  # the deadline no image can shadow
                limit = job.timeout_s + self.stop_grace_s + CONTAINER_DEADLINE_SLACK_S
                self._watchdogs[made[0]] = start_watchdog(self.base_url, made[0], limit)
            return made[0]

        cid = await anyio.to_thread.run_sync(create)

        def attach() -> Any:
            streams.append(api.attach(cid, stdout=True, stderr=True, stream=True, logs=False))
            return streams[0]

        stream = await anyio.to_thread.run_sync(attach)
        await anyio.to_thread.run_sync(api.start, cid)
        return cid, stream

    async def _wait_container(
        self,
        api: Any,
        cid: str,
        stream: Any,
        workspace: Path,
        job: Job,
        cap: LogCap,
        quota_hit: list[str],
    ) -> tuple[bool, float] | str:
        """Drain the output into ``cap`` and wait for the exit, stopping it at the timeout.

        The quota watchdog runs meanwhile (its finding goes into ``quota_hit``). Returns
        ``(timed_out, runtime_s)``, or why the container was lost (an infrastructure error).
        """
        errors = _engine_errors()
        started = time.monotonic()
        timed_out = False
        drained = anyio.Event()

        async def drain() -> None:
            try:
                await _drain_in_daemon_thread(stream, cap)
            except errors:  # the stream broke; the state below says what happened
                pass
            finally:
                drained.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain)
            tg.start_soon(self._quota_watchdog, api, cid, workspace, drained, quota_hit)
            with anyio.move_on_after(job.timeout_s) as deadline:
                # The output stream ends when the program's stdio closes (normally at
                # exit); then poll the state, which is much quicker than the engine's
                # ``wait`` (Podman's polls every 250 ms).
                await drained.wait()
                try:
                    await anyio.to_thread.run_sync(_until_exited, api, cid, abandon_on_cancel=True)
                except errors as exc:
                    tg.cancel_scope.cancel()
                    return f"lost the container while waiting: {_short(exc)}"
            if deadline.cancelled_caught:
                timed_out = True
                try:
                    await anyio.to_thread.run_sync(
                        lambda: api.stop(cid, timeout=math.ceil(self.stop_grace_s))
                    )
                except errors as exc:
                    tg.cancel_scope.cancel()
                    return f"could not stop the container at its timeout: {_short(exc)}"
            runtime_s = time.monotonic() - started
            # After a stop, the output stream ends once the engine has copied all of it.
            with anyio.move_on_after(30):
                await drained.wait()
            tg.cancel_scope.cancel()
        return timed_out, runtime_s

    async def _read_exit(
        self,
        api: Any,
        state: dict[str, Any],
        job: Job,
        timed_out: bool,
        runtime_s: float,
        quota_hit: list[str],
    ) -> tuple[int | None, bool, bool, str]:
        """``(exit_code, timed_out, oom, detail)`` from the finished container's state.

        A SIGKILL at the deadline is a timeout (the container's own deadline fired first); a
        SIGKILL otherwise is taken as out of memory where the engine does not report
        ``OOMKilled`` (``oom_from_sigkill``, by default on Podman).
        """
        exit_code = signal_exit_code(state.get("ExitCode"))
        oom = bool(state.get("OOMKilled"))
        detail = ""
        if not timed_out and not oom and exit_code == -9 and runtime_s >= job.timeout_s:
            # The container's own deadline fired first (the driver was stalled).
            timed_out = True
        if quota_hit:
            detail = quota_hit[0]
        elif not oom and not timed_out and exit_code == -9:
            guess = self.oom_from_sigkill
            if guess is None:
                guess = await self._engine_name(api) == "podman"
            if guess:
                oom = True
                detail = (
                    "killed by SIGKILL under its memory limit; the engine does not report "
                    "OOMKilled here, so this is taken as out of memory"
                )
        return exit_code, timed_out, oom, detail

    async def _quota_watchdog(
        self, api: Any, cid: str, workspace: Path, done: anyio.Event, hit: list[str]
    ) -> None:
        """Kill the container once its workspace passes the quota."""
        limit = self.max_workspace_mb * 1024 * 1024
        while not done.is_set():
            await anyio.sleep(_QUOTA_POLL_S)
            why = await anyio.to_thread.run_sync(
                lambda: over_quota(workspace, max_bytes=limit, max_files=self.max_workspace_files)
            )
            if why is not None and not done.is_set():
                hit.append(f"exceeded its workspace quota ({why}) and was killed")
                with contextlib.suppress(*_engine_errors()):
                    await anyio.to_thread.run_sync(lambda: api.kill(cid))
                return

    async def aclose(self) -> None:
        """Close the engine connection (idempotent); later ``run`` calls raise.

        Before closing, removes this sandbox's containers that no running job holds and every
        container whose owner process is gone; then deletes the prepared seccomp profile.
        """
        self._closed = True
        with anyio.CancelScope(shield=True):
            api, self._api = self._api, None
            if api is not None:
                with contextlib.suppress(*_engine_errors()):
                    await anyio.to_thread.run_sync(_sweep, api, self._id, set(self._live))
                await anyio.to_thread.run_sync(api.close)
            if self._seccomp_path:
                path = Path(self._seccomp_path).parent
                await anyio.to_thread.run_sync(lambda: shutil.rmtree(path, ignore_errors=True))
                self._seccomp_path = None

    async def __aenter__(self) -> DockerSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _probe(base_url: str) -> None:
    """Fail fast (and without leaking a socket, as the SDK does) when a Unix socket is dead."""
    if not base_url.startswith(("unix://", "http+unix://")):
        return
    path = base_url.split("://", 1)[1]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        try:
            sock.connect(path)
        except OSError as exc:
            raise ConnectionError(f"no engine answers at {base_url}: {exc.strerror}") from exc


def _until_exited(api: Any, container_id: str) -> None:
    """Return once the container is no longer running (polling with a short backoff)."""
    delay = 0.005
    while True:
        state = api.inspect_container(container_id)["State"]
        if not state.get("Running") and state.get("Status") != "created":
            return
        time.sleep(delay)
        delay = min(2 * delay, 0.2)


def _reap(proc: Any) -> None:
    """Wait for a watchdog process (it ends once its container is gone); kill it after 30 s."""
    try:
        proc.wait(timeout=30)
    except Exception:
        proc.kill()
        proc.wait()


def _remove(api: Any, container_id: str) -> None:
    """Force-remove a container (and its anonymous volumes); a few tries, gone is fine."""
    errors = _engine_errors()
    docker_errors = require("docker.errors", "docker")
    for attempt in range(3):
        try:
            api.remove_container(container_id, force=True, v=True)
            return
        except docker_errors.NotFound:
            return
        except errors:
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))


def _close_stream(stream: Any) -> None:
    """Close an attach stream: ``close`` shuts the socket; closing the response releases its
    file objects too (otherwise the socket is finalised open and warns).
    """
    with contextlib.suppress(Exception):
        stream.close()
    with contextlib.suppress(Exception):
        stream._response.close()


def _drain(stream: Any, cap: LogCap) -> None:
    """Feed the attached output stream to ``cap`` until the container closes it."""
    try:
        for chunk in stream:
            cap.feed(chunk)
    finally:
        _close_stream(stream)


async def _drain_in_daemon_thread(stream: Any, cap: LogCap) -> None:
    """Run :func:`_drain` in a daemon thread and wait for it (cancellable).

    A worker thread blocked on a socket read would keep the interpreter from exiting if the
    stream were never closed (for example when the event loop is torn down mid-run); a daemon
    thread cannot. The run's shielded cleanup closes the stream, which ends the thread.
    """
    token = anyio.lowlevel.current_token()
    finished = anyio.Event()
    failure: list[BaseException] = []

    def target() -> None:
        try:
            _drain(stream, cap)
        except BaseException as exc:  # handed back to the awaiting task
            failure.append(exc)
        finally:
            with contextlib.suppress(Exception):  # the loop may already be gone
                anyio.from_thread.run_sync(finished.set, token=token)

    threading.Thread(target=target, name="openmle-docker-drain", daemon=True).start()
    await finished.wait()
    if failure:
        raise failure[0]


_PODMAN_SECCOMP = Path("/usr/share/containers/seccomp.json")
_DENIED_SYSCALLS = frozenset({"unshare", "setns", "keyctl", "add_key", "request_key"})
_CLONE_NAMESPACE_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
_ENOSYS = 38
_CLONE_RULES: tuple[dict[str, Any], ...] = (
    # ``clone`` only without namespace flags (the flags are argument 0, argument 1 on s390),
    # and ``clone3`` answered with ENOSYS (its flags sit in memory, out of seccomp's reach),
    # which makes the C library fall back to ``clone``: what Docker's default profile does.
    {
        "names": ["clone"],
        "action": "SCMP_ACT_ALLOW",
        "args": [
            {"index": 0, "value": _CLONE_NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
        ],
        "excludes": {"arches": ["s390", "s390x"]},
    },
    {
        "names": ["clone"],
        "action": "SCMP_ACT_ALLOW",
        "args": [
            {"index": 1, "value": _CLONE_NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
        ],
        "includes": {"arches": ["s390", "s390x"]},
    },
    {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": _ENOSYS},
)


def _eq(index: int, value: int) -> dict[str, Any]:
    return {"index": index, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}


_AF_UNIX, _AF_INET, _AF_NETLINK, _AF_INET6 = 1, 2, 16, 10
_SOCKET_RULES: tuple[dict[str, Any], ...] = (
    # Socket families and protocols a kernel has built in, by exact value (a value with other
    # bits set matches none, so it is refused): any other makes the kernel load its module on
    # the host (modprobe as root: TIPC, RDS, SCTP, DCCP, AF_ALG, netlink crypto_user), the
    # rule LocalSandbox's filter has in bwrap mode. socketpair: Unix only.
    {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [_eq(0, _AF_UNIX)]},
    *(
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [_eq(0, _AF_NETLINK), _eq(2, p)]}
        for p in (0, 15)  # NETLINK_ROUTE, NETLINK_KOBJECT_UEVENT
    ),
    *(
        {"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [_eq(0, family), _eq(2, p)]}
        for family in (_AF_INET, _AF_INET6)
        for p in (0, 1, 6, 17, 58)  # the type's default, ICMP, TCP, UDP, ICMPv6
    ),
    {"names": ["socketpair"], "action": "SCMP_ACT_ALLOW", "args": [_eq(0, _AF_UNIX)]},
)


def _tightened_profile(profile: dict[str, Any]) -> dict[str, Any]:
    """``profile`` (a Podman/Docker seccomp profile) without namespaces, keyrings and the
    socket families whose modules load on demand.

    Removes ``unshare``, ``setns`` and the keyring calls from every allow list (the default
    action then refuses them), and replaces every rule for ``clone``/``clone3`` by
    :data:`_CLONE_RULES` (``clone`` with any namespace flag and every ``clone3`` are refused)
    and every rule for ``socket``/``socketpair`` by :data:`_SOCKET_RULES`.
    """
    import copy

    out = copy.deepcopy(profile)
    replaced = {"clone", "clone3", "socket", "socketpair"}
    removed = _DENIED_SYSCALLS | replaced
    for rule in out.get("syscalls", []):
        if rule.get("action") == "SCMP_ACT_ALLOW" or set(rule.get("names", [])) & replaced:
            rule["names"] = [n for n in rule.get("names", []) if n not in removed]
    out["syscalls"] = [r for r in out.get("syscalls", []) if r.get("names")]
    out["syscalls"].extend(copy.deepcopy([*_CLONE_RULES, *_SOCKET_RULES]))
    return out


def _tightened_podman_profile() -> str:
    """Write Podman's default seccomp profile, tightened by :func:`_tightened_profile`.

    Podman allows ``unshare``, ``setns``, ``keyctl`` and ``clone`` with any flags
    unconditionally (for rootless use). Returns the written path, or "" (engine default) when
    the file is missing.
    """
    import json

    try:
        profile = _tightened_profile(json.loads(_PODMAN_SECCOMP.read_text()))
    except (OSError, ValueError, AttributeError, TypeError):
        return ""
    out = Path(tempfile.mkdtemp(prefix="openmle-seccomp-")) / "seccomp.json"  # private (0700)
    out.write_text(json.dumps(profile))
    return str(out)


def _no_gpu_runtime(message: str) -> bool:
    text = message.lower()
    return "device driver" in text or "nvidia" in text or "gpu" in text


def _short(exc: BaseException, limit: int = 500) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit] + "..."


publish_one(DockerSandbox, "openmle.backends")  # its repr names the public path
