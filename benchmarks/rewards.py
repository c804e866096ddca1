"""Batched entropic advantages vs a plain per-group loop, side by side.

4,096 groups of 16 rewards. The loop is the textbook algorithm written here (log-sum-exp KL,
doubling then 60 bisection steps, leave-one-out weights), one group at a time; the batched
version is :func:`openmle.rewards.entropic_advantages`, one vectorised computation over all
groups. Both give the same advantages (the maximum difference is printed).

Run: ``python benchmarks/rewards.py`` (``--groups`` and ``--size`` to change the shape).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(_ROOT), str(_ROOT / "src")]

from benchmarks._common import emit, median_seconds  # noqa: E402

from openmle.rewards import entropic_advantages  # noqa: E402

FloatArray = npt.NDArray[np.float64]


def _kl(c: FloatArray, beta: float) -> float:
    z = beta * c
    logq = z - np.logaddexp.reduce(z)
    q = np.exp(logq)
    return float(np.sum(q * (logq + math.log(c.size))))


def textbook_entropic(rewards: FloatArray, target_kl: float = math.log(2.0)) -> FloatArray:
    """The entropic advantage of one group, the plain way (mirrors the released algorithm)."""
    k = rewards.size
    if k < 2 or np.allclose(rewards, rewards[0]):
        return np.zeros(k)
    c = rewards - rewards.max()
    hi = 1.0
    while hi < 1e6 and _kl(c, hi) < target_kl:
        hi *= 2.0
    if _kl(c, hi) >= target_kl:
        lo = 0.0
        for _ in range(60):
            mid = (lo + hi) / 2.0
            if _kl(c, mid) >= target_kl:
                hi = mid
            else:
                lo = mid
    e = np.exp(hi * c)
    z = (e.sum() - e) / (k - 1)
    out: FloatArray = e / (z + 1e-12) - 1.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=4096)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rewards = np.random.default_rng(0).uniform(0.0, 1.0, size=(args.groups, args.size))

    def loop() -> FloatArray:
        return np.stack([textbook_entropic(row) for row in rewards])

    def batched() -> FloatArray:
        return entropic_advantages(rewards, compat="openrsi")

    max_diff = float(np.max(np.abs(loop() - batched())))
    t_loop = median_seconds(loop, repeats=args.repeats, warmup=0)
    t_batched = median_seconds(batched, repeats=args.repeats, warmup=1)
    ratio = t_loop / t_batched
    print(f"groups x size           : {args.groups} x {args.size}")
    print(f"per-group loop          : {t_loop * 1e3:10.1f} ms")
    print(f"batched (vectorised)    : {t_batched * 1e3:10.1f} ms")
    print(f"speed-up                : {ratio:10.1f} x")
    print(f"max |loop - batched|    : {max_diff:.3e}")
    emit(
        "rewards.entropic_advantages",
        {
            "groups": args.groups,
            "size": args.size,
            "loop_s": round(t_loop, 6),
            "batched_s": round(t_batched, 6),
            "speedup": round(ratio, 2),
            "max_abs_diff": max_diff,
        },
    )


if __name__ == "__main__":
    main()
