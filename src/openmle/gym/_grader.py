"""The grading process: its limits (:class:`GradeLimits`), how it is started, bounded and
killed, and how a sandbox waits for it without leaving it behind.

A grade runs :mod:`openmle.gym._gradeproc` in a fresh ``python -I`` process that

- starts with a fixed, minimal environment (no variable of the caller's reaches it, so a
  task's ``utils/metric.py`` sees no secrets), in a new session of its own;
- confines itself before any task code runs: ``RLIMIT_AS`` (``memory_mb``), ``RLIMIT_CPU``
  (``cpu_s``) and ``PR_SET_PDEATHSIG`` so it dies with the thread that started it (a killed
  ``openmle task validate`` or a service stopped by SIGTERM or SIGKILL takes it along);
- is killed, with its whole process group, at ``timeout_s`` of wall-clock time, and in a
  ``finally`` whatever happened (the caller's cancellation included);
- reads every CSV within ``max_bytes``, ``max_rows``, ``max_columns`` and ``max_line_bytes``,
  checked on the raw bytes before parsing.

What is not bounded: processes that ``utils/metric.py`` starts and moves to another session
outlive a parent killed with SIGKILL (the parent-death signal reaches the grading process
only); a normal end, a timeout and a cancellation kill the whole process group.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import select
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, final

from attrs import field, frozen

from openmle.errors import InvalidArgument
from openmle.gym import _gradeproc

__all__ = [
    "ChildRun",
    "GradeLimits",
    "GradeScope",
    "confine_child",
    "grade_in_thread",
    "run_child",
]

MAX_GRADE_TIMEOUT_S = 86_400.0
"""Largest wall-clock limit a grade may have (one day)."""
MAX_GRADE_MEMORY_MB = 1_048_576
"""Largest address-space limit a grade may have (1 TiB)."""


def _positive(limit: float) -> Callable[[Any, Any, Any], None]:
    def check(_inst: Any, attribute: Any, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidArgument(
                f"Expected GradeLimits.{attribute.name} to be a number but got {value!r}"
            )
        if not (math.isfinite(value) and 0 < value <= limit):
            raise InvalidArgument(
                f"Expected GradeLimits.{attribute.name} in (0, {limit:g}] but got {value!r}; "
                "give a positive value within the range"
            )

    return check


@final
@frozen(kw_only=True)
class GradeLimits:
    """What one grading process may use; every limit is enforced, none is advisory.

    Args:
        timeout_s: wall-clock limit; the process group is killed at it (default 600 s, at
            most one day).
        cpu_s: CPU-time limit (``RLIMIT_CPU``; default: ``timeout_s``).
        memory_mb: address-space limit (``RLIMIT_AS``) in MiB (default 4096). Parsing costs
            roughly 20 to 30 times the CSV's size, so a submission near ``max_bytes`` needs
            more memory than the default; raise both together.
        max_bytes: largest CSV read (default 512 MiB).
        max_rows: most data rows in one CSV (default 10,000,000).
        max_columns: most columns in one CSV (default 10,000).
        max_line_bytes: longest line of a CSV (default 8 MiB).

    Raises:
        InvalidArgument: a value that is not positive, not finite, or above its maximum.
    """

    timeout_s: float = field(default=600.0, validator=_positive(MAX_GRADE_TIMEOUT_S))
    cpu_s: float | None = field(default=None, validator=_positive(MAX_GRADE_TIMEOUT_S))
    memory_mb: int = field(default=4096, validator=_positive(MAX_GRADE_MEMORY_MB))
    max_bytes: int = field(default=_gradeproc.MAX_CSV_BYTES, validator=_positive(2**40))
    max_rows: int = field(default=_gradeproc.MAX_ROWS, validator=_positive(2**40))
    max_columns: int = field(default=_gradeproc.MAX_COLUMNS, validator=_positive(2**30))
    max_line_bytes: int = field(default=_gradeproc.MAX_LINE_BYTES, validator=_positive(2**40))

    def with_timeout(self, timeout_s: float) -> GradeLimits:
        """These limits with ``timeout_s`` (the CPU limit follows it unless set)."""
        return GradeLimits(**{**self.to_dict(), "timeout_s": timeout_s})

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the child's configuration keys)."""
        return {
            "timeout_s": self.timeout_s,
            "cpu_s": self.cpu_s,
            "memory_mb": self.memory_mb,
            "max_bytes": self.max_bytes,
            "max_rows": self.max_rows,
            "max_columns": self.max_columns,
            "max_line_bytes": self.max_line_bytes,
        }


@final
@frozen(kw_only=True)
class ChildRun:
    """How a grading process ended.

    Args:
        result: the JSON the process wrote, or None when it wrote none.
        elapsed_s: wall-clock seconds from start to end.
        limit: ``"time"`` (killed at ``timeout_s``), ``"cpu"`` (``RLIMIT_CPU``), ``"memory"``
            (reported by the process), ``"killed"`` (SIGKILL from elsewhere: the CPU hard
            limit, the kernel's OOM killer, a cancellation) or None.
        returncode: the exit status (negative: killed by that signal).
    """

    result: dict[str, Any] | None
    elapsed_s: float
    limit: str | None
    returncode: int | None


def confine_child(config: dict[str, Any]) -> None:
    """Put the calling (grading) process under the limits in ``config`` (the configuration
    :func:`run_child` wrote): ``PR_SET_PDEATHSIG``, ``RLIMIT_AS`` and ``RLIMIT_CPU``. A
    program started by :func:`run_child` with ``module=`` calls it first thing.
    """
    _gradeproc.confine(config)


