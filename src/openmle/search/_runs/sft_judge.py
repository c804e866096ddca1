"""An optional model-judged filter over SFT records: any :class:`~openmle.OperatorModel` decides,
step by step, whether a record is worth imitating.

The judge gets one request per record: a system message stating the answer format and a user
message with the task, the operator, the prompt the step answered and the step's answer. It must
answer with one JSON object ``{"keep": true|false, "reason": "..."}`` (a fenced ```json block
is accepted). A malformed answer or a failed call (:class:`~openmle.errors.ModelError`) is an
*error recorded on that record's verdict*, never silent: the record is dropped by default
(``on_error="drop"``; the released system's judge failed open, which let unchecked steps through)
or kept with ``on_error="keep"``, and either way :attr:`JudgedRecords.errors` lists it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Literal, final

import anyio
from attrs import frozen

from openmle._protocols import OperatorModel
from openmle._types import Message, ModelRequest
from openmle._validation import check_choice, check_positive, check_type
from openmle.errors import ModelError
from openmle.search._runs.sft_export import SFTRecord

__all__ = ["JudgedRecords", "StepVerdict", "ajudge_sft_records", "judge_sft_records"]

JUDGE_SYSTEM = (
    "You review one step of an automated machine-learning engineer: the instructions it was "
    "given and the answer it wrote (a plan and a Python program). Decide whether the answer is "
    "a good example to imitate: it follows the instructions, its plan matches its program, and "
    "it does not cheat (no reading of hidden answers, no hard-coded or faked scores). Reply with "
    'one JSON object and nothing else: {"keep": true or false, "reason": "one sentence"}.'
)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


@final
@frozen(kw_only=True)
class StepVerdict:
    """The judge's decision on one record.

    Attributes:
        record: the record judged.
        keep: whether the record is kept (after ``on_error`` for errors).
        reason: the judge's reason ("" on error).
        error: why no verdict could be read (malformed answer, failed call), else None.
    """

    record: SFTRecord
    keep: bool
    reason: str = ""
    error: str | None = None


@final
@frozen(kw_only=True)
class JudgedRecords:
    """What :func:`judge_sft_records` returns.

    Attributes:
        kept: the records kept, in input order.
        verdicts: one verdict per input record, in input order.
    """

    kept: tuple[SFTRecord, ...]
    verdicts: tuple[StepVerdict, ...]

    @property
    def errors(self) -> tuple[StepVerdict, ...]:
        """The verdicts whose judge answer was malformed or whose call failed."""
        return tuple(v for v in self.verdicts if v.error is not None)


def judge_request(record: SFTRecord) -> ModelRequest:
    """The request the judge gets for ``record``."""
    users = [m.content for m in record.messages if m.role == "user"]
    answer = record.messages[-1].content if record.messages else ""
    body = (
        f"Task: {record.task}\nOperator: {record.operator}\n\n"
        f"## Instructions the step received\n\n{users[-1] if users else ''}\n\n"
        f"## The step's answer\n\n{answer}\n"
    )
    return ModelRequest(
        messages=(Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=body)),
        temperature=0.0,
        metadata={"purpose": "sft-step-judge", "task": record.task, "node_id": record.node_id},
    )


def parse_verdict(text: str) -> tuple[bool, str]:
    """``(keep, reason)`` from a judge answer.

    Raises:
        ValueError: the answer is not one JSON object with a boolean ``keep`` (and a string
            ``reason`` when present); the message quotes the start of the answer.
    """
    raw = text.strip()
    fenced = _FENCE.match(raw)
    if fenced:
        raw = fenced.group(1)
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict) or not isinstance(data.get("keep"), bool):
        raise ValueError(
            'malformed judge answer: expected one JSON object {"keep": bool, "reason": str},'
            f" got {text[:200]!r}"
        )
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError(f"malformed judge answer: 'reason' must be a string, got {reason!r}")
    return data["keep"], reason


async def ajudge_sft_records(
    records: Sequence[SFTRecord],
    judge: OperatorModel,
    *,
    concurrency: int = 4,
    on_error: Literal["drop", "keep"] = "drop",
) -> JudgedRecords:
    """Ask ``judge`` about each record (``concurrency`` calls at a time); keep those it keeps.

    Args:
        records: records from :func:`~openmle.search.export_sft` or the ``*_records`` functions.
        judge: any operator model (an LLM service, a scripted model in tests).
        concurrency: judge calls in flight at once.
        on_error: what happens to a record whose verdict could not be read: ``"drop"``
            (default) or ``"keep"``; the error is recorded either way.

    Returns:
        :class:`JudgedRecords`.

    Raises:
        InvalidArgument: a bad ``concurrency`` or ``on_error``.
    """
    check_positive(check_type(concurrency, int, "concurrency"), "concurrency")
    check_choice(on_error, ("drop", "keep"), "on_error")
    verdicts: list[StepVerdict | None] = [None] * len(records)
    limiter = anyio.CapacityLimiter(concurrency)
    failures: list[BaseException] = []  # anything else (a bug): raised as one error, not a group

    async def one(i: int, record: SFTRecord) -> None:
        async with limiter:
            try:
                response = await judge.complete(judge_request(record))
                keep, reason = parse_verdict(response.text)
            except (ModelError, ValueError) as exc:
                kind = "judge call failed: " if isinstance(exc, ModelError) else ""
                verdicts[i] = StepVerdict(
                    record=record, keep=on_error == "keep", error=f"{kind}{exc}"
                )
                return
            except Exception as exc:
                failures.append(exc)
                return
        verdicts[i] = StepVerdict(record=record, keep=keep, reason=reason)

    async with anyio.create_task_group() as tg:
        for i, record in enumerate(records):
            tg.start_soon(one, i, record)
    if failures:
        raise failures[0]
    done = tuple(v for v in verdicts if v is not None)
    return JudgedRecords(kept=tuple(v.record for v in done if v.keep), verdicts=done)


def judge_sft_records(
    records: Sequence[SFTRecord],
    judge: OperatorModel,
    *,
    concurrency: int = 4,
    on_error: Literal["drop", "keep"] = "drop",
) -> JudgedRecords:
    """Synchronous :func:`ajudge_sft_records` (not from inside a running event loop)."""
    return anyio.run(
        lambda: ajudge_sft_records(records, judge, concurrency=concurrency, on_error=on_error)
    )
