"""The grading process: its limits (:class:`GradeLimits`), how it is started, bounded and
killed, and how a sandbox waits for it without leaving it behind.

A grade runs :mod:`openmle.gym._gradeproc` in a confined process that

- starts with a fixed, minimal environment (no variable of the caller's reaches it, so a
  task's ``utils/metric.py`` sees no secrets), in a new session of its own;
- confines itself before any task code runs: ``RLIMIT_AS`` (``memory_mb``), ``RLIMIT_CPU``
  (``cpu_s``) and ``PR_SET_PDEATHSIG`` so it dies with the thread that started it (a killed
  ``openmle task validate`` or a service stopped by SIGTERM or SIGKILL takes it along);
- is killed, with its whole process group, at ``timeout_s`` of wall-clock time, and in a
  ``finally`` whatever happened (the caller's cancellation included);
- reads every CSV within ``max_bytes``, ``max_rows``, ``max_columns`` and ``max_line_bytes``,
  checked on the raw bytes before parsing.

The grading process is a fresh fork of a *grading server*: a ``python -I`` process
running the same module (``--serve``), started once and reused (kept idle between grades, at
most :data:`MAX_IDLE_SERVERS` in all), which forks one child per grade and never runs task
code itself. The child takes its own session, the grade's ``HOME``/``TMPDIR`` and working
directory, and confines itself (limits, parent-death signal on the server) before any task
code runs, exactly as a fresh process does; a grade then costs a ``fork`` instead of an
interpreter start. The server ends (killing a running grade's group) when its stdin closes,
so with this process.

A program run with ``module=`` has servers of its own (``--serve MODULE``): the server
imports the module and the modules it names in ``PRELOAD`` (say pandas) once, and each
grade's child calls the module's ``main([MODULE, CONFIG])``, as ``python -I -m MODULE
CONFIG`` would, with the server as the configuration's ``parent_pid``. The module's top level
and its ``PRELOAD`` are the standard library, openmle and libraries only, never a task's or a
benchmark's code (``main`` imports that in the child, after :func:`confine_child`). A
server with helper threads (a fork of it would be unsafe) refuses its grades. Programs run
with a fixed ``hash_seed`` (the per-process hash seed cannot change after a fork), and any
grade no server can take, start a fresh interpreter.

What is not bounded: processes that ``utils/metric.py`` starts and moves to another session
outlive a parent killed with SIGKILL (the parent-death signal reaches the grading process
only); a normal end, a timeout and a cancellation kill the whole process group.
"""

from __future__ import annotations

import atexit
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
from typing import IO, TYPE_CHECKING, Any, Protocol, final

from attrs import field, frozen

from openmle._readback import loads_untrusted
from openmle._trees import remove_tree, scratch_dir
from openmle.errors import InvalidArgument
from openmle.gym import _gradeproc

if TYPE_CHECKING:
    from openmle._task_protocol import GradeLike, TaskHandle
    from openmle._types import Split

