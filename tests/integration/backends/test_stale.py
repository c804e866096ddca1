"""remove_stale_cgroups: the cgroups a SIGKILLed owner left behind are emptied and removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import openmle
from openmle.backends import remove_stale_cgroups

pytestmark = pytest.mark.integration

#: An owner that makes a per-run cgroup (as a sandbox does), puts a process in it, prints
#: "PID DIR..." and waits to be killed.
OWNER = """
import subprocess, sys, time
from openmle.backends._cgroup import Cgroup
cg = Cgroup.create(pids_max=16, memory_bytes=None, cpus=None)
if cg is None:
    print("none", flush=True)
    sys.exit(0)
child = subprocess.Popen(["sleep", "300"])
for path in cg.procs_files:
    with open(path, "w") as f:
        f.write(str(child.pid))
print(child.pid, *cg.dirs.values(), flush=True)
time.sleep(300)
"""


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_the_cgroups_of_a_killed_owner_are_emptied_and_removed() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    with subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, env=env
    ) as owner:
        try:
            _check(owner)
        finally:
            if owner.poll() is None:
                owner.kill()


def _check(owner: subprocess.Popen[str]) -> None:
    assert owner.stdout is not None
    line = owner.stdout.readline().split()
    if line == ["none"] or not line:
        pytest.skip("this process may not create cgroups here (needs root and cgroupfs)")
    child, dirs = int(line[0]), [Path(d) for d in line[1:]]
    assert all(d.is_dir() for d in dirs) and _running(child)
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert remove_stale_cgroups(owner.pid) == 1
    assert not any(d.exists() for d in dirs)
    deadline = time.monotonic() + 10
    while _running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(child)  # killed with its cgroup
    assert remove_stale_cgroups(owner.pid) == 0  # nothing left
