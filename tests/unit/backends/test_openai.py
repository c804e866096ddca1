"""``OpenAIModel`` over real HTTP against a scripted OpenAI-compatible server on 127.0.0.1
(well-behaved, broken and hostile: the second security review's attacks are at the end)."""

from __future__ import annotations

import gc
import json
import socket
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest
from tests._serve import served_in_thread

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
uvicorn = pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from openmle import Message, ModelRequest, ModelResponse, Operator  # noqa: E402
from openmle.backends._openai import (  # noqa: E402
    OpenAIModel,
    split_reasoning,
)
from openmle.errors import (  # noqa: E402
    InvalidArgument,
    ModelAuthError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimited,
    ModelTimeout,
)
from openmle.testing import check_operator_model  # noqa: E402


@dataclass
class Reply:
    """One scripted answer of the fake server."""

    status: int = 200
    content: str = "print(1)"
    reasoning: str | None = None
    reasoning_key: str = "reasoning_content"
    usage: tuple[int, int] = (11, 7)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    drop_after_chunks: int | None = None
    message: str = "scripted error"
    finish_reason: str = "stop"
    raw: bytes | None = None  # send exactly these bytes (any status, headers, media type)
    media_type: str = "application/json"
    endless: bool = False  # a 200 body that never ends (an event stream when streaming)


class _Dropped(Exception):
    """Raised inside a streaming body to make the server drop the connection."""


class FakeOpenAI:
    """A minimal OpenAI-compatible server: ``/v1/chat/completions`` and ``/v1/models``."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.models = ["served/model-a", "served/model-b"]
        self.stolen: list[dict[str, Any]] = []  # requests that reached the redirect target
        self.in_flight = 0
        self.max_in_flight = 0
        self.epoch = 0  # a handler of an earlier test (still sleeping) counts for nothing
        self.base_url = ""
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.list_models, methods=["GET"]),
                Route("/elsewhere/v1/chat/completions", self.steal, methods=["POST"]),
            ]
        )

    def reset(self) -> None:
        self.replies.clear()
        self.requests.clear()
        self.stolen.clear()
        self.in_flight = self.max_in_flight = 0
        self.epoch += 1

    async def list_models(self, request: Request) -> Response:
        return JSONResponse(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}
        )

    async def steal(self, request: Request) -> Response:
        self.stolen.append(await request.json())
        return JSONResponse({"error": {"message": "you should not be here"}}, status_code=400)

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append((dict(request.headers), body))
        reply = self.replies.popleft() if self.replies else Reply()
        epoch = self.epoch
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await anyio.sleep(reply.delay_s)
        finally:
            if epoch == self.epoch:  # not a test that has ended (its client gave up)
                self.in_flight -= 1
        if reply.raw is not None:
            return Response(
                reply.raw,
                status_code=reply.status,
                headers=reply.headers,
                media_type=reply.media_type,
            )
        if reply.endless:
            return StreamingResponse(
                _endless(bool(body.get("stream"))), media_type="text/event-stream"
            )
        if reply.status != 200:
            return JSONResponse(
                {"error": {"message": reply.message, "type": "scripted", "code": reply.status}},
                status_code=reply.status,
                headers=reply.headers,
            )
        if body.get("stream"):
            return StreamingResponse(self._events(body, reply), media_type="text/event-stream")
        msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning is not None:
            msg[reply.reasoning_key] = reply.reasoning
        return JSONResponse(
            {
                "id": "cmpl-1",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": msg, "finish_reason": reply.finish_reason}],
                "usage": {
                    "prompt_tokens": reply.usage[0],
                    "completion_tokens": reply.usage[1],
                    "total_tokens": sum(reply.usage),
                },
            }
        )

    async def _events(self, body: dict[str, Any], reply: Reply) -> AsyncIterator[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None) -> bytes:
            data = {
                "id": "cmpl-1",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                if delta is not None
                else [],
                "usage": usage,
            }
            return f"data: {json.dumps(data)}\n\n".encode()

        parts: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if reply.reasoning:
            parts += [{reply.reasoning_key: w} for w in _pieces(reply.reasoning)]
        parts += [{"content": w} for w in _pieces(reply.content)]
        for i, delta in enumerate(parts):
            if reply.drop_after_chunks is not None and i == reply.drop_after_chunks:
                raise _Dropped("scripted disconnect")
            await anyio.sleep(reply.chunk_delay_s)
            yield chunk(delta)
        yield chunk({}, finish=reply.finish_reason)
        if (body.get("stream_options") or {}).get("include_usage"):
            u = {
                "prompt_tokens": reply.usage[0],
                "completion_tokens": reply.usage[1],
                "total_tokens": sum(reply.usage),
            }
            yield chunk(None, usage=u)  # type: ignore[arg-type]
        yield b"data: [DONE]\n\n"


async def _endless(stream: bool) -> AsyncIterator[bytes]:
    """A body that never ends, 1 MiB at a time (the hostile server of the security review)."""
    if stream:
        event = b'data: {"choices":[{"index":0,"delta":{"content":"xxxxxxxx"}}]}\n\n'
        block = event * (2**20 // len(event))
    else:
        yield b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
        block = b"x" * 2**20
    while True:
        yield block
        await anyio.lowlevel.checkpoint()


def _pieces(text: str, n: int = 4) -> list[str]:
    return [text[i : i + n] for i in range(0, len(text), n)]


@pytest.fixture(scope="module")
def _server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    with served_in_thread(fake.app, lifespan="off") as url:
        fake.base_url = f"{url}/v1"
        yield fake


@pytest.fixture
def server(_server: FakeOpenAI) -> FakeOpenAI:
    """The module's fake server, with an empty script and request log."""
    _server.reset()
    return _server


