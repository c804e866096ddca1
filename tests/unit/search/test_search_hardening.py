"""Hostile sandboxes, models and usage reports must not kill a search (issues 12 and 20).

Every case here raised out of ``arun_search`` (or hung, or mis-priced) before the driver caught
everything a sandbox or model raises, validated usage and priced by the requested model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.search._toy import score_proportional, toy_spec

from openmle import (
    Job,
    ModelRequest,
    ModelResponse,
    OperatorModel,
    Outcome,
    RunResult,
    Sandbox,
    Split,
    Usage,
)
from openmle.errors import BackendError
from openmle.search import (
    Budget,
    PriceTable,
    ResumeSpec,
    SearchConfig,
    SearchSpec,
    aresume_search,
    arun_search,
    read_journal,
    resume_search,
    run_search,
)
from openmle.testing import FunctionSandbox, ScriptedModel

PROGRAM = "```python\nscore = {score}\n```"


def by_step(request: ModelRequest) -> str:
    """A program whose score grows with the step."""
    step = int(request.metadata["step"])
    return PROGRAM.format(score=round(0.1 + 0.01 * step, 4))


def grade(job: Job) -> RunResult:
    """Grades by the program's 'score = x' line."""
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


CONFIG = SearchConfig(initial_drafts=2, seed=1, retries=1, retry_backoff_s=0.0)


def toy(
    *, model: OperatorModel | None = None, sandbox: Sandbox | None = None, **kw: Any
) -> SearchSpec:
    """The toy search with :data:`CONFIG`; by default the model writes :func:`by_step`
    programs and the sandbox grades them with :func:`grade`."""
    kw.setdefault("config", CONFIG)
    return toy_spec(model or ScriptedModel(by_step), sandbox or FunctionSandbox(grade), **kw)


def resumed(sandbox: Sandbox | None = None) -> ResumeSpec:
    """How the tests resume the toy search: the same model and selector, ``sandbox`` (default:
    grading with :func:`grade`)."""
    return ResumeSpec(
        model=ScriptedModel(by_step),
        sandbox=sandbox or FunctionSandbox(grade),
        selector=score_proportional(),
    )


def test_any_sandbox_exception_is_an_infra_error_node_and_resume_moves_on(tmp_path: Path) -> None:
    """A RecursionError from Sandbox.run (1,500 nested directories did this) becomes that
    step's INFRA_ERROR node; the search finishes, and a resume does not re-run the step."""

    def crash_on_step_1(job: Job) -> RunResult:
        if job.name == "n00001":
            raise RecursionError("maximum recursion depth exceeded " + "x" * 5000)
        return grade(job)

    out = tmp_path / "run"
    result = run_search(
        toy(sandbox=FunctionSandbox(crash_on_step_1), budget=Budget(steps=4)),
        run_dir=out,
    )
    assert len(result.nodes) == 4
    bad = result.nodes[1]
    assert bad.outcome is Outcome.INFRA_ERROR
    assert "RecursionError: maximum recursion depth exceeded" in bad.detail
    assert len(bad.detail) < 1000  # the message is truncated
    before = read_journal(out)
    again = resume_search(
        out,
        resumed(FunctionSandbox(crash_on_step_1)),
    )
    assert len(again.nodes) == 4
    assert read_journal(out) == before  # nothing re-run


def test_consecutive_infra_errors_stop_with_one_clear_error_then_resume_continues(
    tmp_path: Path,
) -> None:
    """A sandbox that always raises stops the search after max_infra_errors nodes with one
    BackendError; the failed steps stay journalled, and a resume with a working sandbox goes
    on past them."""

    def broken(job: Job) -> RunResult:
        raise UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed")

    out = tmp_path / "run"
    with pytest.raises(BackendError, match=r"3 consecutive infrastructure errors.*resume"):
        run_search(
            toy(
                sandbox=FunctionSandbox(broken),
                budget=Budget(steps=20),
                config=SearchConfig(initial_drafts=2, seed=1, retries=0, max_infra_errors=3),
            ),
            run_dir=out,
        )
    nodes = [r["node"] for r in read_journal(out) if r["event"] == "node"]
    assert [n["outcome"] for n in nodes] == ["infra_error"] * 3
    assert "UnicodeEncodeError" in nodes[0]["detail"]
    result = resume_search(
        out,
        resumed(),
    )
    assert len(result.nodes) == 20
    assert [n.outcome for n in result.nodes[:3]] == [Outcome.INFRA_ERROR] * 3
    assert result.best is not None


