"""``LocalSandbox``: the default :class:`openmle.Sandbox`, running programs on this machine.

Each job gets a fresh run directory with a workspace (the program's working directory, where
it writes ``submission.csv``). The program reads the task's public data for the job's split
read-only through ``$DATA_DIR``; after it exits (or is killed), the sandbox grades the
submission with ``task.grade`` in a worker thread, outside the program's isolation, and
classifies the run with :func:`openmle.backends._kit.grade_outside` (the rule every shipped
sandbox uses).

Isolation and limits are described in :mod:`openmle.backends._isolation`: bubblewrap where it
works, else a weaker Landlock mode that warns once; never a mode in which the task's private
paths are readable.

Departures from the released system: it had no local sandbox (programs went to an external
HTTP job service), mixed HTTP status codes with outcomes, and trusted the timeout of the remote
service. Here the timeout kills the whole process tree (TERM, then KILL after ``kill_grace_s``)
and frees the pipes; queue time (waiting for a slot or a GPU) and runtime are measured apart;
the submission is copied (never followed through a symlink) before grading, so a program
cannot point the grader at the answers.
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from functools import partial
from pathlib import Path
from typing import Any, Literal, final

import anyio
import anyio.abc
from attrs import define, field

from openmle._exports import publish_one
from openmle._protocols import Sandbox
from openmle._runlog import LogCap
from openmle._task_protocol import TaskHandle, TaskResolver
from openmle._trees import walk
from openmle._types import Job, RunResult
from openmle._validation import int_at_least
from openmle.backends import _isolation as iso
from openmle.backends._gpu import GpuPool
from openmle.backends._kit import default_resolver, grade_outside, output_dir_name
from openmle.backends._plan import (
    RUN_ID_ENV,
    LaunchPlan,
    PlanSettings,
    RunFacts,
    RunPaths,
    SandboxFacts,
    SpareShape,
    bwrap_spare,
    cgroup_limits,
    job_problem,
    launch_env,
    launch_plan,
    paths_problem,
    spare_argv,
    spare_input,
    spare_shape,
)
from openmle.backends._procs import matching
from openmle.backends._workspace import encode_program, over_quota
from openmle.errors import InvalidArgument, InvalidArgumentType, SandboxError, SandboxUnavailable

__all__ = ["LocalSandbox"]

Isolation = Literal["auto", "bwrap", "landlock"]
Mode = Literal["bwrap", "landlock"]

_OWNED_ENV = ("CUDA_VISIBLE_DEVICES", "DATA_DIR", RUN_ID_ENV)
_PIPE_GRACE_S = 5.0
_QUOTA_POLL_S = 0.5
_MAX_LOG_BYTES = 16 * 1024 * 1024
_LOG_HINT = "Results carry the logs, so keep them small."
_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, RuntimeWarning, stacklevel=4)


def _positive_float(name: str) -> Any:
    def check(instance: object, attribute: object, value: object) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise InvalidArgument(f"Expected a number > 0 but got LocalSandbox.{name}={value!r}")

    return check


def _check_isolation(instance: object, attribute: object, value: object) -> None:
    if value not in ("auto", "bwrap", "landlock"):
        raise InvalidArgument(
            f"Expected isolation to be one of 'auto', 'bwrap', 'landlock' but got {value!r}"
        )


def _paths(value: object) -> tuple[Path, ...]:
    if isinstance(value, str | bytes | os.PathLike) or not hasattr(value, "__iter__"):
        raise InvalidArgumentType(f"Expected a sequence of paths but got extra_ro_paths={value!r}")
    return tuple(Path(os.path.abspath(p)) for p in value)


@final
@define(eq=False)
class LocalSandbox(Sandbox):
    """Runs candidate programs as isolated local processes and grades their submissions.

    Linux only: isolation comes from bubblewrap (namespaces) or, as a weaker fallback,
    Landlock and seccomp; see ``docs/how-to/custom-sandbox.md`` for what a program sees.

    Args:
        resolver: turns ``job.task`` into a :class:`~openmle._task_protocol.TaskHandle`
            (default: ``openmle.gym.resolve_task``, a bundled name or a package path).
        isolation: ``"auto"`` (bubblewrap if it works here, else Landlock with a one-time
            ``RuntimeWarning``), ``"bwrap"`` or ``"landlock"`` to insist on one.
        max_concurrency: programs running at once (default: CPU count); others queue.
        gpus: GPUs this sandbox may lease: None for all visible (``CUDA_VISIBLE_DEVICES`` or
            nvidia-smi), an int for the first ``n``, or indices into the visible list.
        memory_mb: memory limit (MiB) of a job whose ``resources.memory_mb`` is None.
        max_processes: processes (and threads) one run may have alive at once.
        max_file_mb: largest file (MiB) a program may write.
        max_workspace_mb, max_workspace_files: the run's disk quota: bytes and files (and
            directories) its workspace and ``/tmp`` may hold together. As root a size-limited
            tmpfs is mounted for each run (writes past it fail with ``ENOSPC``; the files
            live in memory, charged to the run's memory cgroup where there is one);
            elsewhere a watchdog polls the workspace and kills the run past the quota.
        kill_grace_s: seconds between SIGTERM and SIGKILL at a timeout.
        log_head_bytes, log_tail_bytes: output kept from the start and end of a run
            (at most 16 MiB each).
        python: the interpreter that runs programs (default: this one).
        workdir: where run directories are made (default: the system temp dir).
        keep_workspaces: keep each run directory (``openmle-run-*`` under ``workdir``, with
            ``workspace/``, ``program/main.py`` and the graded copy) instead of deleting it.
        extra_ro_paths: more host directories programs may read (e.g. model weights).
        cgroups: give each run its own cgroup where this process may create one (limits
            memory and processes across the whole tree, detects OOM kills). The next run's
            launcher joins its cgroup ahead, off the job's path (made once the previous
            run ended; on cgroup v1 the join skips the RCU grace period of a
            ``cgroup.procs`` move). False falls back to per-process
            ``RLIMIT_DATA`` and ``RLIMIT_NPROC`` (which does not bind root).
        cpu_quota: also cap each run's CPU use at ``resources.cpus`` cores with a cgroup
            quota (cgroup v1 costs one more cgroup move, a few ms, per run). Without it,
            ``resources.cpus`` sets the thread-count variables (``OMP_NUM_THREADS``, ...)
            and the CPU-time limit only.

    Raises:
        InvalidArgument: a bad argument (names the field and the fix).
    """

    resolver: TaskResolver | None = None
    isolation: Isolation = field(default="auto", kw_only=True, validator=_check_isolation)
    max_concurrency: int = field(
        factory=lambda: os.cpu_count() or 1,
        kw_only=True,
        validator=int_at_least(1, "LocalSandbox.max_concurrency"),
    )
    gpus: int | Sequence[int] | None = field(default=None, kw_only=True)
    memory_mb: int = field(
        default=4096, kw_only=True, validator=int_at_least(1, "LocalSandbox.memory_mb")
    )
    max_processes: int = field(
        default=256, kw_only=True, validator=int_at_least(1, "LocalSandbox.max_processes")
    )
    max_file_mb: int = field(
        default=1024, kw_only=True, validator=int_at_least(1, "LocalSandbox.max_file_mb")
    )
    max_workspace_mb: int = field(
        default=2048, kw_only=True, validator=int_at_least(1, "LocalSandbox.max_workspace_mb")
    )
    max_workspace_files: int = field(
        default=100_000, kw_only=True, validator=int_at_least(1, "LocalSandbox.max_workspace_files")
    )
    kill_grace_s: float = field(
        default=2.0, kw_only=True, validator=_positive_float("kill_grace_s")
    )
    log_head_bytes: int = field(
        default=64 * 1024,
        kw_only=True,
        validator=int_at_least(
            1, "LocalSandbox.log_head_bytes", most=_MAX_LOG_BYTES, hint=_LOG_HINT
        ),
    )
    log_tail_bytes: int = field(
        default=64 * 1024,
        kw_only=True,
        validator=int_at_least(
            1, "LocalSandbox.log_tail_bytes", most=_MAX_LOG_BYTES, hint=_LOG_HINT
        ),
    )
    python: str | None = field(default=None, kw_only=True)
    workdir: Path | None = field(default=None, kw_only=True)
    keep_workspaces: bool = field(default=False, kw_only=True)
    extra_ro_paths: tuple[Path, ...] = field(default=(), kw_only=True, converter=_paths)
    cpu_quota: bool = field(default=False, kw_only=True)
    cgroups: bool = field(default=True, kw_only=True)

    _limiter: anyio.CapacityLimiter = field(init=False)
    _gpu_pool: GpuPool | None = field(default=None, init=False)
    _setup_lock: anyio.Lock = field(factory=anyio.Lock, init=False)
    _mode: Mode | None = field(default=None, init=False)
    _facts: SandboxFacts | None = field(default=None, init=False)
    _spares: list[_Spare] = field(factory=list, init=False)
    _making: list[Future[_Spare | None]] = field(factory=list, init=False)
    """Spares being made on the spawner thread (collected by :meth:`_take_spare`)."""
    _spares_finalizer: bool = field(default=False, init=False)
    _bwrap: str | None = field(default=None, init=False)
    _seccomp: bytes | None = field(default=None, init=False)
    _cgroups: bool = field(default=False, init=False)
    _views: dict[str, Path] = field(factory=dict, init=False)
    _view_root: Path | None = field(default=None, init=False)
    _view_lock: anyio.Lock = field(factory=anyio.Lock, init=False)
    _closed: bool = field(default=False, init=False)
    _running: int = field(default=0, init=False)
    _phases: dict[str, float] = field(factory=dict, init=False)
    _cleanups: set[Future[None]] = field(factory=set, init=False)
    """The last run's phase end times (``time.perf_counter``; see ``benchmarks/sandbox.py``)."""

    def __attrs_post_init__(self) -> None:
        if self.resolver is not None and not callable(self.resolver):
            raise InvalidArgumentType(
                f"Expected a callable resolver(task_ref) -> TaskHandle but got {self.resolver!r}"
            )
        self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        if self.gpus is not None:
            self._gpu_pool = GpuPool.from_spec(self.gpus)

    # ----------------------------------------------------------------------------------------
    # Public surface

    @property
    def isolation_mode(self) -> Mode | None:
        """``"bwrap"`` or ``"landlock"`` once :meth:`prepare` (or a first run) has chosen."""
        return self._mode

    @property
    def running(self) -> int:
        """Programs running right now."""
        return self._running

    async def prepare(self) -> Mode:
        """Probe the isolation now (idempotent) and return the mode in use.

        Raises:
            SandboxUnavailable: the requested isolation (or, for ``"auto"``, any isolation
                that keeps the private answers unreadable) is not available here.
        """
        if self._mode is not None:
            return self._mode
        async with self._setup_lock:
            if self._mode is not None:
                return self._mode
            python = self.python or sys.executable
            try:
                info = await anyio.to_thread.run_sync(iso.runtime_info, python)
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                raise SandboxUnavailable(
                    f"cannot use Python interpreter {python!r}: {exc}"
                ) from exc
            problem = "not tried (isolation='landlock')"
            mode: Mode | None = None
            if self.isolation in ("auto", "bwrap"):
                bwrap = shutil.which("bwrap")
                found = await anyio.to_thread.run_sync(iso.bwrap_problem, bwrap, python)
                if found is None:
                    mode, self._bwrap = "bwrap", bwrap
                    program = iso.seccomp_program(
                        os.uname().machine,
                        sockets="ip",  # its own network namespace
                        noop_metadata=False,
                        sysv_ipc=True,
                        prlimit_others=True,
                        core_limit=False,  # the launcher inside stacks core_limit_program
                    )
                    if program is not None:
                        self._seccomp = iso.seccomp_bytes(program)
                else:
                    problem = found
                    if self.isolation == "bwrap":
                        raise SandboxUnavailable(f"isolation='bwrap' requested but {problem}")
            if mode is None:
                machine = os.uname().machine
                if iso.seccomp_program(machine, sockets="none", noop_metadata=False) is None:
                    raise SandboxUnavailable(
                        f"bubblewrap: {problem}; and the Landlock mode has no seccomp filter "
                        f"for this architecture ({machine}). Install bubblewrap."
                    )
                if iso.landlock_abi() == 0:
                    raise SandboxUnavailable(
                        "LocalSandbox needs bubblewrap or Landlock to keep the task's answers "
                        f"away from programs; bubblewrap: {problem}; Landlock: not supported by "
                        "this kernel (Linux >= 5.13 with Landlock enabled). Install bubblewrap."
                    )
                mode = "landlock"
                if self.isolation == "auto":
                    _warn_once(
                        "landlock",
                        f"LocalSandbox is using its weaker Landlock isolation ({problem}): "
                        "programs share the host's PID namespace and see the host's /usr "
                        "and runtime; reads of the answers, writes outside the workspace and "
                        "sockets other than TCP (itself denied from Landlock ABI 4) are "
                        "refused. Install bubblewrap for full isolation.",
                    )
            probe = (
                await anyio.to_thread.run_sync(
                    lambda: iso.Cgroup.create(pids_max=8, memory_bytes=None, cpus=None)
                )
                if self.cgroups
                else None
            )
            if probe is not None:
                probe.remove()
                self._cgroups = True
            elif os.geteuid() == 0:
                _warn_once(
                    "nproc",
                    "LocalSandbox has no cgroups here (or cgroups=False) and RLIMIT_NPROC does "
                    "not bind root: a fork bomb is bounded only by the run's timeout"
                    + (" and PID namespace" if mode == "bwrap" else ""),
                )
            if self._gpu_pool is None:
                self._gpu_pool = await anyio.to_thread.run_sync(GpuPool.from_spec, None)
            # What sandboxes of processes killed with SIGKILL left: their programs' children.
            await anyio.to_thread.run_sync(iso.sweep_orphans, RUN_ID_ENV)
            self._facts = SandboxFacts(
                mode=mode,
                info=info,
                layout=await anyio.to_thread.run_sync(iso.host_layout),
                machine=os.uname().machine,
                euid=os.geteuid(),
                landlock_abi=iso.landlock_abi() if mode == "landlock" else 0,
                bwrap=self._bwrap,
                cgroups=self._cgroups,
            )
            self._mode = mode
            return mode

    async def run(self, job: Job) -> RunResult:
        """Run ``job`` to completion and return how it ended (see :class:`openmle.Sandbox`).

        Raises:
            InvalidArgumentType: ``job`` is not a :class:`openmle.Job`.
            SandboxError: the sandbox is closed, or no task resolver is available.
            SandboxUnavailable: see :meth:`prepare`.
            InvalidArgument: the resolver does not know ``job.task`` (``TaskPackageError``, a
                subclass, when the package is broken).
        """
        if not isinstance(job, Job):
            raise InvalidArgumentType(f"Expected an openmle.Job but got {type(job).__name__}")
        if self._closed:
            raise SandboxError("LocalSandbox is closed; create a new one to run more jobs")
        await self.prepare()
        resolver = self.resolver or default_resolver
        task = await anyio.to_thread.run_sync(resolver, job.task)
        submitted = time.monotonic()  # queue_s: waiting for a slot and for GPUs
        pool = self._gpu_pool
        if pool is None:
            raise AssertionError("internal invariant broken: pool is not None")
        why = pool.problem(job.resources)
        if why is not None:
            return RunResult.infra_error(why, split=job.split)
        async with self._limiter, pool.lease(job.resources) as gpus:
            queue_s = time.monotonic() - submitted
            self._running += 1
            try:
                return await self._execute(job, task, gpus, queue_s)
            finally:
                self._running -= 1

    async def aclose(self) -> None:
        """Refuse new jobs and delete cached data views (idempotent)."""
        self._closed = True
        pending = list(self._cleanups)
        self._cleanups = set()
        if pending:  # run directories and cgroups still being removed
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(futures_wait, pending)
        making = list(self._making)
        self._making.clear()  # the same list the finalizer holds
        if making:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(futures_wait, making)
        self._spares.extend(s for f in making if (s := _spare_of(f)) is not None)
        spares = list(self._spares)
        self._spares.clear()  # the same list the finalizer holds
        with anyio.CancelScope(shield=True):
            for spare in spares:
                await spare.discard()
        if self._view_root is not None:
            root, self._view_root = self._view_root, None
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(iso.safe_rmtree, root)

    async def __aenter__(self) -> LocalSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ----------------------------------------------------------------------------------------
    # One run

    async def _data_view(self, public: Path, private: Sequence[Path], *, mode: Mode) -> Path:
        """A cached read-only, symlink-free copy of ``public``; what the program reads.

        Landlock mode: always (on disk under ``workdir``). bwrap mode: in a tmpfs of at most
        ``_NEUTRAL_DATA_BYTES`` (root only), so ``/proc/self/mountinfo`` inside the sandbox
        names no host path for ``/data``; ``public`` itself (bound as it is, its host path
        visible in ``mountinfo``) where that cannot be done (not root, too large, no mount).
        """
        key = str(public)
        async with self._view_lock:
            if key in self._views:
                return self._views[key]
            if mode == "bwrap" and not await anyio.to_thread.run_sync(self._neutral_root_ok):
                self._views[key] = public
                return public
            if self._view_root is None:
                self._view_root = Path(tempfile.mkdtemp(prefix="openmle-views-", dir=self.workdir))
                # Removed by aclose(); also when the sandbox is garbage-collected or at exit.
                weakref.finalize(self, iso.safe_rmtree, self._view_root)
            dst = self._view_root / f"view{len(self._views)}"
            if mode == "bwrap":
                dst = await anyio.to_thread.run_sync(
                    _neutral_copy, public, dst, private, self._view_root
                )
            else:
                await anyio.to_thread.run_sync(
                    lambda: iso.symlink_free_copy(public, dst, deny=private)
                )
            self._views[key] = dst
            return dst

    def _neutral_root_ok(self) -> bool:
        """In bwrap mode: whether the views' tmpfs is (or could now be) mounted (root only)."""
        if os.geteuid() != 0:
            return False
        if self._view_root is not None:
            return bool(iso.mounts_under(self._view_root))
        # In the system temp dir, not ``workdir`` (run directories): its files live in memory.
        root = Path(tempfile.mkdtemp(prefix="openmle-views-"))
        if not iso.mount_quota_tmpfs(
            root, max_bytes=_NEUTRAL_DATA_BYTES, max_files=_NEUTRAL_DATA_FILES
        ):
            iso.safe_rmtree(root)
            return False
        self._view_root = root
        weakref.finalize(self, iso.safe_rmtree, root)
        return True

    def _settings(self) -> PlanSettings:
        return PlanSettings(
            memory_mb=self.memory_mb,
            max_processes=self.max_processes,
            max_file_mb=self.max_file_mb,
            max_workspace_mb=self.max_workspace_mb,
            max_workspace_files=self.max_workspace_files,
            kill_grace_s=self.kill_grace_s,
            extra_ro_paths=self.extra_ro_paths,
            cpu_quota=self.cpu_quota,
        )

    async def _execute(
        self, job: Job, task: TaskHandle, gpus: tuple[str, ...], queue_s: float
    ) -> RunResult:
        """Check the job and the task's paths, take a spare launcher (with its run directory
        and cgroup), plan the launch, hand it over and wait.
        """
        facts = self._facts
        if facts is None:
            raise AssertionError("internal invariant broken: prepare() ran before _execute")
        problem = job_problem(job)
        if problem is not None:
            return RunResult.infra_error(problem, split=job.split, queue_s=queue_s)
        settings = self._settings()
        phases = self._phases = {"start": time.perf_counter()}
        source = encode_program(job, queue_s=queue_s)
        if isinstance(source, RunResult):
            return source
        public, private = await anyio.to_thread.run_sync(_task_paths, task, job)
        why = paths_problem(
            task_name=task.name,
            public=public,
            private=private,
            mode=facts.mode,
            info=facts.info,
            extra_ro=self.extra_ro_paths,
        )
        if why is not None:
            return RunResult.infra_error(why, split=job.split, queue_s=queue_s)
        data = await self._data_view(public, private, mode=facts.mode)
        shape = spare_shape(
            job, mode=facts.mode, data=data, private=private, settings=settings, gpus=gpus
        )
        try:
            spare = await self._take_spare(shape)
        except OSError as exc:
            return RunResult.infra_error(
                f"could not start the program: {exc}", split=job.split, queue_s=queue_s
            )
        phases["spare"] = time.perf_counter()
        ended = handed = False
        try:
            (spare.box / "program" / "main.py").write_bytes(source)
            paths = RunPaths(
                box=spare.box, public=public, data=data, private=private, tmp_mounted=spare.mounted
            )
            if spare.cgroup is not None:
                failed = _limit_cgroup(spare.cgroup, job, settings, queue_s)
                if failed is not None:
                    return failed
            run = await _run_facts(facts, spare, gpus, output_dir_name(task))
            phases["limits"] = time.perf_counter()
            plan = launch_plan(job, paths=paths, settings=settings, sandbox=facts, run=run)
            phases["plan"] = time.perf_counter()
            with anyio.move_on_after(plan.timeout_s):  # a spare that waited reported it
                await spare.proc.hold_namespace()
            # A spare that died (it could not join its cgroup) said why on the status pipe.
            await _hand_over(spare.proc, spare_input(plan))
            handed = True
            phases["handed"] = time.perf_counter()
            result = await self._wait(
                job, task, plan, spare.proc, spare.cgroup, spare.marker, queue_s
            )
            ended = True  # else (cancelled, failed) everything is removed before returning
            return result
        finally:
            with anyio.CancelScope(shield=True):
                await self._end_run(spare, facts.mode, later=ended)
            if handed:
                # The next runs' spares are made once this run is over, not while its program
                # runs: making one (bubblewrap's namespaces and mounts, the launcher's
                # interpreter start) takes CPU, and on a busy host it slowed the program it
                # ran beside by more than its own start (``benchmarks/sandbox.py``).
                self._refill(shape)

    async def _end_run(self, spare: _Spare, mode: Mode, *, later: bool) -> None:
        """Kill what is left of the run; remove its cgroup and directory.

        With ``later`` (a run that returned) the directory's removal runs on the cleaner
        thread and the cgroup's on the spawner thread, off the run's path (:meth:`aclose`
        waits for both); else (cancelled, failed) both are removed before returning.
        Nothing of the run is alive by then: its processes are killed here either way.
        """
        phases = self._phases
        proc, cgroup = spare.proc, spare.cgroup
        await self._kill_tree(proc, cgroup, spare.marker, graceful=False, bwrap=mode == "bwrap")
        proc.close()
        phases["graded"] = time.perf_counter()
        if not later:  # the next run makes its spare itself
            if cgroup is not None:
                await anyio.to_thread.run_sync(cgroup.remove)
            await anyio.to_thread.run_sync(spare.clean, self.keep_workspaces)
            return
        self._cleanups.add(_CLEANER.submit(spare.clean, self.keep_workspaces))
        self._cleanups = {f for f in self._cleanups if not f.done()}
        if cgroup is not None:
            self._cleanups.add(_SPAWNER.submit(cgroup.remove))
        phases["cleaned"] = time.perf_counter()

    def _keep_finalizer(self) -> None:
        if not self._spares_finalizer:
            # Where aclose() never runs: stop the waiting launchers, remove their cgroups.
            weakref.finalize(self, _drop_spares, self._spares, self._making)
            self._spares_finalizer = True

    def _refill(self, shape: SpareShape | None) -> None:
        """Start making spares of ``shape`` on the spawner thread (none once closed) until
        one more than the runs now going (this one included) wait or are being made, at most
        ``max_concurrency``: from two slots, a caller that starts its next run at once takes a
        spare that waited while the spare after it is made (with one slot, the next run waits
        for the spare started as this one ended).
        """
        if self._closed:
            return
        self._keep_finalizer()
        want = min(self._running + 1, self.max_concurrency)
        while len(self._spares) + len(self._making) < want:
            self._making.append(_SPAWNER.submit(self._spare_or_none, shape))

    def _spare_or_none(self, shape: SpareShape | None) -> _Spare | None:
        """Spawner thread: a spare of ``shape``, or None when closed or none can be made."""
        if self._closed:
            return None
        try:
            return self._make_spare(shape)
        except OSError:
            return None

    def _make_spare(self, shape: SpareShape | None) -> _Spare:
        """Make a coming run's directory (its quota tmpfs), cgroup and launcher (blocking; on
        the spawner thread only, which lives as long as the process: the launcher's and
        bubblewrap's parent-death signals follow the thread that started them).

        The launcher joins the cgroup at once (``Cgroup.procs_files``: on cgroup v2 the move
        waits for an RCU grace period, while no run waits for it); in bwrap mode it then
        starts bubblewrap for ``shape`` (:func:`_plan.bwrap_spare`), in whose sandbox a
        launcher waits for the run.

        Raises:
            OSError: it could not be made.
        """
        facts = self._facts
        if facts is None:
            raise AssertionError("internal invariant broken: prepare() ran before a spare")
        run_dir = Path(tempfile.mkdtemp(prefix="openmle-run-", dir=self.workdir))
        # Everything the program may write or run from lives in ``box``: a size-limited tmpfs
        # (the quota) where we may mount one. bubblewrap binds its parts by their path inside
        # that tmpfs, so /proc/self/mountinfo shows no host path for them.
        box = run_dir / "box"
        cgroup: iso.Cgroup | None = None
        try:
            box.mkdir()
            # The three directories count against the inode limit too.
            mounted = iso.mount_quota_tmpfs(
                box,
                max_bytes=self.max_workspace_mb * 1024 * 1024,
                max_files=self.max_workspace_files + 8,
            )
            for part in ("workspace", "program", "tmp"):
                (box / part).mkdir()
            if facts.cgroups:  # the defaults' limits; a run with others sets its own
                cgroup = iso.Cgroup.create(
                    pids_max=self.max_processes,
                    memory_bytes=(
                        self.memory_mb * 1024 * 1024
                        if self.memory_mb >= _SPARE_MEMORY_MIN_MB
                        else None
                    ),
                    cpus=1.0 if self.cpu_quota else None,
                )
            marker = iso.owned_marker(uuid.uuid4().hex)
            then = None
            if shape is not None:
                paths = RunPaths(
                    box=box,
                    public=shape.data,
                    data=shape.data,
                    private=shape.private,
                    tmp_mounted=mounted,
                )
                then = bwrap_spare(
                    shape=shape,
                    paths=paths,
                    settings=self._settings(),
                    sandbox=facts,
                    marker=marker,
                    status_fd=_STATUS_FD,
                    seccomp_fd=_SECCOMP_FD if self._seccomp is not None else None,
                )
            landlock = facts.mode == "landlock"
            chain = _Chain.spawn(
                spare_argv(
                    python=facts.info.executable,
                    procs_files=cgroup.procs_files if cgroup is not None else [],
                    status_fd=_STATUS_FD,
                    owner_pid=os.getpid(),
                    then=then,
                    mount_ns=landlock,
                    # No cgroup to find what the program orphans by: keep it in the tree.
                    subreaper=landlock and cgroup is None,
                ),
                env=launch_env(marker),
                seccomp=None if landlock else self._seccomp,
                reports_namespace=landlock,
            )
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            _remove_run_dir(run_dir, box, mounted=True, keep=False)
            raise
        return _Spare(
            proc=chain,
            cgroup=cgroup,
            marker=marker,
            run_dir=run_dir,
            box=box,
            mounted=mounted,
            shape=shape,
        )

    async def _take_spare(self, shape: SpareShape | None) -> _Spare:
        """A spare for a run of ``shape``: a waiting one, else one being made, else one made
        now (spares of another shape are dropped when they would exceed the pool).

        Raises:
            OSError: none was waiting and none could be made.
        """
        while True:
            for f in [f for f in self._making if f.done()]:
                self._making.remove(f)
                got = _spare_of(f)
                if got is not None:
                    self._spares.append(got)
            for spare in list(self._spares):
                if spare.proc.returncode is not None:  # died waiting (it said why): drop it
                    self._spares.remove(spare)
                    await spare.discard()
                elif spare.shape == shape:
                    self._spares.remove(spare)
                    return spare
            if not self._making:
                break
            await anyio.to_thread.run_sync(
                lambda: futures_wait(self._making, return_when="FIRST_COMPLETED")
            )
        while self._spares and len(self._spares) >= self.max_concurrency:
            await self._spares.pop(0).discard()  # of another shape: make room
        self._keep_finalizer()
        made = _SPAWNER.submit(self._make_spare, shape)
        try:
            return await anyio.to_thread.run_sync(made.result)
        except BaseException:
            with anyio.CancelScope(shield=True):  # cancelled while it was made: drop it
                await anyio.to_thread.run_sync(futures_wait, [made])
            if made.exception() is None:
                await made.result().discard()
            raise

    async def _wait(
        self,
        job: Job,
        task: TaskHandle,
        plan: LaunchPlan,
        proc: _Chain,
        cgroup: iso.Cgroup | None,
        marker: str,
        queue_s: float,
    ) -> RunResult:
        """Capture the output until the program exits or times out, kill the tree, classify."""
        bwrap = plan.mode == "bwrap"
        box = plan.cwd.parent
        started = time.monotonic()
        cap = LogCap(head=self.log_head_bytes, tail=self.log_tail_bytes)
        quota_hit: list[str] = []
        async with anyio.create_task_group() as tg:
            drained = anyio.Event()
            tg.start_soon(_pump, proc, cap, drained)
            if plan.quota_watchdog:
                # Landlock mode without a cgroup: proc is the run's subreaper (see _kill_tree).
                subreaper = not bwrap and cgroup is None
                tg.start_soon(self._quota_watchdog, proc, box, quota_hit, subreaper)
            with anyio.move_on_after(plan.timeout_s) as waited:
                await proc.wait()
            runtime_s = time.monotonic() - started
            self._phases["exited"] = time.perf_counter()
            timed_out = waited.cancelled_caught
            with anyio.CancelScope(shield=True):
                await self._kill_tree(proc, cgroup, marker, graceful=timed_out, bwrap=bwrap)
            with anyio.move_on_after(_PIPE_GRACE_S):
                await drained.wait()
            tg.cancel_scope.cancel()
        self._phases["swept_drained"] = time.perf_counter()
        status = proc.read_status()
        exit_code = proc.returncode
        # The launcher says "ok" (in bwrap mode: the one inside the sandbox) just before exec.
        if not status.startswith(b"ok"):
            why = status[4:].decode(errors="replace") if status.startswith(b"err:") else ""
            if timed_out and not why:
                why = "the sandbox did not start within the job's timeout"
            return RunResult.infra_error(
                "sandbox failed to start the program: "
                + (why or f"exit status {exit_code}; see logs"),
                split=job.split,
                queue_s=queue_s,
                logs=cap.text(),
            )
        return await grade_outside(
            job=job,
            task=task,
            workspace=plan.cwd,
            grading_dir=box.parent / "graded",
            exit_code=exit_code,
            timed_out=timed_out,
            oom=cgroup.oom_killed() if cgroup is not None else False,
            cap=cap,
            runtime_s=runtime_s,
            queue_s=queue_s,
            shell_base=bwrap,
            detail=quota_hit[0] if quota_hit else "",
        )

    async def _quota_watchdog(
        self, proc: _Chain, box: Path, hit: list[str], subreaper: bool
    ) -> None:
        """Kill the run once ``box`` passes the quota (where no quota tmpfs could be mounted);
        with ``subreaper`` (``proc`` is the run's subreaper) only what runs under it, which
        then exits by itself.
        """
        limit_bytes = self.max_workspace_mb * 1024 * 1024
        while proc.returncode is None:
            await anyio.sleep(_QUOTA_POLL_S)
            why = await anyio.to_thread.run_sync(
                lambda: over_quota(
                    box, max_bytes=limit_bytes, max_files=self.max_workspace_files + 3
                )
            )
            if why is not None and proc.returncode is None:
                hit.append(f"exceeded its workspace quota ({why}) and was killed")
                if subreaper:
                    pids = await anyio.to_thread.run_sync(iso.descendants, proc.pid)
                    iso.kill_pids(pids, signal.SIGKILL, partial(matching, root=proc.pid))
                    return
                proc.kill_group(signal.SIGKILL)
                proc.kill(signal.SIGKILL)
                return

    async def _kill_tree(
        self,
        proc: _Chain,
        cgroup: iso.Cgroup | None,
        marker: str,
        *,
        graceful: bool,
        bwrap: bool,
    ) -> None:
        """Kill every process of the run and reap the main one (TERM first when ``graceful``).

        The run's own mount namespace (Landlock mode as root, held open by ``proc``) finds
        the run's processes without a cgroup even when they cleared their environment (the
        run marker) and left the process tree (``setsid``, double ``fork``). Each process found
        is checked the run's again once its pid is pinned (see :func:`iso.kill_pids`), so
        none that got a listed pid after it was read is signalled.
        """
        main = proc.pid

        def still(pids: set[int]) -> set[int]:
            return _still_run_pids(
                pids, main, cgroup, marker=marker, bwrap=bwrap, namespace=proc.namespace
            )

        def targets(main_alive: bool) -> set[int]:
            return _run_pids(
                main if main_alive else None,
                cgroup,
                marker=marker,
                bwrap=bwrap,
                namespace=proc.namespace,
            )

        if graceful and proc.returncode is None:
            pids = await anyio.to_thread.run_sync(targets, True)
            if bwrap:  # Spare bwrap itself: its death would SIGKILL the namespace at once.
                pids = {p for p in pids if _comm(p) != "bwrap"}
            else:
                proc.kill_group(signal.SIGTERM)
            iso.kill_pids(pids, signal.SIGTERM, still)
            with anyio.move_on_after(self.kill_grace_s):
                await proc.wait()
        if bwrap and proc.returncode is not None:
            # bwrap exited: its PID namespace, and everything in it, is gone (the namespace's
            # init exits only once every process in it has been reaped). What its cgroup may
            # still list is exiting: killed without waiting for it to leave (the cgroup's
            # removal, on a thread, waits for that).
            if cgroup is not None:
                cgroup.kill()
            return
        pause = 0.0005  # the namespace's last processes exit within a millisecond or two
        # Landlock mode without a cgroup: main is the run's subreaper (see _launcher), which
        # kills what is left under it once its program is dead, then exits; killed first, it
        # would hand the program's orphans to the host's init.
        subreaper = not bwrap and cgroup is None
        for attempt in range(200):
            alive = proc.returncode is None
            if alive or cgroup is None:  # scans /proc: off the event loop
                pids = await anyio.to_thread.run_sync(targets, alive)
            else:  # reads the cgroup's member list: cheap
                pids = targets(alive)
            if not pids and not alive and not bwrap and cgroup is not None:
                # The cgroup lists nothing, and no PID namespace holds a Landlock run: one
                # scan by the run's marker too (about 0.4 ms), for a process the cgroup did not
                # list (seen once in CI: a timed-out run's two processes alive after this
                # returned; the cause was not found).
                pids = await anyio.to_thread.run_sync(iso.live_pids_with_env, RUN_ID_ENV, marker)
            if not pids and not alive:
                return
            if not subreaper or attempt > 0:  # the group holds the subreaper too
                proc.kill_group(signal.SIGKILL)
            iso.kill_pids(pids, signal.SIGKILL, still)
            if cgroup is not None:
                cgroup.kill()
            if alive:
                if not subreaper or attempt > 0:
                    proc.kill(signal.SIGKILL)
                with anyio.move_on_after(5):
                    await proc.wait()
            else:
                await anyio.sleep(pause)
                pause = min(pause * 2, 0.05)