def _request(**kw: Any) -> ModelRequest:
    return ModelRequest(
        messages=(Message(role="system", content="sys"), Message(role="user", content="hi")),
        operator=Operator.DRAFT,
        **kw,
    )


def _model(server: FakeOpenAI, **kw: Any) -> OpenAIModel:
    kw.setdefault("api_key", "sk-test")
    kw.setdefault("backoff_s", 0.01)
    return OpenAIModel(model="served/model-a", base_url=server.base_url, **kw)


async def _answer(server: FakeOpenAI, **kw: Any) -> ModelResponse:
    """The answer to one :func:`_request` of a :func:`_model` with ``kw``, closed after."""
    model = _model(server, **kw)
    try:
        return await model.complete(_request())
    finally:
        await model.aclose()


@pytest.mark.anyio
async def test_plain_completion_usage_and_request_body(server: FakeOpenAI) -> None:
    """A non-streamed answer comes back with usage; settings and extra_body reach the server."""
    server.replies.append(Reply(content="print(42)", usage=(30, 5)))
    model = _model(server, temperature=0.7, extra_body={"top_k": 20}, max_tokens=64)
    resp = await model.complete(_request(top_p=0.9, seed=3, stop=("```",)))
    await model.aclose()
    assert resp.text == "print(42)" and resp.reasoning is None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (30, 5)
    assert resp.model == "served/model-a" and resp.finish_reason == "stop"
    assert resp.latency_s > 0
    headers, body = server.requests[0]
    assert headers["authorization"] == "Bearer sk-test"
    assert body["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi"},
    ]
    assert body["temperature"] == 0.7 and body["top_p"] == 0.9 and body["seed"] == 3
    assert body["max_tokens"] == 64 and body["top_k"] == 20 and body["stop"] == ["```"]
    assert "stream" not in body


@pytest.mark.anyio
async def test_token_limit_field_for_reasoning_models(server: FakeOpenAI) -> None:
    """``token_limit_param`` sends the limit as ``max_completion_tokens`` where models need it."""
    model = _model(server, token_limit_param="max_completion_tokens", max_tokens=99)
    await model.complete(_request())
    await model.aclose()
    body = server.requests[0][1]
    assert body["max_completion_tokens"] == 99 and "max_tokens" not in body