__all__ = [
    "MAX_IDLE_SERVERS",
    "ChildRun",
    "GradeLimits",
    "GradeScope",
    "close_grade_servers",
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
        self._procs: set[_Killable] = set()
        self._cancelled = False

    def add(self, proc: _Killable) -> None:
        """Track ``proc`` (a grading process); kill it at once when the scope is already
        cancelled.
        """
        with self._lock:
            self._procs.add(proc)
            if self._cancelled:
                proc.kill_group()

    def discard(self, proc: _Killable) -> None:
        """Stop tracking ``proc`` (it has been reaped)."""
        with self._lock:
            self._procs.discard(proc)

    def cancel(self) -> None:
        """Kill every tracked process group; later ones are killed as they start."""
        with self._lock:
            self._cancelled = True
            for proc in self._procs:
                proc.kill_group()


class _Killable(Protocol):
    def kill_group(self) -> None: ...


@final
class _FreshChild:
    """A grading process started for one grade (a :class:`GradeScope` entry)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def kill_group(self) -> None:
        _kill_group(self.proc)


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
    """Run a grading program in a confined process of its own.

    The program is gym's grading module or ``module`` (a dotted module name with a
    ``main(argv)`` that behaves as ``python -I -m module CONFIG``: it must call
    :func:`confine_child` on the configuration before it runs any task code and write its
    JSON result to ``config["result"]``; its top level and its optional ``PRELOAD`` tuple of
    module names import no task code). Either runs in a child forked by a reused grading
    server of its own (see the module docstring), or in a fresh process when no server can
    take it. Either way the process starts with the fixed environment, in a
    session of its own, and it and everything in its process group are killed when it ends,
    at ``limits.timeout_s``, and when the calling thread's :class:`GradeScope` is cancelled.

    Every process that runs a task's or a benchmark's code on the host (grading, metric
    inspection, NatureBench evaluators, MLE-bench graders, a package's ``utils/prepare.py``)
    starts here. ``config["max_file_mb"]`` sets ``RLIMIT_FSIZE``; ``hash_seed`` sets the
    child's ``PYTHONHASHSEED`` (default: Python's random seed; a fixed seed starts a fresh
    interpreter).
    """
    scope: GradeScope | None = getattr(_LOCAL, "scope", None)
    with scratch_dir(prefix="openmle-grade-") as tmp:
        cfg = Path(tmp) / "config.json"
        result = Path(tmp) / "result.json"
        home = Path(tmp) / "home"
        home.mkdir()
        body = {
            **config,
            **limits.to_dict(),
            "cpu_s": limits.cpu_s if limits.cpu_s is not None else limits.timeout_s,
            "result": str(result),
        }

        def write_config(parent_pid: int) -> Path:
            # parent_pid: the process the grade's parent-death signal is armed on
            cfg.write_text(json.dumps({**body, "parent_pid": parent_pid}))
            return cfg

        start = time.monotonic()
        ended: tuple[int | None, bool] | None = None
        if hash_seed is None and module not in _unservable:
            ended = _served(
                write_config, module, home=home, cwd=cwd or home, limits=limits, scope=scope
            )
        if ended is None:  # a fresh interpreter (or no server could take the grade)
            write_config(os.getpid())
            ended = _fresh(
                cfg,
                home=home,
                cwd=cwd,
                limits=limits,
                scope=scope,
                module=module,
                hash_seed=hash_seed,
            )
        returncode, timed_out = ended
        elapsed = time.monotonic() - start
        out: dict[str, Any] | None = None
        if not timed_out:
            loaded = _read_result(result)
            out = loaded if isinstance(loaded, dict) else None
        limit: str | None = None
        if timed_out:
            limit = "time"
        elif returncode == -signal.SIGXCPU and out is None:
            limit = "cpu"
        elif returncode == -signal.SIGKILL and out is None:
            limit = "killed"
        elif out is not None and out.get("limit") == "memory":
            limit = "memory"
        return ChildRun(result=out, elapsed_s=elapsed, limit=limit, returncode=returncode)


def _fresh(
    cfg: Path,
    *,
    home: Path,
    cwd: Path | None,
    limits: GradeLimits,
    scope: GradeScope | None,
    module: str | None,
    hash_seed: int | None,
) -> tuple[int | None, bool]:
    """Run the grade in a fresh ``python -I`` process: ``(returncode, timed_out)``."""
    program = ["-m", module] if module else ["-c", _grader_source()]
    proc = subprocess.Popen(
        [sys.executable, "-I", *program, str(cfg)],
        cwd=cwd or home,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=_env(str(home)) | ({"PYTHONHASHSEED": str(hash_seed)} if hash_seed is not None else {}),
        start_new_session=True,
    )
    handle = _FreshChild(proc)
    timed_out = False
    try:
        if scope is not None:
            scope.add(handle)
        timed_out = not _wait_exit(proc, limits.timeout_s)
    finally:
        _kill_group(proc)  # the metric's own children go too
        proc.wait()
        if scope is not None:
            scope.discard(handle)
    return proc.returncode, timed_out


MAX_IDLE_SERVERS = 4
"""Most grading servers kept idle between grades, whatever program they serve, in all (each
is one idle ``python -I`` process; the least recently used one goes first)."""
_SERVER_REPLY_S = 30.0
"""How long a server may take to start (its imports included), to start a grade's child or
to report a killed one's end."""
_idle: list[_GradeServer] = []
"""Idle servers, least recently used first."""
_unservable: set[str | None] = set()
"""Programs whose server refused a grade (it cannot import them, or it has helper threads):
they start fresh, until :func:`close_grade_servers`."""
_idle_lock = threading.Lock()


