"""The exact launch plan ``LocalSandbox`` spawns (no process started, no sandbox needed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import attrs
import pytest

from openmle import Job, Resources
from openmle.backends import _isolation as iso
from openmle.backends._plan import (
    CgroupLimits,
    LaunchPlan,
    PlanSettings,
    RunFacts,
    RunPaths,
    SandboxFacts,
    SpareShape,
    bwrap_spare,
    job_problem,
    launch_plan,
    paths_problem,
    spare_argv,
    spare_input,
    spare_shape,
)
from openmle.backends._seccomp import core_limit_program

INFO = iso.RuntimeInfo(executable="/opt/py/bin/python3", roots=("/opt/py",), bin_dir="/opt/py/bin")
LAYOUT = iso.HostLayout(
    top_level=(("/bin", "usr/bin"), ("/lib", "usr/lib")),
    present=frozenset({"/etc/passwd", "/proc/cpuinfo"}),
)
BOX = Path("/nonexistent/openmle-run-x/box")
PATHS = RunPaths(
    box=BOX,
    public=Path("/nonexistent/task/valid/public"),
    data=Path("/nonexistent/task/valid/public"),
    private=(Path("/nonexistent/task/private"),),
    tmp_mounted=True,
)
JOB = Job(
    code="print(1)",
    task="toy",
    resources=Resources(cpus=1.5, memory_mb=512),
    env={"SEED": "3"},
    timeout_s=60,
)
SETTINGS = PlanSettings(max_processes=64, max_file_mb=8)
MIB = 1024 * 1024
THREADS = {
    "OMP_NUM_THREADS": "2",
    "OPENBLAS_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
    "NUMEXPR_NUM_THREADS": "2",
}


def _sandbox(mode: str = "bwrap", **kw: object) -> SandboxFacts:
    args: dict[str, object] = {
        "mode": mode,
        "info": INFO,
        "layout": LAYOUT,
        "machine": "x86_64",
        "euid": 0,
        "bwrap": "/usr/bin/bwrap",
        "cgroups": True,
    }
    args.update(kw)
    return SandboxFacts(**args)  # type: ignore[arg-type]


def _spare(
    seccomp_fd: int | None,
    *,
    paths: RunPaths = PATHS,
    settings: PlanSettings = SETTINGS,
    private: tuple[Path, ...] | None = None,
    gpus: tuple[str, ...] = (),
    sandbox: SandboxFacts | None = None,
) -> tuple[SpareShape, list[str]]:
    """The bwrap spare of ``JOB`` over ``paths``' data (and ``private``, else the paths'
    own), run ``m1`` with status fd 3: its shape (never None in bwrap) and its argv."""
    shape = spare_shape(
        JOB,
        mode="bwrap",
        data=paths.data,
        private=paths.private if private is None else private,
        settings=settings,
        gpus=gpus,
    )
    assert shape is not None
    argv = bwrap_spare(
        shape=shape,
        paths=paths,
        settings=settings,
        sandbox=sandbox or _sandbox(),
        marker="m1",
        status_fd=3,
        seccomp_fd=seccomp_fd,
    )
    return shape, argv


def _run(**kw: object) -> RunFacts:
    args: dict[str, object] = {
        "marker": "m1",
        "status_fd": 7,
        "seccomp_fd": 9,
        "cgroup_procs": ("/cg/pids/r/cgroup.procs", "/cg/memory/r/cgroup.procs"),
        "rlimit_hard": {"RLIMIT_CPU": -1, "RLIMIT_FSIZE": -1, "RLIMIT_CORE": -1},
    }
    args.update(kw)
    return RunFacts(**args)  # type: ignore[arg-type]


def _bwrap_prefix(tmp_bind: list[str]) -> list[str]:
    """The namespaces, /proc, /dev and runtime binds every bwrap run starts with."""
    out = ["/usr/bin/bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    out += ["--unshare-cgroup-try", "--die-with-parent", "--cap-drop", "ALL"]
    out += ["--hostname", "sandbox", "--proc", "/proc"]
    for sub in ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi"):
        out += ["--ro-bind-try", f"/proc/{sub}", f"/proc/{sub}"]
    out += ["--dev", "/dev", "--size", str(512 * MIB), "--tmpfs", "/dev/shm", *tmp_bind]
    out += ["--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin"]
    out += ["--symlink", "usr/lib", "/lib"]
    for etc in iso.ETC_FILES:
        out += ["--ro-bind-try", etc, etc]
    out += ["--ro-bind", "/opt/py", "/opt/py"]
    out += ["--ro-bind", "/nonexistent/task/valid/public", "/data"]
    out += ["--ro-bind", f"{BOX}/program", "/program", "--bind", f"{BOX}/workspace", "/workspace"]
    return out


BWRAP_ENV = {
    "PATH": "/opt/py/bin:/usr/local/bin:/usr/bin:/bin",
    "HOME": "/workspace",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONNOUSERSITE": "1",
    "MPLBACKEND": "Agg",
    **THREADS,
    "SEED": "3",
    "DATA_DIR": "/data",
    "CUDA_VISIBLE_DEVICES": "",
    "OPENMLE_RUN_ID": "m1",
}


def _setenv(env: dict[str, str]) -> list[str]:
    out = ["--clearenv"]
    for k, v in env.items():
        out += ["--setenv", k, v]
    return out


def test_bwrap_plan_with_cgroup_is_exact() -> None:
    """The default path: the launcher waiting inside the sandbox made ahead sets the rlimits
    and execs python with the program's environment; no shell, no prlimit."""
    plan = launch_plan(JOB, paths=PATHS, settings=SETTINGS, sandbox=_sandbox(), run=_run())
    # CPU: 60 s x ceil(1.5) cores + 5; file size 8 MiB; no core files
    rlimits = (("RLIMIT_CPU", 125, 125), ("RLIMIT_FSIZE", 8 * MIB, 8 * MIB), ("RLIMIT_CORE", 1, 1))
    argv = ["/opt/py/bin/python3", "/program/main.py"]
    assert plan == LaunchPlan(
        mode="bwrap",
        argv=tuple(argv),
        cwd=BOX / "workspace",
        launch_env={
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "OPENMLE_RUN_ID": "m1",
        },
        program_env=BWRAP_ENV,
        pass_fds=(7, 9),
        rlimits=rlimits,
        cgroup=CgroupLimits(pids_max=64, memory_bytes=512 * MIB, cpus=None),
        launcher={
            "cwd": "/workspace",
            "rlimits": [list(r) for r in rlimits],
            "argv": argv,
            "env": BWRAP_ENV,
        },
        seccomp="bwrap",
        shm_bytes=512 * MIB,
        tmp_bytes=8 * MIB,
        quota_bytes=2048 * MIB,
        quota_files=100_000,
        quota_watchdog=False,
        timeout_s=60,
        kill_grace_s=2.0,
    )
    assert json.loads(spare_input(plan)) == plan.launcher


