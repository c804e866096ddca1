"""The toy search most driver tests run: task "toy", higher is better, no description, a
score-proportional selector, one worker; each test passes its model, sandbox and budget.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmle import Job, ModelRequest, OperatorModel, RunResult, Sandbox, Selector
from openmle.search import Budget, SearchConfig, SearchSpec, run_search
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

__all__ = ["four_step_run", "score_proportional", "toy_run", "toy_spec"]


def score_proportional() -> FunctionSelector:
    """A selector drawing parents with weight ``1 + score``."""
    return FunctionSelector(lambda c: 1.0 + (c.score or 0.0))


def toy_spec(
    model: OperatorModel,
    sandbox: Sandbox,
    *,
    budget: Budget,
    config: SearchConfig | None = None,
    workers: int = 1,
    selector: Selector | None = None,
    description: str = "",
    **more: Any,
) -> SearchSpec:
    """The :class:`SearchSpec` of the toy search (``more``: any other field of the spec)."""
    return SearchSpec(
        task="toy",
        higher_is_better=True,
        model=model,
        sandbox=sandbox,
        selector=selector or score_proportional(),
        budget=budget,
        config=config,
        workers=workers,
        description=description,
        **more,
    )


def toy_run(
    path: Path,
    model: Callable[[ModelRequest], str],
    grade: Callable[[Job], RunResult],
    **spec: Any,
) -> Path:
    """``path``, holding a finished toy search of the scripted ``model`` graded by ``grade``
    (``spec``: the other arguments of :func:`toy_spec`, ``budget`` among them)."""
    run_search(toy_spec(ScriptedModel(model), FunctionSandbox(grade), **spec), run_dir=path)
    return path


def four_step_run(
    path: Path,
    model: Callable[[ModelRequest], str],
    grade: Callable[[Job], RunResult],
    **more: Any,
) -> Path:
    """``path``, holding a finished four-step toy search (two drafts, seed 1, every parent
    equally likely) of the scripted ``model`` graded by ``grade`` (``more``: any other field
    of the spec)."""
    return toy_run(
        path,
        model,
        grade,
        selector=FunctionSelector(lambda c: 1.0),
        config=SearchConfig(initial_drafts=2, seed=1),
        budget=Budget(steps=4),
        **more,
    )