@final
class _GradeServer:
    """One grading server process (``_gradeproc --serve [MODULE]``) and our ends of its pipes;
    ``module`` is the program it serves (None: gym's grading).
    """

    def __init__(self, module: str | None) -> None:
        self.module = module
        self.home = tempfile.mkdtemp(prefix="openmle-grade-server-")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-c",
                _grader_source(),
                _gradeproc.SERVE_FLAG,
                *([module] if module else []),
            ],
            cwd=self.home,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_env(self.home) | _gradeproc.SERVER_ONLY_ENV,
            start_new_session=True,
        )
        self._lock = threading.Lock()
        self._buf = b""
        self._active = False
        self.broken = False
        self.refused = False

    def _write(self, message: dict[str, Any], *, only_active: bool = False) -> None:
        stdin = self.proc.stdin
        if stdin is None:
            raise AssertionError("internal invariant broken: a server has a stdin pipe")
        with self._lock:
            if only_active and not self._active:
                return  # its grade has ended: never a later grade's
            stdin.write((json.dumps(message) + "\n").encode())
            stdin.flush()

    def _read(self, deadline: float) -> dict[str, Any] | None:
        """The server's next message, or None at ``deadline`` or when it ended (broken)."""
        out: IO[bytes] | None = self.proc.stdout
        if out is None:
            raise AssertionError("internal invariant broken: a server has a stdout pipe")
        fd = out.fileno()
        while b"\n" not in self._buf:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                self.broken = True
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            found = loads_untrusted(line)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            self.broken = True
            return None
        return found

    def kill_group(self) -> None:
        """Kill the running grade's process group (nothing when no grade runs)."""
        with contextlib.suppress(OSError):
            self._write({"kill": True}, only_active=True)

    def grade(
        self, cfg: Path, *, home: Path, cwd: Path, timeout_s: float, scope: GradeScope | None
    ) -> tuple[int | None, bool] | None:
        """Run one grade: ``(returncode, timed_out)``, or None when no child was started."""
        try:
            self._write({"config": str(cfg), "home": str(home), "cwd": str(cwd)})
        except OSError:
            self.broken = True
            return None
        start = time.monotonic()
        started = self._read(start + _SERVER_REPLY_S)
        if started is None or "pid" not in started:
            self.broken = True
            self.refused = started is not None and "refused" in started
            return None
        self._active = True
        if scope is not None:
            scope.add(self)
        try:
            ended = self._read(start + timeout_s)
            timed_out = ended is None and not self.broken
            if timed_out:
                self.kill_group()
                ended = self._read(time.monotonic() + _SERVER_REPLY_S)
        finally:
            with self._lock:
                self._active = False
            if scope is not None:
                scope.discard(self)
        if ended is None or "exit" not in ended:
            self.broken = True
            self.close()  # its child dies with it (parent-death signal)
            return (None if timed_out else -signal.SIGKILL), timed_out
        code = ended["exit"]
        return (code if isinstance(code, int) else None), timed_out

    def close(self) -> None:
        """End the server (its stdin closes; killed when it lingers) and remove its home."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        remove_tree(self.home)


def _idle_server(module: str | None) -> _GradeServer | None:
    """The most recently used idle server of ``module``'s, taken from the pool, or None."""
    with _idle_lock:
        for at in range(len(_idle) - 1, -1, -1):
            if _idle[at].module == module:
                return _idle.pop(at)
    return None


def _served(
    write_config: Callable[[int], Path],
    module: str | None,
    *,
    home: Path,
    cwd: Path,
    limits: GradeLimits,
    scope: GradeScope | None,
) -> tuple[int | None, bool] | None:
    """Run the grade on an idle grading server of ``module``'s (started when none is idle);
    None when no server could start its child (the caller starts a fresh process then). The
    configuration is written with the server as the grade's parent.
    """
    server = _idle_server(module)
    if server is None or server.proc.poll() is not None:
        if server is not None:
            server.close()
        try:
            server = _GradeServer(module)
        except OSError:
            return None
    cfg = write_config(server.proc.pid)
    ended = server.grade(cfg, home=home, cwd=cwd, timeout_s=limits.timeout_s, scope=scope)
    if server.broken or ended is None:
        if server.refused:
            with _idle_lock:
                _unservable.add(module)
        server.close()
        return ended
    with _idle_lock:
        _idle.append(server)
        evicted = _idle.pop(0) if len(_idle) > MAX_IDLE_SERVERS else None
    if evicted is not None:
        evicted.close()
    return ended


def close_grade_servers() -> None:
    """End the idle grading servers (each ends by itself with this process, too) and forget
    which programs could not be served.
    """
    with _idle_lock:
        servers = list(_idle)
        _idle.clear()
        _unservable.clear()
    for server in servers:
        server.close()


atexit.register(close_grade_servers)


async def grade_in_thread(
    task: TaskHandle, submission: Path, split: Split, *, timeout_s: float | None = None
) -> GradeLike:
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
        grade: Callable[..., GradeLike] = task.grade  # an openmle Task's takes timeout_s
        call: Callable[[], GradeLike] = functools.partial(grade, submission, split, timeout_s=bound)
    else:
        call = functools.partial(task.grade, submission, split)

    def run() -> GradeLike:
        _LOCAL.scope = scope
        try:
            return call()
        finally:
            _LOCAL.scope = None

    try:
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
    finally:
        scope.cancel()  # a no-op when the grade ended; kills it when the caller was cancelled