def _env(home: str) -> dict[str, str]:
    """The fixed environment of a grading process: nothing of the caller's."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        # One thread per math library: their per-thread buffers would eat RLIMIT_AS.
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


@functools.cache
def _grader_source() -> str:
    """The grading module's source, run in the child with ``python -I -c``."""
    return Path(_gradeproc.__file__).read_text(encoding="utf-8")


_LOCAL = threading.local()


@final
class GradeScope:
    """The grading processes started by one thread; :meth:`cancel` kills them (and any
    started later in the scope).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._cancelled = False

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        """Track ``proc``; kill it at once when the scope is already cancelled."""
        with self._lock:
            self._procs.add(proc)
            if self._cancelled:
                _kill_group(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        """Stop tracking ``proc`` (it has been reaped)."""
        with self._lock:
            self._procs.discard(proc)

    def cancel(self) -> None:
        """Kill every tracked process group; later ones are killed as they start."""
        with self._lock:
            self._cancelled = True
            for proc in self._procs:
                _kill_group(proc)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL ``proc``'s process group (it leads its own session) while it is unreaped."""
    if proc.returncode is not None:
        return  # reaped: its id may belong to someone else now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _wait_exit(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Wait until ``proc`` exits *without reaping it* (its group id stays valid); True when
    it exited within ``timeout_s``.
    """
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd: poll (reaps, then the group is killed)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        return bool(ready)
    finally:
        os.close(fd)


MAX_RESULT_BYTES = 4 * 1024 * 1024
"""Largest result file a grading process may leave (bytes); a larger one is no result."""


def _read_result(path: Path) -> Any:
    """The JSON a grading process wrote, read as untrusted: a regular file (never a link or a
    FIFO), at most :data:`MAX_RESULT_BYTES`; None otherwise.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_RESULT_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(MAX_RESULT_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def run_child(
    config: dict[str, Any],
    *,
    limits: GradeLimits,
    cwd: Path | None = None,
    module: str | None = None,
    hash_seed: int | None = None,
) -> ChildRun:
    """Run a grading program in a fresh, confined ``python -I`` process.

    The program is gym's grading module, or ``module`` (a dotted module name run as
    ``python -I -m module CONFIG``; it must call :func:`confine_child` on the configuration
    before it runs any task code and write its JSON result to ``config["result"]``). Either
    way the process starts with the fixed environment, in a session of its own, and it and
    everything in its process group are killed when it ends, at ``limits.timeout_s``, and when
    the calling thread's :class:`GradeScope` is cancelled.

    Every process that runs a task's or a benchmark's code on the host (grading, metric
    inspection, NatureBench evaluators, MLE-bench graders, a package's ``utils/prepare.py``)
    starts here. ``config["max_file_mb"]`` sets ``RLIMIT_FSIZE``; ``hash_seed`` sets the
    child's ``PYTHONHASHSEED`` (default: Python's random seed).
    """
    scope: GradeScope | None = getattr(_LOCAL, "scope", None)
    with tempfile.TemporaryDirectory(prefix="openmle-grade-") as tmp:
        cfg = Path(tmp) / "config.json"
        result = Path(tmp) / "result.json"
        home = Path(tmp) / "home"
        home.mkdir()
        cfg.write_text(
            json.dumps(
                {
                    **config,
                    **limits.to_dict(),
                    "cpu_s": limits.cpu_s if limits.cpu_s is not None else limits.timeout_s,
                    "parent_pid": os.getpid(),
                    "result": str(result),
                }
            )
        )
        start = time.monotonic()
        program = ["-m", module] if module else ["-c", _grader_source()]
        proc = subprocess.Popen(
            [sys.executable, "-I", *program, str(cfg)],
            cwd=cwd or home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=_env(str(home))
            | ({"PYTHONHASHSEED": str(hash_seed)} if hash_seed is not None else {}),
            start_new_session=True,
        )
        timed_out = False
        try:
            if scope is not None:
                scope.add(proc)
            timed_out = not _wait_exit(proc, limits.timeout_s)
        finally:
            _kill_group(proc)  # the metric's own children go too
            proc.wait()
            if scope is not None:
                scope.discard(proc)
        elapsed = time.monotonic() - start
        out: dict[str, Any] | None = None
        if not timed_out:
            loaded = _read_result(result)
            out = loaded if isinstance(loaded, dict) else None
        limit: str | None = None
        if timed_out:
            limit = "time"
        elif proc.returncode == -signal.SIGXCPU and out is None:
            limit = "cpu"
        elif proc.returncode == -signal.SIGKILL and out is None:
            limit = "killed"
        elif out is not None and out.get("limit") == "memory":
            limit = "memory"
        return ChildRun(result=out, elapsed_s=elapsed, limit=limit, returncode=proc.returncode)


async def grade_in_thread(
    task: Any, submission: Path, split: Any, *, timeout_s: float | None = None
) -> Any:
    """``task.grade(submission, split)`` in a worker thread, bounded and never left behind.

    For an openmle :class:`~openmle.gym.Task` the grade's wall-clock limit is at most
    ``timeout_s`` (a sandbox passes the job's timeout, so grading is bounded by it), and when
    the caller is cancelled the grading process group is killed before this returns. Any other
    :class:`~openmle._task_protocol.TaskHandle` is called as ``task.grade(submission, split)``.
    """
    import anyio

    scope = GradeScope()
    limits = getattr(task, "grade_limits", None)
    if isinstance(limits, GradeLimits) and timeout_s is not None:
        bound = min(limits.timeout_s, max(1.0, float(timeout_s)))
        call: Callable[[], Any] = functools.partial(task.grade, submission, split, timeout_s=bound)
    else:
        call = functools.partial(task.grade, submission, split)

    def run() -> Any:
        _LOCAL.scope = scope
        try:
            return call()
        finally:
            _LOCAL.scope = None

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    finally:
        scope.cancel()  # a no-op when the grade ended; kills it when the caller was cancelled
