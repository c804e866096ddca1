"""The local sandbox's launch plan: what one run starts, with which limits, as a value.

:func:`launch_plan` is pure: from the job, the run's paths, the sandbox's settings and the
facts detected about this host and this run (file descriptors already opened, the run's
cgroup, the kernel's Landlock ABI, ...) it computes the whole command line, both
environments, the rlimits, the cgroup limits and the isolation settings, and does no I/O
beyond resolving paths (``realpath``) for the checks that hide private answers. The local
sandbox then only spawns the plan and waits (``LocalSandbox._execute``). Unit tests pin plans
exactly (``tests/unit/backends/test_launch_plan.py``), as the Docker sandbox's
``container_request`` is pinned.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from attrs import field, frozen

from openmle._types import Job, env_problem
from openmle.backends._bwrap import LAUNCHER_IN_SANDBOX, bwrap_argv
from openmle.backends._landlock import landlock_rules
from openmle.backends._launcher import LL_ALL, LL_EXECUTE
from openmle.backends._runtime import LAUNCHER, HostLayout, RuntimeInfo, is_within
from openmle.backends._seccomp import core_limit_program, seccomp_program

__all__ = [
    "OUTPUT_DIR_ENV",
    "RUN_ID_ENV",
    "CgroupLimits",
    "LaunchPlan",
    "PlanSettings",
    "RunFacts",
    "RunPaths",
    "SandboxFacts",
    "SpareShape",
    "bwrap_spare",
    "cgroup_limits",
    "clamp_to",
    "job_problem",
    "launch_env",
    "launch_plan",
    "paths_problem",
    "program_env",
    "spare_argv",
    "spare_input",
    "spare_shape",
]

Mode = Literal["bwrap", "landlock"]

RUN_ID_ENV = "OPENMLE_RUN_ID"
OUTPUT_DIR_ENV = "OUTPUT_DIR"
"""Where a task that declares ``outputs`` is told its outputs go (set by the sandbox)."""
"""Every program process carries this variable (a fresh id per run); used to find leftovers."""

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
# The launch chain (the Python launcher, bubblewrap) runs outside the isolation, so it gets
# this fixed environment and never the job's.
LAUNCH_PATH = "/usr/local/bin:/usr/bin:/bin"
RLIM_INFINITY = -1


def _tuple_of_paths(value: Sequence[Path]) -> tuple[Path, ...]:
    return tuple(value)


@frozen(kw_only=True)
class PlanSettings:
    """The sandbox's own settings that shape a run (the :class:`LocalSandbox` fields)."""

    memory_mb: int = 4096
    max_processes: int = 256
    max_file_mb: int = 1024
    max_workspace_mb: int = 2048
    max_workspace_files: int = 100_000
    kill_grace_s: float = 2.0
    extra_ro_paths: tuple[Path, ...] = field(default=(), converter=_tuple_of_paths)
    cpu_quota: bool = False


@frozen(kw_only=True)
class SandboxFacts:
    """What the sandbox detected once (at ``prepare``) about this host."""

    mode: Mode
    info: RuntimeInfo
    layout: HostLayout
    machine: str
    euid: int
    landlock_abi: int = 0
    bwrap: str | None = None
    cgroups: bool = False
    """Whether runs get a cgroup (this process may create them and ``cgroups=True``)."""


@frozen(kw_only=True)
class RunPaths:
    """The run's directories: everything the program may write lives in ``box``."""

    box: Path
    public: Path
    """The split's public data."""
    data: Path
    """What the program reads: ``public`` or a copy of it (bwrap binds it at ``/data``)."""
    private: tuple[Path, ...] = field(converter=_tuple_of_paths)
    tmp_mounted: bool = False
    """Whether ``box`` is a quota tmpfs (else a watchdog polls it)."""

    @property
    def workspace(self) -> Path:
        return self.box / "workspace"

    @property
    def program_dir(self) -> Path:
        return self.box / "program"

    @property
    def tmp_dir(self) -> Path:
        return self.box / "tmp"


