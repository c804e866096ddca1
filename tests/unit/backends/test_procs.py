"""Killing listed processes: never one that got a listed pid after the list was read.

The reuse tests force a real pid reuse (as root, through ``/proc/sys/kernel/ns_last_pid``,
under a lock file so no two tests race on it): a member is listed, killed and reaped, and an
innocent process is started at its pid; the kill path then runs with the stale list. They
are skipped where ``ns_last_pid`` is not writable.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import anyio
import pytest
from attrs import define

from openmle.backends import _cgroup, _local, _procs
from openmle.backends import _isolation as iso
from openmle.backends._plan import RUN_ID_ENV

_NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
_LOCK = Path(tempfile.gettempdir()) / "openmle-tests-ns_last_pid.lock"
_SLEEP = [sys.executable, "-c", "import time; time.sleep(60)"]

needs_pid_control = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not os.access(_NS_LAST_PID, os.W_OK),
    reason="needs a writable /proc/sys/kernel/ns_last_pid (root, Linux)",
)


@contextlib.contextmanager
def _pid_lock() -> Iterator[None]:
    """Held while a test sets ``ns_last_pid`` and forks (tests in other workers wait)."""
    with _LOCK.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _innocent_at(pid: int) -> subprocess.Popen[bytes] | None:
    """An unrelated sleeping process started as ``pid``, or None (the host's own forks took
    the pid first)."""
    _NS_LAST_PID.write_text(str(pid - 1))
    proc = subprocess.Popen(_SLEEP, env={"PATH": os.environ.get("PATH", "")})
    if proc.pid == pid:
        return proc
    proc.kill()
    proc.wait()
    return None


def _reused(
    start_member: Callable[[], subprocess.Popen[bytes]],
    listing: Callable[[int], object],
) -> tuple[object, subprocess.Popen[bytes]]:
    """``listing(member's pid)`` read while the member lives; then the member killed and
    reaped and an innocent process started at its pid. Retried where the host took the pid."""
    for _ in range(30):
        with _pid_lock():
            member = start_member()
            listed = listing(member.pid)
            with member:
                member.kill()
            innocent = _innocent_at(member.pid)
        if innocent is not None:
            return listed, innocent
    pytest.skip("the host's own processes took the freed pid first, every time")


def _environ(pid: int) -> list[bytes]:
    """``pid``'s environment entries (none where it cannot be read)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def _survives(proc: subprocess.Popen[bytes]) -> bool:
    """Whether ``proc`` is still running a moment later (a SIGKILL lands at once)."""
    try:
        proc.wait(timeout=0.3)
    except subprocess.TimeoutExpired:
        return True
    return False


@needs_pid_control
def test_cgroup_kill_spares_a_process_that_took_a_listed_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cgroup member listed, then reaped, its pid taken by a process outside the cgroup:
    killing with that list spares it (it was SIGKILLed: the list was killed by pid)."""
    cg = iso.Cgroup.create(pids_max=16, memory_bytes=256 << 20, cpus=None)
    if cg is None:
        pytest.skip("no writable cgroups here")

    def member() -> subprocess.Popen[bytes]:
        joins = "; ".join(f"echo 0 > {f}" for f in cg.procs_files)
        proc = subprocess.Popen(
            ["/bin/sh", "-c", f"{joins} || exit 3; echo joined; exec sleep 60"],
            stdout=subprocess.PIPE,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"joined\n"
        return proc

    def listing(pid: int) -> set[int]:
        members = cg.pids()
        assert members == {pid}
        return members

    try:
        stale, innocent = _reused(member, listing)
        assert isinstance(stale, set)
        with innocent:
            reads = iter([stale])  # the list as read before the member went
            real = _cgroup.Cgroup.pids
            monkeypatch.setattr(
                _cgroup.Cgroup, "pids", lambda self: next(reads, None) or real(self)
            )
            cg.kill()
            alive = _survives(innocent)
            innocent.kill()
        assert alive, "a process outside the cgroup was killed through a stale member list"
    finally:
        monkeypatch.undo()
        cg.remove()


@needs_pid_control
def test_sweep_orphans_spares_a_process_that_took_a_listed_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process carrying a dead owner's marker, found by the ``/proc`` scan, then reaped,
    its pid taken by a process without the marker: the sweep spares it (it was SIGKILLed:
    the scan's pids were killed as they were)."""
    key = "OPENMLE_TEST_PIDKILL"
    marker = f"{os.getpid()}.1.orphan"  # start time 1: an owner that is gone

    def member() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(_SLEEP, env={**os.environ, key: marker})
        for _ in range(1000):  # until its environment is the program's, not the fork's
            if f"{key}={marker}".encode() in _environ(proc.pid):
                break
        return proc

    def listing(pid: int) -> list[tuple[int, list[bytes]]]:
        return [(pid, _environ(pid))]

    stale, innocent = _reused(member, listing)
    assert isinstance(stale, list)
    with innocent:
        scans = iter([stale])  # the scan as read before the member went
        real = _procs._environments
        monkeypatch.setattr(_procs, "_environments", lambda: next(scans, None) or real())
        killed = iso.sweep_orphans(key)
        alive = _survives(innocent)
        innocent.kill()
    assert alive, "a process without the marker was killed through a stale /proc scan"
    assert innocent.pid not in killed


@needs_pid_control
def test_kill_pids_spares_a_process_that_took_a_listed_pid() -> None:
    """The helper itself: a pid listed by marker, reaped and reused by a process without it,
    is pinned, re-checked and skipped; a process that still matches is killed."""
    key, value = "OPENMLE_TEST_PIDKILL", "m2"

    def member() -> subprocess.Popen[bytes]:
        return subprocess.Popen(_SLEEP, env={**os.environ, key: value})

    stale, innocent = _reused(member, lambda pid: {pid})
    assert isinstance(stale, set)
    with innocent, member() as other:
        for _ in range(1000):
            if iso.live_pids_with_env(key, value) == {other.pid}:
                break

        def still(pids: set[int]) -> set[int]:
            return _procs.matching(pids, env=(key, value))

        sent = iso.kill_pids(stale | {other.pid}, signal.SIGKILL, still)
        assert sent == {other.pid}
        assert other.wait(timeout=30) == -signal.SIGKILL
        alive = _survives(innocent)
        innocent.kill()
    assert alive


def test_kill_pids_signals_only_what_still_confirms() -> None:
    """Only the pids ``still`` returns are signalled, each once; gone pids, this process and
    pid 1 never reach ``still``."""
    with subprocess.Popen(_SLEEP) as a, subprocess.Popen(_SLEEP) as b:
        gone = subprocess.Popen(_SLEEP)
        gone.kill()
        gone.wait()
        seen: list[set[int]] = []

        def still(pids: set[int]) -> set[int]:
            seen.append(pids)
            return {a.pid, 999_999_999}

        candidates = [a.pid, a.pid, b.pid, gone.pid, os.getpid(), 1]
        assert iso.kill_pids(candidates, signal.SIGKILL, still) == {a.pid}
        assert seen == [{a.pid, b.pid}]
        assert a.wait(timeout=30) == -signal.SIGKILL
        assert b.poll() is None
        b.kill()
    assert iso.kill_pids([], signal.SIGKILL, lambda pids: pytest.fail("called")) == set()


def test_matching_rechecks_each_criterion_per_pid() -> None:
    """``matching`` finds the same processes the scans do: descendants by their parent
    chain, carriers of a marker, members of a mount namespace."""
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], env={**os.environ, "OPENMLE_M": "x"}
    ) as parent:
        try:
            for _ in range(2000):
                below = iso.descendants(parent.pid)
                if below and all(_environ(p) for p in below):
                    break
            (child,) = below
            pids = {parent.pid, child}
            assert _procs.matching(pids, root=parent.pid) == {child}
            assert _procs.matching(pids, root=os.getpid()) == pids
            assert _procs.matching(pids, env=("OPENMLE_M", "x")) == pids
            assert _procs.matching(pids, env=("OPENMLE_M", "y")) == set()
            st = os.stat(f"/proc/{child}/ns/mnt")
            assert _procs.matching(pids, namespace=(st.st_dev, st.st_ino)) == pids
            assert _procs.matching(pids, namespace=(st.st_dev, st.st_ino + 1)) == set()
            assert _procs.matching(pids) == set()
        finally:
            iso.kill_pids(
                iso.descendants(parent.pid),
                signal.SIGKILL,
                lambda p: _procs.matching(p, root=parent.pid),
            )
            parent.kill()