def test_bwrap_spare_is_exact() -> None:
    """The sandbox made ahead for a run's shape: namespaces, the shape's data and /dev/shm,
    the spare's own box, seccomp; inside it the launcher waits, with the fixed environment."""
    shape, argv = _spare(4)
    assert shape == SpareShape(
        data=PATHS.data, private=PATHS.private, gpu=False, shm_bytes=512 * MIB
    )
    launch = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OPENMLE_RUN_ID": "m1"}
    # the launcher sets the core limit, then refuses changing it (bubblewrap's filter allows it)
    core = core_limit_program("x86_64")
    inner = {"status_fd": 3, "procs": [], "parent": None, "core_filter": core}
    assert argv == [
        *_bwrap_prefix(["--bind", f"{BOX}/tmp", "/tmp"]),
        *["--seccomp", "4"],
        *_setenv(launch),
        *["--chdir", "/workspace", "--ro-bind", iso.LAUNCHER, "/run/openmle/launcher.py"],
        *["--", "/opt/py/bin/python3", "-I", "-S", "/run/openmle/launcher.py", json.dumps(inner)],
    ]
    assert (
        spare_shape(JOB, mode="landlock", data=PATHS.data, private=(), settings=SETTINGS, gpus=())
        is None
    )  # a Landlock spare fits every run