@frozen(kw_only=True)
class SpareShape:
    """bwrap mode: what a spare's sandbox was made for (its mounts and ``/dev/shm``); a run of
    another shape cannot use it (see :func:`spare_shape`).
    """

    data: Path
    private: tuple[Path, ...] = field(converter=_tuple_of_paths)
    gpu: bool
    shm_bytes: int


@frozen(kw_only=True)
class RunFacts:
    """What one run has opened or found before its plan is made."""

    marker: str
    gpus: tuple[str, ...] = ()
    status_fd: int
    seccomp_fd: int | None = None
    """bwrap mode: an fd on the seccomp filter (``bwrap --seccomp``), or None for none."""
    cgroup_procs: tuple[str, ...] = ()
    """The run's cgroup (the files the spare launcher wrote ``0`` to when it joined:
    ``Cgroup.procs_files``); empty without one."""
    user_processes: int = 0
    """Processes this uid owns now (a relative ``RLIMIT_NPROC`` when there is no cgroup)."""
    rlimit_hard: Mapping[str, int] = field(factory=dict)
    """Current hard limits by name (``RLIM_INFINITY`` = -1, or absent: unlimited)."""
    outputs: str | None = None
    """The task's output directory name (``task.outputs``: ``$OUTPUT_DIR`` in the workspace)."""


@frozen(kw_only=True)
class CgroupLimits:
    """The limits written to the run's cgroup before it starts."""

    pids_max: int
    memory_bytes: int
    cpus: float | None = None


@frozen(kw_only=True)
class LaunchPlan:
    """Everything one run starts, as data (see :func:`launch_plan`)."""

    mode: Mode
    argv: tuple[str, ...]
    """What the launcher ``exec``s: bubblewrap (which runs the program) or the program."""
    cwd: Path
    launch_env: Mapping[str, str]
    """The launcher's (and bubblewrap's) fixed environment (never anything from the job)."""
    program_env: Mapping[str, str]
    """The program's whole environment, applied inside the isolation."""
    pass_fds: tuple[int, ...]
    rlimits: tuple[tuple[str, int, int], ...]
    cgroup: CgroupLimits | None
    launcher: Mapping[str, object]
    """The run configuration the spare launcher reads (:func:`spare_input`)."""
    seccomp: Literal["bwrap", "launcher"] | None
    """Who loads the seccomp filter: bwrap (from ``RunFacts.seccomp_fd``) or the launcher."""
    shm_bytes: int
    tmp_bytes: int
    quota_bytes: int
    quota_files: int
    quota_watchdog: bool
    """True where no quota tmpfs could be mounted: a watchdog polls the workspace instead."""
    timeout_s: float
    kill_grace_s: float


def job_problem(job: Job) -> str | None:
    """Why the sandbox refuses ``job`` before making anything, or None."""
    for key, value in job.env.items():  # Job refuses these too; a forged Job may not
        problem = env_problem(key, value)
        if problem is not None:
            return f"job.env[{key!r}] is refused: {problem}"
    return None


def paths_problem(
    *,
    task_name: str,
    public: Path,
    private: Sequence[Path],
    mode: Mode,
    info: RuntimeInfo,
    extra_ro: Sequence[Path],
) -> str | None:
    """Why the task's paths cannot be isolated (public overlapping private, ...), or None."""
    overlap = [p for p in private if is_within(public, p) or is_within(p, public)]
    if overlap:
        return (
            f"task {task_name!r}: public dir {public} overlaps private path {overlap[0]}; "
            "fix the task package"
        )
    if mode == "landlock":
        inside = [
            (p, r) for p in private for r in (*info.roots, *map(str, extra_ro)) if is_within(p, r)
        ]
        if inside:
            return (
                f"private path {inside[0][0]} lies inside {inside[0][1]}, which Landlock "
                "mode must leave readable; move the task elsewhere or install bubblewrap"
            )
    return None


