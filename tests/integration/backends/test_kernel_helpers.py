"""Nothing a program does makes the kernel run a helper on the host: the core-dump helper of
a piped ``core_pattern`` (a crash), or modprobe (a socket family or protocol, or a terminal
line discipline, whose module is not loaded); nor does it reach the scheduling of the host's
processes (``setpriority(PRIO_USER)`` in the Landlock mode, which shares the host's PIDs).

Where ``kernel.core_pattern`` is a pipe (``|/usr/lib/systemd/systemd-coredump ...``, Ubuntu's
apport), the kernel runs that helper as root, in the host's namespaces and outside the run's
cgroup, for every crash, and ``RLIMIT_CORE = 0`` does not stop it: only a limit of exactly 1
byte does. A run's limit is 1 byte and its program cannot change it (seccomp), so neither an
accidental crash (an abort, SIGSEGV, SIGXCPU at the CPU limit) nor one after lowering the limit
reaches the host. The grading process gets the same limit
(``tests/unit/gym/test_grader_limits.py``).

Module loading: creating a socket of a family or protocol the kernel does not have loaded
makes it run ``modprobe`` as root on the host, whatever the caller may do otherwise (TIPC,
RDS, SCTP, DCCP, AF_ALG: the usual first step of a kernel exploit). Whether a module would
load depends on the host's kernel, so the tests check what decides it: such calls fail with
``EPERM`` (seccomp) before the kernel looks for the family, in both modes, while the sockets
programs use still work.

The test switches this host's ``core_pattern`` to a helper of its own for a few seconds (root
only, under a lock; the old value is put back), so it runs only where that is allowed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio
import pytest
from tests._sandboxes import prepared_local
from tests._socket_families import LOADING, SOCKETS_PROGRAM, USUAL, results

from openmle import Job, Outcome
from openmle.testing import ToyTask

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:LocalSandbox is using its weaker:RuntimeWarning"),
]

CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")


@contextlib.contextmanager
def piped_core_pattern(tmp_path: Path) -> Iterator[Path]:
    """This host's core dumps piped to a helper that logs each crash's ``comm`` (``%e``);
    the log's path. Skips where the pattern cannot be changed (not root, a read-only
    ``/proc/sys`` as in most containers).
    """
    if os.geteuid() != 0 or not os.access(CORE_PATTERN, os.W_OK):
        pytest.skip("changing kernel.core_pattern needs root and a writable /proc/sys")
    log = tmp_path / "cores.log"
    helper = tmp_path / "core-helper.sh"
    helper.write_text(f'#!/bin/sh\necho "$1" >> {log}\ncat > /dev/null\n')
    helper.chmod(0o755)
    with open("/tmp/openmle-test-core-pattern.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        old = CORE_PATTERN.read_text()
        try:
            CORE_PATTERN.write_text(f"|{helper} %e")
        except OSError as exc:
            pytest.skip(f"kernel.core_pattern is not writable here ({exc})")
        try:
            yield log
        finally:
            CORE_PATTERN.write_text(old)


def _crashes(tag: str) -> str:
    """A program named ``tag`` (its ``comm``) that tries to lower its core limit to 0, then
    crashes a child and itself with ``abort()``.
    """
    return f"""
import ctypes, os, resource
ctypes.CDLL(None).prctl(15, {tag.encode()!r}, 0, 0, 0)  # PR_SET_NAME: the helper's %e
hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
try:
    resource.setrlimit(resource.RLIMIT_CORE, (0, hard))
    print("lowered", flush=True)
except (OSError, ValueError) as exc:
    print("refused", exc, flush=True)
print("core limit", resource.getrlimit(resource.RLIMIT_CORE), flush=True)
pid = os.fork()
if pid == 0:
    os.abort()