def test_bwrap_plan_without_quota_tmpfs_or_seccomp() -> None:
    """No quota tmpfs: a sized /tmp tmpfs and the watchdog; no seccomp fd: none passed."""
    settings = PlanSettings(max_processes=64, max_file_mb=8, cpu_quota=True)
    paths = RunPaths(
        box=BOX, public=PATHS.public, data=PATHS.data, private=PATHS.private, tmp_mounted=False
    )
    plan = launch_plan(
        JOB,
        paths=paths,
        settings=settings,
        sandbox=_sandbox(),
        run=_run(seccomp_fd=None, cgroup_procs=("/cg/pids/r/cgroup.procs",)),
    )
    assert plan.cgroup == CgroupLimits(pids_max=64, memory_bytes=512 * MIB, cpus=1.5)
    assert (plan.seccomp, plan.pass_fds) == (None, (7,))
    assert plan.quota_watchdog  # no quota tmpfs: the watchdog polls the workspace
    _, argv = _spare(None, paths=paths, settings=settings)
    prefix = _bwrap_prefix(["--size", str(8 * MIB), "--tmpfs", "/tmp"])
    assert argv[: len(prefix)] == prefix
    assert "--seccomp" not in argv


def test_spare_launcher_dies_with_its_owner_and_joins_first() -> None:
    """The launcher started ahead: isolated Python without site, its start configuration."""
    argv = spare_argv(
        python="/opt/py/bin/python3", procs_files=["/cg/a", "/cg/b"], status_fd=3, owner_pid=42
    )
    assert argv[:4] == ["/opt/py/bin/python3", "-I", "-S", iso.LAUNCHER]
    assert json.loads(argv[4]) == {"status_fd": 3, "procs": ["/cg/a", "/cg/b"], "parent": 42}
    ns = spare_argv(python="py", procs_files=[], status_fd=3, owner_pid=42, mount_ns=True)
    assert json.loads(ns[4]) == {"status_fd": 3, "procs": [], "parent": 42, "mount_ns": True}
    reaper = spare_argv(python="py", procs_files=[], status_fd=3, owner_pid=42, subreaper=True)
    assert json.loads(reaper[4]) == {"status_fd": 3, "procs": [], "parent": 42, "subreaper": True}
    # bwrap mode: a shell joins the cgroups (quoted paths) and execs the spare's bubblewrap
    then = ["/usr/bin/bwrap", "a b", "--", "py"]
    sh = spare_argv(python="py", procs_files=["/cg/it's"], status_fd=3, owner_pid=42, then=then)
    assert sh == [
        "/bin/sh",
        "-c",
        "set -u\n"
        "unset PWD OLDPWD\n"
        "echo 0 > '/cg/it'\"'\"'s' || { printf %s 'err:cannot join cgroup /cg/it'\"'\"'s' "
        "> /proc/self/fd/3; exit 125; }\n"
        "exec /usr/bin/bwrap 'a b' -- py",
    ]
    assert spare_argv(python="py", procs_files=[], status_fd=3, owner_pid=42, then=then) == then