def program_env(
    job: Job,
    *,
    info: RuntimeInfo | None,
    data: str,
    workspace: str,
    tmp: str,
    gpus: Sequence[str] | None,
    marker: str | None,
    outputs: str | None = None,
) -> dict[str, str]:
    """The program's environment, for every sandbox (local, bwrap, Docker): defaults, then
    ``job.env``, then what the sandbox owns.

    Defaults: ``PATH``, ``TMPDIR``, ``LANG``/``LC_ALL`` (``C.UTF-8``), unbuffered Python without
    bytecode files or user site, ``MPLBACKEND=Agg`` and the thread caps (:data:`THREAD_VARS`,
    one per requested CPU, rounded up). Owned (a job cannot change them): ``HOME`` (the
    workspace), ``DATA_DIR``, ``CUDA_VISIBLE_DEVICES``, the run marker and, for a task that
    declares ``outputs``, ``OUTPUT_DIR`` (``<workspace>/<outputs>``, as NatureBench's harness
    sets ``OUTPUT_DIR=/workspace/output``; the program makes the directory).

    Args:
        job: the job (its resources and ``env``).
        info: the runtime whose ``bin_dir`` leads ``PATH``; None keeps the image's own ``PATH``
            (a container).
        data, workspace, tmp: the data, workspace and temporary directories as the program
            sees them.
        gpus: the GPU ids the program may use; None when the engine exposes exactly the leased
            devices (a container: ``CUDA_VISIBLE_DEVICES`` is then left unset, never the job's).
        marker: the run marker (``OPENMLE_RUN_ID``); None when the sandbox finds its runs
            otherwise (container labels; the job's value is dropped).
        outputs: the task's output directory name (``task.outputs``); None: ``OUTPUT_DIR`` is
            the job's, if it sets one.
    """
    threads = str(max(1, math.ceil(job.resources.cpus)))
    env = {
        **({} if info is None else {"PATH": f"{info.bin_dir}:/usr/local/bin:/usr/bin:/bin"}),
        "HOME": workspace,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        **dict.fromkeys(THREAD_VARS, threads),
    }
    env.update(job.env)
    env["HOME"] = workspace  # in place: the defaults' order stays
    env["DATA_DIR"] = data
    if outputs is not None:
        env[OUTPUT_DIR_ENV] = f"{workspace.rstrip('/')}/{outputs}"
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop(RUN_ID_ENV, None)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    if marker is not None:
        env[RUN_ID_ENV] = marker
    return env


def launch_env(marker: str) -> dict[str, str]:
    """The fixed environment of the launch chain (never anything from the job)."""
    return {"PATH": LAUNCH_PATH, "LANG": "C.UTF-8", RUN_ID_ENV: marker}


def clamp_to(
    wanted: Sequence[tuple[str, int | None]], hard: Mapping[str, int]
) -> tuple[tuple[str, int, int], ...]:
    """``(name, soft, hard)`` with each limit clamped to the current hard limit (None dropped).

    An unprivileged process cannot raise a hard limit, so a wanted limit above it becomes the
    hard limit.
    """
    out: list[tuple[str, int, int]] = []
    for name, value in wanted:
        if value is None:
            continue
        h = hard.get(name, RLIM_INFINITY)
        v = value if h == RLIM_INFINITY else min(value, h)
        out.append((name, v, v))
    return tuple(out)


def cgroup_limits(job: Job, settings: PlanSettings) -> CgroupLimits:
    """The limits of ``job``'s cgroup (where it gets one)."""
    return CgroupLimits(
        pids_max=settings.max_processes,
        memory_bytes=(job.resources.memory_mb or settings.memory_mb) * 1024 * 1024,
        cpus=job.resources.cpus if settings.cpu_quota else None,
    )


