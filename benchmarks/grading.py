"""Where a grade's time goes: a task package graded by a fresh interpreter vs a grading server.

A small task package (built-in ``rmse`` metric, 200 test rows, like a search step's
validation grade) is graded with :meth:`openmle.gym.Task.grade` two ways, interleaved (fresh,
served, fresh, served, ...) so background load hits both alike; the figures are medians:

- ``fresh``: a new ``python -I -c <grading module>`` process per grade (what every grade
  paid before the grading server; still what a grade with ``hash_seed`` or ``module=`` pays);
- ``served``: a fork of the reused grading server per grade (the default now).

Where the time goes, each part measured on its own in the same run (medians; parts of the
fresh grade are separate processes, so under load they do not add up exactly):
``interpreter`` (``python -I -c pass``: a process and interpreter start), ``with_module``
(``python -I -c <grading module>`` that only defines the module: the start plus compiling the
module's source, which ``-c`` does every time, and importing its standard-library modules),
``grade_in_process`` (the CSV reads, checks and metric, called in this process). A served grade
pays ``grade_in_process`` plus a fork, the child's confinement, the configuration and result
files and two pipe round trips (``served - grade_in_process``). The toy task of
``benchmarks/sandbox.py`` (``openmle.testing.ToyTask``, a test fake whose grader is always a
fresh ``python -I -c``) is timed too, as ``toy_ms``, for comparison with that benchmark.

Run: ``python benchmarks/grading.py [--repeats 30]``.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the CSV writer of the tests
from tests._files import write_csv

from openmle import Split
from openmle.gym import _gradeproc as gradeproc
from openmle.gym import _grader as grader
from openmle.gym import load_task
from openmle.testing import TOY_SOLUTION, ToyTask

# ``benchmarks/`` is on sys.path when this runs as a script; mypy does not know that.
emit: Callable[[str, dict[str, Any]], None] = importlib.import_module("_common").emit

N_ROWS = 200
GOAL_MS = 25.0


def _package(root: Path) -> tuple[Path, Path]:
    """A regression package with its validation split shipped; (root, a submission)."""
    rows = [[i, round(i * 0.5, 2), round(2.0 * i + 1.0, 3)] for i in range(4 * N_ROWS)]
    for view, test in (("data", rows[-N_ROWS:]), ("data/valid", rows[-2 * N_ROWS : -N_ROWS])):
        pub, priv = root / view / "public", root / view / "private"
        write_csv(pub / "train.csv", ["id", "x", "y"], [r for r in rows if r not in test])
        write_csv(pub / "test.csv", ["id", "x"], [r[:2] for r in test])
        write_csv(pub / "sample_submission.csv", ["id", "y"], [[r[0], 0.0] for r in test])
        write_csv(priv / "test_answer.csv", ["id", "y"], [[r[0], r[2]] for r in test])
        (pub / "description.txt").write_text("Predict y. RMSE. Columns id,y.\n")
    (root / "task.toml").write_text('name = "bench"\nmetric = "rmse"\n')
    sub = root.parent / "submission.csv"
    write_csv(sub, ["id", "y"], [[r[0], r[2] + 0.1] for r in rows[-2 * N_ROWS : -N_ROWS]])
    return root, sub


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, capture_output=True, env={"PATH": "/usr/bin:/bin"})


def _measure(repeats: int) -> dict[str, float | int | str]:
    served_fn = grader._served
    with tempfile.TemporaryDirectory() as tmp:
        root, sub = _package(Path(tmp) / "pkg")
        task = load_task(root)
        toy = ToyTask.create(Path(tmp) / "toy")
        work = Path(tmp) / "toywork"
        work.mkdir()
        subprocess.run(
            [sys.executable, "-c", TOY_SOLUTION],
            cwd=work,
            env={"DATA_DIR": str(toy.public_dir(Split.VALID))},
            check=True,
            capture_output=True,
        )
        config = {
            "answers": str(task.answers_path("valid")),
            "sample": str(task.public_dir("valid") / "sample_submission.csv"),
            "submission": str(sub),
            "id_column": task.id_column,
            "metric": "rmse",
        }
        source = grader._grader_source().replace('if __name__ == "__main__":', "if False:")
        parts: dict[str, list[float]] = {}

        def add(name: str, ms: float) -> None:
            parts.setdefault(name, []).append(ms)

        for i in range(repeats + 2):

            def fresh() -> object:
                grader._served = lambda *a, **k: None
                try:
                    return task.grade(sub, "valid")
                finally:
                    grader._served = served_fn

            f_ms = _timed(fresh)
            s_ms = _timed(lambda: task.grade(sub, "valid"))
            i_ms = _timed(lambda: _run([sys.executable, "-I", "-c", "pass"]))
            m_ms = _timed(lambda: _run([sys.executable, "-I", "-c", source]))
            g_ms = _timed(lambda: gradeproc.grade_files(config))
            t_ms = _timed(lambda: toy.grade(work / "submission.csv", Split.VALID))
            if i < 2:  # warm-up (the first served grade starts the server)
                continue
            for name, ms in (
                ("fresh", f_ms),
                ("served", s_ms),
                ("interpreter", i_ms),
                ("with_module", m_ms),
                ("grade_in_process", g_ms),
                ("toy", t_ms),
            ):
                add(name, ms)
        report = task.grade(sub, "valid")
        assert report.valid and report.score is not None, report
    med = {k: statistics.median(v) for k, v in parts.items()}
    print(
        f"fresh interpreter grade {med['fresh']:6.1f} ms | its parts: interpreter start "
        f"{med['interpreter']:.1f}, start + grading module {med['with_module']:.1f}, grade "
        f"{med['grade_in_process']:.1f}"
    )
    print(
        f"served grade (fork)     {med['served']:6.1f} ms = grade "
        f"{med['grade_in_process']:.1f} + fork, confine, files, round trips "
        f"{med['served'] - med['grade_in_process']:.1f} | ratio served/fresh "
        f"{med['served'] / med['fresh']:.2f}"
    )
    print(f"toy task (test fake, fresh python -I -c) {med['toy']:6.1f} ms")
    figures: dict[str, float | int | str] = {"repeats": repeats, "rows": N_ROWS}
    for name, ms in med.items():
        figures[f"{name}_ms"] = round(ms, 2)
    figures["served_over_fresh"] = round(med["served"] / med["fresh"], 3)
    figures["goal_grade_ms"] = GOAL_MS
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    figures = _measure(args.repeats)
    grader.close_grade_servers()
    emit("grading", figures)


if __name__ == "__main__":
    main()