def test_a_sandbox_returning_garbage_is_an_infra_error() -> None:
    """A sandbox returning None, or a result for another split, is an INFRA_ERROR."""

    def garbage(job: Job) -> RunResult:
        if job.name == "n00000":
            return None  # type: ignore[return-value]
        if job.name == "n00001":
            return RunResult(outcome=Outcome.SUCCESS, score=0.99, split=Split.TEST)
        return grade(job)

    result = run_search(
        toy(sandbox=_UncheckedSandbox(garbage), budget=Budget(steps=3), final_test=False)
    )
    assert [n.outcome for n in result.nodes[:2]] == [Outcome.INFRA_ERROR] * 2
    assert "NoneType" in result.nodes[0].detail
    assert "split 'test'" in result.nodes[1].detail


class _UncheckedSandbox:
    """Returns whatever the handler gives (FunctionSandbox asserts a RunResult)."""

    def __init__(self, handler: object) -> None:
        self.handler = handler

    async def run(self, job: Job) -> RunResult:
        """The handler's value, unchecked."""
        return self.handler(job)  # type: ignore[operator, no-any-return]

    async def aclose(self) -> None:
        """Nothing to close."""


def test_model_code_with_a_lone_surrogate_is_an_outcome(tmp_path: Path) -> None:
    """Code the model wrote with a lone surrogate never raises: the response parser replaces
    the unencodable half by U+FFFD, the program runs as data, and its file is valid UTF-8.
    (A custom parser that lets one through meets the driver's own check, below.)"""

    def answer(request: ModelRequest) -> str:
        if request.metadata["step"] == 0:
            return "```python\nprint('\ud800')\nscore = 0.5\n```"
        return by_step(request)

    out = tmp_path / "run"
    sandbox = FunctionSandbox(grade)
    result = run_search(
        toy(model=ScriptedModel(answer), sandbox=sandbox, budget=Budget(steps=3)),
        run_dir=out,
    )
    first = result.nodes[0]
    assert first.outcome is Outcome.SUCCESS
    assert "\ufffd" in (out / "nodes" / "n00000" / "program.py").read_text(encoding="utf-8")
    assert result.best is not None


def test_the_driver_refuses_unencodable_code_from_any_parser() -> None:
    """The driver's own guard: text a custom parser passes on with a lone surrogate is named as
    unencodable (the node becomes a RUNTIME_ERROR outcome), never written or run."""
    from openmle.search._driver import _unencodable

    assert _unencodable("print('ok')") is None
    why = _unencodable("print('\ud800')")
    assert why is not None and "cannot be encoded as UTF-8" in why


@pytest.mark.parametrize(
    "exc",
    [
        json.JSONDecodeError("Expecting value", "<html>", 0),
        AttributeError("'str' object has no attribute 'get'"),
        TypeError("content is an int"),
        ValueError("usage is NaN"),
    ],
)
def test_whatever_the_model_raises_is_recorded_and_the_search_goes_on(exc: Exception) -> None:
    """A model that raises something other than ModelError on step 1 gives an INFRA_ERROR
    node naming the error; the other steps run."""

    def answer(request: ModelRequest) -> str:
        if request.metadata["step"] == 1:
            raise exc
        return by_step(request)

    result = run_search(toy(model=ScriptedModel(answer), budget=Budget(steps=4), workers=2))
    assert len(result.nodes) == 4
    assert result.nodes[1].outcome is Outcome.INFRA_ERROR
    assert type(exc).__name__ in result.nodes[1].detail
    assert result.test_result is not None


def _responding(**fields: object) -> ScriptedModel:
    """A model answering by_step's program with the given response fields."""

    def answer(request: ModelRequest) -> ModelResponse:
        return ModelResponse(text=by_step(request), **fields)  # type: ignore[arg-type]

    return ScriptedModel(answer, model="asked-model")


def test_negative_token_counts_cannot_disable_the_token_cap() -> None:
    """Negative usage is ignored (estimated from characters instead, with a warning), so the
    tokens cap still ends the search (before: it ran to the step cap)."""
    model = _responding(usage=Usage(prompt_tokens=-1_000_000, completion_tokens=-5))
    result = run_search(toy(model=model, budget=Budget(tokens=1_000, steps=200), final_test=False))
    assert result.stop_reason == "tokens"
    assert len(result.nodes) < 200
    n = result.nodes[0]
    assert n.used.prompt_tokens > 0 and n.used.completion_tokens > 0
    assert any("usage ignored" in w for w in n.warnings)


