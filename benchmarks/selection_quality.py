"""Three-factor parent selection against greedy and uniform, at equal budget, across seeds.

Each bundled task is searched with the offline model (numpy programs) in the local sandbox,
5 seeds per selector, 14 steps each (4 initial drafts, then Improve/Crossover/Debug), ordered
commits so a seed's run does not depend on timing (the harness is
``tests/quality/_harness.py``). Two claims of the paper are compared:

- the three-factor selector reaches a better mean best validation score than greedy and
  uniform parent selection on most tasks;
- search with the four operators (three-factor parents) beats the parallel baseline, the best
  of as many independent Drafts, on most tasks at the same number of steps.

Measured on a 2-core machine (mean best validation score over the 5 seeds; binary higher is
better, the others lower)::

    task                three-factor   greedy     uniform    drafts-only
    tabular-binary      0.74020        0.73954    0.74226    0.73961
    tabular-regression  26.714         26.736     27.022     27.381
    tabular-multiclass  1.01242        1.01993    1.02075    1.02817

Margins are within about one standard deviation at 14 steps; the offline model's Improve
makes small changes, so the selector has few decisive steps at this budget. The suite keeps a
fast guard of the machinery (``tests/quality/test_selection_quality.py``: every arm searched,
and the comparison independent of how many searches run at once). Run::

    python benchmarks/selection_quality.py              # the table above (minutes on 2 cores)
    python benchmarks/selection_quality.py --steps 24 --seeds 0 1 2 3 4 5 6 7

It prints the table and ends with one JSON line: the means per task and arm, on how many
tasks each claim held, and the seconds it took.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]  # the harness lives with the tests

from benchmarks._common import emit  # noqa: E402

TASKS = ("tabular-binary", "tabular-regression", "tabular-multiclass")
HIB = {"tabular-binary": True, "tabular-regression": False, "tabular-multiclass": False}


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print its table and figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=14, help="search steps per run (default 14)")
    ap.add_argument("--drafts", type=int, default=4, help="initial drafts (default 4)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    args = ap.parse_args(argv)

    import anyio
    from tests.quality._harness import DRAFTS_ONLY, compare, table, wins

    hib = {t: HIB[t] for t in args.tasks}

    async def go() -> dict[str, dict[str, list[float]]]:
        return await compare(
            args.tasks, args.seeds, steps=args.steps, initial_drafts=args.drafts, hib=hib,
            drafts_only=True,
        )  # fmt: skip

    t0 = time.perf_counter()
    results = anyio.run(go)
    seconds = time.perf_counter() - t0
    print("mean best validation score (sd) over seeds", args.seeds, "- * marks the best mean")
    print(table(results, hib))
    won = wins(results, hib)
    over_drafts = wins(results, hib, against=(DRAFTS_ONLY,))
    print("three-factor ahead of greedy and uniform:", won)
    print("search ahead of best-of-N drafts:", over_drafts)
    emit(
        "selection_quality",
        {
            "steps": args.steps,
            "seeds": args.seeds,
            "means": {
                t: {a: round(statistics.fmean(v), 6) for a, v in by.items()}
                for t, by in results.items()
            },
            "three_factor_ahead": won,
            "search_ahead_of_drafts": over_drafts,
            "claims_held": sum(won.values()) >= 2 and sum(over_drafts.values()) >= 2,
            "seconds": round(seconds, 1),
        },
    )


if __name__ == "__main__":
    main()
