"""What the shipped sandboxes share once a program has ended, with one behaviour for all.

:class:`~openmle.backends.LocalSandbox` and :class:`~openmle.backends.DockerSandbox` differ in
how they start and stop a program; everything after it ends is here, so both report a run the
same way:

- :func:`default_resolver`: ``job.task`` resolves through ``openmle.gym.resolve_task``, looked
  up at run time (a clear :class:`~openmle.errors.SandboxError` names ``resolver=`` where it is
  missing).
- :func:`exit_signal` and :func:`signal_verdict`: one mapping from an exit status to the signal
  that ended the program and to what that means (``SIGXCPU`` is the CPU-time limit, a timeout;
  any other signal is named in the detail).
- :func:`workspace_artifacts`: the files a program left, listed the same way everywhere: in a
  worker thread, bounded (:class:`~openmle.backends._workspace.ArtifactLimits`), symlinks
  listed but never followed (a symlinked directory is one entry), the program file
  ``main.py`` left out.
- :func:`grade_outside`: grading outside the sandbox: the submission is refused when too large
  or not a regular file, copied (never followed through a link) and graded in a worker thread;
  a grader that raises is an ``INFRA_ERROR`` naming the task and the exception type (never its
  message, which could quote the answers); then :func:`~openmle._runlog.classify_run`.
  A task whose handle declares ``outputs`` (a directory name, see :func:`task_outputs`) is
  graded on a bounded copy of ``<workspace>/<outputs>/`` instead
  (:func:`~openmle.backends._workspace.copy_outputs`: no links followed, no FIFOs or devices,
  entries, bytes and depth bounded), with a top-level ``submission.csv`` copied into it.

GPU leases are :class:`~openmle.backends._gpu.GpuPool` in both sandboxes.
"""

from __future__ import annotations

import importlib
import os
import signal
import stat
from pathlib import Path
from typing import cast

import anyio

from openmle._runlog import LogCap, RefusedGrade, classify_run, take_submission
from openmle._signature import error_signature
from openmle._task_protocol import GradeLike, TaskHandle, TaskResolver
from openmle._types import Job, RunResult
from openmle.backends._workspace import copy_outputs, list_artifacts
from openmle.errors import SandboxError

__all__ = [
    "PROGRAM_FILE",
    "default_resolver",
    "exit_signal",
    "grade_outside",
    "output_dir_name",
    "signal_exit_code",
    "signal_verdict",
    "submission_too_large",
    "task_outputs",
    "workspace_artifacts",
]

PROGRAM_FILE = "main.py"
"""The program's file name; never listed as an artifact."""

_SHELL_SIGNAL_BASE = 128
"""Shells, bubblewrap and container engines report death by signal N as 128 + N."""


def default_resolver(ref: str) -> TaskHandle:
    """``openmle.gym.resolve_task(ref)``, looked up on each call (so it can be replaced).

    Raises:
        SandboxError: this installation has no ``openmle.gym.resolve_task``.
    """
    gym = importlib.import_module("openmle.gym")
    resolve = getattr(gym, "resolve_task", None)
    if resolve is None:
        raise SandboxError(
            "openmle.gym.resolve_task is not available in this installation; "
            "pass the sandbox a resolver=... to say how job.task names a task"
        )
    return cast(TaskResolver, resolve)(ref)


def exit_signal(exit_code: int | None, *, shell_base: bool) -> int | None:
    """The signal that ended the program, if its exit status says so.

    Args:
        exit_code: the exit status; negative for a signal (as :mod:`subprocess` reports it).
        shell_base: the status comes through a layer that reports signal N as 128 + N
            (bubblewrap, a container engine), so 129..192 also mean a signal.
    """
    if exit_code is None:
        return None
    if exit_code < 0:
        return -exit_code
    if shell_base and _SHELL_SIGNAL_BASE < exit_code <= _SHELL_SIGNAL_BASE + 64:
        return exit_code - _SHELL_SIGNAL_BASE
    return None


def signal_exit_code(exit_code: int | None) -> int | None:
    """An engine's 128 + N status as -N (how :class:`~openmle.RunResult` reports a signal)."""
    if exit_code is not None and _SHELL_SIGNAL_BASE < exit_code <= _SHELL_SIGNAL_BASE + 64:
        return _SHELL_SIGNAL_BASE - exit_code
    return exit_code


def signal_verdict(
    exit_code: int | None, *, shell_base: bool, timed_out: bool, oom: bool
) -> tuple[bool, str]:
    """``(timed_out, detail)`` once the signal that ended the program is taken into account.

    ``SIGXCPU`` (the CPU-time limit) is a timeout; any other signal ending a run that was not
    already a timeout or OOM is named in the detail (``"killed by SIGSEGV"``).
    """
    signum = exit_signal(exit_code, shell_base=shell_base)
    if signum is None or timed_out:
        return timed_out, ""
    if signum == signal.SIGXCPU:
        return True, "killed at its CPU-time limit"
    if oom:
        return timed_out, ""
    try:
        return timed_out, f"killed by {signal.Signals(signum).name}"
    except ValueError:
        return timed_out, f"killed by signal {signum}"


def _list(workspace: Path) -> tuple[str, ...]:
    return list_artifacts(workspace, exclude=(PROGRAM_FILE,))


async def workspace_artifacts(workspace: Path) -> tuple[str, ...]:
    """The files ``workspace`` holds (sorted, bounded, ``main.py`` excluded), in a thread."""
    return await anyio.to_thread.run_sync(_list, workspace)