@pytest.mark.anyio
async def test_unset_sampling_settings_are_not_sent(server: FakeOpenAI) -> None:
    """Settings left unset everywhere are omitted, so models that refuse them still work."""
    model = _model(server)
    await model.complete(_request())
    await model.aclose()
    body = server.requests[0][1]
    assert not {"temperature", "top_p", "max_tokens", "seed", "stop"} & set(body)


@pytest.mark.anyio
async def test_api_key_from_environment(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without ``api_key`` the key is read from the named environment variable."""
    monkeypatch.setenv("MY_VLLM_KEY", "from-env")
    model = _model(server, api_key=None, api_key_env="MY_VLLM_KEY")
    await model.complete(_request())
    await model.aclose()
    assert server.requests[0][0]["authorization"] == "Bearer from-env"


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_streamed_answer_keeps_reasoning_apart(server: FakeOpenAI, key: str) -> None:
    """A streamed answer is assembled; reasoning deltas and final usage are kept apart."""
    server.replies.append(
        Reply(content="import os\nprint(os.sep)", reasoning="think hard", reasoning_key=key)
    )
    resp = await _answer(server, stream=True)
    assert resp.text == "import os\nprint(os.sep)"
    assert resp.reasoning == "think hard"
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (11, 7)
    assert resp.finish_reason == "stop"
    assert server.requests[0][1]["stream"] is True


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_think_block_in_content_is_moved_to_reasoning(
    server: FakeOpenAI, stream: bool
) -> None:
    """A leading ``<think>`` block (no reasoning parser on the server) is not in the text."""
    server.replies.append(Reply(content="<think>plan it</think>\n\nprint(1)"))
    resp = await _answer(server, stream=stream)
    assert resp.text == "print(1)" and resp.reasoning == "plan it"


@pytest.mark.anyio
async def test_429_honours_retry_after(server: FakeOpenAI) -> None:
    """A 429 with ``Retry-After`` waits that long (not the much longer backoff), then succeeds."""
    server.replies.extend(
        [Reply(status=429, headers={"Retry-After": "0.3"}), Reply(content="done")]
    )
    model = _model(server, backoff_s=500.0, max_backoff_s=500.0)
    t0 = time.monotonic()
    with anyio.fail_after(60):
        resp = await model.complete(_request())
    await model.aclose()
    assert resp.text == "done" and len(server.requests) == 2
    assert time.monotonic() - t0 >= 0.3


@pytest.mark.anyio
async def test_retry_after_is_capped_by_max_backoff(server: FakeOpenAI) -> None:
    """A huge ``Retry-After`` is capped at ``max_backoff_s``."""
    server.replies.extend([Reply(status=503, headers={"Retry-After": "3600"}), Reply()])
    model = _model(server, max_backoff_s=0.05)
    with anyio.fail_after(60):
        resp = await model.complete(_request())
    await model.aclose()
    assert resp.text == "print(1)" and len(server.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_is_retried(server: FakeOpenAI, status: int) -> None:
    """Transient 5xx answers are retried until one succeeds."""
    server.replies.extend([Reply(status=status), Reply(status=status), Reply(content="ok")])
    resp = await _answer(server, max_retries=3)
    assert resp.text == "ok" and len(server.requests) == 3


@pytest.mark.anyio
async def test_persistent_429_raises_rate_limited(server: FakeOpenAI) -> None:
    """429 on every attempt raises ``ModelRateLimited`` after exactly ``max_retries`` retries."""
    server.replies.extend([Reply(status=429)] * 3)
    model = _model(server, max_retries=2)
    with pytest.raises(ModelRateLimited, match="max_concurrency"):
        await model.complete(_request())
    await model.aclose()
    assert len(server.requests) == 3


@pytest.mark.anyio
async def test_persistent_500_raises_model_error(server: FakeOpenAI) -> None:
    """5xx on every attempt raises ``ModelError`` naming the last error."""
    server.replies.extend([Reply(status=500, message="engine dead")] * 2)
    model = _model(server, max_retries=1)
    with pytest.raises(ModelError, match="engine dead"):
        await model.complete(_request())
    await model.aclose()


@pytest.mark.anyio
async def test_per_call_timeout(server: FakeOpenAI) -> None:
    """A server slower than ``timeout_s`` raises ``ModelTimeout`` after each attempt times out."""
    server.replies.extend([Reply(delay_s=5.0), Reply(delay_s=5.0)])
    model = _model(server, timeout_s=0.3, max_retries=1)
    with anyio.fail_after(30), pytest.raises(ModelTimeout, match=r"timeout_s=0\.3"):
        await model.complete(_request())
    await model.aclose()
    # The server (a thread) may read a request after the client gave up on it: wait for
    # both to arrive rather than counting at a moment a loaded machine decides.
    with anyio.fail_after(30):
        while len(server.requests) < 2:  # noqa: ASYNC110 - the server thread sets no event
            await anyio.sleep(0.05)
    assert len(server.requests) == 2


@pytest.mark.anyio
async def test_stalled_stream_times_out(server: FakeOpenAI) -> None:
    """A stream that stops sending mid-way cannot hang the caller (E2B#1128)."""
    server.replies.append(Reply(content="x" * 40, chunk_delay_s=2.0))
    model = _model(server, stream=True, timeout_s=0.5, max_retries=0)
    with anyio.fail_after(30), pytest.raises(ModelTimeout):
        await model.complete(_request())
    await model.aclose()


@pytest.mark.anyio
async def test_slow_answer_within_timeout_succeeds(server: FakeOpenAI) -> None:
    """A slow answer that arrives within ``timeout_s`` is not retried."""
    server.replies.append(Reply(delay_s=0.3, content="slow"))
    resp = await _answer(server, timeout_s=30)
    assert resp.text == "slow" and len(server.requests) == 1


@pytest.mark.anyio
async def test_disconnect_mid_stream_is_retried(server: FakeOpenAI) -> None:
    """A connection dropped mid-stream is retried; the retry's answer is returned whole."""
    server.replies.extend(
        [Reply(content="abcdefghijkl", drop_after_chunks=2), Reply(content="whole")]
    )
    resp = await _answer(server, stream=True)
    assert resp.text == "whole" and len(server.requests) == 2


@pytest.mark.anyio
async def test_persistent_disconnects_raise_model_error(server: FakeOpenAI) -> None:
    """Connections dropped on every attempt raise ``ModelError``, never a partial answer."""
    server.replies.extend([Reply(content="abcdefghijkl", drop_after_chunks=1)] * 2)
    model = _model(server, stream=True, max_retries=1)
    with pytest.raises(ModelError, match="failed on all 2 attempts"):
        await model.complete(_request())
    await model.aclose()


@pytest.mark.anyio
async def test_unreachable_server_raises_model_error() -> None:
    """Nothing listening on the port: connection errors are retried, then ``ModelError``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIModel(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.01
    )
    with pytest.raises(ModelError, match="ConnectError"):
        await model.complete(_request())
    await model.aclose()


_AUTH = ("Invalid API key", {"api_key_env": "VLLM_KEY"}, ModelAuthError, r"\$VLLM_KEY")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "message", "options", "error", "match", "named"),
    [
        (401, *_AUTH, "Invalid API key"),
        (403, *_AUTH, "Invalid API key"),
        (404, "The model `nope` does not exist.", {}, ModelNotFoundError, "served/model-a",
         "'served/model-a'"),
        (400, "max_tokens too large", {}, ModelError, "max_tokens too large", ""),
    ],
)  # fmt: skip
async def test_client_errors_are_named_and_not_retried(
    server: FakeOpenAI,
    status: int,
    message: str,
    options: dict[str, Any],
    error: type[ModelError],
    match: str,
    named: str,
) -> None:
    """Raised at once, without retries: 401/403 ``ModelAuthError`` naming the key variable (and
    the server's message), 404 ``ModelNotFoundError`` naming the model and the ones the server
    serves, other 4xx ``ModelError`` with the server's message."""
    server.replies.append(Reply(status=status, message=message))
    model = _model(server, **options)
    with pytest.raises(error, match=match) as info:
        await model.complete(_request())
    await model.aclose()
    assert named in str(info.value) and len(server.requests) == 1


@pytest.mark.anyio
async def test_concurrency_limit(server: FakeOpenAI) -> None:
    """No more than ``max_concurrency`` calls are in flight at once."""
    server.replies.extend([Reply(delay_s=1.0) for _ in range(6)])
    model = _model(server, max_concurrency=2)
    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(model.complete, _request())
    await model.aclose()
    assert len(server.requests) == 6 and server.max_in_flight == 2


@pytest.mark.anyio
async def test_conformance(server: FakeOpenAI) -> None:
    """``OpenAIModel`` passes the operator-model conformance check."""
    model = _model(server)
    await check_operator_model(model)
    await model.aclose()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_model_survives_a_new_event_loop(server: FakeOpenAI) -> None:
    """One model used under two ``anyio.run`` calls opens a fresh pool for the second loop.

    (The first loop's idle connection cannot be closed once its loop is gone; Python warns
    about it when it is collected, hence the filter.)
    """
    model = _model(server)
    first = anyio.run(model.complete, _request())
    second = anyio.run(model.complete, _request())
    assert first.text == second.text == "print(1)" and len(server.requests) == 2
    anyio.run(model.aclose)
    del model
    gc.collect()  # collect the abandoned pools here, under this test's warning filter


def test_public_module_path() -> None:
    """The class reports its public module."""
    from openmle.backends import JobServiceSandbox
    from openmle.backends import OpenAIModel as Public

    assert Public.__module__ == JobServiceSandbox.__module__ == "openmle.backends"


def test_split_reasoning() -> None:
    """Only a leading think block moves; an unclosed one means the text was all reasoning."""
    assert split_reasoning("<think>a</think>b", None) == ("b", "a")
    assert split_reasoning("b <think>a</think>", None) == ("b <think>a</think>", None)
    assert split_reasoning("<think>cut off", "r") == ("", "r\ncut off")


@pytest.mark.parametrize(
    "kw",
    [
        {"model": ""},
        {"model": "m", "timeout_s": 0},
        {"model": "m", "max_retries": -1},
        {"model": "m", "max_concurrency": 0},
        {"model": "m", "max_tokens": 0},
        {"model": "m", "max_response_bytes": 10},
        {"model": "m", "total_timeout_s": 0},
        {"model": "m", "base_url": "ftp://x"},
    ],
)
def test_bad_settings_name_the_field(kw: dict[str, Any]) -> None:
    """Invalid settings raise ``InvalidArgument`` naming the field."""
    with pytest.raises(InvalidArgument, match="OpenAIModel"):
        OpenAIModel(**kw)


# ---------------------------------------------------------------------------------------------
# A hostile or broken server (second security review): every answer is a ModelError or a
# sanitised response, never another exception, and never unbounded memory.


def _completion(message: Any = None, usage: Any = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": "served/model-a",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }
    if usage is not None:
        body["usage"] = usage
    body.update(extra)
    return body


def _raw(value: Any) -> bytes:
    return json.dumps(value, allow_nan=True).encode()


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_endless_body_is_cut_at_the_byte_cap(server: FakeOpenAI, stream: bool) -> None:
    """A body that never ends stops at ``max_response_bytes`` (32 MiB), not at ``timeout_s``.

    (Before: it grew ~450 MB/s until the 600 s timeout.) No retry: it would only repeat.
    """
    server.replies.extend([Reply(endless=True), Reply()])
    model = _model(server, stream=stream, timeout_s=120, max_retries=1)
    with anyio.fail_after(110), pytest.raises(ModelError, match="max_response_bytes=33554432"):
        await model.complete(_request())
    await model.aclose()
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_declared_oversized_body_is_refused_unread(server: FakeOpenAI) -> None:
    """A ``Content-Length`` over the cap is refused before the body is read; the cap is settable."""
    server.replies.append(Reply(raw=_raw(_completion({"content": "x" * 5000}))))
    model = _model(server, max_response_bytes=4096, max_retries=0)
    with pytest.raises(ModelError, match="Content-Length"):
        await model.complete(_request())
    await model.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("raw", "media_type", "said"),
    [
        (b'{"choices": [{"message": {"content": "print(1)"', "application/json", "not JSON"),
        (b"<html><body>Welcome to nginx!</body></html>", "text/html", "not JSON"),
        (b'["a", "list"]', "application/json", "not a JSON object"),
        (_raw(_completion(None)), "application/json", "message is missing"),
        (_raw(_completion("print(1)")), "application/json", "message is a str"),
        (_raw(_completion({"content": 42})), "application/json", "content is a int"),
        (_raw(_completion({"content": ["x"]})), "application/json", "content is a list"),
        (_raw({"choices": "many"}), "application/json", "'choices' is a str"),
        (_raw({"choices": [7]}), "application/json", "choices\\[0\\] is a int"),
        (b"\xff\xfe{}", "application/json", "not JSON"),
        (_raw({"error": {"message": "engine overloaded"}}), "application/json", "overloaded"),
    ],
)
async def test_malformed_answers_raise_model_error(
    server: FakeOpenAI, raw: bytes, media_type: str, said: str
) -> None:
    """Invalid JSON, an HTML page with status 200, choices without a message, content that is
    not a string: each a ``ModelError`` naming the fault (before: JSONDecodeError,
    AttributeError or TypeError aborted the search)."""
    server.replies.extend([Reply(raw=raw, media_type=media_type)] * 2)
    model = _model(server, max_retries=1)
    with pytest.raises(ModelError, match=said) as info:
        await model.complete(_request())
    await model.aclose()
    assert type(info.value) is ModelError and len(server.requests) == 2


@pytest.mark.anyio
async def test_malformed_answer_then_good_one_is_retried(server: FakeOpenAI) -> None:
    """A malformed answer is retried like a transient fault."""
    server.replies.extend([Reply(raw=b"<html>502</html>", media_type="text/html"), Reply()])
    resp = await _answer(server)
    assert resp.text == "print(1)" and len(server.requests) == 2


@pytest.mark.anyio
@pytest.mark.parametrize(
    "events",
    [
        [b"data: {not json\n\n"],
        [b'data: {"choices": [{"delta": {"content": 5}}]}\n\n'],
        [b'data: {"choices": {"a": 1}}\n\n'],
        [b'data: {"choices": [{"delta": "text"}]}\n\n'],
        [b'data: {"error": {"message": "worker died"}}\n\n'],
        [b"data: 17\n\n"],
    ],
)
async def test_malformed_stream_events_raise_model_error(
    server: FakeOpenAI, events: list[bytes]
) -> None:
    """Garbage inside an event stream is a ``ModelError`` too."""
    raw = b"".join(events) + b"data: [DONE]\n\n"
    server.replies.extend([Reply(raw=raw, media_type="text/event-stream")] * 2)
    model = _model(server, stream=True, max_retries=1)
    with pytest.raises(ModelError, match="failed on all 2 attempts"):
        await model.complete(_request())
    await model.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_lone_surrogates_are_replaced(server: FakeOpenAI, stream: bool) -> None:
    """A lone surrogate (``\\ud800`` is valid JSON) becomes U+FFFD, so the program can be written
    to a file and sent to a job service (before: UnicodeEncodeError there)."""
    if stream:
        raw = (
            b'data: {"choices": [{"delta": {"content": "print(\'\\ud800\')"}}]}\n\n'
            b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}]}\n\n'
            b"data: [DONE]\n\n"
        )
        reply = Reply(raw=raw, media_type="text/event-stream")
    else:
        reply = Reply(raw=b'{"choices": [{"message": {"content": "print(\'\\udc80\')"}}]}')
    server.replies.append(reply)
    resp = await _answer(server, stream=stream)
    assert resp.text == "print('\ufffd')" and resp.text.encode()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"prompt_tokens": float("nan"), "completion_tokens": float("inf")}, (0, 0)),
        ({"prompt_tokens": "12", "completion_tokens": 3}, (0, 3)),
        ({"prompt_tokens": -5000, "completion_tokens": 4}, (0, 4)),
        ({"prompt_tokens": 10**30, "completion_tokens": 4}, (0, 4)),
        ({"prompt_tokens": 7.0, "completion_tokens": 2.5}, (7, 0)),
        ({"prompt_tokens": True, "completion_tokens": [1]}, (0, 0)),
        ("lots", (0, 0)),
        ([1, 2], (0, 0)),
    ],
)
async def test_implausible_usage_is_unknown_with_a_warning(
    server: FakeOpenAI,
    caplog: pytest.LogCaptureFixture,
    usage: Any,
    expected: tuple[int, int],
) -> None:
    """NaN, infinite, negative, huge, fractional or non-numeric token counts count as unknown
    (0) with a warning: never negative, never a crash when journaled or priced (before:
    ValueError or TypeError)."""
    server.replies.append(Reply(raw=_raw(_completion({"content": "print(1)"}, usage=usage))))
    model = _model(server)
    with caplog.at_level("WARNING", logger="openmle.model"):
        resp = await model.complete(_request())
    await model.aclose()
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == expected
    assert resp.text == "print(1)"
    assert any("unknown" in r.getMessage() for r in caplog.records)
    json.dumps(attrs.asdict(resp.usage), allow_nan=False)  # journaling works


