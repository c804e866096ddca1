"""The toy search most driver tests run: task "toy", higher is better, no description, a
score-proportional selector, one worker; each test passes its model, sandbox and budget.
"""

from __future__ import annotations

from typing import Any

from openmle import OperatorModel, Sandbox, Selector
from openmle.search import Budget, SearchConfig, SearchSpec
from openmle.testing import FunctionSelector

__all__ = ["score_proportional", "toy_spec"]


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