_, status = os.waitpid(pid, 0)
print("child dumped", os.WCOREDUMP(status), flush=True)
os.abort()
"""


def _helper_saw(log: Path, tag: str) -> list[str]:
    return [ln for ln in log.read_text().split() if ln == tag] if log.exists() else []


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_a_crashing_program_never_runs_the_hosts_core_helper(
    tmp_path: Path, mode: Literal["bwrap", "landlock"]
) -> None:
    if resource.getrlimit(resource.RLIMIT_CORE)[1] == 0:
        pytest.skip("this process's hard core limit is 0: no run can have the 1 byte")
    tag = f"omc{uuid.uuid4().hex[:10]}"
    with piped_core_pattern(tmp_path) as log:
        # the helper is live: a crash outside the sandbox reaches it (RLIMIT_CORE 0 included)
        outside = await anyio.run_process([sys.executable, "-c", _crashes(tag)], check=False)
        assert b"lowered" in outside.stdout and b"child dumped True" in outside.stdout
        assert len(_helper_saw(log, tag)) == 2
        log.unlink()
        async with prepared_local(
            ToyTask.create(tmp_path / "toy"), mode, max_file_mb=64, memory_mb=1024
        ) as sandbox:
            result = await sandbox.run(Job(code=_crashes(tag), task="toy", timeout_s=60))
    assert result.outcome is Outcome.RUNTIME_ERROR, result
    assert "refused" in result.logs and "core limit (1, 1)" in result.logs, result.logs
    assert "child dumped False" in result.logs, result.logs
    assert _helper_saw(log, tag) == []


_SOCKETS = (
    SOCKETS_PROGRAM
    + """
import fcntl, os, struct
def ldisc(fd):  # TIOCSETD N_HDLC: a line discipline whose module may not be loaded
    class Done:
        def close(self):
            pass
    fcntl.ioctl(fd, 0x5423, struct.pack("i", 13))
    return Done()
print("ldisc_stdin", tried(lambda: ldisc(0)))
try:
    pty = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
except OSError as exc:
    print("ptmx", errno.errorcode.get(exc.errno))
else:
    print("ldisc_pty", tried(lambda: ldisc(pty)))
"""
)


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_sockets_and_line_disciplines_that_would_load_a_module_are_refused(
    tmp_path: Path, mode: Literal["bwrap", "landlock"]
) -> None:
    async with prepared_local(ToyTask.create(tmp_path / "toy"), mode) as sandbox:
        result = await sandbox.run(Job(code=_SOCKETS, task="toy", timeout_s=60))
    got = results(result.logs)
    refused = (*LOADING, "ldisc_stdin")
    assert {k: got.get(k) for k in refused} == dict.fromkeys(refused, "EPERM"), result.logs
    assert got.get("ldisc_pty", "EPERM") == "EPERM", result.logs  # bwrap's /dev has a ptmx
    assert got["pair_unix"] == "ok"  # multiprocessing's pipes
    # bwrap mode has its own network namespace: Unix, UDP and netlink's route protocol work
    # there; the Landlock mode allows TCP only
    usual = "ok" if mode == "bwrap" else "EPERM"
    assert [got[k] for k in USUAL] == [usual] * len(USUAL), result.logs


_RENICE_EVERYONE = """
import os
try:
    os.setpriority(os.PRIO_USER, os.geteuid(), 7)  # every process of this user
    print("prio_user set")
except OSError as exc:
    print("prio_user", exc.strerror)
print("own nice", os.getpriority(os.PRIO_PROCESS, 0))
"""


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_a_program_cannot_renice_the_hosts_processes(
    tmp_path: Path, mode: Literal["bwrap", "landlock"]
) -> None:
    """Landlock mode shares the host's PID namespace: ``setpriority(PRIO_USER)`` reached every
    process of the service's user (as root, those without capabilities: other runs; as
    another user, the service itself), and the call's own processes were reniced even as it
    failed. Refused whole now. bwrap mode: its PID namespace bounds the call to the run."""
    async with prepared_local(ToyTask.create(tmp_path / "toy"), mode) as sandbox:
        result = await sandbox.run(Job(code=_RENICE_EVERYONE, task="toy", timeout_s=60))
    if mode == "landlock":
        assert "prio_user Operation not permitted" in result.logs, result.logs
        assert "own nice 0" in result.logs, result.logs  # the kernel never saw the call
    else:
        assert "prio_user set" in result.logs and "own nice 7" in result.logs, result.logs
