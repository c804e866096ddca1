"""The bench runner's own cost: ``openmle bench run`` against the same searches run directly.

A miniature MLE-bench (three competitions, the test suite's builder in
``tests/unit/bench/_minibench.py``) is run with the offline model and the local sandbox, two
ways, interleaved (bench, direct, bench, direct, ...) so background load hits both alike:

- **bench**: ``python -m openmle bench run mle-bench-lite ... --concurrency 1`` (the CLI:
  manifest, progress, kept submissions, per-run results and the reports);
- **direct**: one Python process that runs the same searches itself with
  :func:`openmle.search.arun_search` (same competitions, seeds, budget, time limit, model and
  sandbox, one run at a time), each with its run directory, and nothing else.

Both are timed as whole processes (each pays one interpreter start). The figure is the ratio
of the medians (goal: at most 1.05x). Both sides must journal the same number of nodes.

Run: ``python benchmarks/bench_runner.py [--repeats 3] [--seeds 2] [--steps 2]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the miniature's builder lives with the tests
emit: Callable[[str, dict[str, Any]], None] = importlib.import_module("benchmarks._common").emit

SUITE = "mle-bench-lite"
TIME_LIMIT_S = 120
GOAL_RATIO = 1.05


def _bench_cmd(registry: Path, data: Path, out: Path, seeds: int, steps: int) -> list[str]:
    return [
        sys.executable, "-m", "openmle", "bench", "run", SUITE, "--data", str(data),
        "--registry", str(registry), "--model", "offline", "--seeds", str(seeds),
        "--budget", f"steps={steps}", "--out", str(out), "--concurrency", "1",
        "--time-limit", str(TIME_LIMIT_S),
    ]  # fmt: skip


def _direct_cmd(registry: Path, data: Path, out: Path, seeds: int, steps: int) -> list[str]:
    return [
        sys.executable, __file__, "--direct", "--registry", str(registry), "--data", str(data),
        "--out", str(out), "--seeds", str(seeds), "--steps", str(steps),
    ]  # fmt: skip


async def _direct(registry: Path, data: Path, out: Path, seeds: int, steps: int) -> None:
    """The searches ``bench run`` makes, run one after another with nothing around them."""
    from openmle.backends import LocalSandbox, make_model
    from openmle.bench import MLEBench
    from openmle.search import Budget, SearchConfig, arun_search

    bench = MLEBench.locate(registry, data, valid_dir=out / "valid", time_limit_s=TIME_LIMIT_S)
    model = make_model("offline")
    async with LocalSandbox(lambda ref: bench.task(ref.partition("@seed-")[0])) as sandbox:
        for cid in bench.suite(SUITE):
            task = bench.task(cid)
            for seed in range(seeds):
                await arun_search(
                    f"{cid}@seed-{seed}",
                    model=model,
                    sandbox=sandbox,
                    budget=Budget(steps=steps),
                    config=SearchConfig(seed=seed, timeout_s=TIME_LIMIT_S),
                    workers=1,
                    ordered=True,
                    run_dir=out / "runs" / cid / f"seed-{seed}",
                    higher_is_better=task.higher_is_better,
                    description=task.description,
                    time_limit_s=TIME_LIMIT_S,
                )


def _nodes(out: Path) -> int:
    """Nodes journalled under ``out`` (both sides keep one journal per run)."""
    n = 0
    for journal in out.glob("runs/*/seed-*/journal.jsonl"):
        for line in journal.read_text(errors="replace").splitlines():
            if line.strip() and json.loads(line).get("event") == "node":
                n += 1
    return n


def _timed(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:6]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall


def _measure(repeats: int, seeds: int, steps: int) -> dict[str, Any]:
    from tests.unit.bench._minibench import build

    with tempfile.TemporaryDirectory(prefix="openmle-bench-runner-") as tmp:
        registry, data = build(Path(tmp) / "mini")
        bench_s: list[float] = []
        direct_s: list[float] = []
        nodes: set[tuple[int, int]] = set()
        for i in range(repeats):
            b_out, d_out = Path(tmp) / f"bench{i}", Path(tmp) / f"direct{i}"
            bench_s.append(_timed(_bench_cmd(registry, data, b_out, seeds, steps)))
            direct_s.append(_timed(_direct_cmd(registry, data, d_out, seeds, steps)))
            nodes.add((_nodes(b_out), _nodes(d_out)))
            print(f"repeat {i}: bench {bench_s[-1]:.2f} s, direct {direct_s[-1]:.2f} s")
    b, d = statistics.median(bench_s), statistics.median(direct_s)
    same = all(x == y for x, y in nodes)
    print(
        f"{SUITE} miniature ({seeds} seeds, {steps} steps, offline model, local sandbox): "
        f"bench run {b:.2f} s | direct searches {d:.2f} s | ratio {b / d:.3f}x "
        f"(goal <= {GOAL_RATIO}x); nodes bench/direct {sorted(nodes)}"
    )
    return {
        "repeats": repeats,
        "seeds": seeds,
        "steps": steps,
        "bench_s": round(b, 3),
        "direct_s": round(d, 3),
        "ratio": round(b / d, 4),
        "goal_ratio": GOAL_RATIO,
        "ok": b / d <= GOAL_RATIO,
        "same_nodes": same,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--direct", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--registry", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.direct:
        import anyio

        anyio.run(_direct, args.registry, args.data, args.out, args.seeds, args.steps)
        return
    emit("bench_runner", _measure(args.repeats, args.seeds, args.steps))


if __name__ == "__main__":
    main()
