"""Task resources and time limits reach every job the search builds (and survive resume)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.unit.search.test_loop_driver import grade, model_by_step, selector

from openmle import ModelRequest, Resources, Split
from openmle.errors import InvalidArgument
from openmle.search import Budget, ResumeSpec, SearchConfig, SearchSpec, resume_search, run_search
from openmle.testing import FunctionSandbox, ScriptedModel


def gpu_task(tmp_path: Path) -> Path:
    root = tmp_path / "gpu-task"
    root.mkdir()
    (root / "task.toml").write_text(
        'name = "gpu-task"\nmetric = "accuracy"\ntime_limit_s = 30\n'
        "[resources]\ncpus = 4\ngpus = 1\nmemory_mb = 2048\n"
    )
    return root


def _spec(
    task: str, sandbox: FunctionSandbox, *, steps: int, timeout_s: float, **fields: Any
) -> SearchSpec:
    """A one-worker search of ``task`` by the step-scored scripted model (2 drafts, seed 1)."""
    return SearchSpec(
        task=task,
        model=ScriptedModel(model_by_step),
        sandbox=sandbox,
        selector=selector(),
        budget=Budget(steps=steps),
        config=SearchConfig(initial_drafts=2, seed=1, timeout_s=timeout_s),
        workers=1,
        higher_is_better=True,
        description="d",
        **fields,
    )


def test_task_resources_reach_every_job(tmp_path: Path) -> None:
    """A task with Resources(gpus=1) gives every job (valid and the final test) the GPU, the
    CPUs, the memory, and its time limit as a cap on the configured timeout."""
    task = gpu_task(tmp_path)
    sandbox = FunctionSandbox(grade)
    result = run_search(_spec(str(task), sandbox, steps=3, timeout_s=600.0))
    assert result.test_result is not None
    assert {j.split for j in sandbox.jobs} == {Split.VALID, Split.TEST}
    for job in sandbox.jobs:
        assert job.resources.gpu_count == 1
        assert job.resources.cpus == 4.0 and job.resources.memory_mb == 2048
        assert job.timeout_s == 30.0


def test_explicit_resources_win_and_survive_resume(tmp_path: Path) -> None:
    """resources= overrides the package; a resumed run asks for the same (from the manifest)."""
    run_dir = tmp_path / "run"
    sandbox = FunctionSandbox(grade)
    run_search(
        _spec(
            "toy-not-a-package",
            sandbox,
            steps=2,
            timeout_s=50.0,
            resources=Resources(gpus=1, cpus=2),
            time_limit_s=20.0,
            final_test=False,
        ),
        run_dir=run_dir,
    )
    assert all(j.resources.gpus == 1 and j.timeout_s == 20.0 for j in sandbox.jobs)
    again = FunctionSandbox(grade)
    resume_search(
        run_dir,
        ResumeSpec(
            model=ScriptedModel(model_by_step),
            sandbox=again,
            selector=selector(),
            budget=Budget(steps=4),
        ),
    )
    assert again.jobs, "the resumed run made no job"
    for job in again.jobs:
        assert job.resources.gpus == 1 and job.resources.cpus == 2.0
        assert job.timeout_s == 20.0


def test_no_task_package_means_defaults() -> None:
    """Without a package or explicit values jobs keep the defaults (one CPU, no GPU)."""
    from openmle.search._driver import _job_limits

    limits = _job_limits("no-such-task-anywhere")
    assert limits.resources == Resources() and limits.timeout(123.0) == 123.0


def test_resume_keeps_the_description_and_time_limit_in_prompts(tmp_path: Path) -> None:
    """A task openmle.gym cannot resolve (a benchmark's) resumes with the description it started
    with (it was resumed with an empty one) and the capped time limit; a different one is
    refused."""
    seen: list[ModelRequest] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request)
        return model_by_step(request)

    run_dir = tmp_path / "run"
    kwargs: dict[str, Any] = dict(
        sandbox=FunctionSandbox(grade), selector=selector(), higher_is_better=True
    )
    run_search(
        SearchSpec(
            task="bench-task@seed-0",
            model=ScriptedModel(answer),
            budget=Budget(steps=2),
            config=SearchConfig(initial_drafts=2, seed=1, timeout_s=50.0),
            workers=1,
            description="THE SECRET DESCRIPTION",
            time_limit_s=20.0,
            final_test=False,
            **kwargs,
        ),
        run_dir=run_dir,
    )
    first = [m.content for r in seen for m in r.messages]
    assert any("THE SECRET DESCRIPTION" in c for c in first)
    seen.clear()
    kwargs.pop("higher_is_better")
    resume_search(
        run_dir,
        ResumeSpec(
            model=ScriptedModel(answer),
            budget=Budget(steps=4),
            description="THE SECRET DESCRIPTION",
            **kwargs,
        ),
    )
    assert seen and all(
        any("THE SECRET DESCRIPTION" in m.content for m in r.messages) for r in seen
    )
    with pytest.raises(InvalidArgument, match="differs"):
        resume_search(
            run_dir,
            ResumeSpec(
                model=ScriptedModel(answer), budget=Budget(steps=5), description="another", **kwargs
            ),
        )
