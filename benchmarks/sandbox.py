"""Per-job overhead of LocalSandbox against a bare ``subprocess.run`` of the same program.

Both run the same program, interleaved (bare, sandbox, bare, sandbox, ...) so background load
hits both alike; the figures are medians. The programs write no submission, so neither side
grades: grading is a separate, task-specific cost (the toy task's grader is a child Python
process), reported on its own line as ``grade_ms``.

What the sandbox adds per job, on its path: writing the program into a run directory made ahead
(a quota tmpfs as root), setting the limits of a cgroup made ahead, the launch plan, handing
the plan to the launcher waiting for it (bwrap mode: inside a sandbox whose namespaces, mounts
and seccomp filter were made ahead for the run's shape; Landlock mode: it applies Landlock and
seccomp), which sets the rlimits and ``exec``s the program; then output capture, the
leftover-process sweep, classifying. Off its path (threads, started as the run ends): the
cgroup and run directory removal, and the next runs' spares. That background work gets its own
time, as it has a search step's model call: after each sandbox run the benchmark waits until
the sandbox is idle (``_settle``: cleanups done, spares made and their launchers blocked on
their stdin) before the next bare run, so it slows neither side, and reports how long that took
(``background_ms``, wall time from the run's return). The ``b2b`` figures run the trivial
program back to back with no gap (sandbox runs in a row, then bare runs in a row), where the
background work competes with the next run. The bare side gets the same environment variables.
The ``bwrap-nocg`` rows run with ``cgroups=False`` to show what the cgroups still cost.

The absolute milliseconds move with the host's load (print ``uptime`` with them); the ratios
and overheads of the same interleaved run are what compare.

Run: ``python benchmarks/sandbox.py [--repeats 30]``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Any, Literal

import anyio

from openmle import Job, Outcome, Split
from openmle.backends import LocalSandbox
from openmle.backends._isolation import bwrap_problem, descendants, landlock_abi
from openmle.testing import TOY_SOLUTION, ToyTask

# ``benchmarks/`` is on sys.path when this runs as a script; mypy does not know that.
emit: Callable[[str, dict[str, Any]], None] = importlib.import_module("_common").emit

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
PROGRAMS = {
    "trivial": "print('hello')\n",
    "numpy": "import numpy as np\nprint(np.arange(10).sum())\n",
}


def _bare(code: str, data_dir: Path) -> float:
    with tempfile.TemporaryDirectory() as work:
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", code],
            cwd=work,
            env={  # what LocalSandbox gives a program, so both start the same interpreter
                "DATA_DIR": str(data_dir),
                "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                "HOME": work,
                "TMPDIR": work,
                "LANG": "C.UTF-8",
                "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1",
                "PYTHONNOUSERSITE": "1",
                "CUDA_VISIBLE_DEVICES": "",
                **dict.fromkeys(THREAD_VARS, "1"),
            },
            capture_output=True,
            timeout=120,
            check=True,
        )
        return time.perf_counter() - t0


def _grade_ms(task: ToyTask, data_dir: Path, n: int) -> float:
    """Median milliseconds of ``task.grade`` on a correct submission."""
    with tempfile.TemporaryDirectory() as work:
        subprocess.run(
            [sys.executable, "-c", TOY_SOLUTION],
            cwd=work,
            env={"DATA_DIR": str(data_dir)},
            check=True,
            capture_output=True,
        )
        grades = []
        for _ in range(n):
            t0 = time.perf_counter()
            task.grade(Path(work) / "submission.csv", Split.VALID)
            grades.append(time.perf_counter() - t0)
    return statistics.median(grades) * 1000


PHASES = (
    ("resolve", "start"),
    ("take_spare", "spare"),
    ("limits", "limits"),
    ("plan", "plan"),
    ("hand_over", "handed"),
    ("program", "exited"),
    ("sweep_drain", "swept_drained"),
    ("grade_kill", "graded"),
    ("cleanup", "cleaned"),
    ("return", None),
)
"""Each phase of ``LocalSandbox.run`` and the mark it ends at (``LocalSandbox._phases``):
resolving the task; the task's paths and data view and taking the spare launcher made ahead
(its run directory, quota tmpfs, cgroup and, in bwrap mode, its sandbox: made on a thread
from when the previous run took its own); setting its cgroup's limits; the launch plan; handing the
launcher its run; the program's run (from the hand-over to its exit: what ``runtime_s``
measures); the end-of-run sweep and output drain; classifying (and grading) and the final
kill; queueing the run directory's and the cgroup's removal (both run on threads)."""


_READ_NR = {"x86_64": "0", "aarch64": "63"}.get(os.uname().machine)
"""The ``read`` syscall's number, as ``/proc/PID/syscall`` shows it."""


