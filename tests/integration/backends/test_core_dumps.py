"""A crashing program never starts the host's core-dump helper (a piped ``core_pattern``).

Where ``kernel.core_pattern`` is a pipe (``|/usr/lib/systemd/systemd-coredump ...``, Ubuntu's
apport), the kernel runs that helper as root, in the host's namespaces and outside the run's
cgroup, for every crash, and ``RLIMIT_CORE = 0`` does not stop it: only a limit of exactly 1
byte does. A run's limit is 1 byte and its program cannot change it (seccomp), so neither an
accidental crash (an abort, SIGSEGV, SIGXCPU at the CPU limit) nor one after lowering the limit
reaches the host. The grading process gets the same limit
(``tests/unit/gym/test_grader_limits.py``).

The test switches this host's ``core_pattern`` to a helper of its own for a few seconds (root
only, under a lock; the old value is put back), so it runs only where that is allowed.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import anyio
import pytest
from tests._sandboxes import prepared_local

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