@define
class _Exited:
    """What ``LocalSandbox._kill_tree`` uses of a run's chain, for a main process that has
    exited (its pid still held: a real process here, in its own session)."""

    pid: int
    returncode: int | None = 0
    namespace: tuple[int, int] | None = None

    def kill(self, sig: int) -> None:
        raise AssertionError("the exited main process is not signalled")

    def kill_group(self, sig: int) -> None:
        pass


@needs_pid_control
def test_kill_tree_spares_a_process_that_took_a_listed_pid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's leftover (Landlock mode, no cgroup: found by its marker) listed, then reaped,
    its pid taken by a process without the marker: the run's end spares it."""
    marker = "pidkill-run"

    def member() -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(_SLEEP, env={**os.environ, RUN_ID_ENV: marker})
        for _ in range(1000):
            if f"{RUN_ID_ENV}={marker}".encode() in _environ(proc.pid):
                break
        return proc

    stale, innocent = _reused(member, lambda pid: {pid})
    assert isinstance(stale, set)
    with innocent, subprocess.Popen(_SLEEP, start_new_session=True) as main:
        lists = iter([stale])  # the run's processes as listed before the member went
        real = _local._run_pids
        monkeypatch.setattr(_local, "_run_pids", lambda *a, **k: next(lists, None) or real(*a, **k))
        sandbox = cast(_local.LocalSandbox, SimpleNamespace(kill_grace_s=1.0))
        chain = cast(_local._Chain, _Exited(pid=main.pid))
        anyio.run(
            lambda: _local.LocalSandbox._kill_tree(
                sandbox, chain, None, marker, graceful=False, bwrap=False
            )
        )
        alive = _survives(innocent)
        innocent.kill()
        main.kill()
    assert alive, "a process without the run's marker was killed through a stale list"