def _waiting(pid: int) -> bool:
    """Whether the launch chain ``pid`` is ready: its launcher (``pid`` or, in bwrap mode, one
    of its descendants) is blocked reading its run from stdin; or the chain has exited.
    """
    if not Path(f"/proc/{pid}").exists():
        return True
    for p in (pid, *descendants(pid)):
        try:
            fields = Path(f"/proc/{p}/syscall").read_text().split()
        except OSError:
            continue
        if fields[:2] == [_READ_NR, "0x0"]:
            return True
    return False


async def _settle(sb: LocalSandbox) -> float:
    """Wait until ``sb`` is idle: no run being removed, no spare being made, and every spare's
    launcher started and blocked on its stdin (its interpreter start done); the seconds waited.

    (The benchmark reaches into the sandbox, as it reads ``_phases``: an idle sandbox is a
    measuring condition, not an API.)
    """
    t0 = time.perf_counter()
    pending: list[Future[Any]] = [*sb._making, *sb._cleanups]
    if pending:
        await anyio.to_thread.run_sync(futures_wait, pending)
    made = [f.result() for f in sb._making if f.exception() is None]
    pids = [s.proc.pid for s in [*sb._spares, *made] if s is not None]
    if _READ_NR is not None:
        await anyio.to_thread.run_sync(_poll_waiting, pids)
    return time.perf_counter() - t0


