"""An :class:`~openmle.OperatorModel` over any OpenAI-compatible chat-completions service.

Works with OpenAI itself and with local servers that speak the same protocol (vLLM, SGLang,
llama.cpp, Ollama). Uses the official ``openai`` SDK (async client), extra ``openai``.

Where we depart from the released system and from peers:

- Retries are ours, not the SDK's (its own retries are switched off): 429, 408, 409 and 5xx
  answers, timeouts and dropped connections are retried with capped exponential backoff and
  jitter, honouring ``Retry-After`` / ``retry-after-ms`` (capped at ``max_backoff_s``), so
  the policy is one documented thing rather than two stacked ones.
- Every attempt runs under its own wall-clock limit (``timeout_s``) covering the whole call,
  streamed or not: a server that stops sending mid-stream cannot hang a search (E2B#1128).
- Reasoning is kept apart from the answer: ``reasoning_content`` (vLLM/SGLang reasoning parsers),
  ``reasoning`` (OpenRouter-style) or a leading ``<think>...</think>`` block go to
  :attr:`ModelResponse.reasoning`, never into the program text the operators parse.
- 401/403 and 404 are not retried and name the fix (the key variable, the model id and the
  models the server does serve, or a base URL missing ``/v1``).
- Sampling settings the request leaves unset are *not sent* unless set here, so models that
  refuse some of them (AIDE#81: GPT-5 rejects ``temperature``) work with their defaults.
"""

from __future__ import annotations

import email.utils
import math
import os
import random
import re
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, final

import anyio
import anyio.lowlevel
import attrs
from attrs import define, field

from openmle._compat import require
from openmle._protocols import OperatorModel
from openmle._types import ModelRequest, ModelResponse, Usage
from openmle._validation import check_positive, fail
from openmle.errors import (
    ModelAuthError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimited,
    ModelTimeout,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["OpenAIModel"]

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|$)", re.DOTALL)


