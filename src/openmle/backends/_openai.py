"""An :class:`~openmle.OperatorModel` over any OpenAI-compatible chat-completions service.

Works with OpenAI itself and with local servers that speak the same protocol (vLLM, SGLang,
llama.cpp, Ollama). Speaks the protocol directly over ``httpx`` (a core dependency), so it needs
no extra: the answer is untrusted input, and the client must bound and check it byte by byte,
which an SDK that reads and models the body for us does not allow.

Where we depart from the released system and from peers:

- Retries are ours: 429, 408, 409 and 5xx answers, timeouts, dropped connections and malformed
  answers are retried with capped exponential backoff and jitter, honouring ``Retry-After`` /
  ``retry-after-ms`` (capped at ``max_backoff_s``).
- Every attempt runs under its own wall-clock limit (``timeout_s``) covering the whole call,
  streamed or not: a server that stops sending mid-stream cannot hang a search (E2B#1128);
  ``total_timeout_s`` bounds a whole call, retries and backoff included.
- The answer is untrusted: its body is read with a byte cap (``max_response_bytes``, 32 MiB by
  default; an endless body is cut there, not at the timeout), parsed strictly (invalid JSON, an
  HTML page, choices without a message, content that is not a string: a :class:`ModelError`,
  never another exception), token counts that are not plausible integers are treated as unknown
  (0, with a warning on the ``openmle.model`` logger) and lone surrogates in the text are
  replaced by ``U+FFFD``.
- Redirects are never followed: a 3xx answer is a :class:`ModelError` naming the target, so the
  prompt is never re-sent to another host (a 307/308 would re-send the body).
- Reasoning is kept apart from the answer: ``reasoning_content`` (vLLM/SGLang reasoning parsers),
  ``reasoning`` (OpenRouter-style) or a leading ``<think>...</think>`` block go to
  :attr:`ModelResponse.reasoning`, never into the program text the operators parse.
- A cost the server reports with the usage (``usage.cost`` in USD, as OpenRouter sends it) is
  passed on as :attr:`ModelResponse.cost_usd`, so a ``Budget(usd=...)`` can count it.
- :meth:`OpenAIModel.preflight` checks the key, the address and the model id with one cheap
  request before a search (the CLI calls it before the first step);
  :meth:`OpenAIModel.list_models` lists what the server serves.
- 401/403 and 404 are not retried and name the fix (the key variable, the model id and the
  models the server does serve, or a base URL missing ``/v1``).
- Sampling settings the request leaves unset are *not sent* unless set here, so models that
  refuse some of them (AIDE#81: GPT-5 rejects ``temperature``) work with their defaults.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from types import MappingProxyType
from typing import Any, final

import anyio
import attrs
import httpx
from attrs import define, field

from openmle._exports import publish_one
from openmle._protocols import OperatorModel
from openmle._types import ModelRequest, ModelResponse, Usage
from openmle._validation import check_positive, fail
from openmle._wire import retry_after_seconds
from openmle.backends._looppool import LoopPool
from openmle.errors import (
    ModelAuthError,
    ModelError,
    ModelNotFoundError,
    ModelRateLimited,
    ModelTimeout,
)

__all__ = ["OpenAIModel"]

log = logging.getLogger("openmle.model")

_RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
_THINK = re.compile(r"^\s*<think>(.*?)(?:</think>|$)", re.DOTALL)
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKEN_ID = re.compile(r"^token_id:(\d{1,10})$")
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024
"""Default cap on one answer's body: about 160k streamed tokens at ~200 bytes per event."""
_MAX_ERROR_BYTES = 64 * 1024  # the body of an error answer: only its message is wanted
_MAX_TOKENS_PER_CALL = 10**9  # a token count above this is not plausible: unknown
_MAX_COST_PER_CALL = 1e4  # USD; a reported cost above this is not plausible: unknown
_DEFAULT_BASE_URL = "https://api.openai.com/v1"


class _TooLarge(Exception):
    """The answer's body passed ``max_response_bytes``."""


class _Malformed(Exception):
    """The answer is not a chat completion (retried like a transient failure)."""