@pytest.mark.anyio
async def test_odd_model_id_and_finish_reason_are_sanitised(server: FakeOpenAI) -> None:
    """A list as model id or a dict as finish reason do not reach the caller."""
    raw = _raw(
        {
            "model": ["x"],
            "choices": [{"message": {"content": "ok"}, "finish_reason": {"a": 1}}],
        }
    )
    server.replies.append(Reply(raw=raw))
    resp = await _answer(server)
    assert resp.model == "served/model-a" and resp.finish_reason is None


@pytest.mark.anyio
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_redirects_are_not_followed(server: FakeOpenAI, status: int) -> None:
    """A redirect to another origin is a ``ModelError`` naming the target; the prompt is never
    re-sent there (before: a 307/308 re-sent it to the new host)."""
    port = server.base_url.split(":")[2].split("/")[0]
    target = f"http://localhost:{port}/elsewhere/v1/chat/completions"
    server.replies.append(Reply(status=status, raw=b"", headers={"location": target}))
    model = _model(server)
    with pytest.raises(ModelError, match="redirected") as info:
        await model.complete(_request())
    await model.aclose()
    assert target in str(info.value) and server.stolen == [] and len(server.requests) == 1


@pytest.mark.anyio
async def test_total_timeout_bounds_the_whole_call(server: FakeOpenAI) -> None:
    """``total_timeout_s`` caps every attempt and backoff together."""
    server.replies.extend([Reply(delay_s=1.0) for _ in range(5)])
    model = _model(server, timeout_s=0.4, total_timeout_s=1.0, max_retries=50, backoff_s=0.3)
    t0 = time.monotonic()
    with anyio.fail_after(30), pytest.raises(ModelTimeout, match=r"total_timeout_s=1\.0"):
        await model.complete(_request())
    await model.aclose()
    assert time.monotonic() - t0 < 20 and len(server.requests) <= 5