def _rlimits(
    job: Job, *, settings: PlanSettings, sandbox: SandboxFacts, run: RunFacts
) -> tuple[tuple[str, int, int], ...]:
    """The run's rlimits, clamped to the current hard limits (see :func:`launch_plan`)."""
    memory = (job.resources.memory_mb or settings.memory_mb) * 1024 * 1024
    wanted: list[tuple[str, int | None]] = [
        ("RLIMIT_CPU", math.ceil(job.timeout_s * max(1, math.ceil(job.resources.cpus))) + 5),
        ("RLIMIT_FSIZE", settings.max_file_mb * 1024 * 1024),
        # 1 byte, not 0: no core file fits (the kernel writes none below a page), and at 1 the
        # kernel skips a piped core_pattern too (systemd-coredump, apport), which 0 does not:
        # every crash (SIGSEGV, an abort, SIGXCPU at the CPU limit) would start the host's
        # helper as root, outside the run's cgroup. seccomp keeps the program from changing it.
        ("RLIMIT_CORE", 1),
    ]
    if not run.cgroup_procs:
        if sandbox.euid != 0:
            wanted.append(("RLIMIT_NPROC", run.user_processes + settings.max_processes))
        # RLIMIT_DATA counts private writable memory, not address-space reservations (CUDA
        # and allocators reserve far more than they use, which RLIMIT_AS counts).
        wanted.append(("RLIMIT_DATA", memory))
        if not run.gpus:
            # RLIMIT_DATA misses shared mappings (mmap(-1, n) shared): bound the address
            # space too, with room for reservations. With GPUs (CUDA reserves terabytes of
            # address space) only a memory cgroup can do it.
            wanted.append(("RLIMIT_AS", 2 * memory + (1 << 30)))
    return clamp_to(wanted, run.rlimit_hard)


def _bwrap_launch(
    job: Job, *, settings: PlanSettings, sandbox: SandboxFacts, run: RunFacts
) -> tuple[list[str], dict[str, str]]:
    """Bwrap mode: the program's command line and environment inside the sandbox."""
    env = program_env(
        job,
        info=sandbox.info,
        data="/data",
        workspace="/workspace",
        tmp="/tmp",
        gpus=run.gpus,
        marker=run.marker,
        outputs=run.outputs,
    )
    return [sandbox.info.executable, "/program/main.py"], env


def spare_shape(
    job: Job,
    *,
    mode: Mode,
    data: Path,
    private: Sequence[Path],
    settings: PlanSettings,
    gpus: Sequence[str],
) -> SpareShape | None:
    """The :class:`SpareShape` a run of ``job`` needs (None in the Landlock mode, whose spares
    fit every run).
    """
    if mode != "bwrap":
        return None
    return SpareShape(
        data=data,
        private=tuple(private),
        gpu=bool(gpus),
        shm_bytes=(job.resources.memory_mb or settings.memory_mb) * 1024 * 1024,
    )


def bwrap_spare(
    *,
    shape: SpareShape,
    paths: RunPaths,
    settings: PlanSettings,
    sandbox: SandboxFacts,
    marker: str,
    status_fd: int,
    seccomp_fd: int | None,
) -> list[str]:
    """Bwrap mode: the bubblewrap command line a spare launcher ``exec``s ahead of its run.

    The sandbox (namespaces, mounts of ``shape.data`` and of the spare's own ``paths.box``,
    the seccomp filter from ``seccomp_fd``) is made before any job comes; inside it a second
    launcher (bound read-only) waits for the run's configuration on stdin and reports ``ok`` on
    ``status_fd`` (passed through). bubblewrap and that launcher get the fixed launch
    environment; the program's own comes with the run.
    """
    if sandbox.bwrap is None:
        raise AssertionError("internal invariant broken: a bwrap-mode sandbox knows bwrap")
    info = sandbox.info
    inner: dict[str, object] = {"status_fd": status_fd, "procs": [], "parent": None}
    if seccomp_fd is not None:
        # bubblewrap's filter lets the core limit be set: the launcher sets it, then refuses
        # it to the program (see _rlimits).
        inner["core_filter"] = core_limit_program(sandbox.machine)
    return bwrap_argv(
        bwrap=sandbox.bwrap,
        info=info,
        data_dir=shape.data,
        workspace=paths.workspace,
        program_dir=paths.program_dir,
        tmp_bytes=settings.max_file_mb * 1024 * 1024,
        private_paths=shape.private,
        extra_ro=settings.extra_ro_paths,
        gpu=shape.gpu,
        info_fd=None,
        seccomp_fd=seccomp_fd,
        command=[info.executable, "-I", "-S", LAUNCHER_IN_SANDBOX, json.dumps(inner)],
        launcher=LAUNCHER,
        env=launch_env(marker),
        shm_bytes=shape.shm_bytes,
        tmp_dir=paths.tmp_dir if paths.tmp_mounted else None,
        layout=sandbox.layout,
    )


