"""An optional model-judged filter over SFT records: any :class:`~openmle.OperatorModel` decides,
step by step, whether a record is worth imitating, seeing the whole segment the step belongs to.

The judge gets one request per record: a system message stating the criteria and the answer
format, and a user message with the task and the record's *segment up to its endpoint*: every
step of the segment in order (operator, the instructions it received for the judged step, each
step's answer and its validation score or failure), the judged step marked, and the score the
segment ended with. It keeps a step only if what the step introduced (a strategy, a state such
as features or a model, or a repair) is inherited by the later steps and contributes to the
endpoint; cosmetic edits, blind retries (the same thing again without a diagnosis),
scale-shrinking dodges (cutting the data, model or epochs to get past a time or memory limit
instead of fixing the cause) and failed environment steps (installs, paths, missing packages)
are dropped. A parallel record (a scored Draft) is its own one-step segment.

It must answer with one JSON object ``{"keep": true|false, "reason": "..."}`` (a fenced
```json block is accepted). A malformed answer or a failed call
(:class:`~openmle.errors.ModelError`) is an *error recorded on that record's verdict*, never
silent: the record is dropped by default (``on_error="drop"``; the released system's judge
failed open, which let unchecked steps through) or kept with ``on_error="keep"``, and either way
:attr:`JudgedRecords.errors` lists it. :func:`~openmle.search.export_sft` takes ``judge=`` and
records every verdict and error in its summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, final

import anyio
from attrs import frozen

from openmle._protocols import OperatorModel
from openmle._readback import loads_untrusted
from openmle._types import Message, ModelRequest
from openmle._validation import check_choice, check_positive, check_type, fail
from openmle.errors import ModelError

if TYPE_CHECKING:  # annotations only: sft_export calls the judge (no import cycle)
    from openmle.search._runs.sft_export import SFTRecord

__all__ = ["JudgedRecords", "StepVerdict", "ajudge_sft_records", "judge_sft_records"]

JUDGE_SYSTEM = (
    "You review one step of an automated machine-learning engineer. You see the whole segment "
    "the step belongs to: a chain of steps (a first program, then improvements or repairs of "
    "it) up to the segment's endpoint, each with its answer (a plan and a Python program) and "
    "its validation score or failure, and the instructions of the step under review. Keep the "
    "step only if what it introduced (a strategy, a state such as features, data handling or a "
    "model, or a repair of an error) is inherited by the later steps and contributes to the "
    "endpoint's result, and it does not cheat (no reading of hidden answers, no hard-coded or "
    "faked scores). Drop cosmetic edits (renaming, comments, formatting, logging), blind "
    "retries (the same program again without a diagnosis of the error), scale-shrinking dodges "
    "(cutting the data, the model or the epochs to get past a time or memory limit instead of "
    "fixing the cause) and failed environment steps (package installs, paths, missing files). "
    'Reply with one JSON object and nothing else: {"keep": true or false, "reason": "one '
    'sentence"}.'
)
MAX_ANSWER_CHARS = 12_000
"""Characters of each step's answer shown to the judge (head and tail kept, the middle cut)."""
MAX_INSTRUCTION_CHARS = 24_000
"""Characters of the judged step's instructions shown to the judge (head and tail kept)."""


