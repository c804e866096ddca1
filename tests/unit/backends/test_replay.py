"""Recording any model's answers and replaying them without it."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import attrs
import pytest

from openmle import Job, Message, ModelRequest, Operator, Outcome, RunResult
from openmle.backends import OfflineModel, RecordingModel, ReplayModel
from openmle.errors import InvalidArgument, ModelNotFoundError
from openmle.search import (
    Budget,
    PriceTable,
    SearchConfig,
    SearchSpec,
    journal_fingerprint,
    run_search,
)
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel, check_operator_model


def request(text: str, seed: int = 0) -> ModelRequest:
    """A one-message request."""
    return ModelRequest(
        messages=[Message(role="user", content=text)], operator=Operator.DRAFT, seed=seed
    )


def test_record_then_replay_same_answers(tmp_path: Path) -> None:
    """Replaying answers each recorded request exactly, identical requests in order."""
    answers = iter(["one", "two", "three"])
    rec = RecordingModel(ScriptedModel(lambda r: next(answers)), tmp_path / "rec.jsonl")
    for text in ("a", "b", "a"):
        anyio.run(rec.complete, request(text))
    replay = ReplayModel(tmp_path / "rec.jsonl")
    assert len(replay) == 3
    assert anyio.run(replay.complete, request("b")).text == "two"
    assert anyio.run(replay.complete, request("a")).text == "one"
    assert anyio.run(replay.complete, request("a")).text == "three"
    assert anyio.run(replay.complete, request("a")).text == "three"  # repeats the last


def test_unknown_request_raises_or_falls_back(tmp_path: Path) -> None:
    """A request never recorded is a model error, unless a fallback answers it."""
    rec = RecordingModel(ScriptedModel(["x"]), tmp_path / "rec.jsonl")
    anyio.run(rec.complete, request("a"))
    with pytest.raises(ModelNotFoundError, match="no recorded answer"):
        anyio.run(ReplayModel(tmp_path / "rec.jsonl").complete, request("a", seed=1))
    fb = ReplayModel(tmp_path / "rec.jsonl", fallback=ScriptedModel(["fallback"]))
    assert anyio.run(fb.complete, request("zzz")).text == "fallback"


def test_missing_or_bad_file(tmp_path: Path) -> None:
    """A missing file or a non-recording line is an argument error naming the file."""
    with pytest.raises(InvalidArgument, match="not found"):
        ReplayModel(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n")
    with pytest.raises(InvalidArgument, match="line 1"):
        ReplayModel(bad)


@pytest.mark.anyio
async def test_conformance(tmp_path: Path) -> None:
    """Both wrappers keep the OperatorModel contract."""
    rec = RecordingModel(OfflineModel(), tmp_path / "r.jsonl")
    await check_operator_model(rec)
    await check_operator_model(ReplayModel(tmp_path / "r.jsonl"))


def test_a_replayed_search_reproduces_the_recorded_one(tmp_path: Path) -> None:
    """A search with a recorded model, replayed without it, writes the same journal."""

    def grade(job: Job) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=len(job.code) % 97 / 97, split=job.split)

    def go(model: object, out: Path) -> None:
        run_search(
            SearchSpec(
                task="toy",
                higher_is_better=True,
                model=model,  # type: ignore[arg-type]
                sandbox=FunctionSandbox(grade),
                selector=FunctionSelector(lambda c: 0.1 + (c.score or 0.0)),
                budget=Budget(steps=10),
                config=SearchConfig(initial_drafts=3, seed=5),
                workers=2,
                ordered=True,
                description="",
            ),
            run_dir=out,
        )

    go(RecordingModel(OfflineModel(sklearn=True), tmp_path / "rec.jsonl"), tmp_path / "a")
    go(ReplayModel(tmp_path / "rec.jsonl"), tmp_path / "b")
    a, b = journal_fingerprint(tmp_path / "a"), journal_fingerprint(tmp_path / "b")
    for ra, rb in zip(a, b, strict=True):
        if ra["event"] == "node":  # the model id differs (offline vs replay): compare the rest
            ra["node"].pop("model")
            rb["node"].pop("model")
    assert a == b


def _priced_spec(model: object, prices: dict[str, tuple[float, float]]) -> SearchSpec:
    """A 3-step toy search of ``model`` under a 5-dollar cap priced by ``prices``."""

    def grade(job: Job) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)

    return SearchSpec(
        task="toy",
        higher_is_better=True,
        model=model,  # type: ignore[arg-type]
        sandbox=FunctionSandbox(grade),
        budget=Budget(steps=3, usd=5.0, prices=PriceTable(prices=prices)),
        config=SearchConfig(initial_drafts=2),
        workers=1,
        description="",
    )


def test_replayed_answers_are_priced_as_the_recorded_model(tmp_path: Path) -> None:
    """docs/how-to/custom-model.md: replaying under a usd cap prices the recorded model id
    (the replay used to ask for a price of 'replay' and stop at its first step)."""
    model = ScriptedModel(lambda r: "plan\n```python\nprint(1)\n```", model="my-model-v1")
    prices = {"my-model-v1": (0.5, 1.5)}
    recorded = RecordingModel(model, tmp_path / "answers.jsonl")
    first = run_search(_priced_spec(recorded, prices), run_dir=tmp_path / "a")
    replay = ReplayModel(tmp_path / "answers.jsonl")
    assert replay.model == "my-model-v1" and replay.unpriced_models == ("my-model-v1",)
    again = run_search(_priced_spec(replay, prices), run_dir=tmp_path / "b")
    assert len(again.nodes) == 3 and again.spent["usd"] == pytest.approx(first.spent["usd"])
    assert again.spent["usd"] > 0
    # a table without the recorded id: refused before anything is written, naming the id
    with pytest.raises(InvalidArgument, match="no price for model 'my-model-v1'"):
        _priced_spec(ReplayModel(tmp_path / "answers.jsonl"), {"gpt-4o": (1.0, 1.0)})
    with pytest.raises(InvalidArgument, match="it prices no model"):
        attrs.evolve(_priced_spec(replay, prices), budget=Budget(steps=3, usd=5.0))
    assert ReplayModel(tmp_path / "answers.jsonl", model="other").model == "other"


def test_an_old_recording_is_priced_as_the_model_its_answers_report(tmp_path: Path) -> None:
    """A recording without the asked model's id: the id its answers report."""
    rec = RecordingModel(ScriptedModel(["x"], model="m-1"), tmp_path / "rec.jsonl")
    anyio.run(rec.complete, request("a"))
    lines = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert lines[0]["model"] == "m-1"
    for line in lines:
        del line["model"]
    (tmp_path / "old.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert ReplayModel(tmp_path / "old.jsonl").model == "m-1"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert ReplayModel(empty).model == "replay"


def test_an_unknown_cost_names_the_model_id_looked_up(tmp_path: Path) -> None:
    """A model the table cannot price stops the search with its id in the message."""
    model = ScriptedModel(lambda r: "plan\n```python\nprint(1)\n```", model="m-2")
    with pytest.raises(InvalidArgument, match="answered by model 'm-2'"):
        run_search(_priced_spec(model, {"gpt-4o": (1.0, 1.0)}), run_dir=tmp_path / "c")


def test_a_replay_with_another_seed_fails_with_one_readable_error(tmp_path: Path) -> None:
    """Workers that meet unrecorded requests report one error, not several run together on
    one comma-joined line (each request's key differed, so the messages did)."""

    def grade(job: Job) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)

    def spec(model: object, seed: int) -> SearchSpec:
        return SearchSpec(
            task="toy",
            higher_is_better=True,
            model=model,  # type: ignore[arg-type]
            sandbox=FunctionSandbox(grade),
            budget=Budget(steps=4),
            config=SearchConfig(initial_drafts=4, seed=seed),
            workers=4,
            description="",
        )

    answer = "plan\n```python\nprint(1)\n```"
    run_search(spec(RecordingModel(ScriptedModel(lambda r: answer), tmp_path / "r.jsonl"), 5))
    with pytest.raises(ModelNotFoundError) as caught:
        run_search(spec(ReplayModel(tmp_path / "r.jsonl"), 6), quiet=True)
    message = str(caught.value)
    assert "\n" not in message and message.count("no recorded answer") == 1
    assert "--seed" in message
    assert any(n.startswith("request key ") for n in caught.value.__notes__)


def test_a_recording_nested_too_deeply_or_too_large_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    """A line of 10**5 nested arrays raised RecursionError (a traceback); a sparse file past
    the cap was read whole."""
    nested = tmp_path / "nested.jsonl"
    nested.write_text("[" * 100_000 + "]" * 100_000 + "\n{}\n")
    with pytest.raises(InvalidArgument, match="line 1 is not a recording record"):
        ReplayModel(nested)
    huge = tmp_path / "huge.jsonl"
    with huge.open("wb") as f:
        f.truncate((1 << 30) + 1)
    with pytest.raises(InvalidArgument, match=r"Cannot read the recording .*above the"):
        ReplayModel(huge)
