"""Server-side rollouts with log-probs: ``ModelPolicy`` over ``OpenAIModel`` against a scripted
OpenAI-compatible server on 127.0.0.1 that returns (or withholds) token log-probs and ids."""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
from tests._serve import served_in_thread

torch = pytest.importorskip("torch")
pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from openmle import Message, ModelRequest, Operator  # noqa: E402
from openmle.backends import OpenAIModel  # noqa: E402
from openmle.train import ByteTokenizer, ModelPolicy, rollout_batch  # noqa: E402

TOK = ByteTokenizer()


class Script:
    """Each reply: (text, logprobs or None, how ids are given: "ids", "tokens" or None)."""

    def __init__(self) -> None:
        self.replies: deque[tuple[str, list[float] | None, str | None]] = deque()
        self.bodies: list[dict[str, Any]] = []

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.bodies.append(body)
        text, lps, ids_mode = self.replies.popleft()
        ids = [*TOK.encode(text), TOK.eos_token_id]
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        logprobs = None
        if lps is not None and body.get("logprobs"):
            content = []
            for i, lp in enumerate(lps):
                token = f"token_id:{ids[i]}" if ids_mode == "tokens" else f"t{i}"
                content.append({"token": token, "logprob": lp, "top_logprobs": []})
            logprobs = {"content": content}
        if body.get("stream"):
            return StreamingResponse(self._events(text, logprobs), media_type="text/event-stream")
        choice["message"] = {"role": "assistant", "content": text}
        choice["logprobs"] = logprobs
        if ids_mode == "ids":
            choice["token_ids"] = ids
        raw = json.dumps({"model": body["model"], "choices": [choice]})  # NaN as sent
        return Response(raw, media_type="application/json")

    async def _events(self, text: str, logprobs: dict[str, Any] | None) -> AsyncIterator[bytes]:
        content = (logprobs or {}).get("content", [])
        half = len(content) // 2
        for piece, lp in ((text[:3], content[:half]), (text[3:], content[half:])):
            choice = {"index": 0, "delta": {"content": piece}, "finish_reason": None}
            if logprobs is not None:
                choice["logprobs"] = {"content": lp}
            yield f"data: {json.dumps({'choices': [choice]})}\n\n".encode()
        last = {"index": 0, "delta": {}, "finish_reason": "stop"}
        yield f"data: {json.dumps({'choices': [last]})}\n\n".encode()
        yield b"data: [DONE]\n\n"


@pytest.fixture(scope="module")
def _server() -> Iterator[tuple[Script, str]]:
    script = Script()
    app = Starlette(routes=[Route("/v1/chat/completions", script.chat, methods=["POST"])])
    with served_in_thread(app, lifespan="off") as url:
        yield script, f"{url}/v1"


@pytest.fixture
def server(_server: tuple[Script, str]) -> tuple[Script, str]:
    _server[0].replies.clear()
    _server[0].bodies.clear()
    return _server


REQ = ModelRequest(operator=Operator.DRAFT, messages=(Message(role="user", content="hi"),))


def _sample(policy: ModelPolicy, n: int) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return await policy.sample(REQ, n, seed=0)
        finally:
            assert isinstance(policy.model, OpenAIModel)
            await policy.model.aclose()

    return anyio.run(go)


def _complete(model: OpenAIModel) -> Any:
    async def go() -> Any:
        try:
            return await model.complete(REQ)
        finally:
            await model.aclose()

    return anyio.run(go)


def _lps(text: str, extra: int = 1) -> list[float]:
    return [-0.1 * (i + 1) for i in range(len(TOK.encode(text)) + extra)]