_NEUTRAL_DATA_BYTES = 512 * 1024 * 1024
_NEUTRAL_DATA_FILES = 100_000
"""bwrap mode: the public data copied into a tmpfs (all views of one sandbox together)."""


def _neutral_copy(public: Path, dst: Path, private: Sequence[Path], root: Path) -> Path:
    """Copy ``public`` to ``dst`` in the views' tmpfs; ``public`` itself where it does not
    fit (checked first by apparent size and count, then by the copy's own ``ENOSPC``).
    """
    total, files = 0, 0
    for dirpath, _dirs, names in walk(public):
        files += len(names) + 1
        for name in names:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(dirpath, name)).st_size
        if total > _NEUTRAL_DATA_BYTES or files > _NEUTRAL_DATA_FILES:
            return public
    try:
        iso.symlink_free_copy(public, dst, deny=private)
    except OSError:
        iso.safe_rmtree(dst)
        return public
    return dst


_CLEANER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openmle-run-cleanup")
"""Removes finished runs' directories off their path, in order (the interpreter waits for it
at exit)."""
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openmle-run-spawner")
"""Removes finished runs' cgroups and starts the spare launchers, off the runs' path. One
thread that lives as long as the process: a parent-death signal (the launcher's, bubblewrap's
``--die-with-parent``) fires when the *thread* that started the process exits."""
_SPARE_MEMORY_MIN_MB = 256
"""A spare's cgroup gets the default memory limit ahead only from this size: below it the
launcher (and bwrap's) own start-up could reach it; the run sets it then."""
_PIPE_ATOMIC = 60 * 1024
"""A run configuration this short fits an empty pipe (64 KiB): writing it never blocks."""