def _landlock_launch(
    job: Job, *, paths: RunPaths, settings: PlanSettings, sandbox: SandboxFacts, run: RunFacts
) -> tuple[list[str], dict[str, str], dict[str, object]]:
    """Landlock mode: the program's command line and environment, and the launcher's
    ``landlock`` and ``seccomp`` settings.
    """
    info = sandbox.info
    env = program_env(
        job,
        info=info,
        data=str(paths.data),
        workspace=str(paths.workspace),
        tmp=str(paths.tmp_dir),
        gpus=run.gpus,
        marker=run.marker,
        outputs=run.outputs,
    )
    rules = landlock_rules(
        info=info,
        data_dir=paths.data,
        program_dir=paths.program_dir,
        workspace=paths.workspace,
        tmp_dir=paths.tmp_dir,
        extra_ro=settings.extra_ro_paths,
        gpu=bool(run.gpus),
        layout=sandbox.layout,
    )
    isolation: dict[str, object] = {
        # A private /dev/shm of this size (or none): see the launcher.
        "landlock": {
            "rules": rules,
            "shm": (job.resources.memory_mb or settings.memory_mb) * 1024 * 1024,
            "shm_access": LL_ALL & ~LL_EXECUTE,
        },
        "seccomp": seccomp_program(
            sandbox.machine,
            sockets="tcp" if sandbox.landlock_abi >= 4 else "none",
            # every user: as root a program owns every root file, as another user it owns
            # every file of the service's user (~/.ssh, ~/.bashrc, the venv)
            noop_metadata=True,
            truncate=sandbox.landlock_abi >= 3,  # below ABI 3 Landlock lets it empty any file
        ),
    }
    return [info.executable, str(paths.program_dir / "main.py")], env, isolation


