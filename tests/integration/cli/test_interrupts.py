"""Ctrl-C while ``openmle search`` shuts down: the real command line in a subprocess, SIGINTs
sent at measured gaps, its exit status, the processes it leaves and its run directory.

The rule (``openmle._cli._interrupts``, ``docs/reference/cli.md``): the first interrupt stops
the command, a second while it shuts down is absorbed (the cleanup finishes, exit 130), a
third exits at once (exit 130) after killing the run's programs.

A second Ctrl-C used to be raised as ``KeyboardInterrupt`` by asyncio's handler wherever the
event loop was, the shielded cleanup included: the command died of SIGINT (wait status -2),
hung at exit waiting for worker threads, or left its programs running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import openmle
from openmle.search import RunDir

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SRC = str(Path(openmle.__file__).parents[1])
RUN_ID_ENV = "OPENMLE_RUN_ID"  # the sandboxes' run marker: OWNER_PID.START.TOKEN

#: A sandbox (``--sandbox slowstop:make``) whose every run also starts a process in a session
#: of its own that carries the run marker, and whose cleanup of a cancelled run takes
#: ``SLOWSTOP_S`` seconds (shielded) before it kills that process: the shielded cleanup a
#: second Ctrl-C must not cut short (a real sandbox's is the same, only faster).
_SLOWSTOP = """
import os, signal, subprocess, sys, uuid
from pathlib import Path

import anyio

from openmle.backends import LocalSandbox

SLOW_S = float(os.environ["SLOWSTOP_S"])


def _marker():
    stat = Path("/proc/self/stat").read_text()
    start = stat[stat.rfind(")") + 2 :].split()[19]
    return f"{os.getpid()}.{start}.{uuid.uuid4().hex}"


class SlowStop:
    def __init__(self):
        self.inner = LocalSandbox()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def run(self, job):
        env = {"PATH": os.environ["PATH"], "OPENMLE_RUN_ID": _marker()}
        proc = subprocess.Popen(["sleep", "600"], env=env, start_new_session=True)
        try:
            return await self.inner.run(job)
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(SLOW_S)  # cleaning up, slowly
                proc.kill()
                await anyio.to_thread.run_sync(proc.wait)

    async def aclose(self):
        await self.inner.aclose()


def make(**options):
    return SlowStop()
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"OPENMLE_DEBUG", "OPENAI_API_KEY"}}
    return {**env, "PYTHONPATH": SRC, **extra}


def _owned_by(pid: int) -> list[tuple[int, str]]:
    """Live processes whose run marker names ``pid`` as its owner (pid, command line)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 :].split()[0] == "Z":
            continue
        prefix = f"{RUN_ID_ENV}={pid}.".encode()
        if any(item.startswith(prefix) for item in env):
            out.append((int(entry.name), cmd[:120]))
    return out


def _start(tmp: Path, *extra: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "openmle", "search", "--task", "tabular-binary", "--model",
         "offline", "--steps", "50", "--workers", "2", "--out", "run", *extra],
        cwd=tmp, env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _wait_for_programs(proc: subprocess.Popen[str], timeout: float = 120) -> None:
    """Until the search runs a program (a live process carries a marker ``proc`` owns)."""
    deadline = time.monotonic() + timeout
    while not _owned_by(proc.pid):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no program started"
        time.sleep(0.05)


def _interrupt(proc: subprocess.Popen[str], gaps: list[float]) -> tuple[str, float]:
    """SIGINT now and after each gap (while it runs); its stderr and seconds to exit."""
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    for gap in gaps:
        time.sleep(gap)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"the command hung after {len(gaps) + 1} SIGINTs; stderr: {err}")
    return err, time.monotonic() - t0


def _search_interrupted(
    tmp: Path, gaps: list[float], *extra: str, settle_s: float = 0.0, **env: str
) -> tuple[subprocess.Popen[str], str, float]:
    """A search started in ``tmp`` (``extra`` flags, ``env``), interrupted ``settle_s`` after
    its first program by SIGINTs ``gaps`` apart (see :func:`_interrupt`); killed if it lives."""
    proc = _start(tmp, *extra, **env)
    try:
        _wait_for_programs(proc)
        time.sleep(settle_s)
        err, took = _interrupt(proc, gaps)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc, err, took


def _resumable(run: Path) -> None:
    rd = RunDir.open(run)  # the manifest, the journal's chain
    assert rd.manifest["task"]["name"] == "tabular-binary"
    for line in (run / "journal.jsonl").read_text().splitlines():
        json.loads(line)  # no torn record


def _no_programs_left(pid: int) -> None:
    deadline = time.monotonic() + 5  # a SIGKILLed process may take a moment to go
    while (left := _owned_by(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"programs outlived the command: {left}"


@pytest.mark.parametrize("gap", [0.005, 0.05, 0.3])
def test_a_second_ctrl_c_on_a_real_search_exits_130_and_leaves_nothing(
    tmp_path: Path, gap: float
) -> None:
    proc, err, _ = _search_interrupted(tmp_path, [gap], settle_s=0.5)
    assert proc.returncode == 130, err
    assert "openmle: interrupted (Ctrl-C)" in err, err
    assert "openmle resume run" in err, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    _no_programs_left(proc.pid)
    _resumable(tmp_path / "run")


def test_a_second_ctrl_c_does_not_cut_the_shielded_cleanup_short(tmp_path: Path) -> None:
    (tmp_path / "slowstop.py").write_text(_SLOWSTOP)
    proc, err, took = _search_interrupted(  # the second inside the 1.5 s cleanup
        tmp_path, [0.3], "--sandbox", "slowstop:make", "--app-dir", ".", SLOWSTOP_S="1.5"
    )
    assert proc.returncode == 130, err
    assert "openmle: interrupted again: still cleaning up" in err, err
    assert "openmle resume run" in err, err
    assert took >= 1.5, f"the cleanup was cut short: exited after {took:.2f} s"
    _no_programs_left(proc.pid)  # the cleanup killed its process
    _resumable(tmp_path / "run")


def test_a_third_ctrl_c_exits_at_once_and_kills_the_programs(tmp_path: Path) -> None:
    (tmp_path / "slowstop.py").write_text(_SLOWSTOP)
    proc, err, took = _search_interrupted(
        tmp_path, [0.3, 0.3], "--sandbox", "slowstop:make", "--app-dir", ".", SLOWSTOP_S="60"
    )
    assert proc.returncode == 130, err
    assert "openmle: interrupted three times: exiting now" in err, err
    assert took < 20, f"the third Ctrl-C took {took:.1f} s"
    _no_programs_left(proc.pid)  # the markered process in its own session too
    _resumable(tmp_path / "run")
