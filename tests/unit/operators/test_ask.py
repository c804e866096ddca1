"""ask_json: one loop for structured answers (builder spec and judge, priors distillation)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from openmle import Message, ModelRequest
from openmle.errors import ModelError
from openmle.operators import ask_json, extract_json
from openmle.testing import ScriptedModel

ASK = [Message(role="user", content='Answer with {"n": integer}.')]


def _n(obj: Any) -> int:
    if not isinstance(obj, dict) or not isinstance(obj.get("n"), int):
        raise ValueError('"n" must be an integer')
    return int(obj["n"])


def test_an_invalid_answer_goes_back_with_its_error() -> None:
    seen: list[ModelRequest] = []
    answers = iter(["no json here", '```json\n{"n": "x"}\n```', 'ok: {"n": 3}'])

    def model(request: ModelRequest) -> str:
        seen.append(request)
        return next(answers)

    got = anyio.run(lambda: ask_json(ScriptedModel(model), ASK, _n, metadata={"purpose": "t"}))
    assert got.ok and got.value == 3
    assert [a.kind for a in got.attempts] == ["invalid", "invalid", "ok"]
    assert got.attempts[0].error == "the answer holds no JSON object"
    last = seen[-1].messages
    assert last[-2].content == '```json\n{"n": "x"}\n```'
    assert last[-1].content == 'That answer is invalid: "n" must be an integer. Answer again.'
    assert all(r.metadata["purpose"] == "t" and r.temperature == 0.0 for r in seen)


def test_model_errors_raise_retry_or_stop() -> None:
    calls = 0

    def broken(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        raise ModelError("service down")

    model = ScriptedModel(broken)
    with pytest.raises(ModelError):
        anyio.run(lambda: ask_json(model, ASK, _n, metadata={}))
    retried = anyio.run(lambda: ask_json(model, ASK, _n, metadata={}, on_model_error="retry"))
    assert [a.kind for a in retried.attempts] == ["model_error"] * 3 and retried.value is None
    assert retried.last_error == "ModelError: service down"
    stopped = anyio.run(lambda: ask_json(model, ASK, _n, metadata={}, on_model_error="stop"))
    assert len(stopped.attempts) == 1 and not stopped.ok
    assert calls == 1 + 3 + 1


def test_extract_json_bounds_and_depth() -> None:
    assert extract_json('text {"a": 1} more') == {"a": 1}
    with pytest.raises(ValueError, match="29 characters; at most 10"):
        extract_json('{"a": "' + "x" * 20 + '"}', max_chars=10)
    with pytest.raises(ValueError, match=r"nested too deeply|not valid JSON"):
        extract_json('{"a": ' + "[" * 60_000 + "]" * 60_000 + "}")
