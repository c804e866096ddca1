"""The testing kit names a wrong input instead of failing deep inside (new-user trial)."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from tests._errors import X

from openmle import Job, ModelResponse, Usage
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.testing import (
    FunctionSandbox,
    RecordingTrainer,
    ScriptedModel,
    check_operator_model,
    check_sandbox,
    check_trainer,
)


def test_a_handler_that_returns_no_run_result_is_named() -> None:
    """It was ``AssertionError: internal invariant broken``, as if openmle had a bug."""
    sandbox = FunctionSandbox(lambda job: X(None))
    with pytest.raises(InvalidArgumentType, match=r"FunctionSandbox\.handler returned None"):
        anyio.run(sandbox.run, Job(code="x", task="t"))


@pytest.mark.parametrize("script", [5, "answer", [1, 2], [None]])
def test_a_script_that_is_no_list_of_answers_is_refused_at_once(script: object) -> None:
    """``ScriptedModel(5)`` was accepted and failed at the first request."""
    with pytest.raises(InvalidArgumentType, match=r"ScriptedModel\.script"):
        ScriptedModel(X(script))


def test_a_script_function_giving_no_text_is_named() -> None:
    model = ScriptedModel(lambda request: X(42))
    with pytest.raises(InvalidArgumentType, match="give a str or a ModelResponse"):
        anyio.run(check_operator_model, model)


@pytest.mark.parametrize(
    "usage", [Usage(prompt_tokens=X(1.5), completion_tokens=1), Usage(prompt_tokens=-1)]
)
def test_the_model_check_holds_usage_to_the_search_rule(usage: Usage) -> None:
    """Float or negative counts passed the check, then the search ignored them with a warning."""
    model = ScriptedModel([ModelResponse(text="x", usage=usage)])
    with pytest.raises(AssertionError, match="integer >= 0"):
        anyio.run(check_operator_model, model)


def test_the_model_check_refuses_a_bad_cost() -> None:
    model = ScriptedModel([ModelResponse(text="x", cost_usd=-1.0)])
    with pytest.raises(AssertionError, match="cost_usd"):
        anyio.run(check_operator_model, model)


def test_the_model_check_names_a_non_model() -> None:
    with pytest.raises(InvalidArgumentType, match="OperatorModel"):
        anyio.run(check_operator_model, X("gpt-4"))


def test_check_trainer_names_its_wrong_arguments() -> None:
    with pytest.raises(InvalidArgumentType, match="factory"):
        check_trainer(X(5), [1, 2])
    with pytest.raises(InvalidArgument, match="at least two batches"):
        check_trainer(RecordingTrainer, [1])


def _toy_sandbox() -> FunctionSandbox:
    return FunctionSandbox(lambda job: X(None))


def test_check_sandbox_refuses_private_paths_it_cannot_read(tmp_path: Path) -> None:
    """``private_paths="abc"`` (three missing one-letter paths) passed secrecy vacuously."""
    with pytest.raises(InvalidArgumentType, match="private_paths="):
        anyio.run(lambda: check_sandbox(_toy_sandbox(), task="toy", private_paths=X("abc")))
