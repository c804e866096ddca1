"""An MLE-bench grade: a fresh ``python -I -m`` interpreter per grade vs a reused server.

One competition of the MLE-bench Lite miniature (``--competition``, default
``spooky-author-identification``) is graded on its sample submission through the bench's own
path (:meth:`openmle.bench.MLEBench.task` ``.grade``: :func:`openmle.gym.run_child` running
:mod:`openmle.bench.mlebench.child`), ``--repeats`` times each way, interleaved (fresh,
served, fresh, served, ...) so background load hits both alike; the figures are medians:

- ``fresh``: ``python -I -m openmle.bench.mlebench.child CONFIG`` per grade (what every
  MLE-bench grade, view and format check paid before its program was served): an interpreter
  start, openmle's and pandas' imports, then the grade;
- ``served``: a fork of the reused grading server, which imported the program and its
  ``PRELOAD`` (pandas, ``openmle.gym``) once (the default now).

``server_start`` is the first served grade (it starts the server), paid once per process.

Run: ``python benchmarks/mlebench_grading.py [--repeats 20] [--competition ID]``.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmle import Split
from openmle.bench import MLEBench, build_miniature
from openmle.bench._miniyaml import load as load_yaml
from openmle.gym import _grader as grader

# ``benchmarks/`` is on sys.path when this runs as a script; mypy does not know that.
emit: Callable[[str, dict[str, Any]], None] = importlib.import_module("_common").emit


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def _measure(repeats: int, cid: str) -> dict[str, float | int | str]:
    served_fn = grader._served
    with tempfile.TemporaryDirectory() as tmp:
        registry, data = build_miniature(Path(tmp) / "mini", [cid])
        cfg = load_yaml((registry / "mlebench/competitions" / cid / "config.yaml").read_text())
        sub = data / cfg["dataset"]["sample_submission"]
        task = MLEBench.locate(registry, data, valid_dir=Path(tmp) / "valid").task(cid)

        def grade() -> Any:
            report = task.grade(sub, Split.TEST)
            assert report.valid and report.score is not None, report
            return report

        def fresh() -> object:
            grader._served = lambda *a, **k: None
            try:
                return grade()
            finally:
                grader._served = served_fn

        grader.close_grade_servers()
        start_ms = _timed(grade)
        times: dict[str, list[float]] = {"fresh": [], "served": []}
        for _ in range(repeats):
            times["fresh"].append(_timed(fresh))
            times["served"].append(_timed(grade))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"{cid}: fresh interpreter grade {med['fresh']:7.1f} ms | served (fork) "
        f"{med['served']:6.1f} ms | ratio served/fresh {med['served'] / med['fresh']:.3f} | "
        f"first served grade (server start) {start_ms:.1f} ms"
    )
    return {
        "competition": cid,
        "repeats": repeats,
        "fresh_ms": round(med["fresh"], 2),
        "served_ms": round(med["served"], 2),
        "served_over_fresh": round(med["served"] / med["fresh"], 3),
        "server_start_ms": round(start_ms, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--competition", default="spooky-author-identification")
    args = parser.parse_args()
    figures = _measure(args.repeats, args.competition)
    grader.close_grade_servers()
    emit("mlebench_grading", figures)


if __name__ == "__main__":
    main()
