"""Operator prompt builders: sections, parent counts, budgets, templates, validation-only."""

from __future__ import annotations

import pytest

from openmle import Operator, Outcome, RunResult, Split
from openmle.errors import InvalidArgument
from openmle.operators import (
    OperatorTemplates,
    ParentView,
    PromptBudget,
    TaskBrief,
    build_request,
    format_duration,
    render_feedback,
)

TASK = TaskBrief(
    description="Predict the sale price of each house. Metric: RMSE of log prices.",
    data_description="train.csv (1168 rows, 80 columns), test.csv, sample_submission.csv",
    instructions="Use at most 4 CPU cores.",
)
OK = RunResult(outcome=Outcome.SUCCESS, score=0.1412, logs="fold 1 rmse 0.14\n", runtime_s=75)
CRASH = RunResult(
    outcome=Outcome.RUNTIME_ERROR,
    error_signature="KeyError: '<str>'",
    logs="Traceback (most recent call last):\nKeyError: 'SalePrice'\n",
    runtime_s=3,
)
SLOW = RunResult(outcome=Outcome.TIMEOUT, error_signature="timeout", runtime_s=3600)


def _parent(node: str, result: RunResult, code: str = "import pandas as pd\n") -> ParentView:
    return ParentView.from_result(node, code, result)


def _user(req: object) -> str:
    return req.messages[-1].content  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize(
    ("op", "parents"),
    [
        (Operator.DRAFT, []),
        (Operator.IMPROVE, [_parent("a", OK)]),
        (Operator.DEBUG, [_parent("b", CRASH)]),
        (Operator.CROSSOVER, [_parent("a", OK), _parent("c", OK)]),
    ],
)
def test_sections_in_order(op: Operator, parents: list[ParentView]) -> None:
    """Task, data, inputs, guidance, memory, budget, submission check, format, instructions."""
    req = build_request(
        op, task=TASK, parents=parents, memory="- n1 lightgbm", execution_timeout_s=7200
    )
    text = _user(req)
    titles = ["## Task", "## Data", "## What to do", "## Search memory", "## Execution budget"]
    titles += ["## Submission check", "## Answer format", "## Task instructions"]
    positions = [text.index(t) for t in titles]
    assert positions == sorted(positions)
    if parents:
        assert text.index("## Starting point") < text.index("## What to do")
    assert req.operator is op
    assert req.metadata["parent_ids"] == [p.node_id for p in parents]
    assert req.messages[0].role == "system"


def test_parent_counts_are_checked() -> None:
    """Each operator takes exactly its number of parents."""
    with pytest.raises(InvalidArgument, match="crossover takes 2"):
        build_request("crossover", task=TASK, parents=[_parent("a", OK)], execution_timeout_s=60)
    with pytest.raises(InvalidArgument, match="draft takes 0"):
        build_request("draft", task=TASK, parents=[_parent("a", OK)], execution_timeout_s=60)


def test_unawaited_memory_coroutine_is_refused_with_the_fix() -> None:
    """Passing ``OperatorMemory.build(...)`` without ``await`` names the fix, not a deep
    ``'coroutine' object has no attribute 'strip'``."""

    async def build() -> str:
        return "memory"

    with pytest.raises(InvalidArgument, match=r"memory=await memory\.build"):
        build_request("draft", task=TASK, memory=build(), execution_timeout_s=60)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="memory must be a str"):
        build_request("draft", task=TASK, memory=3, execution_timeout_s=60)  # type: ignore[arg-type]


def test_budget_line_uses_time_left() -> None:
    """The execution budget shows min(timeout, time left) in words."""
    text = _user(build_request("draft", task=TASK, execution_timeout_s=7200, time_left_s=1500))
    assert "at most 25 minutes" in text
    text = _user(build_request("draft", task=TASK, execution_timeout_s=7200))
    assert "at most 2 hours" in text
    assert format_duration(59) == "59 seconds" and format_duration(3 * 3600 + 300) == (
        "3 hours 5 minutes"
    )


def test_remaining_line_shows_steps_wall_and_sandbox_time_left() -> None:
    """The paper's remaining-budget line: steps left, wall time left and program run time
    left, each only when given."""
    text = _user(
        build_request(
            "improve",
            task=TASK,
            parents=[_parent("a", OK)],
            execution_timeout_s=7200,
            steps_left=4,
            time_left_s=720,
            sandbox_left_s=3 * 3600,
        )
    )
    assert "4 steps, 12 minutes of wall time and 3 hours of program run time left" in text
    only = _user(build_request("draft", task=TASK, execution_timeout_s=60, sandbox_left_s=90))
    assert "1 minutes of program run time left" in only and "step" not in only.split("left")[0]