class _Status(Exception):
    """A non-2xx answer: status, headers and the server's message."""

    def __init__(self, status: int, headers: Mapping[str, str], message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.headers = headers
        self.message = message


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


def _check_response_bytes(instance: object, attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1024:
        raise fail("an integer >= 1024", "OpenAIModel.max_response_bytes", value)


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
            means ``$OPENAI_BASE_URL`` or OpenAI's (``https://api.openai.com/v1``).
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
        total_timeout_s: wall-clock limit of one :meth:`complete` call, every attempt and
            backoff included; None: only ``timeout_s`` per attempt.
        max_retries: retries after the first attempt for 408/409/429/5xx answers, timeouts,
            dropped connections and malformed answers.
        backoff_s: first backoff in seconds; doubles each retry (with up to 25 % jitter).
        max_backoff_s: cap on any single wait, including a server's ``Retry-After``.
        max_concurrency: calls in flight at once through this instance; extra calls wait.
        token_limit_param: the body field carrying the token limit: ``"max_tokens"`` (vLLM,
            SGLang, most servers) or ``"max_completion_tokens"`` (OpenAI's reasoning models,
            which refuse ``max_tokens``).
        max_response_bytes: cap on the bytes of one answer's body (server-sent events framing
            included), 32 MiB by default; a longer answer raises :class:`ModelError` as soon as
            the cap is passed, without a retry.
        logprobs: ask for the log-prob of each answer token (``"logprobs": true``) and return
            them in :attr:`ModelResponse.logprobs`, with the token ids in
            :attr:`ModelResponse.token_ids` where the server returns them (vLLM: add
            ``{"return_token_ids": True}`` or ``{"return_tokens_as_token_ids": True}`` to
            ``extra_body``). Log-probs that are not finite numbers <= 0, or ids that are not
            integers >= 0, are dropped (None) with a warning: they are untrusted input that
            would otherwise steer training.

    Raises:
        InvalidArgument: a bad setting (names the field).

    ``complete`` raises :class:`~openmle.errors.ModelAuthError` (401/403),
    :class:`~openmle.errors.ModelNotFoundError` (404), :class:`~openmle.errors.ModelRateLimited`
    (429 after every retry), :class:`~openmle.errors.ModelTimeout` (every attempt timed out, or
    ``total_timeout_s`` passed) or :class:`~openmle.errors.ModelError` (anything else: a
    redirect, an answer over ``max_response_bytes``, malformed answers on every attempt), each
    naming the fix. Nothing a server sends makes it raise anything else.
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
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES, validator=_check_response_bytes
    )
    total_timeout_s: float | None = None
    logprobs: bool = False
    # Per event loop: the HTTP connection pool and the concurrency limiter (see _looppool).
    _pool: LoopPool[tuple[httpx.AsyncClient, anyio.CapacityLimiter]] = field(init=False, repr=False)

    @model.validator
    def _check_model(self, attribute: object, value: object) -> None:
        if not isinstance(value, str) or not value.strip():
            raise fail("a non-empty model id", "OpenAIModel.model", value)

    def __attrs_post_init__(self) -> None:
        check_positive(self.timeout_s, "OpenAIModel.timeout_s")
        check_positive(self.backoff_s, "OpenAIModel.backoff_s", allow_zero=True)
        check_positive(self.max_backoff_s, "OpenAIModel.max_backoff_s", allow_zero=True)
        if self.total_timeout_s is not None:
            check_positive(self.total_timeout_s, "OpenAIModel.total_timeout_s")
        if self.base_url is not None and (
            not isinstance(self.base_url, str)
            or not self.base_url.startswith(("http://", "https://"))
        ):
            raise fail("an http:// or https:// URL or None", "OpenAIModel.base_url", self.base_url)
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool)
            or not isinstance(self.max_tokens, int)
            or self.max_tokens < 1
        ):
            raise fail("an integer >= 1 or None", "OpenAIModel.max_tokens", self.max_tokens)
        self._pool = LoopPool(self._new_client, _close_client)

    # ------------------------------------------------------------------------------------
    def _root(self) -> str:
        return (self.base_url or os.environ.get("OPENAI_BASE_URL") or _DEFAULT_BASE_URL).rstrip("/")

    def _new_client(self) -> tuple[httpx.AsyncClient, anyio.CapacityLimiter]:
        key = self.api_key or os.environ.get(self.api_key_env) or "EMPTY"
        client = httpx.AsyncClient(
            headers={
                "Authorization": f"Bearer {key}",
                "Accept": "application/json",
                "Accept-Encoding": "identity",  # no decompression bombs
            },
            timeout=httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, 30.0)),
            limits=httpx.Limits(max_connections=self.max_concurrency),
            follow_redirects=False,  # a 307/308 would re-send the prompt to another host
        )
        return client, anyio.CapacityLimiter(self.max_concurrency)

    def _get_client(self) -> httpx.AsyncClient:
        # HTTP pools and limiters belong to one event loop: a model reused under a new loop
        # (a second ``anyio.run``) gets fresh ones; each loop closes its own as it ends.
        return self._pool.get()[0]

    async def aclose(self) -> None:
        """Close this event loop's HTTP connection pool (idempotent); a later call opens a new
        one. A pool opened under another event loop is closed by that loop, at the latest when
        it ends.
        """
        await self._pool.aclose()

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
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
        body.update({k: v for k, v in settings.items() if v is not None})
        if request.stop:
            body["stop"] = list(request.stop)
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request``, retrying transient failures; see the class docstring for errors."""
        if not isinstance(request, ModelRequest):
            raise fail("a ModelRequest", "request", request)
        _, limiter = self._pool.get()
        async with limiter:
            return await self._complete_with_retries(request)

    async def _complete_with_retries(self, request: ModelRequest) -> ModelResponse:
        client = self._get_client()
        try:
            # ASCII JSON: a lone surrogate in a prompt is sent escaped instead of failing.
            payload = json.dumps(self._body(request), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ModelError(
                f"the request to {self._where()} is not valid JSON ({exc}); check "
                "OpenAIModel.extra_body and the request's settings"
            ) from exc
        t0 = time.perf_counter()
        deadline = None if self.total_timeout_s is None else t0 + self.total_timeout_s
        last: BaseException | None = None
        last_kind = "error"
        for attempt in range(self.max_retries + 1):
            wait: float | None = None
            limit = self.timeout_s
            if deadline is not None:
                limit = min(limit, deadline - time.perf_counter())
                if limit <= 0:
                    last_kind = "total"
                    break
            try:
                with anyio.fail_after(limit):
                    resp = await self._attempt(client, payload)
                return _with_latency(resp, time.perf_counter() - t0)
            except (TimeoutError, httpx.TimeoutException) as exc:
                last, last_kind = exc, "timeout"
            except httpx.TransportError as exc:
                last, last_kind = exc, "connection"
            except httpx.InvalidURL as exc:
                raise ModelError(
                    f"{self._where()}: the URL is invalid ({exc}); check OpenAIModel(base_url=...)"
                ) from None
            except httpx.HTTPError as exc:  # a body that does not decode (bad gzip, ...)
                last, last_kind = exc, "error"
            except _TooLarge as exc:
                raise ModelError(
                    f"{self._where()} sent an answer over max_response_bytes="
                    f"{self.max_response_bytes} ({exc}); it was cut off there. Raise "
                    "OpenAIModel(max_response_bytes=...) if such answers are expected, or lower "
                    "max_tokens"
                ) from None
            except _Status as exc:
                if exc.status not in _RETRY_STATUSES:
                    raise await self._status_error(exc) from None
                last, last_kind = exc, "rate" if exc.status == 429 else "status"
                wait = retry_after_seconds(exc.headers)
            except _Malformed as exc:  # a broken answer may be a transient fault: retried
                last, last_kind = exc, "error"
            if attempt == self.max_retries:
                break
            backoff = self.backoff_s * (2**attempt) * (1 + 0.25 * random.random())
            pause = min(self.max_backoff_s, backoff if wait is None else wait)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.perf_counter()))
            await anyio.sleep(pause)
        raise self._final_error(last, last_kind)

    async def _attempt(self, client: httpx.AsyncClient, payload: bytes) -> ModelResponse:
        url = f"{self._root()}/chat/completions"
        headers = {"Content-Type": "application/json"}
        if self.stream:
            headers["Accept"] = "text/event-stream"
        async with client.stream("POST", url, content=payload, headers=headers) as resp:
            if resp.is_redirect or 300 <= resp.status_code < 400:
                target = resp.headers.get("location", "?")
                raise ModelError(
                    f"{self._where()} redirected the request (HTTP {resp.status_code}) to "
                    f"{target[:300]!r}; redirects are not followed, so the prompt was not "
                    "re-sent there. Set OpenAIModel(base_url=...) to the right address if you "
                    "trust it"
                )
            if resp.status_code >= 400 or resp.status_code < 200:
                raw = await _read_capped(resp, _MAX_ERROR_BYTES, truncate=True)
                raise _Status(resp.status_code, dict(resp.headers), _server_message(raw))
            if self.stream:
                return await self._read_stream(resp)
            raw = await _read_capped(resp, self.max_response_bytes)
        return self._parse(raw)

    async def _read_stream(self, resp: httpx.Response) -> ModelResponse:
        text: list[str] = []
        thought: list[str] = []
        usage = Usage()
        cost: float | None = None
        finish: str | None = None
        model = self.model
        lp_entries: list[Any] = []
        stream_ids: list[Any] = []
        async for data in _sse_data(resp, self.max_response_bytes):
            if data.strip() == "[DONE]":
                break
            chunk = _json_object(data, "a stream event")
            if "error" in chunk and not chunk.get("choices"):
                raise _Malformed(f"the stream carried an error: {_error_text(chunk)}")
            model = _model_id(chunk.get("model"), model)
            if chunk.get("usage") is not None:
                usage = _usage(chunk.get("usage"), self._where())
                cost = _cost(chunk.get("usage"))
            choices = chunk.get("choices")
            if choices is None:
                choices = []
            if not isinstance(choices, list):
                raise _Malformed(f"'choices' is {_kind(choices)}, not a list")
            for choice in choices[:1]:
                reason = _stream_choice(
                    choice, text, thought, (lp_entries, stream_ids) if self.logprobs else None
                )
                if reason:
                    finish = _finish(reason)
        if finish is None:
            raise httpx.RemoteProtocolError(
                "the stream ended before a finish_reason (connection dropped)"
            )
        answer, reasoning = split_reasoning(_clean("".join(text)), _clean("".join(thought)) or None)
        logprobs, token_ids = (
            self._token_info({"content": lp_entries}, stream_ids or None)
            if self.logprobs
            else (None, None)
        )
        return ModelResponse(
            text=answer, reasoning=reasoning, usage=usage, model=model, finish_reason=finish,
            cost_usd=cost, logprobs=logprobs, token_ids=token_ids,
        )  # fmt: skip

    def _parse(self, raw: bytes) -> ModelResponse:
        completion = _json_object(raw, "the answer")
        choices = completion.get("choices")
        if not choices and "error" in completion:
            raise _Malformed(f"the answer is an error: {_error_text(completion)}")
        if choices is None or choices == []:
            raise ModelError(
                f"{self._where()} answered with no choices; check that the model "
                f"{self.model!r} serves chat completions"
            )
        if not isinstance(choices, list):
            raise _Malformed(f"'choices' is {_kind(choices)}, not a list")
        choice = choices[0]
        if not isinstance(choice, Mapping):
            raise _Malformed(f"choices[0] is {_kind(choice)}, not an object")
        message = choice.get("message")
        if not isinstance(message, Mapping):
            raise _Malformed(f"choices[0].message is {_kind(message)}, not an object")
        content = _opt_str(message.get("content"), "choices[0].message.content") or ""
        answer, reasoning = split_reasoning(_clean(content), _clean(_reasoning_of(message) or ""))
        raw_usage = completion.get("usage")
        usage = Usage() if raw_usage is None else _usage(raw_usage, self._where())
        logprobs, token_ids = (
            self._token_info(choice.get("logprobs"), choice.get("token_ids"))
            if self.logprobs
            else (None, None)
        )
        return ModelResponse(
            text=answer,
            reasoning=reasoning or None,
            usage=usage,
            model=_model_id(completion.get("model"), self.model),
            finish_reason=_finish(choice.get("finish_reason")),
            cost_usd=_cost(raw_usage),
            logprobs=logprobs,
            token_ids=token_ids,
        )

    def _token_info(
        self, raw_logprobs: object, raw_ids: object
    ) -> tuple[tuple[float, ...] | None, tuple[int, ...] | None]:
        """Per-token log-probs and ids from an answer (untrusted: checked, else None)."""
        content = raw_logprobs.get("content") if isinstance(raw_logprobs, Mapping) else None
        logprobs: tuple[float, ...] | None = None
        from_tokens: list[int] | None = []
        if isinstance(content, list) and content:
            values: list[float] = []
            for entry in content:
                lp = entry.get("logprob") if isinstance(entry, Mapping) else None
                if (
                    isinstance(lp, bool)
                    or not isinstance(lp, int | float)
                    or not math.isfinite(lp)
                    or lp > 0
                ):
                    log.warning(
                        "%s returned a token log-prob %s, not a finite number <= 0; "
                        "log-probs dropped for this answer", self._where(), str(lp)[:60],
                    )  # fmt: skip
                    return None, None
                values.append(float(lp))
                tok = entry.get("token")
                m = _TOKEN_ID.match(tok) if isinstance(tok, str) else None
                if from_tokens is not None and m is not None:
                    from_tokens.append(int(m.group(1)))
                else:
                    from_tokens = None
            logprobs = tuple(values)
        else:
            from_tokens = None
        ids: tuple[int, ...] | None = None
        if raw_ids is not None:
            if isinstance(raw_ids, list) and all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 2**31 for i in raw_ids
            ):
                ids = tuple(raw_ids)
            else:
                log.warning("%s returned token_ids that are not integer ids", self._where())
        elif from_tokens:
            ids = tuple(from_tokens)
        if ids is not None and logprobs is not None and len(ids) != len(logprobs):
            log.warning(
                "%s returned %d token ids but %d log-probs; ids dropped",
                self._where(), len(ids), len(logprobs),
            )  # fmt: skip
            ids = None
        return logprobs, ids

    async def list_models(self) -> list[str]:
        """The model ids the server serves (``GET {base_url}/models``), sorted.

        Raises:
            ModelAuthError: the server refused the key (401/403).
            ModelNotFoundError: the server has no ``/models`` there (404; often a base URL
                missing ``/v1``).
            ModelError: the server cannot be reached, answered another error or an answer that
                is not a model list.
        """
        client = self._get_client()
        url = f"{self._root()}/models"
        with self._reaching("did not list its models in time", "could not be asked for its models"):
            with anyio.fail_after(min(30.0, self.timeout_s)):
                async with client.stream("GET", url) as resp:
                    if resp.status_code != 200:
                        raw = await _read_capped(resp, _MAX_ERROR_BYTES, truncate=True)
                        exc = _Status(resp.status_code, dict(resp.headers), _server_message(raw))
                        if exc.status == 404:
                            raise ModelNotFoundError(
                                f"{self._where()} has no model list at {url} (HTTP 404: "
                                f"{exc.message}); check that base_url ends with '/v1'"
                            )
                        if exc.status in (401, 403):
                            raise await self._status_error(exc)
                        raise ModelError(
                            f"{self._where()} refused to list its models (HTTP {exc.status}: "
                            f"{exc.message})"
                        )
                    page = _json_object(await _read_capped(resp, 1024 * 1024), "the model list")
        data = page.get("data")
        if not isinstance(data, list):
            raise ModelError(f"{self._where()} answered {url} without a 'data' list of models")
        ids = {
            _clean(m["id"])[:200]
            for m in data[:10_000]
            if isinstance(m, Mapping) and isinstance(m.get("id"), str) and m["id"].strip()
        }
        return sorted(ids)

    async def preflight(self) -> None:
        """Check the key, the address and the model id with one cheap request, before a search.

        Lists the server's models (``GET /models``); when it lists them, :attr:`model` must be
        one. A server without a model list gets one tiny completion instead (``max_tokens=1``,
        no retries). Raises the error the first search step would have met, at once:
        :class:`ModelAuthError` (a refused key), :class:`ModelNotFoundError` (an unknown model
        or a base URL without ``/v1``; the message lists the models the server serves) or
        :class:`ModelError` (a refused request, an unreachable server).
        """
        try:
            served = await self.list_models()
        except ModelAuthError:
            raise
        except ModelError:
            served = None
        if served:
            if self.model not in served:
                raise ModelNotFoundError(
                    f"{self._where()} does not serve model {self.model!r}; it serves "
                    f"{served[:20]}; set the model id to one of them"
                )
            return
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": "ping"}],
            self.token_limit_param: 1,
        }
        body.update(self.extra_body)
        payload = json.dumps(body, allow_nan=False).encode()
        with self._reaching("did not answer a one-token request", "could not be reached"):
            try:
                with anyio.fail_after(min(60.0, self.timeout_s)):
                    await self._attempt(self._get_client(), payload)
            except _Status as exc:
                raise await self._status_error(exc) from None

    def _where(self) -> str:
        return f"the model service at {self._root()}"

    @contextlib.contextmanager
    def _reaching(self, late: str, failed: str) -> Iterator[None]:
        """A one-off request's transport failures as model errors (no retries).

        Raises:
            ModelTimeout: it timed out ("the model service at URL ``late``").
            ModelError: the connection failed or the answer was too large or malformed
                ("... ``failed`` (ExcType: message); check the base URL ...").
        """
        try:
            yield
        except (TimeoutError, httpx.TimeoutException):
            raise ModelTimeout(f"{self._where()} {late}") from None
        except (httpx.HTTPError, _TooLarge, _Malformed) as exc:
            raise ModelError(
                f"{self._where()} {failed} ({type(exc).__name__}: "
                f"{_one_line(str(exc))}); check the base URL and that the server is running"
            ) from None

    async def _status_error(self, exc: _Status) -> ModelError:
        status, said = exc.status, exc.message
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
                async with self._get_client().stream("GET", f"{self._root()}/models") as resp:
                    if resp.status_code != 200:
                        return []
                    page = _json_object(await _read_capped(resp, 1024 * 1024), "the model list")
            data = page.get("data")
            ids = [
                m["id"]
                for m in (data if isinstance(data, list) else [])
                if isinstance(m, Mapping) and isinstance(m.get("id"), str)
            ]
            return sorted(_clean(i)[:200] for i in ids)[:20]
        except Exception:  # best effort: the hint is optional
            return []

    def _final_error(self, last: BaseException | None, kind: str) -> ModelError:
        tries = self.max_retries + 1
        if kind == "total":
            return ModelTimeout(
                f"{self._where()} did not answer within total_timeout_s={self.total_timeout_s} "
                f"(last error: {type(last).__name__}: {last}); raise "
                "OpenAIModel(total_timeout_s=...) or check the server's load"
            )
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


async def _close_client(pair: tuple[httpx.AsyncClient, anyio.CapacityLimiter]) -> None:
    await pair[0].aclose()


# ---------------------------------------------------------------------------------------------
# Reading an untrusted answer


async def _read_capped(resp: httpx.Response, cap: int, *, truncate: bool = False) -> bytes:
    """The body, at most ``cap`` bytes: past it, :class:`_TooLarge` (or the first ``cap``)."""
    declared = resp.headers.get("content-length", "")
    if not truncate and declared.isdigit() and int(declared) > cap:
        raise _TooLarge(f"Content-Length {declared}")
    buf = bytearray()
    async for chunk in resp.aiter_bytes():
        buf += chunk
        if len(buf) > cap:
            if truncate:
                return bytes(buf[:cap])
            raise _TooLarge(f"more than {cap} bytes received")
    return bytes(buf)


def _stream_choice(
    choice: object,
    text: list[str],
    thought: list[str],
    token_parts: tuple[list[Any], list[Any]] | None,
) -> Any:
    """Append one stream choice's delta to ``text``/``thought`` (and its log-probs and token
    ids to ``token_parts`` when asked); returns its ``finish_reason`` (None while streaming).

    Raises:
        _Malformed: the choice or its delta is not an object, or the content not a string.
    """
    if not isinstance(choice, Mapping):
        raise _Malformed(f"a choice is {_kind(choice)}, not an object")
    delta = choice.get("delta") or {}
    if not isinstance(delta, Mapping):
        raise _Malformed(f"'delta' is {_kind(delta)}, not an object")
    content = _opt_str(delta.get("content"), "delta.content")
    if content:
        text.append(content)
    r = _reasoning_of(delta)
    if r:
        thought.append(r)
    if token_parts is not None:
        lp = choice.get("logprobs")
        part = lp.get("content") if isinstance(lp, Mapping) else None
        if isinstance(part, list):
            token_parts[0].extend(part)
        ids = choice.get("token_ids")
        if isinstance(ids, list):
            token_parts[1].extend(ids)
    return choice.get("finish_reason")


async def _sse_data(resp: httpx.Response, cap: int) -> AsyncIterator[str]:
    """The ``data`` of each server-sent event, reading at most ``cap`` bytes in all."""
    total = 0
    buf = bytearray()
    scan = 0
    data: list[str] = []
    async for chunk in resp.aiter_bytes():
        total += len(chunk)
        if total > cap:
            raise _TooLarge(f"more than {cap} bytes of events received")
        buf += chunk
        while True:
            nl = buf.find(b"\n", scan)
            if nl < 0:
                scan = len(buf)
                break
            line = bytes(buf[:nl]).rstrip(b"\r")
            del buf[: nl + 1]
            scan = 0
            if not line:
                if data:
                    yield "\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                data.append(_decode(value[1:] if value.startswith(b" ") else value))
    if buf.startswith(b"data:"):
        value = bytes(buf[5:]).rstrip(b"\r")
        data.append(_decode(value[1:] if value.startswith(b" ") else value))
    if data:
        yield "\n".join(data)


def _decode(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed(f"the answer is not UTF-8 ({exc})") from None


def _json_object(raw: bytes | str, what: str) -> Mapping[str, Any]:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        text = raw[:200].decode("utf-8", "replace") if isinstance(raw, bytes) else raw[:200]
        raise _Malformed(f"{what} is not JSON ({exc}): {text!r}") from None
    if not isinstance(value, Mapping):
        raise _Malformed(f"{what} is {_kind(value)}, not a JSON object")
    return value


def _kind(value: object) -> str:
    if value is None:
        return "missing"
    return f"a {type(value).__name__} ({str(value)[:60]!r})"


def _clean(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _opt_str(value: object, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _Malformed(f"{where} is {_kind(value)}, not a string")


def _finish(value: object) -> str | None:
    return _clean(value)[:64] if isinstance(value, str) and value else None


def _model_id(value: object, default: str) -> str:
    if isinstance(value, str) and value.strip() and len(value) <= 256:
        return _clean(value)
    return default


def _token_count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 <= value <= _MAX_TOKENS_PER_CALL:
        return value
    return None


def _usage(raw: object, where: str) -> Usage:
    """Token usage from an answer; implausible counts are unknown (0) with a warning."""
    if not isinstance(raw, Mapping):
        log.warning("%s reported usage %s; token usage is unknown", where, _kind(raw))
        return Usage()
    counts: dict[str, int] = {}
    for key in ("prompt_tokens", "completion_tokens"):
        value = raw.get(key)
        count = 0 if value is None else _token_count(value)
        if count is None:
            log.warning(
                "%s reported %s=%s, not an integer in [0, %d]; counted as unknown (0)",
                where,
                key,
                str(value)[:60],
                _MAX_TOKENS_PER_CALL,
            )
            count = 0
        counts[key] = count
    return Usage(**counts)


def _cost(raw: object) -> float | None:
    """The cost in USD a server reported with the usage (``usage.cost``, as OpenRouter sends
    it), or None when it sent none or one that is not a plausible number.
    """
    if not isinstance(raw, Mapping):
        return None
    value = raw.get("cost")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    cost = float(value)
    return cost if math.isfinite(cost) and 0 <= cost <= _MAX_COST_PER_CALL else None


def _reasoning_of(message: Mapping[str, Any]) -> str | None:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _error_text(body: Mapping[str, Any]) -> str:
    err = body.get("error", body)
    if isinstance(err, Mapping):
        for key in ("message", "detail"):
            if isinstance(err.get(key), str):
                return _one_line(err[key])
    if isinstance(err, str):
        return _one_line(err)
    return _one_line(json.dumps(err, default=str)[:300])


def _server_message(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return _one_line(raw.decode("utf-8", "replace")) or "no message"
    if isinstance(body, Mapping):
        if isinstance(body.get("message"), str) and "error" not in body:
            return _one_line(body["message"])
        return _error_text(body)
    return _one_line(str(body))


def _one_line(text: str) -> str:
    return _clean(" ".join(text.split()))[:500]


def _with_latency(resp: ModelResponse, latency: float) -> ModelResponse:
    return attrs.evolve(resp, latency_s=latency)


publish_one(OpenAIModel, "openmle.backends")  # its repr names the public path
