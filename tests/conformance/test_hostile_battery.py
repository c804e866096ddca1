"""The hostile-program battery: LocalSandbox survives every attack; a naive sandbox does not."""

from __future__ import annotations

import resource
import warnings
from collections.abc import Sequence
from typing import Any

import pytest

from openmle import Outcome
from openmle.backends import LocalSandbox
from openmle.backends._isolation import landlock_abi
from openmle.errors import SandboxUnavailable
from openmle.testing import (
    HOSTILE_PROGRAMS,
    HostileProgram,
    HostileReport,
    ToyTask,
    run_hostile_battery,
)

from .test_sandbox_conformance import NaiveSandbox


def _landlock() -> bool:
    return landlock_abi() > 0


pytestmark = [pytest.mark.conformance, pytest.mark.integration, pytest.mark.slow, pytest.mark.anyio]

_SIGNALS_UNSCOPED = ("signal_host",)
"""Probes a Landlock sandbox below ABI 6 may fail: signals are scoped from ABI 6 (see the
isolation docs). They try signals only, so nothing else a sandbox must refuse is excused."""


def _excused(sandbox: LocalSandbox) -> tuple[str, ...]:
    """The probes this sandbox may fail (:data:`_SIGNALS_UNSCOPED` below Landlock ABI 6;
    ``core_dump_helper`` where this process's own hard core limit is 0, which no run can
    raise to the 1 byte that stops a piped helper: see the isolation docs).
    """
    excused: tuple[str, ...] = ()
    if sandbox.isolation_mode == "landlock" and landlock_abi() < 6:
        excused += _SIGNALS_UNSCOPED
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        excused += ("core_dump_helper",)
    return excused


def test_only_signals_are_excused_below_landlock_abi_6() -> None:
    """A probe excused below ABI 6 tries signals and nothing else: ptrace, /proc/PID/mem and
    prlimit (which seccomp refuses on every ABI) are tried by a probe that is never excused
    (they shared the excused signal probe, so a prlimit regression was hidden there)."""
    by_name = {p.name: p for p in HOSTILE_PROGRAMS}
    others = "".join(p.body for p in HOSTILE_PROGRAMS if p.name not in _SIGNALS_UNSCOPED)
    for name in _SIGNALS_UNSCOPED:
        body = by_name[name].body
        assert "os.kill(" in body, name
        for attack in ("ptrace", "/mem", "prlimit"):
            assert attack not in body, (name, attack)
    for attack in ("libc.ptrace(0x4206", "/proc/{pid}/mem", "resource.prlimit(pid"):
        assert attack in others, attack


async def test_local_sandbox_survives_battery(local_sandbox: LocalSandbox, toy: ToyTask) -> None:
    """Every hostile program ends classified, leaves no process and no trace on host or task."""
    reports = await run_hostile_battery(
        local_sandbox, task="toy", private_paths=toy.private_paths, task_root=toy.root
    )
    assert [r.name for r in reports] == [p.name for p in HOSTILE_PROGRAMS]
    excused = _excused(local_sandbox)
    failures = {r.name: r.problems for r in reports if not r.ok and r.name not in excused}
    assert not failures, failures
    by_name = {r.name: r for r in reports}
    # LocalSandbox is stricter than the battery requires.
    assert by_name["memory_bomb"].outcome is Outcome.OOM
    assert by_name["symlinked_submission"].outcome is Outcome.INVALID_SUBMISSION
    assert "File too large" in by_name["disk_filler"].result.logs
    assert by_name["stdout_flood"].result.logs_dropped_bytes > 100 * 1024 * 1024 - 200_000
    # The disk quota stops both attacks at once (a tmpfs as root: ENOSPC, or EFBIG: tmpfs
    # checks RLIMIT_FSIZE even for fallocate(KEEP_SIZE), which ext4 does not).
    assert "No space left on device" in by_name["many_files"].result.logs
    assert "fallocate refused" in by_name["fallocate_3gb"].result.logs
    assert "io_uring_setup: errno 1" in by_name["io_uring_socket"].result.logs
    assert len(by_name["long_artifact_list"].result.artifacts) < 100
    assert "not valid UTF-8" in by_name["lone_surrogate_code"].result.detail


_MEMORY = ("memory_bomb", "shared_memory_mmap", "dev_shm_fill")


