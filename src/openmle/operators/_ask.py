"""Ask a model for one JSON object, validate it, and send an invalid answer back with its error.

The one loop the task builder (spec, quality judge) and the priors (distillation) use:
:func:`ask_json` makes up to ``max_attempts`` calls; each answer goes through
:func:`extract_json` and the caller's ``parse`` (which raises :class:`ValueError` naming what is
wrong); an invalid answer is appended to the conversation with the error, and the model is asked
again. Every call is recorded as an :class:`AskAttempt`, so a stage can report what went wrong
without re-running anything.

A model that fails (an :class:`~openmle.errors.OpenMLEError`) or does not answer within
``timeout_s`` is handled as ``on_model_error`` says: ``"raise"`` (the error reaches the caller),
``"retry"`` (recorded, the same request is sent again) or ``"stop"`` (recorded, no more calls).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Generic, Literal, TypeVar, final

import anyio
from attrs import frozen

from openmle._protocols import OperatorModel
from openmle._types import Message, ModelRequest
from openmle._validation import check_type
from openmle.errors import OpenMLEError

__all__ = ["MAX_ANSWER_CHARS", "AskAttempt", "JsonAnswer", "ask_json", "extract_json"]

_T = TypeVar("_T")

MAX_ANSWER_CHARS: Final = 200_000
"""Longest answer :func:`extract_json` reads (a longer one is invalid)."""

_CLOSE = re.compile(r"\}(?=\s*```)")
"""A ``}`` that a fence follows (after white space): where a fenced object can end."""

AttemptKind = Literal["ok", "invalid", "timeout", "model_error"]


def extract_json(text: str, *, max_chars: int = MAX_ANSWER_CHARS) -> Any:
    """The JSON object in ``text``: the first fenced block holding one, else the text from its
    first ``{`` to its last ``}``.

    Raises:
        ValueError: ``text`` is longer than ``max_chars``, holds no JSON object, is not valid
            JSON, or nests too deeply (the message says which).
        InvalidArgumentType: ``text`` is not a str (also a ``TypeError``).
    """
    check_type(text, str, "text")
    if len(text) > max_chars:
        raise ValueError(f"the answer is {len(text)} characters; at most {max_chars}")
    block = _fenced_object(text)
    candidate = block if block is not None else text.strip()
    if block is None:
        start, end = candidate.find("{"), candidate.rfind("}")
        if start < 0 or end < start:
            raise ValueError("the answer holds no JSON object")
        candidate = candidate[start : end + 1]
    try:
        return json.loads(candidate)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the answer is not valid JSON: {exc}") from None
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None


def _fenced_object(text: str) -> str | None:
    r"""What ``re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.DOTALL)`` captures,
    in linear time (that expression backtracks quadratically on many fences and no ``}``).

    The first fence followed (after an optional ``json`` and white space) by ``{``, up to the
    first ``}`` after it that white space and a fence follow.
    """
    closes = [m.start() for m in _CLOSE.finditer(text)]
    at = text.find("```")
    while at >= 0:
        q = at + 3
        if text.startswith("json", q):
            q += 4
        while q < len(text) and text[q].isspace():
            q += 1
        if text.startswith("{", q):
            i = bisect.bisect_right(closes, q)
            return text[q : closes[i] + 1] if i < len(closes) else None
        at = text.find("```", at + 1)
    return None


@final
@frozen(kw_only=True)
class AskAttempt:
    """One call: how it ended and why it was not accepted.

    Args:
        kind: ``"ok"`` (accepted), ``"invalid"`` (the answer failed :func:`extract_json` or
            ``parse``), ``"timeout"`` or ``"model_error"``.
        error: the reason (empty when accepted): the validation error, ``"no answer within
            N s"``, or ``"ErrorType: message"`` (at most 300 characters of the message).
        answer_chars: the answer's length (0 without an answer).
    """

    kind: AttemptKind
    error: str
    answer_chars: int


@final
@frozen(kw_only=True)
class JsonAnswer(Generic[_T]):
    """What :func:`ask_json` got: the parsed value of the accepted answer (None when no answer
    was accepted) and every attempt, in order.
    """

    value: _T | None
    attempts: tuple[AskAttempt, ...]

    @property
    def ok(self) -> bool:
        """Whether an answer was accepted."""
        return bool(self.attempts) and self.attempts[-1].kind == "ok"

    @property
    def last_error(self) -> str:
        """The last attempt's error (empty when accepted or when nothing was asked)."""
        return self.attempts[-1].error if self.attempts else ""


