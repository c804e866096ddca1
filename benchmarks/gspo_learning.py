"""GSPO learns from real program execution, across seeds: the comparison that takes minutes.

The tiny byte-level policy, warm-started by SFT on the answer format, is trained with GSPO on
the ``digit`` task (rewards from programs run by the real local sandbox; the harness and its
measurements are in ``tests/quality/_gspo.py``). Two figures, each per seed:

- synchronous (:func:`openmle.train.train_on_policy`, lr 7e-4, 30 steps, seeds 0-2): the
  last six steps' mean score minus the first four's; the claim is a mean end score above the
  start by more than 0.1 and a gain above 0.05 on every seed;
- asynchronous (:class:`openmle.train.AsyncRollouts`, two groups in flight, at most one step
  stale, lr 3e-4, 30 steps, seeds 0-1): every gain positive, mean gain above 0.05.

With two groups in flight every group after the first step is exactly one step stale: the
workers sample again before the trainer takes the lock. A step that harms the answer format
then shows in the rewards two steps later instead of one. At the synchronous lr (7e-4) that
made the format collapse and recover (steps at 0.00 valid), and one of two seeds ended below
its start. At 5e-4, 4 of 5 seeds gained more than 0.05, still with dips. At 3e-4, 5 of 5 seeds
gained 0.05-0.18 with no step below 0.53. The truncated IS weights stayed within 0.99-1.004, so
the correction is not what fails; the delay is.

The suite keeps a fast guard of the same behaviour (``tests/quality/test_gspo_learning.py``:
a few steps on one seed, judged by the exact probability of the 7's program). Run::

    python benchmarks/gspo_learning.py                 # both figures (a few minutes on 2 cores)
    python benchmarks/gspo_learning.py --steps 40 --seeds 0 1 2 3 4 5

It prints each curve (mean score of each step's 16 programs, failures count 0) and ends with
one JSON line: the gains, whether each claim held, and the seconds each part took.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]  # the harness lives with the tests

from benchmarks._common import emit  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    """Run both comparisons and print their figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=30, help="GSPO steps per run (default 30)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="synchronous seeds")
    ap.add_argument("--async-seeds", type=int, nargs="*", default=[0, 1], help="async seeds")
    args = ap.parse_args(argv)

    import numpy as np
    import torch
    from tests.quality._gspo import gains, learn

    torch.set_num_threads(1)  # a tiny model beside the programs gains nothing from a second
    figures: dict[str, object] = {"steps": args.steps}
    with tempfile.TemporaryDirectory(prefix="openmle-gspo-") as tmp:
        t0 = time.perf_counter()
        sync = {s: learn(Path(tmp), s, args.steps).curve for s in args.seeds}
        figures["sync_s"] = round(time.perf_counter() - t0, 1)
        for seed, curve in sync.items():
            print(f"seed {seed}: " + " ".join(f"{x:.2f}" for x in curve))
        g = gains(sync)
        start = float(np.mean([np.mean(c[:4]) for c in sync.values()]))
        end = float(np.mean([np.mean(c[-6:]) for c in sync.values()]))
        print(f"mean score: first four steps {start:.3f}, last six steps {end:.3f}; gains {g}")
        figures |= {
            "sync_gains": g,
            "sync_start": round(start, 4),
            "sync_end": round(end, 4),
            "sync_claim_held": end > start + 0.1 and all(v > 0.05 for v in g.values()),
        }
        if args.async_seeds:
            t0 = time.perf_counter()
            curves = {
                s: learn(Path(tmp), s, args.steps, mode="async", lr=3e-4).curve
                for s in args.async_seeds
            }
            figures["async_s"] = round(time.perf_counter() - t0, 1)
            for seed, curve in curves.items():
                print(f"async seed {seed}: " + " ".join(f"{x:.2f}" for x in curve))
            ga = gains(curves)
            print(f"async gains {ga}")
            figures |= {
                "async_gains": ga,
                "async_claim_held": all(v > 0.0 for v in ga.values())
                and float(np.mean(list(ga.values()))) > 0.05,
            }
    emit("gspo_learning", figures)


if __name__ == "__main__":
    main()
