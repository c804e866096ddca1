"""``openmle demo``: a small, real demonstration of the reward maths.

``openmle demo --rewards`` runs the worked example of
``docs/explanation/rewards.md``: one group of 16 log-loss scores (lower is better), rewarded
with static bounds and with adaptive bounds, and the best candidate's advantage under GRPO and
under the entropic advantage, printed as a table. (Plain ``openmle demo`` runs a search; see
``openmle._cli._search``.)
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from openmle._types import TaskMeta
from openmle.rewards import (
    adaptive_bounds,
    entropic_advantage,
    group_normalized_advantage,
    score_to_reward,
    signed_score,
    static_bounds,
)

__all__ = ["WORKED_SCORES", "register", "run_demo"]

WORKED_SCORES: tuple[float, ...] = (
    0.171, 0.164, 0.159, 0.152, 0.148, 0.141, 0.139, 0.131,
    0.129, 0.122, 0.118, 0.111, 0.104, 0.098, 0.091, 0.083,
)  # fmt: skip
"""Validation log-loss of 16 candidate programs of one group (lower is better)."""

_META = TaskMeta(
    higher_is_better=False, theoretical_min=0.0, theoretical_max=20.0, name="log-loss demo"
)


def run_demo() -> dict[str, Any]:
    """Compute every figure of the worked example; returns them as a JSON-ready dict."""
    signed = np.asarray(signed_score(WORKED_SCORES, _META.higher_is_better))
    s_best, s_worst = static_bounds(_META)
    if not (s_best is not None and s_worst is not None):
        raise AssertionError(
            "internal invariant broken: s_best is not None and s_worst is not None"
        )
    a_best, a_worst = adaptive_bounds(
        [], WORKED_SCORES, meta=_META, mode="top1_top16", lower_shift_ratio=0.25
    )
    if not (a_best is not None and a_worst is not None):
        raise AssertionError(
            "internal invariant broken: a_best is not None and a_worst is not None"
        )
    static_r = np.asarray(score_to_reward(signed, best=s_best, worst=s_worst))
    adaptive_r = np.asarray(score_to_reward(signed, best=a_best, worst=a_worst))
    grpo = group_normalized_advantage(adaptive_r)
    ent = entropic_advantage(adaptive_r)
    top = int(np.argmax(adaptive_r))
    return {
        "scores": list(WORKED_SCORES),
        "static_bounds": [s_best, s_worst],
        "adaptive_bounds": [a_best, a_worst],
        "static_rewards": static_r.tolist(),
        "adaptive_rewards": adaptive_r.tolist(),
        "grpo_advantages": grpo.tolist(),
        "entropic_advantages": ent.tolist(),
        "static_spread": float(np.ptp(static_r)),
        "adaptive_spread": float(np.ptp(adaptive_r)),
        "best_grpo": float(grpo[top]),
        "best_entropic": float(ent[top]),
        "best_ratio": float(ent[top] / grpo[top]),
    }


def _print_table(fig: dict[str, Any]) -> None:
    sb, sw = (v + 0.0 for v in fig["static_bounds"])  # + 0.0 prints -0.0 as 0.0
    ab, aw = fig["adaptive_bounds"]
    print("openmle demo: rewarding one group of 16 programs on a log-loss task (lower is better)")
    print()
    print(f"  static bounds (signed)   best {sb:+.4f}  worst {sw:+.4f}")
    print(f"  adaptive bounds (signed) best {ab:+.4f}  worst {aw:+.4f}  (top1_top16, shift 0.25)")
    print()
    header = f"  {'#':>2}  {'log-loss':>8}  {'static r':>8}  {'adaptive r':>10}  {'GRPO A':>7}"
    print(header + f"  {'entropic A':>10}")
    print("  " + "-" * (len(header) + 10))
    rows = zip(
        fig["scores"],
        fig["static_rewards"],
        fig["adaptive_rewards"],
        fig["grpo_advantages"],
        fig["entropic_advantages"],
        strict=True,
    )
    for i, (score, sr, ar, g, e) in enumerate(rows, start=1):
        print(f"  {i:>2}  {score:8.3f}  {sr:8.4f}  {ar:10.4f}  {g:+7.3f}  {e:+10.3f}")
    print()
    print("  (advantages are computed from the adaptive rewards)")
    print(
        f"  reward spread: static {fig['static_spread']:.4f}, adaptive {fig['adaptive_spread']:.4f}"
    )
    print(
        f"  best candidate's advantage: GRPO {fig['best_grpo']:.3f}, "
        f"entropic {fig['best_entropic']:.3f} ({fig['best_ratio']:.2f}x)"
    )


def _handle(args: argparse.Namespace) -> int:
    fig = run_demo()
    if args.json:
        print(json.dumps(fig, sort_keys=True))
    else:
        _print_table(fig)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` command."""
    parser = subparsers.add_parser(
        "demo",
        help="show the reward maths on a worked example",
        description=(
            "Reward one group of 16 log-loss scores with static and adaptive bounds and "
            "compare GRPO with the entropic advantage."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.set_defaults(handler=_handle)