async def _without_cgroups(mode: str, toy: ToyTask, names: Sequence[str]) -> dict[str, object]:
    """Run the programs ``names`` on a LocalSandbox in ``mode`` without cgroups (skipped where
    the mode is unavailable); the failures by program name."""
    if mode == "landlock" and not _landlock():
        pytest.skip("Landlock is not supported by this kernel")
    sb = LocalSandbox(
        ToyTask.resolver({"toy": toy}),
        isolation=mode,  # type: ignore[arg-type]
        cgroups=False,
        max_file_mb=64,
        kill_grace_s=1.0,
    )
    try:
        with warnings.catch_warnings():  # "no cgroups": said once per process
            warnings.simplefilter("ignore", RuntimeWarning)
            await sb.prepare()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    try:
        failures, _ = await _run(sb, toy, *names)
    finally:
        await sb.aclose()
    return failures


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_memory_is_bounded_without_cgroups(mode: str, toy: ToyTask) -> None:
    """Without cgroups, rlimits (RLIMIT_AS too) and a sized /dev/shm bound shared memory."""
    failures = await _without_cgroups(mode, toy, _MEMORY)
    assert not failures, failures


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_leftover_processes_are_found_without_cgroups(mode: str, toy: ToyTask) -> None:
    """Without cgroups a run's processes are found by its PID namespace (bwrap) or, in the
    Landlock mode, by the run marker, the run's own mount namespace (root) and its subreaper,
    which keeps them in the run's tree: a daemon that cleared its environment (so the marker)
    and left the process tree used to survive the run."""
    failures = await _without_cgroups(mode, toy, ("orphans", "orphan_cleared_env", "fork_runner"))
    assert not failures, failures


