"""Running a package's ``utils/prepare.py`` in a child process, deterministically.

``prepare(raw, public, private)`` is the task author's code; it runs in a fresh ``python -I``
process with ``PYTHONHASHSEED=0``, Python's and numpy's global random generators seeded with 0,
an empty temporary working directory and fresh output directories. Only when it succeeds are
``data/public`` and ``data/private`` replaced (each by a rename), so a failing prepare leaves
the package as it was.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from openmle.errors import TaskPackageError

__all__ = ["run_prepare"]

_RUNNER = r"""
import importlib.util, random, sys
from pathlib import Path
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
fn(raw, public, private)
"""


def run_prepare(root: Path, *, timeout_s: float = 600.0) -> None:
    """Rebuild ``root/data/public`` and ``root/data/private`` from ``root/raw``.

    Raises:
        TaskPackageError: ``utils/prepare.py`` or ``raw/`` is missing, prepare raised or
            exited non-zero (the message holds the tail of its stderr), ran past ``timeout_s``,
            or wrote nothing to the public directory.
    """
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
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        try:
            proc = subprocess.run(
                [
                    sys.executable,
                    "-I",
                    "-c",
                    _RUNNER,
                    str(prepare_py),
                    str(raw),
                    str(public),
                    str(private),
                ],
                cwd=work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TaskPackageError(
                f"utils/prepare.py ran longer than {timeout_s:g} s; make it faster or raise "
                "the timeout"
            ) from None
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-5:]
            raise TaskPackageError(
                f"utils/prepare.py failed with exit code {proc.returncode}: "
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