def test_landlock_plan_without_cgroup_is_exact() -> None:
    """Weak mode, no cgroup, not root: per-process limits (clamped), rules, seccomp, env."""
    paths = RunPaths(
        box=BOX,
        public=PATHS.public,
        data=Path("/nonexistent/views/view0"),
        private=PATHS.private,
        tmp_mounted=True,
    )
    hard = {"RLIMIT_CPU": -1, "RLIMIT_FSIZE": -1, "RLIMIT_CORE": -1, "RLIMIT_AS": 1 << 30}
    plan = launch_plan(
        JOB,
        paths=paths,
        settings=SETTINGS,
        sandbox=_sandbox("landlock", euid=1000, landlock_abi=4, bwrap=None, cgroups=False),
        run=_run(seccomp_fd=None, cgroup_procs=(), user_processes=10, rlimit_hard=hard),
    )
    env = {
        **BWRAP_ENV,
        "HOME": f"{BOX}/workspace",
        "TMPDIR": f"{BOX}/tmp",
        "DATA_DIR": "/nonexistent/views/view0",
    }
    ro, rw, dev = iso.LL_READ_ONLY, iso.LL_ALL, iso.LL_DEVICE
    rules = [
        ["/usr", ro],
        ["/bin", ro],
        ["/lib", ro],
        ["/etc/passwd", ro],
        ["/opt/py", ro],
        ["/proc/cpuinfo", ro],
        ["/proc/self", ro],
        ["/sys", ro],
        *[[d, dev] for d in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")],
        ["/nonexistent/views/view0", ro],
        [f"{BOX}/program", ro],
        [f"{BOX}/workspace", rw],
        [f"{BOX}/tmp", rw],
    ]
    rlimits = (
        ("RLIMIT_CPU", 125, 125),
        ("RLIMIT_FSIZE", 8 * MIB, 8 * MIB),
        ("RLIMIT_CORE", 1, 1),
        ("RLIMIT_NPROC", 74, 74),  # 10 processes of this user + 64
        ("RLIMIT_DATA", 512 * MIB, 512 * MIB),
        ("RLIMIT_AS", 1 << 30, 1 << 30),  # wanted 2 x 512 MiB + 1 GiB, clamped to the hard limit
    )
    # metadata calls are no-ops for every user (a program owns its user's files)
    seccomp = iso.seccomp_program("x86_64", sockets="tcp", noop_metadata=True)
    assert seccomp is not None
    launcher = {
        "cwd": f"{BOX}/workspace",
        "rlimits": [list(r) for r in rlimits],
        "argv": ["/opt/py/bin/python3", f"{BOX}/program/main.py"],
        "env": env,
        "landlock": {"rules": rules, "shm": 512 * MIB, "shm_access": iso.LL_ALL & ~iso.LL_EXECUTE},
        "seccomp": [list(i) for i in seccomp],
    }
    assert plan.launcher == launcher
    assert plan.argv == ("/opt/py/bin/python3", f"{BOX}/program/main.py")
    assert plan.program_env == env
    assert plan.rlimits == rlimits
    assert (plan.cgroup, plan.seccomp, plan.pass_fds) == (None, "launcher", (7,))
    assert iso.LAUNCHER.endswith("/openmle/backends/_launcher.py")


def test_gpu_runs_drop_the_address_space_limit_and_see_the_devices() -> None:
    """With GPUs and no cgroup: no RLIMIT_AS (CUDA reserves terabytes); devices bound."""
    layout = iso.HostLayout(top_level=(), present=frozenset(), gpu_devices=("/dev/nvidia0",))
    plan = launch_plan(
        JOB,
        paths=PATHS,
        settings=SETTINGS,
        sandbox=_sandbox(layout=layout, cgroups=False),
        run=_run(cgroup_procs=(), gpus=("3",)),
    )
    assert [r[0] for r in plan.rlimits] == [
        "RLIMIT_CPU",
        "RLIMIT_FSIZE",
        "RLIMIT_CORE",
        "RLIMIT_DATA",
    ]
    assert plan.program_env["CUDA_VISIBLE_DEVICES"] == "3"
    assert plan.cgroup is None  # no cgroup to join
    shape, argv = _spare(None, private=(), gpus=("3",), sandbox=_sandbox(layout=layout))
    assert shape.gpu
    i = argv.index("/dev/nvidia0")
    assert argv[i - 1 : i + 2] == ["--dev-bind", "/dev/nvidia0", "/dev/nvidia0"]


def test_the_plan_is_a_pure_function() -> None:
    """Same inputs, same plan; the job's environment never reaches the launch chain."""
    a = launch_plan(JOB, paths=PATHS, settings=SETTINGS, sandbox=_sandbox(), run=_run())
    b = launch_plan(JOB, paths=PATHS, settings=SETTINGS, sandbox=_sandbox(), run=_run())
    assert a == b
    assert "SEED" not in a.launch_env


def test_refusals_name_the_field() -> None:
    """A forged job env, a public dir over the answers, answers under a Landlock-readable root."""
    forged = Job(code="x", task="toy")
    object.__setattr__(forged, "env", {"LD_PRELOAD": "/tmp/x.so"})
    assert (job_problem(forged) or "").startswith("job.env['LD_PRELOAD'] is refused")
    assert job_problem(JOB) is None

    def problem(private: str, mode: Literal["bwrap", "landlock"]) -> str | None:
        return paths_problem(
            task_name="t",
            public=Path("/nonexistent/t"),
            private=[Path(private)],
            mode=mode,
            info=INFO,
            extra_ro=(),
        )

    over = problem("/nonexistent/t/a", "bwrap")
    assert over is not None and "overlaps private path /nonexistent/t/a" in over
    inside = problem("/opt/py/ans", "landlock")
    assert inside is not None and "lies inside /opt/py" in inside
    assert problem("/opt/py/ans", "bwrap") is None  # bwrap hides it under a tmpfs instead


@pytest.mark.parametrize("euid", [0, 1000])
def test_metadata_calls_are_noops_for_every_user(euid: int) -> None:
    """The weak mode's seccomp filter turns chmod/chown into no-ops, as root and as any other
    user (who owns the service user's files: ``chmod 777 ~/.ssh`` was allowed)."""
    plan = launch_plan(
        JOB,
        paths=PATHS,
        settings=SETTINGS,
        sandbox=_sandbox("landlock", euid=euid, landlock_abi=6, bwrap=None),
        run=_run(seccomp_fd=None),
    )
    assert plan.launcher is not None
    want = iso.seccomp_program("x86_64", sockets="tcp", noop_metadata=True)
    assert want is not None
    assert plan.launcher["seccomp"] == [list(i) for i in want]


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
def test_a_task_with_outputs_is_told_output_dir_in_its_workspace(mode: str) -> None:
    """``RunFacts.outputs`` (the task's ``outputs``): ``OUTPUT_DIR`` is the workspace's
    ``output`` as the program sees it (bwrap ``/workspace/output``, as NatureBench's harness),
    over the job's own value; without it the job's environment is as it was.
    """
    job = attrs.evolve(JOB, env={"OUTPUT_DIR": "/etc"})
    facts = _sandbox(mode) if mode == "bwrap" else _sandbox(mode, landlock_abi=4, bwrap=None)
    plan = launch_plan(
        job, paths=PATHS, settings=SETTINGS, sandbox=facts, run=_run(outputs="output")
    )
    want = "/workspace/output" if mode == "bwrap" else f"{BOX}/workspace/output"
    assert plan.program_env["OUTPUT_DIR"] == want
    plain = launch_plan(JOB, paths=PATHS, settings=SETTINGS, sandbox=facts, run=_run())
    assert "OUTPUT_DIR" not in plain.program_env


@pytest.mark.parametrize(("abi", "truncate"), [(1, False), (2, False), (3, True), (6, True)])
def test_truncate_by_path_is_refused_below_landlock_abi_3(abi: int, truncate: bool) -> None:
    """Landlock checks truncate(2) from ABI 3: below it the seccomp filter refuses the call
    (by path; ftruncate on an open descriptor is checked when the file is opened)."""
    plan = launch_plan(
        JOB,
        paths=PATHS,
        settings=SETTINGS,
        sandbox=_sandbox("landlock", euid=0, landlock_abi=abi, bwrap=None),
        run=_run(seccomp_fd=None),
    )
    assert plan.launcher is not None
    want = iso.seccomp_program(
        "x86_64", sockets="tcp" if abi >= 4 else "none", noop_metadata=True, truncate=truncate
    )
    assert want is not None
    assert plan.launcher["seccomp"] == [list(i) for i in want]