def submission_too_large(workspace: Path) -> RefusedGrade | None:
    """Refuse a ``submission.csv`` above the grader's size limit before anything copies it
    (a sparse file costs no disk in the workspace but its whole size in a copy).
    """
    from openmle.gym import MAX_CSV_BYTES

    try:
        st = os.lstat(workspace / "submission.csv")
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode) and st.st_size > MAX_CSV_BYTES:
        return RefusedGrade(
            reason=f"submission.csv is {st.st_size} bytes, above the {MAX_CSV_BYTES}-byte "
            "limit; write a smaller file"
        )
    return None


_RESERVED = frozenset({"", ".", "..", PROGRAM_FILE, "submission.csv"})


def output_dir_name(task: object) -> str | None:
    """:func:`task_outputs`, None also for a bad name (the grading refuses that one after the
    run): what the program is told as ``$OUTPUT_DIR`` in its workspace.
    """
    try:
        return task_outputs(task)
    except SandboxError:
        return None


def task_outputs(task: object) -> str | None:
    """The output directory name a task declares (``task.outputs``), or None.

    A task handle may declare ``outputs: str | None``; when set, the program writes its outputs
    under ``./<outputs>/`` in its working directory, and the grade receives a copy of that
    directory (holding the program's top-level ``submission.csv`` too, if it wrote one)
    instead of the single file.

    Raises:
        SandboxError: ``outputs`` is not one plain directory name.
    """
    name = getattr(task, "outputs", None)
    if name is None:
        return None
    if (
        not isinstance(name, str)
        or name in _RESERVED
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or name.startswith(".")
    ):
        raise SandboxError(
            f"task {getattr(task, 'name', '?')!r} declares outputs={name!r}; expected one plain "
            "directory name such as 'output' (no '/', not '.', 'main.py' or 'submission.csv')"
        )
    return name


def _take(
    workspace: Path, into: Path, outputs: str | None = None
) -> tuple[Path | None, RefusedGrade | None]:
    refused = submission_too_large(workspace)
    if refused is not None:
        return None, refused
    if outputs is None:
        return take_submission(workspace, into)
    dst = into / outputs
    into.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(workspace / outputs):
        why = copy_outputs(workspace / outputs, dst)
        if why is not None:
            return None, RefusedGrade(reason=why)
    if os.path.lexists(workspace / "submission.csv"):
        _copy, refused = take_submission(workspace, dst)  # wins over outputs/submission.csv
        if refused is not None:
            return None, refused
    return (dst, None) if dst.is_dir() else (None, None)


async def grade_outside(
    *,
    job: Job,
    task: TaskHandle,
    workspace: Path,
    grading_dir: Path,
    exit_code: int | None,
    timed_out: bool,
    oom: bool,
    cap: LogCap,
    runtime_s: float,
    queue_s: float,
    shell_base: bool,
    detail: str = "",
) -> RunResult:
    """Grade what a finished program left and classify the run (the rule every sandbox uses).

    Args:
        workspace: the program's working directory (holds ``submission.csv``, or the
            directory the task's ``outputs`` names).
        grading_dir: where the submission (or the output directory) is copied before
            grading (the caller removes it).
        exit_code, shell_base: the exit status and how it reports signals
            (see :func:`exit_signal`).
        timed_out, oom: what the sandbox observed.
        detail: the sandbox's own account of the ending (a quota kill); wins over the
            signal's.

    A non-zero exit whose error is ``MemoryError`` is OOM (a memory limit without a cgroup
    makes allocations fail instead of killing). Never raises for anything the program did.
    """
    logs = cap.text()
    if exit_code not in (0, None) and not oom:
        oom = (error_signature(logs) or "").startswith("MemoryError")
    timed_out, why = signal_verdict(exit_code, shell_base=shell_base, timed_out=timed_out, oom=oom)
    artifacts = await workspace_artifacts(workspace)
    submission: Path | None = None
    grade: GradeLike | None = None
    try:
        outputs = task_outputs(task)
    except SandboxError as exc:
        return RunResult.infra_error(str(exc), split=job.split, queue_s=queue_s, logs=logs)
    if exit_code == 0 and not timed_out and not oom:
        copy, refused = await anyio.to_thread.run_sync(_take, workspace, grading_dir, outputs)
        if refused is not None:  # never handed to the grader
            submission, grade = workspace / (outputs or "submission.csv"), refused
        elif copy is None and outputs is not None:
            detail = detail or f"exited 0 without writing ./{outputs}/ or ./submission.csv"
        elif copy is not None:
            submission = copy
            try:
                from openmle.gym import grade_in_thread

                grade = await grade_in_thread(task, copy, job.split, timeout_s=job.timeout_s)
            except Exception as exc:  # the grader broke, not the program
                return RunResult.infra_error(
                    f"grader of task {task.name!r} raised {type(exc).__name__}",
                    split=job.split,
                    queue_s=queue_s,
                    logs=logs,
                )
    return classify_run(
        split=job.split,
        exit_code=exit_code,
        timed_out=timed_out,
        oom=oom,
        submission=submission,
        grade=grade,
        logs=logs,
        logs_dropped_bytes=cap.dropped,
        runtime_s=runtime_s,
        queue_s=queue_s,
        artifacts=artifacts,
        detail=detail or why,
    )
