"""Running a package's ``utils/prepare.py`` in a child process, deterministically.

``prepare(raw, public, private)`` is the task author's code, untrusted like any package
content: it runs in the one confined child process every host-side task code runs in
(:func:`openmle.gym._grader.run_child`, mode ``prepare``): a fresh ``python -I`` process with a
fixed environment (nothing of the caller's: no API keys, no ``LD_*``; ``PYTHONHASHSEED=0``), its
own session whose whole process group is killed when it ends, passes ``timeout_s`` or the
calling thread's :class:`~openmle.gym.GradeScope` is cancelled, ``PR_SET_PDEATHSIG`` (it dies
with the thread that started it, a SIGKILLed caller included), ``RLIMIT_AS`` (``memory_mb``),
``RLIMIT_CPU`` (the timeout) and ``RLIMIT_FSIZE`` (``max_file_mb``) set before the package's
code is imported, Python's and numpy's global random generators seeded with 0, an empty
temporary working directory and fresh output directories. Its error (type, message, the last
traceback lines) comes back in the child's result, bounded. Only when it succeeds are
``data/public`` and ``data/private`` replaced (each by a rename), so a failing prepare leaves
the package as it was.

Not confined here: the network and the file system beyond the process's own user (run
``openmle task build`` or a sandbox for raw data you do not trust; the task builder runs the
model's ``prepare.py`` inside a :class:`~openmle.Sandbox`).
"""

from __future__ import annotations

import signal
from pathlib import Path

from openmle._trees import remove_tree, scratch_dir
from openmle.errors import InvalidArgument, TaskPackageError
from openmle.gym._grader import GradeLimits, run_child

__all__ = ["run_prepare"]

_MAX_MEMORY_MB = 1 << 20
_MAX_FILE_MB = 1 << 20


def _limit(value: object, name: str, most: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
        raise InvalidArgument(
            f"Expected {name} to be an integer in [1, {most}] MiB but got {value!r}"
        )
    return value


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
            ended without a result (the message holds its error and traceback tail), passed a
            limit, or
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
    with scratch_dir(prefix=".prepare-", dir=data) as tmp:
        stage = Path(tmp)
        public, private, work = stage / "public", stage / "private", stage / "work"
        for d in (public, private, work):
            d.mkdir()
        config = {
            "mode": "prepare",
            "prepare_py": str(prepare_py),
            "raw": str(raw),
            "public": str(public),
            "private": str(private),
            "max_file_mb": max_file_mb,
        }
        limits = GradeLimits(timeout_s=timeout_s, memory_mb=memory_mb)
        child = run_child(config, limits=limits, cwd=work, hash_seed=0)
        found = child.result or {}
        if child.limit == "time":
            raise TaskPackageError(
                f"utils/prepare.py ran longer than {timeout_s:g} s; make it faster or raise "
                "the timeout"
            )
        if child.limit == "memory":
            raise TaskPackageError(
                f"utils/prepare.py failed: MemoryError: prepare.py needed more than "
                f"memory_mb={memory_mb}; fix the error and run prepare again"
            )
        if "error" in found or not found.get("ok"):
            code = child.returncode
            why = {
                -signal.SIGXCPU: f" (CPU time limit of {timeout_s:g} s)",
                -signal.SIGXFSZ: f" (a file passed max_file_mb={max_file_mb})",
                -signal.SIGKILL: " (killed: out of memory or from outside)",
            }.get(code or 0, "")
            detail = str(found.get("error") or f"it ended without a result (exit code {code})")
            tail = " | ".join(detail.strip().splitlines()[-5:])
            raise TaskPackageError(
                f"utils/prepare.py failed{why}: {tail}; fix the error and run prepare again"
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
        remove_tree(stage / "work")