@pytest.mark.parametrize("stream", [False, True])
def test_server_logprobs_reach_the_rollout_batch(server: tuple[Script, str], stream: bool) -> None:
    script, url = server
    texts = ["print(1)", "print(22)"]
    for t in texts:
        script.replies.append((t, _lps(t), None))
    policy = ModelPolicy(OpenAIModel("m", base_url=url, max_retries=0, stream=stream), TOK)
    samples = _sample(policy, 2)
    assert all(b.get("logprobs") is True for b in script.bodies)  # the policy asked for them
    assert sorted(s.text for s in samples) == texts  # replies arrive in any order
    for s in samples:
        assert s.token_ids == [*TOK.encode(s.text), TOK.eos_token_id]
        assert s.logprobs == pytest.approx(_lps(s.text))
    assert not policy.fallbacks


@pytest.mark.parametrize("mode", ["ids", "tokens"])
def test_server_token_ids_are_used_as_sampled(server: tuple[Script, str], mode: str) -> None:
    script, url = server
    script.replies.append(("abc", _lps("abc"), mode))
    model = OpenAIModel("m", base_url=url, max_retries=0, logprobs=True)
    resp = _complete(model)
    assert resp.token_ids == (*TOK.encode("abc"), TOK.eos_token_id)
    assert resp.logprobs == pytest.approx(_lps("abc"))


def test_without_logprobs_the_policy_says_so_once_and_falls_back(
    server: tuple[Script, str], caplog: pytest.LogCaptureFixture
) -> None:
    script, url = server
    for t in ("a", "bb", "ccc"):
        script.replies.append((t, None, None))
    policy = ModelPolicy(OpenAIModel("m", base_url=url, max_retries=0), TOK)
    with caplog.at_level(logging.WARNING, logger="openmle.train"):
        samples = _sample(policy, 3)
    assert [s.logprobs for s in samples] == [None, None, None]
    assert all(s.token_ids == [*TOK.encode(s.text), TOK.eos_token_id] for s in samples)
    assert sum("no log-probs" in r.getMessage() for r in caplog.records) == 1
    assert policy.fallbacks["the server returned no log-probs"] == 3


def test_mismatched_logprob_count_falls_back(server: tuple[Script, str]) -> None:
    script, url = server
    script.replies.append(("abcd", _lps("abcd", extra=3), None))
    policy = ModelPolicy(OpenAIModel("m", base_url=url, max_retries=0), TOK)
    (s,) = _sample(policy, 1)
    assert s.logprobs is None and sum(policy.fallbacks.values()) == 1


@pytest.mark.parametrize("bad", [0.5, float("nan"), "x", True])
def test_hostile_logprobs_are_dropped(server: tuple[Script, str], bad: Any) -> None:
    script, url = server
    lps: list[Any] = _lps("ab")
    lps[1] = bad
    script.replies.append(("ab", lps, None))
    model = OpenAIModel("m", base_url=url, max_retries=0, logprobs=True)
    resp = _complete(model)
    assert resp.text == "ab" and resp.logprobs is None and resp.token_ids is None


def test_rollout_batch_carries_server_logprobs(server: tuple[Script, str]) -> None:
    from openmle.rewards import GroupRewards
    from openmle.train import RolloutGroup

    script, url = server
    for t in ("x=1", "y=22"):
        script.replies.append((t, _lps(t), None))
    policy = ModelPolicy(OpenAIModel("m", base_url=url, max_retries=0), TOK)
    samples = _sample(policy, 2)
    rewards = GroupRewards(
        rewards=(1.0, 0.0), base_rewards=(1.0, 0.0), advantages=(1.0, -1.0),
        included=(True, True), improve_deltas=(None, None), bounds=None, discarded=False,
        history_update=(),
    )  # fmt: skip
    group = RolloutGroup(
        task="t", operator=Operator.DRAFT, requested=Operator.DRAFT, parent_ids=(),
        samples=tuple(samples), results=(None, None), rewards=rewards, version=0,
        program_ids=(None, None),
    )  # fmt: skip
    batch = rollout_batch([group], pad_token_id=TOK.pad_token_id)
    assert batch.rollout_logprobs is not None
    got = batch.rollout_logprobs[batch.response_mask]
    want = torch.tensor([lp for s in samples for lp in _lps(s.text)])
    assert torch.allclose(got, want)
