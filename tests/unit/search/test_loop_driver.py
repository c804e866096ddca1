"""The async driver with the in-memory fakes: concurrency, retries, budgets, final grade."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.search._toy import score_proportional, toy_spec

from openmle import Job, ModelRequest, Operator, OperatorModel, Outcome, RunResult, Sandbox, Split
from openmle.errors import ModelError
from openmle.search import Budget, SearchConfig, SearchSpec, arun_search, run_search
from openmle.testing import FunctionSandbox, ScriptedModel

PROGRAM = "```python\nimport sklearn\nscore = {score}\n```"


def model_by_step(request: ModelRequest) -> str:
    """Answers with a program whose 'score' grows with the step."""
    step = int(request.metadata["step"])
    return f"plan for {step}\n" + PROGRAM.format(score=round(0.1 + 0.01 * step, 4))


def grade(job: Job) -> RunResult:
    """Grades by the 'score = x' line of the program; test split adds 0.5."""
    value = float(job.code.split("score = ")[1].split()[0])
    if job.split is Split.TEST:
        value += 0.5
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


selector = score_proportional
"""The score-proportional selector (shared with test_job_limits)."""


def toy(
    *, model: OperatorModel | None = None, sandbox: Sandbox | None = None, **kw: Any
) -> SearchSpec:
    """The toy search; by default the model answers :func:`model_by_step` and the sandbox
    grades with :func:`grade`."""
    return toy_spec(model or ScriptedModel(model_by_step), sandbox or FunctionSandbox(grade), **kw)


def test_run_search_blocking_twin_and_final_test_grade() -> None:
    """run_search runs the steps, picks the best by validation and grades it once on test."""
    sandbox = FunctionSandbox(grade)
    result = run_search(
        toy(
            sandbox=sandbox,
            budget=Budget(steps=12),
            config=SearchConfig(initial_drafts=3, seed=1),
            workers=3,
            description="toy task",
        )
    )
    assert len(result.nodes) == 12
    assert [n.step for n in result.nodes] == list(range(12))
    assert result.best is not None and result.best.node_id == "n00011"
    assert result.best_valid_score == pytest.approx(0.21)
    assert result.test_score == pytest.approx(0.71)
    test_jobs = [j for j in sandbox.jobs if j.split is Split.TEST]
    assert len(test_jobs) == 1 and test_jobs[0].code == result.best.code
    assert result.stop_reason == "steps"
    assert result.best.family == "sklearn"
    assert result.best.card is not None and result.best.card.score == result.best.score
    assert result.nodes[0].plan == "plan for 0"


@pytest.mark.anyio
async def test_workers_run_concurrently_up_to_the_cap() -> None:
    """At most `workers` sandbox runs overlap, and the cap is reached (steady state)."""
    running = 0
    peak = 0
    full = anyio.Event()

    async def slow(job: Job) -> RunResult:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 4:
            full.set()
        await full.wait()  # the first runs end only once four overlap, however slow the loop
        await anyio.sleep(0.02)
        running -= 1
        return grade(job)

    with anyio.fail_after(60):  # a search that never runs four at once would wait here
        result = await arun_search(
            toy(sandbox=FunctionSandbox(slow), budget=Budget(steps=16), workers=4, final_test=False)
        )
    assert peak == 4
    assert len(result.nodes) == 16
    assert result.test_result is None


@pytest.mark.anyio
async def test_model_failures_become_infra_nodes_after_retries() -> None:
    """A model that keeps failing yields INFRA_ERROR nodes, never a crash."""

    def broken(request: ModelRequest) -> str:
        raise ModelError("service down")

    model = ScriptedModel(broken)
    result = await arun_search(
        toy(
            model=model,
            budget=Budget(steps=2),
            config=SearchConfig(retries=2, retry_backoff_s=0.0),
            workers=1,
        )
    )
    assert [n.outcome for n in result.nodes] == [Outcome.INFRA_ERROR] * 2
    assert len(model.requests) == 6  # each node: a call and two retries
    assert result.best is None and result.test_result is None


@pytest.mark.anyio
async def test_sandbox_infra_errors_are_retried_and_summed() -> None:
    """An INFRA_ERROR run is retried; a later success is recorded."""
    attempts = 0

    def flaky(job: Job) -> RunResult:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            return RunResult.infra_error("node lost", queue_s=2.0)
        return grade(job)

    result = await arun_search(
        toy(
            sandbox=FunctionSandbox(flaky),
            budget=Budget(steps=1),
            config=SearchConfig(retry_backoff_s=0.0),
            workers=1,
            final_test=False,
        )
    )
    node = result.nodes[0]
    assert node.outcome is Outcome.SUCCESS
    assert node.used.queue_s == 2.0


@pytest.mark.anyio
async def test_missing_code_is_a_program_failure_then_debugged() -> None:
    """A response without a program is MISSING_CODE and gets a Debug step."""
    answers = iter(["no code here", PROGRAM.format(score=0.3), PROGRAM.format(score=0.4)])
    result = await arun_search(
        toy(
            model=ScriptedModel(lambda r: next(answers)),
            budget=Budget(steps=3),
            config=SearchConfig(initial_drafts=1),
            workers=1,
            final_test=False,
        )
    )
    assert result.nodes[0].outcome is Outcome.MISSING_CODE
    assert result.nodes[1].operator is Operator.DEBUG


@pytest.mark.anyio
async def test_cancel_on_exhaust_cancels_running_work() -> None:
    """With on_exhaust='cancel', a sandbox-seconds cap cancels the runs still going."""

    async def timed(job: Job) -> RunResult:
        value = float(job.code.split("score = ")[1].split()[0])
        if value > 0.1:  # every run but the first takes long
            await anyio.sleep(30)
        return RunResult(outcome=Outcome.SUCCESS, score=value, runtime_s=100.0)

    with anyio.fail_after(10):
        result = await arun_search(
            toy(
                sandbox=FunctionSandbox(timed),
                budget=Budget(sandbox_s=50.0, on_exhaust="cancel"),
                workers=3,
                final_test=False,
            )
        )
    assert [n.step for n in result.nodes] == [0]
    assert result.stop_reason == "sandbox_s"


@pytest.mark.anyio
async def test_finish_on_exhaust_lets_running_work_complete(tmp_path: Path) -> None:
    """With on_exhaust='finish', work already running is recorded after the cap is hit."""

    async def timed(job: Job) -> RunResult:
        value = float(job.code.split("score = ")[1].split()[0])
        await anyio.sleep(0.01 if value < 0.105 else 0.1)
        return RunResult(outcome=Outcome.SUCCESS, score=value, runtime_s=100.0)

    result = await arun_search(
        toy(
            sandbox=FunctionSandbox(timed),
            budget=Budget(sandbox_s=50.0),
            workers=3,
            final_test=False,
        )
    )
    assert [n.step for n in result.nodes] == [0, 1, 2]
    assert result.spent["sandbox_s"] == 300.0


@pytest.mark.anyio
async def test_wall_clock_cap_cancels_slow_runs() -> None:
    """A wall-seconds cap with on_exhaust='cancel' stops runs that would take far longer."""

    async def stuck(job: Job) -> RunResult:
        await anyio.sleep(60)
        return grade(job)

    with anyio.fail_after(20):
        result = await arun_search(
            toy(
                sandbox=FunctionSandbox(stuck),
                budget=Budget(wall_s=0.5, on_exhaust="cancel"),
                workers=2,
                final_test=False,
            )
        )
    assert result.nodes == ()
    assert result.stop_reason == "wall_s"
