"""Search-loop overhead per step, excluding model and sandbox time, at 1,000 steps.

The model (``ScriptedModel``) and the sandbox (``FunctionSandbox``) answer instantly, so the
wall time of a search is the loop's own cost: proposing (selection over every successful node),
building the operator prompt with memory, parsing the answer, building the experience card,
updating the board and the ledger, and (with a run directory) the fsync'd journal.

Side by side in one run:
- ``core``: the I/O-free core alone (propose/commit in a plain loop, no prompts) - the floor;
- ``driver``: the async driver with operator prompts and memory, no run directory;
- ``driver+journal``: the same writing a run directory (fsync per record).

Figures are per-step milliseconds; ratios are against ``core``. Target: under 10 ms per step
for the driver at 1,000 steps.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from openmle import Job, ModelRequest, Outcome, RunResult, Usage
from openmle.search import (
    Budget,
    Evaluation,
    SearchConfig,
    SearchCore,
    SearchSpec,
    ThreeFactorSelector,
    run_search,
)
from openmle.testing import FunctionSandbox, ScriptedModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._common import emit

STEPS = 1000

PROGRAM = """import numpy as np
from sklearn.ensemble import RandomForestClassifier
x = np.random.default_rng({seed}).normal(size=100)
print("Final Validation Score:", {score})
"""


def _score(step: int) -> float:
    return ((step * 7919) % 1000) / 1000.0


def model(request: ModelRequest) -> str:
    """An instant model: a realistic short program per step."""
    step = int(request.metadata["step"])
    return f"Plan {step}.\n```python\n{PROGRAM.format(seed=step, score=_score(step))}```"


def grade(job: Job) -> RunResult:
    """An instant sandbox: every 9th program fails, others score deterministically."""
    step = int(job.code.split("default_rng(")[1].split(")")[0])
    if step % 9 == 4:
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR,
            error_signature="ValueError: bad <n>",
            logs="Traceback (most recent call last):\nValueError: bad 3\n",
            runtime_s=1.0,
        )
    return RunResult(outcome=Outcome.SUCCESS, score=_score(step), runtime_s=1.0, logs="ok\n")


def bench_core() -> float:
    """Seconds for STEPS propose/commit cycles of the bare core."""
    core = SearchCore(
        config=SearchConfig(), selector=ThreeFactorSelector(), budget=Budget(steps=STEPS)
    )
    t0 = time.perf_counter()
    while (p := core.propose()) is not None:
        code = PROGRAM.format(seed=p.step, score=_score(p.step))
        result = grade(Job(code=code, task="bench"))
        core.commit(p, Evaluation(code=code, result=result, usage=Usage(prompt_tokens=1)))
    return time.perf_counter() - t0


def bench_driver(run_dir: Path | None, workers: int) -> float:
    """Seconds for a STEPS search through the async driver."""
    t0 = time.perf_counter()
    run_search(
        SearchSpec(
            task="bench",
            model=ScriptedModel(model),
            sandbox=FunctionSandbox(grade),
            budget=Budget(steps=STEPS),
            workers=workers,
            description="A benchmark task.",
            final_test=False,
            higher_is_better=True,
        ),
        run_dir=run_dir,
        quiet=True,
    )
    return time.perf_counter() - t0


def main() -> None:
    """Run the three variants and print per-step figures and ratios."""
    core_s = bench_core()
    driver_s = bench_driver(None, workers=4)
    with tempfile.TemporaryDirectory() as tmp:
        journal_s = bench_driver(Path(tmp) / "run", workers=4)
    per = {k: 1000 * v / STEPS for k, v in (("core", core_s), ("driver", driver_s))}
    per["driver_journal"] = 1000 * journal_s / STEPS
    print(f"search loop overhead per step at {STEPS} steps (model and sandbox instant)")
    print(f"  core (propose/commit only)        {per['core']:8.3f} ms/step")
    print(
        f"  driver (prompts, memory, cards)   {per['driver']:8.3f} ms/step  "
        f"({per['driver'] / per['core']:.1f}x core)"
    )
    print(
        f"  driver + fsync'd run directory    {per['driver_journal']:8.3f} ms/step  "
        f"({per['driver_journal'] / per['core']:.1f}x core)"
    )
    emit(
        "search_loop",
        {
            "steps": STEPS,
            "core_ms_per_step": round(per["core"], 4),
            "driver_ms_per_step": round(per["driver"], 4),
            "driver_journal_ms_per_step": round(per["driver_journal"], 4),
            "driver_over_core": round(per["driver"] / per["core"], 2),
            "journal_over_core": round(per["driver_journal"] / per["core"], 2),
        },
    )


if __name__ == "__main__":
    main()