def test_per_operator_prompt_caps() -> None:
    """PromptBudget.operator_max_chars caps each operator on its own (the paper preset's
    Improve 54.3K and Crossover 78.4K); others keep max_chars."""
    big_code = "x = 1\n" * 40_000
    parents = [_parent("a", OK, big_code), _parent("b", OK, big_code)]
    budget = PromptBudget(
        max_chars=20_000, code_chars=60_000, operator_max_chars={"crossover": 30_000}
    )
    cross = build_request(
        "crossover", task=TASK, parents=parents, execution_timeout_s=60, budget=budget
    )
    improve = build_request(
        "improve", task=TASK, parents=parents[:1], execution_timeout_s=60, budget=budget
    )
    assert 20_000 < cross.prompt_chars <= 30_000 and improve.prompt_chars <= 20_000
    assert budget.max_chars_for(Operator.CROSSOVER) == 30_000
    with pytest.raises(InvalidArgument, match="operator"):
        PromptBudget(operator_max_chars={"mutate": 50_000})
    with pytest.raises(InvalidArgument, match=r"operator_max_chars\['draft'\]"):
        PromptBudget(operator_max_chars={"draft": 10})


def test_timeout_advice_only_for_debug_after_timeout() -> None:
    """Debug after a timeout gets the cost-cutting advice; other cases do not."""
    debug_slow = _user(
        build_request("debug", task=TASK, parents=[_parent("s", SLOW)], execution_timeout_s=60)
    )
    debug_crash = _user(
        build_request("debug", task=TASK, parents=[_parent("b", CRASH)], execution_timeout_s=60)
    )
    improve = _user(
        build_request("improve", task=TASK, parents=[_parent("s", OK)], execution_timeout_s=60)
    )
    assert "## Time and memory" in debug_slow
    assert "## Time and memory" not in debug_crash and "## Time and memory" not in improve


def test_feedback_shows_validation_score_and_refuses_test() -> None:
    """Feedback names the outcome and the validation score; a test-split result is refused."""
    text = render_feedback(OK)
    assert "Outcome: success" in text and "Validation score: 0.1412" in text
    assert "KeyError" in render_feedback(CRASH)
    with pytest.raises(InvalidArgument, match="test split"):
        render_feedback(RunResult(outcome=Outcome.SUCCESS, score=0.2, split=Split.TEST))


def test_hard_budget_and_determinism() -> None:
    """Huge inputs are cut to the hard cap, memory first, the same way every time."""
    big_code = "x = 1\n" * 20_000
    big_logs = RunResult(outcome=Outcome.SUCCESS, score=0.5, logs="epoch loss\n" * 50_000)
    parents = [_parent("a", big_logs, big_code), _parent("b", big_logs, big_code)]
    budget = PromptBudget(max_chars=20_000, code_chars=12_000, memory_chars=9_000)
    kwargs = {
        "task": TASK,
        "parents": parents,
        "memory": "- node\n" * 10_000,
        "execution_timeout_s": 600,
        "budget": budget,
    }
    a = build_request("crossover", **kwargs)  # type: ignore[arg-type]
    b = build_request("crossover", **kwargs)  # type: ignore[arg-type]
    assert a.prompt_chars <= 20_000
    assert a == b
    text = _user(a)
    for must in ("## Task", "## What to do", "## Submission check", "## Answer format"):
        assert must in text
    assert "characters omitted" in text


def test_custom_templates() -> None:
    """Users can replace any wording."""
    tpl = OperatorTemplates(
        system="You are terse.",
        guidance={op: f"GUIDE-{op.value}" for op in Operator},
        submission_check="WRITE submission.csv",
    )
    req = build_request(
        "improve", task=TASK, parents=[_parent("a", OK)], execution_timeout_s=60, templates=tpl
    )
    assert req.messages[0].content.startswith("You are terse.")
    assert "GUIDE-improve" in _user(req) and "WRITE submission.csv" in _user(req)


def test_oversized_templates_still_fit() -> None:
    """Even a huge system template cannot push the prompt past the hard cap."""
    tpl = OperatorTemplates(system="persona " * 10_000, answer_format="format " * 10_000)
    req = build_request(
        "draft",
        task=TASK,
        execution_timeout_s=60,
        templates=tpl,
        budget=PromptBudget(max_chars=5000),
    )
    assert req.prompt_chars <= 5000