def _program_in(workdir: Path, *, marker: bool) -> subprocess.Popen[bytes]:
    """A sleeping process working in ``workdir``, with the run marker or without."""
    env = {"PATH": os.environ.get("PATH", "")} | ({RUN_ID_ENV: "1.2.run"} if marker else {})
    proc = subprocess.Popen(_SLEEP, cwd=workdir, env=env)
    for _ in range(1000):  # until its environment is the program's, not the fork's
        if not marker or f"{RUN_ID_ENV}=1.2.run".encode() in _environ(proc.pid):
            break
    return proc


def test_kill_stale_programs_kills_the_marked_programs_in_the_work_dir(tmp_path: Path) -> None:
    """A job service's start-up sweep: marked programs working inside its work directory die;
    one without the marker, or working elsewhere, is spared."""
    from openmle.backends import kill_stale_programs

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    (work / "openmle-run-1" / "workspace").mkdir(parents=True)
    elsewhere.mkdir()
    left = _program_in(work / "openmle-run-1" / "workspace", marker=True)
    unmarked = _program_in(work, marker=False)
    other = _program_in(elsewhere, marker=True)
    with left, unmarked, other:
        assert kill_stale_programs(work) == 1
        assert left.wait(timeout=10) == -signal.SIGKILL
        assert _survives(unmarked) and _survives(other)
        unmarked.kill()
        other.kill()


@needs_pid_control
def test_kill_stale_programs_spares_a_process_that_took_a_found_pid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the scan, then reaped, its pid taken by a process without the marker: the
    sweep spares that one (the service's copy of this sweep killed by the scanned pid)."""
    from openmle.backends import kill_stale_programs

    program = _program_in(tmp_path, marker=True)
    innocents: list[subprocess.Popen[bytes]] = []
    real = _procs.kill_pids

    def reuse_then_kill(
        pids: set[int], sig: int, still: Callable[[set[int]], set[int]]
    ) -> set[int]:
        assert pids == {program.pid}
        with program:  # the scan's pid goes, and an unmarked process takes it
            program.kill()
        with _pid_lock():
            innocent = _innocent_at(program.pid)
        if innocent is None:
            pytest.skip("the host's own processes took the freed pid first")
        innocents.append(innocent)
        return real(pids, sig, still)

    monkeypatch.setattr(_procs, "kill_pids", reuse_then_kill)
    assert kill_stale_programs(tmp_path) == 0
    [innocent] = innocents
    with innocent:
        alive = _survives(innocent)
        innocent.kill()
    assert alive and innocent.pid == program.pid