async def ask_json(
    model: OperatorModel,
    messages: Sequence[Message],
    parse: Callable[[Any], _T],
    *,
    metadata: Mapping[str, Any],
    max_attempts: int = 3,
    timeout_s: float | None = None,
    on_model_error: Literal["raise", "retry", "stop"] = "raise",
    model_errors: tuple[type[Exception], ...] = (OpenMLEError,),
    max_chars: int = MAX_ANSWER_CHARS,
    echo_chars: int = MAX_ANSWER_CHARS,
    retry_note: str = "That answer is invalid: {error}. Answer again.",
) -> JsonAnswer[_T]:
    """Ask ``model`` for one JSON object until ``parse`` accepts it, at most ``max_attempts``
    calls (temperature 0).

    Args:
        model: any :class:`~openmle.OperatorModel`.
        messages: the conversation to send (an invalid answer and ``retry_note`` are appended).
        parse: validates the decoded JSON and returns the value; raises ``ValueError`` naming
            what is wrong (sent back to the model).
        metadata: the requests' metadata (e.g. ``{"purpose": ...}``).
        max_attempts: calls at most, the first included (>= 1).
        timeout_s: limit of one call (None: none).
        on_model_error: what a model error or timeout does: ``"raise"``, ``"retry"`` or
            ``"stop"`` (see the module).
        model_errors: the exceptions that count as a model error (others always propagate).
        max_chars: longest answer read (:func:`extract_json`).
        echo_chars: at most this many characters of an invalid answer are sent back.
        retry_note: the user message after an invalid answer (``{error}`` is its error).

    Returns:
        A :class:`JsonAnswer` (``ok`` False when no answer was accepted).

    Raises:
        OpenMLEError, TimeoutError: with ``on_model_error="raise"``, what the model raised.
    """
    convo = list(messages)
    attempts: list[AskAttempt] = []
    caught: tuple[type[Exception], ...] = (TimeoutError, *model_errors)
    for _ in range(max_attempts):
        request = ModelRequest(messages=convo, metadata=dict(metadata), temperature=0.0)
        try:
            with anyio.fail_after(timeout_s):
                answer = (await model.complete(request)).text
        except caught as exc:
            if on_model_error == "raise":
                raise
            if isinstance(exc, TimeoutError):
                attempts.append(
                    AskAttempt(
                        kind="timeout", error=f"no answer within {timeout_s:g} s", answer_chars=0
                    )
                )
            else:
                why = f"{type(exc).__name__}: {str(exc)[:300]}"
                attempts.append(AskAttempt(kind="model_error", error=why, answer_chars=0))
            if on_model_error == "stop":
                break
            continue
        try:
            value = parse(extract_json(answer, max_chars=max_chars))
        except ValueError as exc:
            attempts.append(AskAttempt(kind="invalid", error=str(exc), answer_chars=len(answer)))
            convo = [
                *convo,
                Message(role="assistant", content=answer[:echo_chars]),
                Message(role="user", content=retry_note.format(error=exc)),
            ]
            continue
        attempts.append(AskAttempt(kind="ok", error="", answer_chars=len(answer)))
        return JsonAnswer(value=value, attempts=tuple(attempts))
    return JsonAnswer(value=None, attempts=tuple(attempts))