def launch_plan(
    job: Job,
    *,
    paths: RunPaths,
    settings: PlanSettings,
    sandbox: SandboxFacts,
    run: RunFacts,
) -> LaunchPlan:
    """The :class:`LaunchPlan` of ``job`` (pure; see the module docstring).

    Limits: memory ``job.resources.memory_mb`` (else ``settings.memory_mb``) in the run's
    cgroup, or per process (``RLIMIT_DATA``, and ``RLIMIT_AS`` without GPUs) where there is
    none; processes ``settings.max_processes`` (cgroup ``pids.max``, else a relative
    ``RLIMIT_NPROC``, which does not bind root); CPU time ``timeout_s * ceil(cpus) + 5``
    seconds; file size ``settings.max_file_mb``; no core dumps (``RLIMIT_CORE`` 1 byte:
    no file, no piped helper). The launcher (started ahead,
    see :func:`spare_argv`) sets the rlimits and ``exec``s ``argv``.
    """
    bwrap = sandbox.mode == "bwrap"
    rlimits = _rlimits(job, settings=settings, sandbox=sandbox, run=run)
    launcher: dict[str, object] = {
        "cwd": "/workspace" if bwrap else str(paths.workspace),
        "rlimits": [list(r) for r in rlimits],
    }
    if bwrap:
        argv, env = _bwrap_launch(job, settings=settings, sandbox=sandbox, run=run)
        launcher.update(argv=argv, env=env)
    else:
        argv, env, isolation = _landlock_launch(
            job, paths=paths, settings=settings, sandbox=sandbox, run=run
        )
        launcher.update(argv=argv, env=env, **isolation)
    memory = (job.resources.memory_mb or settings.memory_mb) * 1024 * 1024
    fds = (run.status_fd,) if run.seccomp_fd is None else (run.status_fd, run.seccomp_fd)
    return LaunchPlan(
        mode=sandbox.mode,
        argv=tuple(argv),
        cwd=paths.workspace,
        launch_env=launch_env(run.marker),
        program_env=env,
        pass_fds=fds,
        rlimits=rlimits,
        cgroup=cgroup_limits(job, settings) if run.cgroup_procs else None,
        # Through JSON, as the launcher reads it (tuples become lists).
        launcher=json.loads(json.dumps(launcher)),
        seccomp=("bwrap" if run.seccomp_fd is not None else None) if bwrap else "launcher",
        shm_bytes=memory,
        tmp_bytes=settings.max_file_mb * 1024 * 1024,
        quota_bytes=settings.max_workspace_mb * 1024 * 1024,
        quota_files=settings.max_workspace_files,
        quota_watchdog=not paths.tmp_mounted,
        timeout_s=job.timeout_s,
        kill_grace_s=settings.kill_grace_s,
    )


def spare_argv(
    *,
    python: str,
    procs_files: Sequence[str],
    status_fd: int,
    owner_pid: int,
    then: Sequence[str] | None = None,
    mount_ns: bool = False,
    subreaper: bool = False,
) -> list[str]:
    """What is started ahead of a run (a *spare*): it joins the run's cgroups at once (v2: one RCU
    grace period, paid while no run waits; v1 moves its one thread without one).

    Landlock mode: the launcher, which dies with ``owner_pid`` and then waits for its run's
    :attr:`LaunchPlan.launcher` configuration on stdin (see :mod:`._launcher`); with
    ``mount_ns`` it first makes the run's own mount namespace and reports it on ``status_fd``
    (a line: ``mnt:[N]``, or empty without one), for the sandbox to hold open; with
    ``subreaper`` it stays, outside the program's rules, as the run's child subreaper (see
    :mod:`._launcher`): what the program orphans stays its descendant. bwrap mode:
    ``then`` (:func:`bwrap_spare`, whose launcher waits inside the sandbox), ``exec``'d by a
    ``/bin/sh`` that joins the cgroups (by itself where there are none).
    """
    if then is not None:
        if not procs_files:
            return list(then)
        q = shlex.quote
        status = f"/proc/self/fd/{status_fd}"  # dash redirects only fds 0-9 by number
        # The shell exports PWD (the service's working directory, a host path) to bubblewrap,
        # whose init process inside the sandbox keeps that environment: unset it.
        lines = ["set -u", "unset PWD OLDPWD"]
        lines += [
            f"echo 0 > {q(f)} || {{ printf %s {q('err:cannot join cgroup ' + f)} > {status}; "
            "exit 125; }"
            for f in procs_files
        ]
        lines.append("exec " + shlex.join(then))
        return ["/bin/sh", "-c", "\n".join(lines)]
    start: dict[str, object] = {
        "status_fd": status_fd,
        "procs": list(procs_files),
        "parent": owner_pid,
    }
    if mount_ns:
        start["mount_ns"] = True
    if subreaper:
        start["subreaper"] = True
    return [python, "-I", "-S", LAUNCHER, json.dumps(start)]


def spare_input(plan: LaunchPlan) -> bytes:
    """What a spare launcher reads on stdin to run ``plan``."""
    return json.dumps(plan.launcher).encode()