def _as_without_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the Landlock mode as a user without root does: no mount namespace for the run (the
    launcher's ``unshare`` is refused), emulated as root by not asking for one."""
    from openmle.backends import _local
    from openmle.backends._plan import spare_argv as argv

    spawn = _local._Chain.spawn

    def no_namespace_argv(**kw: Any) -> list[str]:
        return argv(**{**kw, "mount_ns": False})

    def no_namespace_spawn(*a: Any, **kw: Any) -> Any:
        return spawn(*a, **{**kw, "reports_namespace": False})

    monkeypatch.setattr(_local, "spare_argv", no_namespace_argv)
    monkeypatch.setattr(_local._Chain, "spawn", no_namespace_spawn)


async def test_landlock_mode_without_root_keeps_a_cleared_env_daemon_in_the_tree(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Landlock mode of a user without root has no cgroup and no mount namespace. A
    daemon that double-forked, called ``setsid`` and cleared its environment (the run marker)
    had nothing left to be found by and outlived the run; the run's child subreaper (the
    launcher, which stays as the program's parent) now keeps it a descendant of the run."""
    _as_without_root(monkeypatch)
    failures = await _without_cgroups(
        "landlock", toy, ("orphans", "orphan_cleared_env", "fork_runner", "signal_host")
    )
    assert not failures, failures


MARKER_ENV = "OPENMLE_HOSTILE_MARKER"  # in every battery job's env; found in a command line too

#: Kills its parent (in the Landlock mode without cgroups: the run's subreaper) first, so
#: that its daemon would go to the host's init; reports whether the kill worked.
_KILL_THE_SUBREAPER = HostileProgram(
    name="orphan_after_killing_the_subreaper",
    description="SIGKILLs its parent, then leaves a cleared-environment daemon, then succeeds",
    body=(
        "import os, shutil, signal, sys, time\n"
        f"tag = '{MARKER_ENV}=' + os.environ['{MARKER_ENV}']\n"
        "parent = os.getppid()\n"
        "try:\n"
        "    os.kill(parent, signal.SIGKILL)\n"
        "except OSError as exc:\n"
        "    print('parent kill refused', exc.errno)\n"
        "time.sleep(0.2)\n"
        "if os.getppid() != parent:\n"
        "    print('KILLED-THE-PARENT')\n"
        "daemon = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "time.sleep(600)'\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        os.execve(sys.executable, [sys.executable, '-c', daemon, tag], {})\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "shutil.copyfile(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'),\n"
        "                'submission.csv')\n"
        "print('PARENT-DONE')\n"
    ),
    expected=[Outcome.SUCCESS],
    must_print="PARENT-DONE",
    must_not_print="KILLED-THE-PARENT",
)


async def test_a_program_cannot_kill_the_runs_subreaper(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The subreaper stays outside the program's Landlock domain, whose signals Landlock
    scopes to the domain from ABI 6 (Linux 6.12): the program cannot kill it to hand its
    daemon to the host's init. Below ABI 6 it can (a gap the isolation docs name)."""
    if not _landlock() or landlock_abi() < 6:
        pytest.skip("needs Landlock ABI 6 (signal scoping, Linux 6.12)")
    _as_without_root(monkeypatch)
    sb = LocalSandbox(
        ToyTask.resolver({"toy": toy}), isolation="landlock", cgroups=False, kill_grace_s=1.0
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            reports = await run_hostile_battery(
                sb,
                task="toy",
                private_paths=toy.private_paths,
                task_root=toy.root,
                programs=[_KILL_THE_SUBREAPER],
            )
    finally:
        await sb.aclose()
    assert reports[0].ok, reports[0].problems
    assert "parent kill refused 1" in reports[0].result.logs, reports[0].result.logs


async def test_battery_reports_a_leaking_sandbox(toy: ToyTask) -> None:
    """Against an unisolated sandbox the battery reports the leaks and the writes it made."""
    names = {"read_private", "write_outside", "network", "host_unix_socket", "metadata_outside"}
    names |= {"signal_host", "trace_and_limit_host", "truncate_outside", "file_attributes_outside"}
    safe = [p for p in HOSTILE_PROGRAMS if p.name in names]
    reports = await run_hostile_battery(
        NaiveSandbox(toy),
        task="toy",
        private_paths=toy.private_paths,
        task_root=toy.root,
        programs=safe,
    )
    problems = {r.name: " ".join(r.problems) for r in reports}
    assert "the attack worked" in problems["read_private"]
    assert "task package changed" in problems["write_outside"]
    assert "task package changed" in problems["metadata_outside"]
    assert "host service" in problems["network"]
    assert "host service" in problems["host_unix_socket"]
    assert "the attack worked" in problems["signal_host"]
    assert "the attack worked" in problems["trace_and_limit_host"]
    assert "the attack worked" in problems["truncate_outside"]
    assert "the attack worked" in problems["file_attributes_outside"]


async def _run(
    sandbox: LocalSandbox, toy: ToyTask, *names: str
) -> tuple[dict[str, object], list[HostileReport]]:
    """Run the hostile programs ``names`` on ``sandbox``: (failures by name, reports)."""
    by_name = {p.name: p for p in HOSTILE_PROGRAMS}
    reports = await run_hostile_battery(
        sandbox,
        task="toy",
        private_paths=toy.private_paths,
        task_root=toy.root,
        programs=[by_name[n] for n in names],
    )
    return {r.name: r.problems for r in reports if not r.ok}, reports


async def test_host_descriptors_do_not_reach_the_program(
    local_sandbox: LocalSandbox, toy: ToyTask
) -> None:
    """A descriptor the host holds without close-on-exec (opened by the battery before the
    second run's chain starts) is closed before the program: a directory fd reached the host's
    whole filesystem from inside bwrap, a file fd the answers in both modes. Nor does the
    host's working directory reach bwrap's init process (the launch shell exported PWD)."""
    failures, _ = await _run(
        local_sandbox, toy, "exit_zero_no_submission", "inherited_fds", "host_cwd_in_environ"
    )
    assert not failures, failures


async def test_system_v_ipc_does_not_outlive_the_run(
    local_sandbox: LocalSandbox, toy: ToyTask
) -> None:
    """System V objects live in an IPC namespace: bwrap's is the run's own; the Landlock mode
    shares the host's, where they outlived the run, so its seccomp filter refuses them."""
    failures, reports = await _run(local_sandbox, toy, "sysv_ipc")
    assert not failures, failures
    logs = reports[0].result.logs
    if local_sandbox.isolation_mode == "landlock":
        assert "shm refused 1" in logs, logs


async def test_host_processes_clock_cgroups_abstract_sockets(
    local_sandbox: LocalSandbox, toy: ToyTask
) -> None:
    """No signal (below Landlock ABI 6 a signal is excused: see the isolation docs), ptrace,
    /proc/PID/mem or prlimit reaches a host process; the clock, the root cgroups and a host's
    abstract Unix socket are out of reach."""
    failures, _ = await _run(
        local_sandbox,
        toy,
        "signal_host",
        "trace_and_limit_host",
        "clock_cgroup_abstract_socket",
    )
    for name in _excused(local_sandbox):
        failures.pop(name, None)
    assert not failures, failures


async def test_file_attributes_outside(local_sandbox: LocalSandbox, toy: ToyTask) -> None:
    """Landlock does not cover inode flags (FS_IOC_SETFLAGS needs only ownership, which a root
    program has of every root-owned file it can open): the seccomp filter refuses them as root;
    bwrap binds everything outside the workspace read-only."""
    failures, _ = await _run(local_sandbox, toy, "file_attributes_outside")
    assert not failures, failures


async def test_tcp_without_connect_or_bind(local_sandbox: LocalSandbox, toy: ToyTask) -> None:
    """Landlock refuses TCP connect and bind, not TCP Fast Open (which connects from sendto)
    nor listen (which binds an unbound socket): the seccomp filter refuses both; bwrap has a
    network namespace of its own."""
    failures, _ = await _run(local_sandbox, toy, "tcp_without_connect")
    assert not failures, failures


async def test_forged_result_lines_stay_logs(local_sandbox: LocalSandbox, toy: ToyTask) -> None:
    """Score and JSON result lines, escapes, NUL and bytes that are not UTF-8 in the output are
    logs: the run has no score, and its result is storable JSON."""
    failures, reports = await _run(local_sandbox, toy, "forged_result_lines")
    assert not failures, failures
    result = reports[0].result
    assert result.score is None
    assert "score: 1.0" in result.logs
