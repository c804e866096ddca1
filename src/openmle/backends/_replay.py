"""Record any operator model's answers to a file, and replay them without the model.

:class:`RecordingModel` wraps a model and appends one JSON line per call (fsync'd):
the request's key, the request itself and the response. :class:`ReplayModel` answers from such
a file: a request gets the recorded response of the same key (messages, operator, seed and
sampling settings; ``metadata`` is not part of the key). Identical requests recorded several
times are replayed in recorded order. A request that was never recorded raises
:class:`~openmle.errors.ModelNotFoundError` (or goes to ``fallback`` when one is given).

Use it for deterministic tests, to re-run a search without a model server, and to share runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any, final

from attrs import define, field

from openmle._protocols import OperatorModel
from openmle._readback import read_back_text
from openmle._types import ModelRequest, ModelResponse, Usage
from openmle.errors import InvalidArgument, ModelNotFoundError

__all__ = ["RecordingModel", "ReplayModel", "request_key"]

_RECORDING_MAX_BYTES = 1 << 30
"""A recording is read only as a regular file of at most this many bytes."""


def request_key(request: ModelRequest) -> str:
    """A stable key of what determines an answer (messages, operator, seed, sampling)."""
    payload = {
        "messages": [[m.role, m.content] for m in request.messages],
        "operator": None if request.operator is None else request.operator.value,
        "seed": request.seed,
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "stop": list(request.stop),
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _response_dict(r: ModelResponse) -> dict[str, Any]:
    return {
        "text": r.text,
        "reasoning": r.reasoning,
        "usage": {
            "prompt_tokens": r.usage.prompt_tokens,
            "completion_tokens": r.usage.completion_tokens,
        },
        "model": r.model,
        "finish_reason": r.finish_reason,
        "latency_s": r.latency_s,
        "cost_usd": r.cost_usd,
    }


def _response(d: Mapping[str, Any]) -> ModelResponse:
    return ModelResponse(
        text=str(d["text"]),
        reasoning=d.get("reasoning"),
        usage=Usage(**dict(d.get("usage") or {})),
        model=str(d.get("model", "")),
        finish_reason=d.get("finish_reason"),
        latency_s=float(d.get("latency_s", 0.0)),
        cost_usd=d.get("cost_usd"),
    )


@final
@define(eq=False)
class RecordingModel(OperatorModel):
    """Wraps ``inner`` and appends every request and response to ``path`` (JSONL, fsync'd)."""

    inner: OperatorModel
    path: Path = field(converter=Path)

    @property
    def model(self) -> str:
        """The wrapped model's id."""
        return str(getattr(self.inner, "model", "") or type(self.inner).__name__)

    def _asked(self, request: ModelRequest) -> str:
        """The id of the model asked for ``request`` (with a router inside, the routed one's):
        the id a price table prices, recorded so a replay is priced the same.
        """
        route = getattr(self.inner, "model_for", None)
        if callable(route):
            asked = getattr(route(request.operator), "model", None)
            if isinstance(asked, str) and asked:
                return asked
        return self.model

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Ask ``inner`` and record the exchange (with the asked model's id)."""
        response = await self.inner.complete(request)
        record = {
            "key": request_key(request),
            "model": self._asked(request),
            "request": {
                "messages": [{"role": m.role, "content": m.content} for m in request.messages],
                "operator": None if request.operator is None else request.operator.value,
                "seed": request.seed,
                "metadata": dict(request.metadata),
            },
            "response": _response_dict(response),
        }
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        return response


def _text_or_empty(value: str | None) -> str:
    return "" if value is None else str(value)


def _unpriced(table: Mapping[str, list[dict[str, Any]]], model: str) -> tuple[str, ...]:
    """The ids priced for the recorded answers that used tokens and carry no cost."""
    out: dict[str, None] = {}
    for answers in table.values():
        for a in answers:
            usage = a.get("usage") or {}
            used = any(usage.get(k) for k in ("prompt_tokens", "completion_tokens"))
            if used and a.get("cost_usd") is None:
                out[model or str(a.get("model") or "")] = None
    return tuple(k for k in out if k)


@final
@define(eq=False)
class ReplayModel(OperatorModel):
    """Answers from a file written by :class:`RecordingModel`.

    Args:
        path: the recording (JSONL).
        fallback: a model for requests that were not recorded (default: raise).
        model: the model id this model names itself by, which a ``Budget``'s price table
            prices the replayed answers as. Default: the recorded one (the id of the model
            the recording asked, else the id its answers report); ``""`` when the recording
            holds several (each answer is then priced as the id it reports); ``"replay"``
            for an empty recording.

    Raises:
        InvalidArgument: the file is missing or not a recording.
    """

    path: Path = field(converter=Path)
    fallback: OperatorModel | None = None
    model: str = field(default=None, converter=_text_or_empty)
    _table: dict[str, list[dict[str, Any]]] = field(init=False, factory=dict)
    _used: dict[str, int] = field(init=False, factory=lambda: defaultdict(int))
    _ids: tuple[str, ...] = field(init=False, default=())
    _unpriced: tuple[str, ...] = field(init=False, default=())

    def __attrs_post_init__(self) -> None:
        if not self.path.is_file():
            raise InvalidArgument(
                f"Expected a recording file but got path={str(self.path)!r} (not found); "
                "record one with RecordingModel or `openmle search --record FILE`"
            )
        explicit = self.model
        table: dict[str, list[dict[str, Any]]] = defaultdict(list)
        asked: dict[str, None] = {}  # the recorded ids, in order
        try:  # a regular file (not a FIFO, not -> /dev/zero) of at most _RECORDING_MAX_BYTES
            text = read_back_text(self.path, max_bytes=_RECORDING_MAX_BYTES, follow=True)
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise InvalidArgument(
                f"Cannot read the recording {str(self.path)!r}: {why}; give a JSONL file written "
                "by RecordingModel or `openmle search --record FILE`"
            ) from None
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                response = dict(rec["response"])
                table[str(rec["key"])].append(response)
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, RecursionError):
                if i == len(lines) - 1:
                    break  # a torn last line
                raise InvalidArgument(
                    f"{self.path}: line {i + 1} is not a recording record"
                ) from None
            asked[str(rec.get("model") or response.get("model") or "")] = None
        self._table = dict(table)
        self._ids = tuple(k for k in asked if k)
        if not explicit:
            self.model = self._ids[0] if len(self._ids) == 1 else ("" if self._ids else "replay")
        self._unpriced = _unpriced(table, self.model)

    @property
    def models(self) -> tuple[str, ...]:
        """The model ids the recording holds answers of (see ``model``), in recorded order."""
        return self._ids

    @property
    def unpriced_models(self) -> tuple[str, ...]:
        """The ids a price table must price for a ``Budget.usd`` cap to count the replayed
        answers: those of answers that used tokens and recorded no cost (``model`` when it is
        set, else the id each answer reports). Known before the run, so the search checks
        them before it writes anything.
        """
        return self._unpriced

    def __len__(self) -> int:
        return sum(len(v) for v in self._table.values())

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded answer to ``request``."""
        key = request_key(request)
        answers = self._table.get(key, [])
        n = self._used[key]
        if n < len(answers):
            self._used[key] = n + 1
            return _response(answers[n])
        if answers:  # more identical requests than recorded: repeat the last answer
            return _response(answers[-1])
        if self.fallback is not None:
            return await self.fallback.complete(request)
        # One text for every unrecorded request: several workers that meet the same cause
        # (another seed, task or prompt) report it once; the request's key is a note.
        exc = ModelNotFoundError(
            f"no recorded answer in {self.path} for a request: the prompt, operator or seed "
            "differ from the recording; search with the recording's task, --seed and settings, "
            "or give ReplayModel a fallback model"
        )
        exc.add_note(f"request key {key}")
        raise exc
