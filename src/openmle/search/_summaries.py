"""Node summaries written lazily by a model, cached in memory and on disk.

:class:`SummaryStore` is the one part of operator memory that does I/O (model calls and a disk
cache); :mod:`openmle.search._memory` stays pure and only renders the summaries it is given. The
request it sends follows :mod:`openmle._summary_contract`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, final

import anyio
from attrs import define, field

from openmle._protocols import OperatorModel
from openmle._readback import object_in_answer, read_back_json
from openmle._summary_contract import (
    NODE_SUMMARY_PURPOSE,
    OUTCOME_LINE,
    PARENT_LINE,
    PURPOSE_KEY,
    SUMMARY_KEYS,
)
from openmle._types import Message, ModelRequest, ModelResponse, Usage
from openmle._validation import check_type
from openmle._writeback import ensure_dir, write_file
from openmle.operators import clip
from openmle.search._board import Board
from openmle.search._cards import ExperienceCard
from openmle.search._memory import _fmt

__all__ = ["SummaryStore"]


_SAFE = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
SUMMARY_FILE_MAX_BYTES = 1024 * 1024
"""The largest cached summary file read back (a larger one is ignored and recomputed)."""


def _summary_prompt(card: ExperienceCard, board: Board, code: str) -> list[Message]:
    parent = None
    if card.parent_ids and board.has(card.parent_ids[0]):
        parent = board.card(card.parent_ids[0])
    lines = [
        f"Node {card.node_id} ({card.operator.value}, family {card.family}).",
        OUTCOME_LINE.format(outcome=card.outcome.value, score=_fmt(card.score)),
    ]
    if card.error_signature:
        lines.append(f"Error: {card.error_signature}")
    if parent is not None:
        lines.append(
            PARENT_LINE.format(
                node_id=parent.node_id,
                family=parent.family,
                score=_fmt(parent.score),
                plan=clip(parent.plan, 600, keep_head=1.0),
            )
        )
    lines.append(f"Plan: {clip(card.plan, 1200, keep_head=1.0)}")
    lines.append("Program:\n```python\n" + clip(code, 12_000, keep_head=0.7) + "\n```")
    system = (
        "You summarise one attempt of a machine-learning search for later attempts to learn "
        "from. Answer with one JSON object and nothing else, with two string fields: "
        '"method" (2-4 sentences: the model, features and validation used) and "lesson" '
        "(2-4 sentences: what changed against the parent and what it did to the validation "
        "score, or why it failed)."
    )
    return [Message(role="system", content=system), Message(role="user", content="\n".join(lines))]


def _parse_summary(text: str) -> str | None:
    data = object_in_answer(text)
    if data is None:
        return None
    parts = []
    for key in SUMMARY_KEYS:
        value = data.get(key)
        if not isinstance(value, str) or not value.strip():
            return None
        parts.append(" ".join(value.split()))
    return " ".join(parts)


def _opt_path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


@final
@define(eq=False)
class SummaryStore:
    """Lazily synthesised node summaries: memory cache, disk cache, then the model.

    Args:
        model: the model that writes summaries (temperature 0, up to ``max_tokens``).
        cache_dir: a directory for ``<node_id>.json`` files (None: memory only).
        max_tokens: completion cap of one summary call.

    Lookup order for a node: the card's ``summary``, the memory cache, the disk cache, then
    one model call. Concurrent requests for one node share one call. A failed call or an
    answer that is not the expected JSON leaves the node without a summary (memory shows its
    plan instead) and is retried the next time the node is needed.

    Attributes:
        calls: model calls made; failures: calls that failed or gave no usable summary;
        last_error: why the last failure happened.
        usage: tokens of every call made (a search also counts each call on the step whose
            prompt needed it); cost_usd: their cost where the model reports it.
    """

    model: OperatorModel | None = None
    cache_dir: Path | None = field(default=None, converter=_opt_path)
    max_tokens: int = 512
    calls: int = field(default=0, init=False)
    failures: int = field(default=0, init=False)
    last_error: str | None = field(default=None, init=False)
    usage: Usage = field(factory=Usage, init=False)
    cost_usd: float = field(default=0.0, init=False)
    _memory: dict[str, str] = field(factory=dict, init=False)
    _inflight: dict[str, anyio.Event] = field(factory=dict, init=False)

    def _path(self, node_id: str) -> Path | None:
        if self.cache_dir is None:
            return None
        name = node_id if _SAFE.match(node_id) else hashlib.sha256(node_id.encode()).hexdigest()
        return self.cache_dir / f"{name}.json"

    async def _read_disk(self, node_id: str) -> str | None:
        path = self._path(node_id)
        if path is None:
            return None
        try:
            data: Any = await anyio.to_thread.run_sync(
                functools.partial(read_back_json, path, max_bytes=SUMMARY_FILE_MAX_BYTES)
            )
        except (OSError, ValueError):  # missing, a link, not a regular file, too large, not JSON
            return None
        if isinstance(data, dict) and data.get("node_id") == node_id:
            summary = data.get("summary")
            return summary if isinstance(summary, str) and summary else None
        return None

    async def _write_disk(self, node_id: str, summary: str) -> None:
        path = self._path(node_id)
        if path is None:
            return
        data = json.dumps({"node_id": node_id, "summary": summary}).encode("utf-8")

        def write() -> None:  # summaries/ a real directory, no link followed
            path.parent.parent.mkdir(parents=True, exist_ok=True)  # the caller's choice
            write_file(ensure_dir(path.parent.parent, path.parent.name) / path.name, data)

        await anyio.to_thread.run_sync(write)

    async def get(
        self,
        board: Board,
        node_id: str,
        *,
        code_of: Callable[[str], str | None] | None = None,
        responses: list[ModelResponse] | None = None,
    ) -> str | None:
        """The summary of one node (synthesised if needed); None on failure.

        ``responses``, when given, receives the model's answer if a call is made (for usage
        accounting by the caller).
        """
        card = board.card(node_id)
        if card.summary:
            return card.summary
        if node_id in self._memory:
            board.set_summary(node_id, self._memory[node_id])
            return self._memory[node_id]
        pending = self._inflight.get(node_id)
        if pending is not None:
            await pending.wait()
            found = self._memory.get(node_id)
            if found:
                board.set_summary(node_id, found)
            return found
        event = anyio.Event()
        self._inflight[node_id] = event
        try:
            summary = await self._read_disk(node_id)
            if summary is None and self.model is not None:
                summary = await self._synthesise(board, card, code_of, responses)
                if summary is not None:
                    await self._write_disk(node_id, summary)
            if summary is not None:
                self._memory[node_id] = summary
                board.set_summary(node_id, summary)
            return summary
        finally:
            del self._inflight[node_id]
            event.set()

    async def _synthesise(
        self,
        board: Board,
        card: ExperienceCard,
        code_of: Callable[[str], str | None] | None,
        responses: list[ModelResponse] | None = None,
    ) -> str | None:
        if self.model is None:
            raise AssertionError("internal invariant broken: self.model is not None")
        code = (code_of(card.node_id) if code_of is not None else None) or ""
        request = ModelRequest(
            messages=_summary_prompt(card, board, code),
            temperature=0.0,
            max_tokens=self.max_tokens,
            metadata={PURPOSE_KEY: NODE_SUMMARY_PURPOSE, "node_id": card.node_id},
        )
        self.calls += 1
        try:
            response = await self.model.complete(request)
        except Exception as exc:  # a failed summary is data: fall back and retry later
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return None
        self.usage = self.usage + response.usage
        self.cost_usd += response.cost_usd or 0.0
        if responses is not None:
            responses.append(response)
        summary = _parse_summary(response.text)
        if summary is None:
            self.failures += 1
            self.last_error = "the answer was not a JSON object with 'method' and 'lesson'"
        return summary

    async def ensure(
        self,
        board: Board,
        node_ids: Sequence[str],
        *,
        code_of: Callable[[str], str | None] | None = None,
        responses: list[ModelResponse] | None = None,
    ) -> Mapping[str, str]:
        """Summaries of ``node_ids`` (those that could be had), fetched concurrently.

        Args:
            board: the board holding the nodes' cards (summaries are set on it).
            node_ids: the nodes.
            code_of: the program of a node by id.
            responses: receives the answer of every model call this makes (usage, cost).
        """
        check_type(board, Board, "board")
        out: dict[str, str] = {}

        async def one(n: str) -> None:
            s = await self.get(board, n, code_of=code_of, responses=responses)
            if s:
                out[n] = s

        async with anyio.create_task_group() as tg:
            for n in dict.fromkeys(node_ids):
                tg.start_soon(one, n)
        return {n: out[n] for n in node_ids if n in out}
