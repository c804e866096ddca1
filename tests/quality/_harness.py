"""Shared harness of the search-quality guard and benchmark: equal-budget searches across seeds
and selectors (``tests/quality/test_selection_quality.py``, ``benchmarks/selection_quality.py``).

Programs are deterministic (fixed seeds, one thread), so a run's result depends only on its
code and split; :class:`CachedSandbox` runs each distinct program once and replays its result,
which keeps the comparison CI-sized without changing any outcome. The searches of a comparison
run concurrently (``parallel`` at a time, the sandbox's own slots bounding the programs): with
``ordered=True`` each search's result does not depend on timing, so running them side by side
keeps every core busy (one search alone often waits on a single long program) and changes no
score.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Sequence

import anyio
from attrs import define, field

from openmle import Job, RunResult, Sandbox, Selector
from openmle.backends import LocalSandbox, OfflineModel
from openmle.search import (
    Budget,
    GreedySelector,
    SearchConfig,
    SearchSpec,
    ThreeFactorSelector,
    UniformSelector,
    arun_search,
)

SELECTORS: dict[str, Callable[[bool], Selector]] = {
    "three-factor": lambda hib: ThreeFactorSelector.preset("released", higher_is_better=hib),
    "greedy": lambda hib: GreedySelector(higher_is_better=hib),
    "uniform": lambda hib: UniformSelector(),
}

DRAFTS_ONLY = "drafts-only"
"""The parallel baseline: every step a Draft (best of N independent drafts, no operators)."""


@define(eq=False)
class CachedSandbox(Sandbox):
    """Runs each distinct (program, task, split) once; later runs get the recorded result."""

    inner: Sandbox
    cache: dict[str, RunResult] = field(factory=dict)
    locks: dict[str, anyio.Lock] = field(factory=dict)
    hits: int = 0

    async def run(self, job: Job) -> RunResult:
        key = hashlib.sha256(f"{job.task}\0{job.split}\0{job.code}".encode()).hexdigest()
        lock = self.locks.setdefault(key, anyio.Lock())
        async with lock:
            if key in self.cache:
                self.hits += 1
                return self.cache[key]
            result = await self.inner.run(job)
            if not result.outcome.is_infra:
                self.cache[key] = result
            return result

    async def aclose(self) -> None:
        await self.inner.aclose()


async def compare(
    tasks: Sequence[str],
    seeds: Sequence[int],
    *,
    steps: int,
    initial_drafts: int,
    workers: int = 2,
    hib: dict[str, bool],
    drafts_only: bool = False,
    parallel: int = 6,
    sandbox: CachedSandbox | None = None,
) -> dict[str, dict[str, list[float]]]:
    """Best validation score per (task, arm), one entry per seed. The arms are the selectors
    and, with ``drafts_only``, :data:`DRAFTS_ONLY` (``steps`` drafts, no other operator).
    ``parallel`` searches run at once; the result is the same for any value. The programs run
    in ``sandbox`` (left open for the caller to reuse its recorded results) or, by default, in
    a fresh :class:`CachedSandbox` over a :class:`~openmle.backends.LocalSandbox` closed at
    the end."""
    own = sandbox is None
    if sandbox is None:
        sandbox = CachedSandbox(LocalSandbox())
    box = sandbox
    arms = [*SELECTORS, *([DRAFTS_ONLY] if drafts_only else [])]
    scores: dict[tuple[str, int, str], float] = {}
    limiter = anyio.CapacityLimiter(parallel)

    async def one(task: str, seed: int, name: str) -> None:
        make = SELECTORS.get(name, SELECTORS["three-factor"])
        drafts = steps if name == DRAFTS_ONLY else initial_drafts
        async with limiter:
            result = await arun_search(
                SearchSpec(
                    task=task,
                    model=OfflineModel(sklearn=False),
                    sandbox=box,
                    budget=Budget(steps=steps),
                    selector=make(hib[task]),
                    config=SearchConfig(initial_drafts=drafts, seed=seed, timeout_s=300),
                    workers=workers,
                    ordered=True,
                    higher_is_better=hib[task],
                    final_test=False,
                )
            )
        score = result.best_valid_score
        worst = float("-inf") if hib[task] else float("inf")
        scores[task, seed, name] = worst if score is None else score

    try:
        async with anyio.create_task_group() as tg:
            for task in tasks:  # started in the sequential order: the first ones fill the cache
                for seed in seeds:
                    for name in arms:
                        tg.start_soon(one, task, seed, name)
    finally:
        if own:
            await box.aclose()
    return {t: {a: [scores[t, s, a] for s in seeds] for a in arms} for t in tasks}


def table(results: dict[str, dict[str, list[float]]], hib: dict[str, bool]) -> str:
    """A printable mean (sd) table, best mean per task marked with '*'."""
    arms = list(next(iter(results.values())))
    lines = [f"{'task':<22}" + "".join(f"{s:>24}" for s in arms)]
    for task, by_sel in results.items():
        means = {s: statistics.fmean(v) for s, v in by_sel.items()}
        best = (max if hib[task] else min)(means, key=lambda s: means[s])
        cells = []
        for s, v in by_sel.items():
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            cells.append(f"{means[s]:.5f} ({sd:.5f}){'*' if s == best else ' '}")
        lines.append(f"{task:<22}" + "".join(f"{c:>24}" for c in cells))
    return "\n".join(lines)


def wins(
    results: dict[str, dict[str, list[float]]],
    hib: dict[str, bool],
    against: Sequence[str] = ("greedy", "uniform"),
) -> dict[str, bool]:
    """Per task, whether three-factor's mean beats the mean of every arm in ``against``."""
    out = {}
    for task, by_sel in results.items():
        m = {s: statistics.fmean(v) for s, v in by_sel.items()}
        sign = 1.0 if hib[task] else -1.0
        tf = sign * m["three-factor"]
        out[task] = all(tf > sign * m[a] for a in against)
    return out