_STATUS_FD = 3
"""The status pipe's number in the launch chain (the launcher's ``ok`` or ``err:...``)."""
_SECCOMP_FD = 4
"""bwrap mode: the seccomp filter's pipe in the launch chain (``bwrap --seccomp 4``)."""


@define(eq=False)
class _Chain:
    """A launch chain started with ``posix_spawn``: raw pipes, a pidfd, no asyncio transport.

    Started before its run (a spare), it holds no object that warns when a sandbox that was
    never closed is collected: its pipes are plain descriptors that :meth:`close` (or the
    sandbox's finalizer) closes, and the chain exits on its own when its stdin closes.
    """

    pid: int
    pidfd: int
    stdin_w: int
    stdout_r: int
    status_r: int
    has_seccomp: bool
    reports_namespace: bool = False
    """Its launcher reports the run's mount namespace first (Landlock mode)."""
    namespace: tuple[int, int] | None = field(default=None, init=False)
    """The run's own mount namespace, ``(st_dev, st_ino)``, while :attr:`_namespace_fd`
    holds it open (so no later namespace gets its number); None without one."""
    _namespace_fd: int = field(default=-1, init=False)
    _status_head: bytes = field(default=b"", init=False)
    """What was read from the status pipe past the namespace report."""
    _returncode: int | None = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        seccomp: bytes | None,
        reports_namespace: bool = False,
    ) -> _Chain:
        """Start ``argv`` in a new session with stdin, stdout+stderr and status pipes.

        Raises:
            OSError: it could not be started.
        """
        opened: list[int] = []

        def pipe() -> tuple[int, int]:
            # Above the fixed numbers, so the dup2s below always copy (and clear CLOEXEC).
            r, w = os.pipe()
            hi_r, hi_w = (
                fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 10),
                fcntl.fcntl(w, fcntl.F_DUPFD_CLOEXEC, 10),
            )
            os.close(r)
            os.close(w)
            opened.extend((hi_r, hi_w))
            return hi_r, hi_w

        try:
            in_r, in_w = pipe()
            out_r, out_w = pipe()
            st_r, st_w = pipe()
            actions = [
                (os.POSIX_SPAWN_DUP2, in_r, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, out_w, 2),
                (os.POSIX_SPAWN_DUP2, st_w, _STATUS_FD),
            ]
            sec_r = -1
            if seccomp is not None:
                sec_r, sec_w = pipe()
                try:
                    os.write(sec_w, seccomp)  # a few hundred bytes: fits the pipe
                finally:
                    os.close(sec_w)
                    opened.remove(sec_w)
                actions.append((os.POSIX_SPAWN_DUP2, sec_r, _SECCOMP_FD))
            pid = os.posix_spawn(argv[0], list(argv), env, file_actions=actions, setsid=True)
        except BaseException:
            for fd in opened:
                with contextlib.suppress(OSError):
                    os.close(fd)
            raise
        for fd in (in_r, out_w, st_w, *([sec_r] if sec_r >= 0 else [])):
            os.close(fd)
        try:
            pidfd = os.pidfd_open(pid)
        except OSError:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            for fd in (in_w, out_r, st_r):
                os.close(fd)
            raise
        os.set_blocking(out_r, False)
        os.set_blocking(st_r, False)
        return cls(
            pid=pid,
            pidfd=pidfd,
            stdin_w=in_w,
            stdout_r=out_r,
            status_r=st_r,
            has_seccomp=seccomp is not None,
            reports_namespace=reports_namespace,
        )

    async def hold_namespace(self) -> None:
        """Wait for the launcher's namespace report (a spare that waited has sent it) and open
        the namespace it names, while the launcher is in it: held open until :meth:`close`,
        its number names no later namespace (the kernel gives a freed number to the next
        namespace made at once; found by number, a later one's processes were killed).
        Nothing without a report (bwrap mode) or a namespace; a launcher that failed instead
        leaves its report for :meth:`read_status`.
        """
        if not self.reports_namespace or self.namespace is not None or self._status_head:
            return
        got = bytearray()
        while b"\n" not in got and len(got) < 4096:
            try:
                chunk = os.read(self.status_r, 4096)
            except BlockingIOError:
                await anyio.wait_readable(self.status_r)
                continue
            if not chunk:
                break
            got += chunk
        line, newline, rest = bytes(got).partition(b"\n")
        self._status_head = rest if newline else bytes(got)
        name = line.decode(errors="replace")
        if not newline or not name.startswith("mnt:["):
            return
        try:
            fd = os.open(f"/proc/{self.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # the launcher died (killed from outside): nothing to hold
            return
        st = os.fstat(fd)
        if name != f"mnt:[{st.st_ino}]":  # not the namespace it reported: none held
            os.close(fd)
            return
        self._namespace_fd, self.namespace = fd, (st.st_dev, st.st_ino)

    def read_status(self) -> bytes:
        """What the launcher wrote on the status pipe since it was last read (``ok``,
        ``err:...``, or nothing yet).
        """
        head, self._status_head = self._status_head, b""
        return head + _read_all(self.status_r)

    def start(self, script: bytes) -> None:
        """Hand the chain its script and close its stdin (blocking: a few KiB at most)."""
        try:
            with contextlib.suppress(BrokenPipeError):
                view = memoryview(script)
                while view:
                    view = view[os.write(self.stdin_w, view) :]
        finally:
            os.close(self.stdin_w)
            self.stdin_w = -1

    @property
    def returncode(self) -> int | None:
        """The exit status once it has exited (``-signal`` when killed), else None.

        It is not reaped here (``WNOWAIT``): until :meth:`close`, its zombie keeps its pid,
        which is also its process group's id (``setsid``), so the group the sandbox signals
        while it kills the run's leftovers is never a later process's that got the number.
        """
        if self._returncode is None and not self._closed:
            with contextlib.suppress(ChildProcessError):
                got = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if got is not None and got.si_pid == self.pid:
                    exited = got.si_code == os.CLD_EXITED
                    self._returncode = got.si_status if exited else -got.si_status
        return self._returncode

    def kill(self, sig: int) -> None:
        """Send ``sig`` to it through its pidfd (nothing once it is closed: see :meth:`close`)."""
        if not self._closed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(self.pidfd, sig)

    def kill_group(self, sig: int) -> None:
        """Send ``sig`` to its process group (its pid: ``setsid``), only until :meth:`close`:
        until then its pid, so the group's id, is its own, even once it has exited (its
        zombie is kept, see :attr:`returncode`).
        """
        if not self._closed:
            iso.kill_group(self.pid, sig)

    async def wait(self) -> int:
        """Wait until it exits; its exit status."""
        while True:
            code = self.returncode
            if code is not None:
                return code
            await anyio.wait_readable(self.pidfd)

    def close(self) -> None:
        """Close our ends of its pipes and its pidfd (idempotent; reaps it if it has exited)."""
        if self._closed:
            return
        with contextlib.suppress(ChildProcessError):
            pid, status = os.waitpid(self.pid, os.WNOHANG)  # reap its zombie
            if pid == self.pid and self._returncode is None:
                self._returncode = os.waitstatus_to_exitcode(status)
        self._closed = True
        for fd in (self.pidfd, self.stdout_r, self.status_r):
            anyio.notify_closing(fd)
        for fd in (self.pidfd, self.stdin_w, self.stdout_r, self.status_r, self._namespace_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.namespace = None


def _remove_run_dir(run_dir: Path, box: Path, *, mounted: bool, keep: bool) -> None:
    """Unmount the quota tmpfs and delete the run directory (or, with ``keep``, keep its
    ``workspace`` and ``program``, without set-user-ID or set-group-ID bits).
    """
    if keep:
        for part in ("workspace", "program"):
            src = box / part
            if not src.is_dir():
                continue
            if mounted:  # copy out of the tmpfs, which goes with the unmount
                with contextlib.suppress(OSError, subprocess.SubprocessError):
                    subprocess.run(
                        ["cp", "-a", "--", str(src), str(run_dir / part)],
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=600,
                        check=False,
                    )
            else:
                with contextlib.suppress(OSError):
                    src.rename(run_dir / part)
            # The program may have run as root: a set-user-ID copy of a shell it left would
            # be a root shell on the host for whoever reaches the kept directory. (chmod -R
            # walks any depth and never follows a symbolic link it meets.)
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(
                    ["chmod", "-R", "u-s,g-s", "--", str(run_dir / part)],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=600,
                    check=False,
                )
    if mounted:
        iso.unmount(box)
    if keep:
        iso.safe_rmtree(box)
    else:
        iso.safe_rmtree(run_dir)


@define(eq=False)
class _Spare:
    """A launcher started before its run, already inside the run's cgroup, with the run's
    directory (``box``: its quota tmpfs where ``mounted``) made; in bwrap mode its sandbox,
    made for ``shape``, is set up too.
    """

    proc: _Chain
    cgroup: iso.Cgroup | None
    marker: str
    run_dir: Path
    box: Path
    mounted: bool
    shape: SpareShape | None

    def clean(self, keep: bool) -> None:
        """Remove the run directory, or keep its parts (blocking)."""
        _remove_run_dir(self.run_dir, self.box, mounted=self.mounted, keep=keep)

    async def discard(self) -> None:
        """Stop it, remove its cgroup and its directory (shielded from cancellation)."""
        with anyio.CancelScope(shield=True):
            self.proc.kill(signal.SIGKILL)
            if self.cgroup is not None:
                self.cgroup.kill()
            with anyio.move_on_after(5):
                await self.proc.wait()
            self.proc.close()
            if self.cgroup is not None:
                await anyio.to_thread.run_sync(self.cgroup.remove)
            await anyio.to_thread.run_sync(self.clean, False)


def _spare_of(made: Future[_Spare | None]) -> _Spare | None:
    """The spare a finished spawner job made, or None."""
    return None if made.cancelled() or made.exception() is not None else made.result()


def _drop_spare(spare: _Spare) -> None:
    """Kill a waiting launcher and remove its cgroup (blocking, no event loop)."""
    spare.proc.kill(signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(spare.proc.pid, 0)
    for fd in (spare.proc.pidfd, spare.proc.stdin_w, spare.proc.stdout_r, spare.proc.status_r):
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)
    if spare.cgroup is not None:
        spare.cgroup.kill()
        spare.cgroup.remove(wait_s=1.0)  # a finalizer: bounded, at exit too
    spare.clean(False)


def _drop_made(made: Future[_Spare | None]) -> None:
    spare = _spare_of(made)
    if spare is not None:
        _drop_spare(spare)


def _drop_spares(spares: list[_Spare], making: list[Future[_Spare | None]]) -> None:
    """Kill waiting launchers and remove their cgroups (a finalizer: blocking, no loop); those
    still being made are dropped when made.
    """
    for spare in spares:
        _drop_spare(spare)
    spares.clear()
    for made in making:
        made.add_done_callback(_drop_made)
    making.clear()


async def _hand_over(proc: _Chain, config: bytes) -> None:
    """Hand the waiting launcher its run (off the loop only when it could block)."""
    if len(config) < _PIPE_ATOMIC:  # fits the empty pipe: never blocks
        proc.start(config)
    else:
        await anyio.to_thread.run_sync(proc.start, config)


async def _pump(proc: _Chain, cap: LogCap, drained: anyio.Event) -> None:
    """Feed the chain's output to ``cap`` until end of file."""
    try:
        while True:
            await anyio.wait_readable(proc.stdout_r)
            try:
                chunk = os.read(proc.stdout_r, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            cap.feed(chunk)
    except (anyio.ClosedResourceError, anyio.BusyResourceError, OSError):
        pass
    finally:
        drained.set()


def _task_paths(task: TaskHandle, job: Job) -> tuple[Path, tuple[Path, ...]]:
    """The split's public dir and the private paths (may build a task's validation view)."""
    return Path(task.public_dir(job.split)), tuple(Path(p) for p in task.private_paths)


def _run_pids(
    main: int | None,
    cgroup: iso.Cgroup | None,
    *,
    marker: str,
    bwrap: bool,
    namespace: tuple[int, int] | None,
) -> set[int]:
    """The run's live processes: ``main``'s descendants (when it is alive), and its cgroup's
    members, else (Landlock mode) those carrying its ``marker`` or in its mount ``namespace``
    (held open by the caller: see :meth:`_Chain.hold_namespace`).
    """
    found: set[int] = set()
    if main is not None:
        found |= iso.descendants(main)
    if cgroup is not None:
        found |= cgroup.pids()  # authoritative: a program cannot leave its cgroup
    elif not bwrap:
        found |= iso.live_pids_with_env(RUN_ID_ENV, marker)
        if namespace is not None:
            found |= iso.live_pids_in_mount_ns(namespace)
    return found


def _still_run_pids(
    pids: set[int],
    main: int,
    cgroup: iso.Cgroup | None,
    *,
    marker: str,
    bwrap: bool,
    namespace: tuple[int, int] | None,
) -> set[int]:
    """Those of ``pids`` that are the run's now, by any criterion :func:`_run_pids` finds
    them by (the re-check of :func:`iso.kill_pids`): members of its ``cgroup`` (one read),
    descendants of ``main`` (its pid is held until the run's chain is closed), and, in the
    Landlock mode, carriers of its ``marker`` and members of its mount ``namespace``.
    """
    found = cgroup.members(pids) if cgroup is not None else set()
    env = None if bwrap else (RUN_ID_ENV, marker)
    return found | matching(pids - found, root=main, env=env, namespace=namespace)


def _read_all(fd: int) -> bytes:
    out = bytearray()
    while True:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        out += chunk
    return bytes(out)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _limit_cgroup(
    cgroup: iso.Cgroup, job: Job, settings: PlanSettings, queue_s: float
) -> RunResult | None:
    """Set the job's limits on the run's cgroup; an infrastructure error if that failed."""
    limits = cgroup_limits(job, settings)
    try:
        cgroup.set_limits(
            pids_max=limits.pids_max, memory_bytes=limits.memory_bytes, cpus=limits.cpus
        )
    except OSError as exc:
        return RunResult.infra_error(
            f"could not set the run's cgroup limits: {exc}",
            split=job.split,
            queue_s=queue_s,
        )
    return None


async def _run_facts(
    facts: SandboxFacts, spare: _Spare, gpus: tuple[str, ...], outputs: str | None = None
) -> RunFacts:
    """What the launch plan needs to know of this run and the spare chain it runs in
    (``outputs``: the task's output directory name, ``$OUTPUT_DIR`` in the workspace).

    Without a cgroup and as a user other than root, it counts the user's processes (the
    process limit is per user then).
    """
    proc, cgroup = spare.proc, spare.cgroup
    users = 0
    if cgroup is None and facts.euid != 0:
        users = await anyio.to_thread.run_sync(iso.count_user_processes, os.getuid())
    return RunFacts(
        marker=spare.marker,
        gpus=gpus,
        status_fd=_STATUS_FD,
        seccomp_fd=_SECCOMP_FD if proc.has_seccomp else None,
        cgroup_procs=tuple(cgroup.procs_files) if cgroup is not None else (),
        user_processes=users,
        rlimit_hard=iso.hard_rlimits(),
        outputs=outputs,
    )


publish_one(LocalSandbox, "openmle.backends")  # its repr names the public path
