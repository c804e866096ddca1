"""Running a package's ``utils/prepare.py`` in a child process, deterministically.

``prepare(raw, public, private)`` is the task author's code, untrusted like any package
content: it runs in a fresh ``python -I`` process with a fixed environment (nothing of the
caller's: no API keys, no ``LD_*``; ``PYTHONHASHSEED=0``), its own session whose whole process
group is killed when it ends or passes ``timeout_s``, ``RLIMIT_AS`` (``memory_mb``),
``RLIMIT_CPU`` (the timeout) and ``RLIMIT_FSIZE`` (``max_file_mb``) set before the package's
code is imported, Python's and numpy's global random generators seeded with 0, an empty
temporary working directory and fresh output directories; its stderr is kept to the last
64 KiB. Only when it succeeds are ``data/public`` and ``data/private`` replaced (each by a
rename), so a failing prepare leaves the package as it was.

Not confined here: the network and the file system beyond the process's own user (run
``openmle task build`` or a sandbox for raw data you do not trust; the task builder runs the
model's ``prepare.py`` inside a :class:`~openmle.Sandbox`).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from openmle.errors import InvalidArgument, TaskPackageError
from openmle.gym._grader import _env as _grader_env
from openmle.gym._grader import _kill_group, _wait_exit

__all__ = ["run_prepare"]

_RUNNER = r"""
import importlib.util, random, resource, sys
from pathlib import Path
memory_mb, cpu_s, file_mb = (int(a) for a in sys.argv[5:8])
for which, value in (
    (resource.RLIMIT_AS, memory_mb << 20),
    (resource.RLIMIT_CPU, cpu_s),
    (resource.RLIMIT_FSIZE, file_mb << 20),
):
    soft, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))
random.seed(0)
try:
    import numpy
    numpy.random.seed(0)
except ImportError:
    pass
prepare_py, raw, public, private = (Path(a) for a in sys.argv[1:5])
sys.path.insert(0, str(prepare_py.parent))
spec = importlib.util.spec_from_file_location("_openmle_task_prepare", prepare_py)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
fn = getattr(module, "prepare", None)
if not callable(fn):
    print("utils/prepare.py defines no function prepare(raw, public, private)", file=sys.stderr)
    sys.exit(3)
try:
    fn(raw, public, private)
except MemoryError:
    print(f"MemoryError: prepare.py needed more than memory_mb={memory_mb}", file=sys.stderr)
    sys.exit(4)
"""

_STDERR_TAIL = 64 * 1024

_MAX_MEMORY_MB = 1 << 20
_MAX_FILE_MB = 1 << 20


def _env(home: str) -> dict[str, str]:
    """The fixed environment of a prepare process: the grading process's (nothing of the
    caller's), with ``PYTHONHASHSEED=0``.
    """
    return {**_grader_env(home), "PYTHONHASHSEED": "0"}


def _limit(value: object, name: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
        raise InvalidArgument(
            f"Expected {name} to be an integer in [1, {most}] MiB but got {value!r}"
        )
    return value


def _tail(path: Path) -> str:
    with path.open("rb") as fh:
        fh.seek(max(0, path.stat().st_size - _STDERR_TAIL))
        return fh.read().decode("utf-8", "replace")


def _run_confined(
    argv: list[str], *, cwd: Path, home: Path, err: Path, timeout_s: float
) -> int | None:
    """Run ``argv`` in its own session with the fixed environment; its exit status, or None
    when it passed ``timeout_s``. Its whole process group is killed when it ends.
    """
    with err.open("wb") as stderr:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=_env(str(home)),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            exited = _wait_exit(proc, timeout_s)  # not reaped: its group id stays its own
        finally:
            # The package's own children (a daemon it forked) go with it, timed out or not.
            _kill_group(proc)
            proc.wait()
    if not exited:
        return None
    return proc.returncode


def run_prepare(
    root: Path, *, timeout_s: float = 600.0, memory_mb: int = 16384, max_file_mb: int = 16384
) -> None:
    """Rebuild ``root/data/public`` and ``root/data/private`` from ``root/raw``.

    Args:
        root: the package directory.
        timeout_s: wall-clock limit in seconds (also the CPU-time limit).
        memory_mb: address-space limit of the prepare process, MiB.
        max_file_mb: largest file the prepare process may write, MiB.

    Raises:
        InvalidArgument: a limit is not a positive integer.
        TaskPackageError: ``utils/prepare.py`` or ``raw/`` is missing, prepare raised or
            exited non-zero (the message holds the tail of its stderr), passed a limit, or
            wrote nothing to the public directory.
    """
    memory_mb = _limit(memory_mb, "memory_mb", _MAX_MEMORY_MB)
    max_file_mb = _limit(max_file_mb, "max_file_mb", _MAX_FILE_MB)
    prepare_py = root / "utils" / "prepare.py"
    raw = root / "raw"
    if not prepare_py.is_file():
        raise TaskPackageError(
            "utils/prepare.py is missing; add a module with prepare(raw, public, private)"
        )
    if not raw.is_dir():
        raise TaskPackageError(
            "raw/ is missing, so prepare.py has nothing to split; put the labelled source "
            "data in raw/"
        )
    data = root / "data"
    data.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".prepare-", dir=data) as tmp:
        stage = Path(tmp)
        public, private, work = stage / "public", stage / "private", stage / "work"
        for d in (public, private, work):
            d.mkdir()
        home = stage / "home"
        home.mkdir()
        argv = [
            sys.executable,
            "-I",
            "-c",
            _RUNNER,
            str(prepare_py),
            str(raw),
            str(public),
            str(private),
            str(memory_mb),
            str(max(1, int(timeout_s + 0.999))),
            str(max_file_mb),
        ]
        err = stage / "stderr"
        code = _run_confined(argv, cwd=work, home=home, err=err, timeout_s=timeout_s)
        if code is None:
            raise TaskPackageError(
                f"utils/prepare.py ran longer than {timeout_s:g} s; make it faster or raise "
                "the timeout"
            )
        if code != 0:
            tail = _tail(err).strip().splitlines()[-5:]
            why = {
                -signal.SIGXCPU: f" (CPU time limit of {timeout_s:g} s)",
                -signal.SIGXFSZ: f" (a file passed max_file_mb={max_file_mb})",
                -signal.SIGKILL: " (killed: out of memory or from outside)",
            }.get(code, "")
            raise TaskPackageError(
                f"utils/prepare.py failed with exit code {code}{why}: "
                + " | ".join(tail)
                + "; fix the error and run prepare again"
            )
        if not any(public.iterdir()):
            raise TaskPackageError(
                "utils/prepare.py wrote nothing to the public directory; write train.csv, "
                "test.csv, sample_submission.csv and description.txt there"
            )
        for name, new in (("public", public), ("private", private)):
            old = data / name
            if old.exists():
                trash = stage / f"old-{name}"
                old.rename(trash)
            new.rename(old)
        shutil.rmtree(stage / "work", ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
