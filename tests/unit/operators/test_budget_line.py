"""The budget line: per-run limit, remaining steps and time; budget-blind prompts omit it."""

from __future__ import annotations

import pytest

from openmle import Operator
from openmle.errors import InvalidArgument
from openmle.operators import TaskBrief, build_request

TASK = TaskBrief(description="Predict the label.")


def _user(**kw: object) -> str:
    req = build_request(Operator.DRAFT, task=TASK, execution_timeout_s=600, **kw)  # type: ignore[arg-type]
    return req.messages[-1].content


def test_remaining_steps_time_and_limit() -> None:
    """The prompt says the per-run limit, the steps left and the time left."""
    user = _user(steps_left=4, time_left_s=1800)
    assert "at most 10 minutes" in user
    assert "This search has 4 steps and 30 minutes left in total" in user
    assert "This search has 1 step left" in _user(steps_left=1)
    assert "30 minutes left" in _user(time_left_s=1800)
    assert "left in total" not in _user()  # nothing capped: no remaining line


def test_budget_blind_prompt_has_no_budget() -> None:
    """Budget-blind prompts carry neither the limit nor what is left."""
    user = _user(steps_left=4, time_left_s=1800, budget_blind=True)
    assert "Execution budget" not in user and "left in total" not in user
    assert "10 minutes" not in user and "30 minutes" not in user


@pytest.mark.parametrize("bad", [-1, 2.5, True, "3"])
def test_steps_left_is_checked(bad: object) -> None:
    """A bad steps_left names the argument."""
    with pytest.raises(InvalidArgument, match="steps_left"):
        _user(steps_left=bad)