def _frozen(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise fail("a mapping of JSON values", "OpenAIModel.extra_body", value)
    return MappingProxyType(dict(value))


def _check_retries(instance: object, attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail("an integer >= 0", "OpenAIModel.max_retries", value)


def _check_concurrency(instance: object, attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail("an integer >= 1", "OpenAIModel.max_concurrency", value)


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds a server asked us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date. Returns None when neither header
    is present or parseable; never negative.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms is not None:
        try:
            ms = float(raw_ms)
        except ValueError:
            ms = math.nan
        if math.isfinite(ms):
            return max(0.0, ms / 1000.0)
    raw = lower.get("retry-after")
    if raw is None:
        return None
    try:
        s = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        s = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, s) if math.isfinite(s) else None


def split_reasoning(text: str, reasoning: str | None) -> tuple[str, str | None]:
    """Move a leading ``<think>...</think>`` block of ``text`` into the reasoning.

    Servers with a reasoning parser return reasoning separately; without one, reasoning models
    put it first in the content. An unclosed ``<think>`` means the whole text was reasoning.
    """
    m = _THINK.match(text)
    if m is None:
        return text, reasoning
    thought = m.group(1).strip()
    rest = text[m.end() :].lstrip()
    merged = "\n".join(p for p in (reasoning, thought) if p) or None
    return rest, merged


@final
@define(eq=False)
class OpenAIModel(OperatorModel):
    """Answers operator prompts through an OpenAI-compatible ``/v1/chat/completions`` endpoint.

    Args:
        model: the model id the server serves (e.g. ``"Qwen/Qwen3-8B"`` under vLLM).
        base_url: the API root including ``/v1`` (e.g. ``"http://127.0.0.1:8000/v1"``); None
            means the SDK's default (``$OPENAI_BASE_URL`` or OpenAI's).
        api_key: the key; None reads ``$<api_key_env>``. Local servers without auth accept any
            value; when the variable is unset too, ``"EMPTY"`` is sent.
        api_key_env: environment variable to read the key from.
        temperature, top_p, max_tokens: defaults for requests that leave them unset (None: not
            sent, the server's default applies).
        extra_body: extra JSON fields merged into every request body (vLLM/SGLang options such
            as ``{"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}}``).
        stream: stream the answer (server-sent events) instead of waiting for the whole body.
        timeout_s: wall-clock limit of one attempt in seconds, covering connect, the whole
            stream and the body.
        max_retries: retries after the first attempt for 408/409/429/5xx answers, timeouts and
            dropped connections.
        backoff_s: first backoff in seconds; doubles each retry (with up to 25 % jitter).
        max_backoff_s: cap on any single wait, including a server's ``Retry-After``.
        max_concurrency: calls in flight at once through this instance; extra calls wait.
        token_limit_param: the body field carrying the token limit: ``"max_tokens"`` (vLLM,
            SGLang, most servers) or ``"max_completion_tokens"`` (OpenAI's reasoning models,
            which refuse ``max_tokens``).

    Raises:
        InvalidArgument: a bad setting (names the field).
        MissingDependency: ``openai`` is not installed (``pip install 'openmle[openai]'``).

    ``complete`` raises :class:`~openmle.errors.ModelAuthError` (401/403),
    :class:`~openmle.errors.ModelNotFoundError` (404), :class:`~openmle.errors.ModelRateLimited`
    (429 after every retry), :class:`~openmle.errors.ModelTimeout` (every attempt timed out) or
    :class:`~openmle.errors.ModelError` (anything else), each naming the fix.
    """

    model: str = field()
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    extra_body: Mapping[str, Any] = field(factory=dict, converter=_frozen)
    stream: bool = False
    timeout_s: float = 600.0
    max_retries: int = field(default=5, validator=_check_retries)
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0
    max_concurrency: int = field(default=16, validator=_check_concurrency)
    token_limit_param: str = field(
        default="max_tokens",
        validator=attrs.validators.in_(("max_tokens", "max_completion_tokens")),
    )
    _client: AsyncOpenAI | None = field(default=None, init=False, repr=False)
    _limiter: anyio.CapacityLimiter | None = field(default=None, init=False, repr=False)
    _loop: object = field(default=None, init=False, repr=False)

    @model.validator
    def _check_model(self, attribute: object, value: object) -> None:
        if not isinstance(value, str) or not value.strip():
            raise fail("a non-empty model id", "OpenAIModel.model", value)

    def __attrs_post_init__(self) -> None:
        check_positive(self.timeout_s, "OpenAIModel.timeout_s")
        check_positive(self.backoff_s, "OpenAIModel.backoff_s", allow_zero=True)
        check_positive(self.max_backoff_s, "OpenAIModel.max_backoff_s", allow_zero=True)
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise fail("an integer >= 1 or None", "OpenAIModel.max_tokens", self.max_tokens)

    # ------------------------------------------------------------------------------------
    def _get_client(self) -> AsyncOpenAI:
        # HTTP pools and limiters belong to one event loop: a model reused under a new loop
        # (a second ``anyio.run``) gets fresh ones instead of failing on a closed loop.
        token = anyio.lowlevel.current_token()
        if self._loop != token:
            self._client, self._limiter, self._loop = None, None, token
        if self._client is None:
            openai = require("openai", "openai")
            key = self.api_key or os.environ.get(self.api_key_env) or "EMPTY"
            self._client = openai.AsyncOpenAI(
                api_key=key, base_url=self.base_url, max_retries=0, timeout=self.timeout_s
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP connection pool (idempotent); a later call opens a new one."""
        client, self._client = self._client, None
        # A pool opened under another (finished) event loop cannot be closed from this one.
        if client is not None and self._loop == anyio.lowlevel.current_token():
            with anyio.CancelScope(shield=True):
                await client.close()

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        settings = {
            "temperature": self.temperature if request.temperature is None else request.temperature,
            "top_p": self.top_p if request.top_p is None else request.top_p,
            self.token_limit_param: (
                self.max_tokens if request.max_tokens is None else request.max_tokens
            ),
            "seed": request.seed,
        }
        kwargs.update({k: v for k, v in settings.items() if v is not None})
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request``, retrying transient failures; see the class docstring for errors."""
        if not isinstance(request, ModelRequest):
            raise fail("a ModelRequest", "request", request)
        self._get_client()
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        async with self._limiter:
            return await self._complete_with_retries(request)

    async def _complete_with_retries(self, request: ModelRequest) -> ModelResponse:
        openai = require("openai", "openai")
        client = self._get_client()
        body = self._body(request)
        t0 = time.perf_counter()
        last: BaseException | None = None
        last_kind = "error"
        for attempt in range(self.max_retries + 1):
            wait: float | None = None
            try:
                with anyio.fail_after(self.timeout_s):
                    if self.stream:
                        resp = await self._streamed(client, body)
                    else:
                        resp = self._parse(await client.chat.completions.create(**body))
                return _with_latency(resp, time.perf_counter() - t0)
            except TimeoutError as exc:
                last, last_kind = exc, "timeout"
            except openai.APITimeoutError as exc:
                last, last_kind = exc, "timeout"
            except openai.APIConnectionError as exc:
                last, last_kind = exc, "connection"
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status not in _RETRY_STATUSES:
                    raise await self._status_error(exc) from exc
                last, last_kind = exc, "rate" if status == 429 else "status"
                wait = retry_after_seconds(dict(exc.response.headers))
            except openai.APIError as exc:  # malformed body or stream: treat as transient
                last, last_kind = exc, "error"
            if attempt == self.max_retries:
                break
            backoff = self.backoff_s * (2**attempt) * (1 + 0.25 * random.random())
            await anyio.sleep(min(self.max_backoff_s, backoff if wait is None else wait))
        raise self._final_error(last, last_kind) from last

    async def _streamed(self, client: AsyncOpenAI, body: dict[str, Any]) -> ModelResponse:
        stream = await client.chat.completions.create(**body)
        text: list[str] = []
        thought: list[str] = []
        usage = Usage()
        finish: str | None = None
        model = self.model
        try:
            async for chunk in stream:
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = Usage(
                        prompt_tokens=chunk.usage.prompt_tokens or 0,
                        completion_tokens=chunk.usage.completion_tokens or 0,
                    )
                for choice in chunk.choices[:1]:
                    delta = choice.delta
                    if delta.content:
                        text.append(delta.content)
                    r = _reasoning_of(delta)
                    if r:
                        thought.append(r)
                    if choice.finish_reason:
                        finish = choice.finish_reason
        finally:
            with anyio.CancelScope(shield=True):
                await stream.close()
        if finish is None:
            openai = require("openai", "openai")
            raise openai.APIConnectionError(
                message="the stream ended before a finish_reason (connection dropped)",
                request=stream.response.request,
            )
        answer, reasoning = split_reasoning("".join(text), "".join(thought) or None)
        return ModelResponse(
            text=answer, reasoning=reasoning, usage=usage, model=model, finish_reason=finish
        )

    def _parse(self, completion: Any) -> ModelResponse:
        if not completion.choices:
            raise ModelError(
                f"{self._where()} answered with no choices; check that the model "
                f"{self.model!r} serves chat completions"
            )
        choice = completion.choices[0]
        message = choice.message
        answer, reasoning = split_reasoning(message.content or "", _reasoning_of(message))
        u = completion.usage
        usage = (
            Usage(prompt_tokens=u.prompt_tokens or 0, completion_tokens=u.completion_tokens or 0)
            if u is not None
            else Usage()
        )
        return ModelResponse(
            text=answer,
            reasoning=reasoning,
            usage=usage,
            model=completion.model or self.model,
            finish_reason=choice.finish_reason,
        )

    def _where(self) -> str:
        where = self._client.base_url if self._client is not None else self.base_url
        return f"the model service at {where or 'the SDK default URL'}"

    async def _status_error(self, exc: Any) -> ModelError:
        status = int(exc.status_code)
        said = _server_message(exc)
        if status in (401, 403):
            return ModelAuthError(
                f"{self._where()} refused the API key (HTTP {status}: {said}). Pass "
                f"OpenAIModel(api_key=...) or set ${self.api_key_env} to a key it accepts"
            )
        if status == 404:
            known = await self._known_models()
            hint = (
                f"it serves {known}; set OpenAIModel(model=...) to one of them"
                if known
                else "check OpenAIModel(model=...) and that base_url ends with '/v1'"
            )
            return ModelNotFoundError(
                f"{self._where()} does not know model {self.model!r} (HTTP 404: {said}); {hint}"
            )
        return ModelError(f"{self._where()} refused the request (HTTP {status}: {said})")

    async def _known_models(self) -> list[str]:
        try:
            with anyio.fail_after(min(10.0, self.timeout_s)):
                page = await self._get_client().models.list()
            return sorted(m.id for m in page.data)[:20]
        except Exception:  # best effort: the hint is optional
            return []

    def _final_error(self, last: BaseException | None, kind: str) -> ModelError:
        tries = self.max_retries + 1
        if kind == "timeout":
            return ModelTimeout(
                f"{self._where()} did not answer within timeout_s={self.timeout_s} on any of "
                f"{tries} attempts; raise OpenAIModel(timeout_s=...) or check the server's load"
            )
        if kind == "rate":
            return ModelRateLimited(
                f"{self._where()} kept answering 429 (rate limited) after {tries} attempts; "
                "lower max_concurrency or raise max_retries"
            )
        return ModelError(
            f"{self._where()} failed on all {tries} attempts; last error: "
            f"{type(last).__name__}: {last}"
        )


def _reasoning_of(message: Any) -> str | None:
    extra = getattr(message, "model_extra", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = getattr(message, key, None) or extra.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _server_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return str(getattr(exc, "message", exc))


def _with_latency(resp: ModelResponse, latency: float) -> ModelResponse:
    return attrs.evolve(resp, latency_s=latency)


OpenAIModel.__module__ = "openmle.backends"  # documented and shown under its public path