@final
@frozen(kw_only=True)
class StepVerdict:
    """The judge's decision on one record.

    Attributes:
        record: the record judged.
        keep: whether the record is kept (after ``on_error`` for errors).
        reason: the judge's reason ("" on error).
        error: why no verdict could be read (malformed answer, failed call), else None.
        segment_steps: the steps of the segment the judge saw (1 for a one-step segment).
    """

    record: SFTRecord
    keep: bool
    reason: str = ""
    error: str | None = None
    segment_steps: int = 1

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict naming the record (run, task, node, segment) and the verdict."""
        r = self.record
        return {
            "run_id": r.run_id, "task": r.task, "node_id": r.node_id, "path": r.path,
            "segment_id": r.segment_id, "position": r.position, "keep": self.keep,
            "reason": self.reason, "error": self.error, "segment_steps": self.segment_steps,
        }  # fmt: skip


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


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"


def segment_key(record: SFTRecord) -> tuple[str, str, str, str]:
    """The segment a record belongs to: ``(run_id, task, path, segment_id)``."""
    return (record.run_id, record.task, record.path, record.segment_id)


def segments(records: Sequence[SFTRecord]) -> dict[tuple[str, str, str, str], list[SFTRecord]]:
    """The records grouped by :func:`segment_key`, each segment in position order (one record
    per position, the first seen).
    """
    out: dict[tuple[str, str, str, str], dict[int, SFTRecord]] = {}
    for r in records:
        out.setdefault(segment_key(r), {}).setdefault(r.position, r)
    return {k: [v[p] for p in sorted(v)] for k, v in out.items()}


def _score(r: SFTRecord) -> str:
    return "failed (no validation score)" if r.score is None else f"validation score {r.score:g}"


def judge_request(record: SFTRecord, segment: Sequence[SFTRecord] = ()) -> ModelRequest:
    """The request the judge gets for ``record``, shown inside ``segment`` (its segment's
    records in position order, up to the endpoint; default: the record alone).

    Raises:
        InvalidArgument: ``segment`` is given and does not hold ``record``.
    """
    steps = list(segment) or [record]
    if record not in steps:
        raise fail("the segment holding the record", "segment", len(steps))
    users = [m.content for m in record.messages if m.role == "user"]
    end = steps[-1]
    final = end.segment_score if end.segment_score is not None else end.score
    ended = "failed" if final is None else f"validation score {final:g}"
    parts = [
        f"Task: {record.task}\nSegment: {len(steps)} step(s), ending with {ended}.\n"
        f"Step under review: step {steps.index(record) + 1} ({record.operator}).\n",
        "## Instructions the step under review received\n\n"
        f"{_clip(users[-1] if users else '', MAX_INSTRUCTION_CHARS)}\n",
        "## The segment, in order, up to its endpoint\n",
    ]
    for i, r in enumerate(steps, 1):
        mark = "  <- the step under review" if r == record else ""
        answer = r.messages[-1].content if r.messages else ""
        parts.append(
            f"### Step {i}: {r.operator}, {_score(r)}{mark}\n\n{_clip(answer, MAX_ANSWER_CHARS)}\n"
        )
    body = "\n".join(parts)
    return ModelRequest(
        messages=(Message(role="system", content=JUDGE_SYSTEM), Message(role="user", content=body)),
        temperature=0.0,
        metadata={"purpose": "sft-step-judge", "task": record.task, "node_id": record.node_id},
    )


def _unfenced(raw: str) -> str:
    r"""``raw`` without a fence around all of it (an optional ``json`` after the opening one):
    what ``re.match(r"^```(?:json)?\s*(.*?)\s*```$", raw, re.DOTALL)`` captured, without its
    cubic backtracking on white space.
    """
    if len(raw) < 6 or not (raw.startswith("```") and raw.endswith("```")):
        return raw
    inner = raw[3:-3]
    return (inner[4:] if inner.startswith("json") else inner).strip()


def parse_verdict(text: str) -> tuple[bool, str]:
    """``(keep, reason)`` from a judge answer.

    Raises:
        ValueError: the answer is not one JSON object with a boolean ``keep`` (and a string
            ``reason`` when present); the message quotes the start of the answer.
    """
    raw = _unfenced(text.strip())
    try:
        data = loads_untrusted(raw)
    except ValueError:
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
    context: Sequence[SFTRecord] | None = None,
) -> JudgedRecords:
    """Ask ``judge`` about each record (``concurrency`` calls at a time); keep those it keeps.

    Args:
        records: records from :func:`~openmle.search.export_sft` or the ``*_records`` functions.
        judge: any operator model (an LLM service, a scripted model in tests).
        concurrency: judge calls in flight at once.
        on_error: what happens to a record whose verdict could not be read: ``"drop"``
            (default) or ``"keep"``; the error is recorded either way.
        context: the records the segments are rebuilt from (default ``records``; pass every
            record of the selections when ``records`` is a filtered subset, so that each judged
            step still sees its whole segment).

    Returns:
        :class:`JudgedRecords`.

    Raises:
        InvalidArgument: a bad ``concurrency`` or ``on_error``.
    """
    check_positive(check_type(concurrency, int, "concurrency"), "concurrency")
    check_choice(on_error, ("drop", "keep"), "on_error")
    verdicts: list[StepVerdict | None] = [None] * len(records)
    by_segment = segments([*records, *(context or ())])
    limiter = anyio.CapacityLimiter(concurrency)
    failures: list[BaseException] = []  # anything else (a bug): raised as one error, not a group

    async def one(i: int, record: SFTRecord) -> None:
        seg = by_segment[segment_key(record)]
        if record not in seg:  # another record at the same position: judge it alone
            seg = [record]
        async with limiter:
            try:
                response = await judge.complete(judge_request(record, seg))
                keep, reason = parse_verdict(response.text)
            except (ModelError, ValueError) as exc:
                kind = "judge call failed: " if isinstance(exc, ModelError) else ""
                verdicts[i] = StepVerdict(
                    record=record, keep=on_error == "keep", error=f"{kind}{exc}",
                    segment_steps=len(seg),
                )  # fmt: skip
                return
            except Exception as exc:
                failures.append(exc)
                return
        verdicts[i] = StepVerdict(record=record, keep=keep, reason=reason, segment_steps=len(seg))

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
    context: Sequence[SFTRecord] | None = None,
) -> JudgedRecords:
    """Synchronous :func:`ajudge_sft_records` (not from inside a running event loop)."""
    return anyio.run(
        lambda: ajudge_sft_records(
            records, judge, concurrency=concurrency, on_error=on_error, context=context
        )
    )
