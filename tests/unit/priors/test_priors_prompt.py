"""Priors in the operator prompts: Draft and Improve show the block, Debug and Crossover do
not; the block is cut first under a tight budget and the prompt never exceeds its cap."""

from __future__ import annotations

import pytest

from openmle import Operator, Outcome, RunResult
from openmle.errors import InvalidArgument
from openmle.operators import ParentView, PromptBudget, TaskBrief, build_request
from openmle.priors import (
    PRIORS_BEGIN,
    LexicalRetriever,
    Prior,
    PriorLibrary,
    RenderedPriors,
    TaskProfile,
    render_priors,
)

TASK = TaskBrief(description="Predict house prices from tabular features. Metric: RMSE.")
OK = RunResult(outcome=Outcome.SUCCESS, score=0.14, logs="ok\n", runtime_s=5)
PARENT = ParentView.from_result("a", "import pandas as pd\n", OK)
LIB = PriorLibrary(
    [
        Prior(
            prior_id="gbm",
            kind="method",
            text="Gradient boosting is a strong tabular baseline.",
            source="s",
            modality="tabular",
        ),
        Prior(
            prior_id="cnn",
            kind="method",
            text="Fine-tune a pretrained CNN.",
            source="s",
            modality="image",
        ),
    ]
)


def block() -> RenderedPriors:
    hits = LexicalRetriever().retrieve(
        LIB, TaskProfile(description=TASK.description, modality="tabular"), k=5
    )
    rendered = render_priors(hits, max_chars=2_000)
    assert rendered.shown == ("gbm",)
    return rendered


@pytest.mark.parametrize(
    ("op", "parents", "shown"),
    [
        (Operator.DRAFT, [], True),
        (Operator.IMPROVE, [PARENT], True),
        (Operator.DEBUG, [PARENT], False),
        (Operator.CROSSOVER, [PARENT, PARENT], False),
    ],
)
def test_priors_only_in_draft_and_improve(
    op: Operator, parents: list[ParentView], shown: bool
) -> None:
    """The delimited block appears under its own heading in Draft and Improve only."""
    rendered = block()
    req = build_request(
        op,
        task=TASK,
        parents=parents,
        priors=rendered.text,
        priors_shown=rendered.shown,
        execution_timeout_s=60,
    )
    assert req.metadata["priors_shown"] == (["gbm"] if shown else [])
    user = req.messages[-1].content
    assert ("## Priors from other tasks" in user) is shown
    assert (PRIORS_BEGIN in user) is shown
    assert "Fine-tune a pretrained CNN" not in user


def test_priors_cut_first_and_prompt_within_cap() -> None:
    """With a tight budget the priors go before the task text; the cap always holds."""
    long_priors = render_priors(
        [
            Prior(prior_id=f"p{i}", kind="trick", text="Use early stopping. " * 20, source="s")
            for i in range(40)
        ],
        max_chars=30_000,
    ).text
    budget = PromptBudget(max_chars=3_000)
    req = build_request(
        Operator.DRAFT, task=TASK, priors=long_priors, execution_timeout_s=60, budget=budget
    )
    user = req.messages[-1].content
    assert req.prompt_chars <= budget.max_chars
    assert TASK.description in user
    assert user.count("Use early stopping.") < long_priors.count("Use early stopping.") // 4
    without = build_request(Operator.DRAFT, task=TASK, execution_timeout_s=60)
    assert "Priors from other tasks" not in without.messages[-1].content
    assert "priors_shown" not in without.metadata
    with pytest.raises(InvalidArgument, match="priors must be a str"):
        build_request(Operator.DRAFT, task=TASK, priors=LIB, execution_timeout_s=60)  # type: ignore[arg-type]