def _poll_waiting(pids: list[int]) -> None:
    """Block until every chain of ``pids`` is :func:`_waiting` (at most 10 s)."""
    deadline = time.monotonic() + 10
    while not all(_waiting(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.002)


async def _back_to_back(sb: LocalSandbox, code: str, data_dir: Path, n: int) -> tuple[float, float]:
    """Median seconds per run of ``n`` sandbox runs in a row, then of ``n`` bare runs in a row."""
    ours: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await sb.run(Job(code=code, task="toy"))
        ours.append(time.perf_counter() - t0)
    await _settle(sb)
    bare = [_bare(code, data_dir) for _ in range(n)]
    return statistics.median(bare), statistics.median(ours)


def _phase_ms(marks: dict[str, float], t0: float, t1: float) -> dict[str, float]:
    """Milliseconds of each of ``PHASES`` from ``marks`` (the run started at ``t0``, ended at
    ``t1``)."""
    out: dict[str, float] = {}
    last = t0
    for name, mark in PHASES:
        end = t1 if mark is None else marks.get(mark)
        if end is None:
            continue
        out[name] = (end - last) * 1000
        last = end
    return out


async def _one_program(
    sb: LocalSandbox, mode: str, name: str, code: str, data_dir: Path, repeats: int
) -> dict[str, float]:
    """Interleaved bare and sandbox runs of ``code``; its figures (printed as they come)."""
    figures: dict[str, float] = {}
    bare: list[float] = []
    ours: list[float] = []
    runtimes: list[float] = []
    background: list[float] = []
    phases: dict[str, list[float]] = {}
    for i in range(repeats + 2):
        b = _bare(code, data_dir)
        t0 = time.perf_counter()
        r = await sb.run(Job(code=code, task="toy"))
        o = time.perf_counter() - t0
        bg = await _settle(sb)
        assert r.outcome is Outcome.MISSING_SUBMISSION, r
        if i >= 2:  # warm-up
            bare.append(b)
            ours.append(o)
            runtimes.append(r.runtime_s)
            background.append(bg)
            for phase, ms in _phase_ms(sb._phases, t0, t0 + o).items():
                phases.setdefault(phase, []).append(ms)
    b_ms = statistics.median(bare) * 1000
    o_ms = statistics.median(ours) * 1000
    ratio = o_ms / b_ms
    r_ms = statistics.median(runtimes) * 1000
    print(
        f"{mode:10s} {name:8s} bare subprocess.run {b_ms:7.1f} ms | "
        f"LocalSandbox.run {o_ms:7.1f} ms (runtime_s {r_ms:6.1f} ms) | "
        f"ratio {ratio:4.2f}x | overhead {o_ms - b_ms:6.1f} ms"
    )
    figures[f"{mode}_{name}_bare_ms"] = round(b_ms, 2)
    figures[f"{mode}_{name}_sandbox_ms"] = round(o_ms, 2)
    figures[f"{mode}_{name}_ratio"] = round(ratio, 3)
    figures[f"{mode}_{name}_overhead_ms"] = round(o_ms - b_ms, 2)
    medians = {k: statistics.median(v) for k, v in phases.items()}
    print(
        f"{'':10} {name:8s} phases (median ms): "
        + ", ".join(f"{k} {v:.2f}" for k, v in medians.items())
    )
    for phase, ms in medians.items():
        figures[f"{mode}_{name}_phase_{phase}_ms"] = round(ms, 3)
    bg_ms = statistics.median(background) * 1000
    figures[f"{mode}_{name}_background_ms"] = round(bg_ms, 2)
    print(f"{'':10} {name:8s} background after the run (median): {bg_ms:.1f} ms")
    if name == "trivial":
        bb, bo = await _back_to_back(sb, code, data_dir, max(5, repeats // 2))
        print(
            f"{'':10} {name:8s} back to back: bare {bb * 1000:.1f} ms, "
            f"LocalSandbox {bo * 1000:.1f} ms, overhead {(bo - bb) * 1000:.1f} ms"
        )
        figures[f"{mode}_{name}_b2b_overhead_ms"] = round((bo - bb) * 1000, 2)
    return figures


async def _measure(repeats: int) -> dict[str, float | int | str]:
    figures: dict[str, float | int | str] = {"repeats": repeats}
    with tempfile.TemporaryDirectory() as tmp:
        task = ToyTask.create(Path(tmp) / "toy")
        data_dir = task.public_dir(Split.VALID)
        modes: list[tuple[str, Literal["bwrap", "landlock"], bool]] = []
        if bwrap_problem(shutil.which("bwrap"), sys.executable) is None:
            modes += [("bwrap", "bwrap", True), ("bwrap-nocg", "bwrap", False)]
        if landlock_abi() > 0:
            modes.append(("landlock", "landlock", True))
        for mode, isolation, cgroups in modes:
            sb = LocalSandbox(ToyTask.resolver({"toy": task}), isolation=isolation, cgroups=cgroups)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # cgroups=False as root warns about fork bombs
                await sb.prepare()
            for name, code in PROGRAMS.items():
                figures.update(await _one_program(sb, mode, name, code, data_dir, repeats))
            await sb.aclose()
        g_ms = _grade_ms(task, data_dir, max(5, repeats // 3))
        print(f"grading (toy task, separate cost, not in the figures above): {g_ms:.1f} ms")
        figures["grade_ms"] = round(g_ms, 2)
        figures["goal_overhead_ms"] = 15.0
        figures["goal_numpy_ratio"] = 1.10
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    figures = anyio.run(_measure, args.repeats)
    emit("sandbox", figures)


if __name__ == "__main__":
    main()