@pytest.mark.parametrize(
    "fields",
    [
        {"usage": Usage(prompt_tokens=10**30, completion_tokens=10**30)},
        {"usage": Usage(prompt_tokens=math.nan, completion_tokens=1)},  # type: ignore[arg-type]
        {"usage": Usage(prompt_tokens="12", completion_tokens=[1])},  # type: ignore[arg-type]
        {"usage": "lots"},
        {"model": ["a", "list"]},
        {"cost_usd": math.inf},
        {"cost_usd": -3.0},
        {"cost_usd": "free"},
    ],
)
def test_invalid_usage_cost_or_model_id_never_crash_the_search(
    tmp_path: Path, fields: dict[str, object]
) -> None:
    """Huge, NaN, string, list usage; a list model id; infinite, negative or string cost:
    the search runs, journals, and records a warning where something was ignored."""
    prices = PriceTable(prices={"asked-model": (1.0, 1.0)})
    result = run_search(
        toy(model=_responding(**fields), budget=Budget(steps=3, usd=1e6, prices=prices)),
        run_dir=tmp_path / "run",
    )
    assert len(result.nodes) == 3
    assert all(n.ok for n in result.nodes)
    assert math.isfinite(result.spent["usd"]) and result.spent["usd"] >= 0
    assert math.isfinite(result.spent["tokens"]) and result.spent["tokens"] >= 0
    if "model" not in fields:
        assert result.nodes[0].warnings
    assert len(read_journal(tmp_path / "run")) > 3


def test_prices_follow_the_model_the_user_asked_for() -> None:
    """A service reporting another model id cannot escape the price table (before: 0 USD)."""
    model = _responding(
        usage=Usage(prompt_tokens=1_000_000, completion_tokens=0), model="cheap-unlisted"
    )
    result = run_search(
        toy(
            model=model,
            budget=Budget(steps=3, prices=PriceTable(prices={"asked-model": (2.0, 0.0)})),
            final_test=False,
        )
    )
    assert result.spent["usd"] == pytest.approx(6.0)
    assert result.nodes[0].model == "cheap-unlisted"  # what answered is still recorded


@pytest.mark.anyio
async def test_wall_clock_cap_is_a_hard_deadline_for_model_calls(tmp_path: Path) -> None:
    """With on_exhaust='finish', a model that stalls after the first step still ends the
    search at wall_s: the stalled call is cancelled and journalled as a cancelled step, and
    the run resumes cleanly. The first step must end within wall_s: a machine too loaded to
    run it in 1 s gets a second run with 10 s (the check is the deadline, not the speed)."""
    calls = 0

    class Stalling:
        model = "stall"

        async def complete(self, request: ModelRequest) -> ModelResponse:
            nonlocal calls
            calls += 1
            if calls > 1:
                await anyio.sleep(3600)
            return ModelResponse(text=by_step(request), model="stall")

    for wall_s in (1.0, 10.0):
        calls = 0
        out = tmp_path / f"run-{wall_s:g}"
        with anyio.fail_after(60 + wall_s):  # before the fix this hung for the model's stall
            result = await arun_search(
                toy(
                    model=Stalling(),
                    budget=Budget(wall_s=wall_s, on_exhaust="finish"),
                    workers=2,
                    final_test=False,
                ),
                run_dir=out,
            )
        if result.nodes:
            break
    assert result.stop_reason == "wall_s"
    cancels = [r for r in read_journal(out) if r["event"] == "cancel"]
    assert cancels and all(r["reason"] == "wall_s" for r in cancels)
    assert len(result.nodes) >= 1
    again = await aresume_search(
        out,
        ResumeSpec(model=ScriptedModel(by_step), sandbox=FunctionSandbox(grade), final_test=False),
    )
    assert again.stop_reason == "wall_s"
    assert len(again.nodes) == len(result.nodes)


def test_a_revoked_key_mid_run_stops_the_search_at_once_and_resume_continues(
    tmp_path: Path,
) -> None:
    """A key revoked mid-run (ModelAuthError on the fourth call) stops the search with that one
    error instead of ten steps of INFRA_ERROR nodes; resume with a good key finishes the run."""
    from openmle.errors import ModelAuthError

    calls: list[int] = []

    def revoked_after_three(request: ModelRequest) -> str:
        calls.append(1)
        if len(calls) > 3:
            raise ModelAuthError("401: the API key was revoked")
        return by_step(request)

    out = tmp_path / "run"
    with pytest.raises(ModelAuthError, match="revoked"):
        run_search(
            toy(model=ScriptedModel(revoked_after_three), budget=Budget(steps=8)),
            run_dir=out,
        )
    assert len(calls) == 4  # no retry of an auth failure
    nodes = [r["node"] for r in read_journal(out) if r["event"] == "node"]
    assert [n["outcome"] for n in nodes] == ["success"] * 3
    result = resume_search(
        out,
        resumed(),
    )
    assert len(result.nodes) == 8
    assert all(n.outcome is Outcome.SUCCESS for n in result.nodes)
