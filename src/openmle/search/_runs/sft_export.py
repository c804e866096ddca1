"""Execution-grounded SFT data from search runs: chat records for the four operators.

Two selections, both read from run directories (``journal.jsonl`` node records):

- **parallel** (:func:`parallel_records`): per task, the Draft programs that ran and got a
  validation score; programs with equal scores are deduplicated (the earliest is kept) and the
  ``top_k`` best (default 4) are kept. One record per program: the Draft prompt and the answer.
- **evolutionary** (:func:`evolutionary_records`): *segments*: a Draft, Improve or Crossover node
  followed by its chain of Debug descendants, ending at a node with a validation score. A segment
  is kept when

  * its head is a Draft (ending with a valid score is enough),
  * its head is an Improve and the end's score beats the Improve's parent,
  * its head is a Crossover and the end's score beats the better of its two parents.

  Each node of a kept segment becomes one record (its own operator prompt and its answer), with
  ``segment_id`` and ``position`` so a trainer can weight or filter steps.

With ``leaderboards`` (task name -> the leaderboard's scores, best first), a segment of a task
that has a leaderboard is kept only when its end's validation score also reaches the bronze
threshold (the paper's rule for tasks with a leaderboard); tasks without one are unaffected.

"Beats" is in the task's direction (``higher_is_better`` from the run manifest); a parent
without a validation score is beaten by any score. Scores are the *sandbox's* validation scores
(``valid_score``), never what a program printed, so the data is execution-grounded.

A record's prompt is the exact request the model saw for that node (system and user messages,
memory block and node summaries included) when the run recorded it (``requests/<sha256>.json.gz``,
named by the node's journal record; :meth:`RunDir.request` verifies the hash): such a record has
``prompt_source == "recorded"`` and ``request_sha256`` set. A recorded request that is missing or
does not match its hash is a :class:`~openmle.errors.RunDirError` naming the file, never a silent
rebuild. Runs written before requests were recorded (and nodes with no model request, e.g. an
infrastructure error before the call) get a prompt rebuilt with a
:class:`~openmle.search.PromptBuilder` (default :class:`~openmle.search.OperatorPrompts` without
memory, since the board a node saw is not part of the journal) from the node's parents as
journalled, with ``prompt_source == "rebuilt"``. Test scores and hidden answers never reach a
record. The answer is the node's plan followed by its program in one fenced block, the
shape :func:`openmle.operators.parse_response` reads back.

:func:`export_sft` writes each node at most once (both selections, and nested segments, can keep
the same node: the first record is kept) and, with ``max_tokens``, drops records longer than the
limit instead of truncating them; both counts are in its :class:`SFTExportSummary`.

Departure from the released system: its SFT data are built from per-step directories by ad hoc
scripts; here both selections are pure functions of the journal, and the records carry their
provenance (run, task, node ids, score).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, final

from attrs import field, frozen

from openmle._compat import require
from openmle._leaderboard import MedalThresholds, medal_of, medal_thresholds
from openmle._protocols import OperatorModel
from openmle._types import Message, Operator
from openmle._validation import check_choice, fail
from openmle.search._loop import Node, Proposal
from openmle.search._prompts import OperatorPrompts, PromptBuilder, TaskInfo
from openmle.search._rundir import RunDir

if TYPE_CHECKING:
    from openmle.search._runs.sft_judge import StepVerdict

__all__ = [
    "SFTExport",
    "SFTExportSummary",
    "SFTRecord",
    "estimate_tokens",
    "evolutionary_records",
    "export_sft",
    "parallel_records",
    "read_sft_jsonl",
]

_PATHS = ("parallel", "evolutionary", "both")
_FORMATS = ("parquet", "jsonl")
_HEADS = (Operator.DRAFT, Operator.IMPROVE, Operator.CROSSOVER)


def _messages_tuple(value: Iterable[Message]) -> tuple[Message, ...]:
    return tuple(value)


@final
@frozen(kw_only=True)
class SFTRecord:
    """One chat-format training record.

    Attributes:
        messages: the operator prompt (system, user) then the assistant answer to imitate.
        task: the task name; run_id: the run directory's name.
        path: ``"parallel"`` or ``"evolutionary"``.
        operator: the operator whose answer this is.
        node_id: the node that produced the answer.
        score: the sandbox validation score of the node, None for a failed step of a segment.
        segment_id: the segment's head node id (evolutionary), else the node id.
        position: 0-based position in the segment (0 for parallel records).
        segment_score: the validation score the segment (or program) ended with.
        prompt_source: ``"recorded"`` (the prompt is the request the model saw, read from the
            run directory) or ``"rebuilt"`` (no recorded request: rebuilt from the journal).
        request_sha256: the recorded request's hash (None when rebuilt).
    """

    messages: tuple[Message, ...] = field(converter=_messages_tuple)
    task: str
    run_id: str
    path: str
    operator: str
    node_id: str
    score: float | None
    segment_id: str
    position: int = 0
    segment_score: float | None = None
    prompt_source: str = "rebuilt"
    request_sha256: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``messages`` as ``[{"role", "content"}]`` (chat format)."""
        return {
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "task": self.task,
            "run_id": self.run_id,
            "path": self.path,
            "operator": self.operator,
            "node_id": self.node_id,
            "score": self.score,
            "segment_id": self.segment_id,
            "position": self.position,
            "segment_score": self.segment_score,
            "prompt_source": self.prompt_source,
            "request_sha256": self.request_sha256,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SFTRecord:
        """Inverse of :meth:`to_dict`."""
        d = dict(data)
        d["messages"] = tuple(Message(role=m["role"], content=m["content"]) for m in d["messages"])
        for key in ("score", "segment_score"):
            v = d.get(key)
            d[key] = None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)
        d["position"] = int(d.get("position", 0))
        d["prompt_source"] = str(d.get("prompt_source") or "rebuilt")
        sha = d.get("request_sha256")
        d["request_sha256"] = None if sha is None else str(sha)
        return cls(**d)


def _answer(node: Node) -> str:
    block = f"```python\n{node.code.rstrip()}\n```"
    return f"{node.plan.strip()}\n\n{block}" if node.plan.strip() else block


def _valid(node: Node) -> float | None:
    if not node.outcome.is_success or node.valid_score is None:
        return None
    v = float(node.valid_score)
    return v if math.isfinite(v) else None


def _beats(score: float, ref: float | None, higher_is_better: bool) -> bool:
    if ref is None:
        return True
    return score > ref if higher_is_better else score < ref


def _better(a: float | None, b: float | None, higher_is_better: bool) -> float | None:
    if a is None or b is None:
        return a if b is None else b
    return max(a, b) if higher_is_better else min(a, b)


def _run_info(rd: RunDir, task: TaskInfo | None) -> tuple[TaskInfo, str]:
    meta = rd.manifest.get("task", {})
    info = task or TaskInfo(
        name=str(meta.get("name", "task")), higher_is_better=bool(meta.get("higher_is_better"))
    )
    return info, rd.path.name


@final
class _Prompts:
    """A run's prompts: the recorded request of a node when there is one, else rebuilt."""

    def __init__(self, rd: RunDir, builder: PromptBuilder, task: TaskInfo) -> None:
        self.rd, self.builder, self.task = rd, builder, task
        self.recorded = rd.node_requests()
        self.loaded: dict[str, tuple[Message, ...]] = {}

    def of(
        self, node: Node, by_id: Mapping[str, Node]
    ) -> tuple[tuple[Message, ...], str, str | None] | None:
        """``(messages with the answer, prompt_source, request_sha256)``, or None."""
        digest = self.recorded.get(node.node_id)
        if digest is None:
            msgs = _messages(node, by_id, self.task, self.builder)
            return None if msgs is None else (msgs, "rebuilt", None)
        prompt = self.loaded.get(digest)
        if prompt is None:
            prompt = self.loaded[digest] = self.rd.request(digest).messages
        return (*prompt, Message(role="assistant", content=_answer(node))), "recorded", digest


def _messages(
    node: Node, by_id: Mapping[str, Node], task: TaskInfo, prompts: PromptBuilder
) -> tuple[Message, ...] | None:
    parents = [by_id.get(p) for p in node.parent_ids]
    if any(p is None for p in parents):
        return None  # a parent missing from the journal: the prompt cannot be rebuilt
    proposal = Proposal(
        step=node.step,
        node_id=node.node_id,
        operator=node.operator,
        parent_ids=node.parent_ids,
        generation=node.generation,
        debug_depth=node.debug_depth,
        reason=node.reason,
    )
    request = prompts.build(proposal, [p for p in parents if p is not None], task)
    return (*request.messages, Message(role="assistant", content=_answer(node)))


def _open(run_dir: str | Path | RunDir) -> RunDir:
    return run_dir if isinstance(run_dir, RunDir) else RunDir.open(run_dir)


def parallel_records(
    run_dirs: Iterable[str | Path | RunDir],
    *,
    top_k: int = 4,
    task: TaskInfo | None = None,
    prompts: PromptBuilder | None = None,
) -> list[SFTRecord]:
    """The parallel path: per task, the best ``top_k`` Draft programs with distinct scores.

    Args:
        run_dirs: run directories (several runs of one task are pooled per task name).
        top_k: programs kept per task (after deduplicating equal scores).
        task: what prompts say about the task (default: the manifest's name and direction; pass
            the description to get the prompts the search used).
        prompts: rebuilds the prompt of a node without a recorded request (default
            ``OperatorPrompts(memory=None)``); recorded requests are used as they are.

    Returns:
        Records ordered by task, then best score first.

    Raises:
        InvalidArgument: ``top_k`` < 1.
        RunDirError: a path is not a run directory, or a recorded request is missing or does
            not match its hash.
    """
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise fail("an integer >= 1", "top_k", top_k)
    builder = prompts or OperatorPrompts(memory=None)
    pooled: dict[str, list[tuple[float, int, SFTRecord]]] = {}
    hib_of: dict[str, bool] = {}
    for order, rd in enumerate(_open(r) for r in run_dirs):
        info, run_id = _run_info(rd, task)
        nodes = rd.nodes()
        by_id = {n.node_id: n for n in nodes}
        hib_of[info.name] = info.higher_is_better
        source = _Prompts(rd, builder, info)
        for n in nodes:
            score = _valid(n)
            if n.operator is not Operator.DRAFT or score is None:
                continue
            prompt = source.of(n, by_id)
            if prompt is None:
                continue
            msgs, how, sha = prompt
            rec = SFTRecord(
                messages=msgs, task=info.name, run_id=run_id, path="parallel",
                operator=n.operator.value, node_id=n.node_id, score=score,
                segment_id=n.node_id, segment_score=score, prompt_source=how,
                request_sha256=sha,
            )  # fmt: skip
            pooled.setdefault(info.name, []).append((score, order * 1_000_000 + n.step, rec))
    out: list[SFTRecord] = []
    for name in sorted(pooled):
        sign = 1.0 if hib_of[name] else -1.0
        seen: set[float] = set()
        kept = []
        for score, _, rec in sorted(pooled[name], key=lambda t: t[1]):  # earliest first
            if score in seen:
                continue
            seen.add(score)
            kept.append((score, rec))
        kept.sort(key=lambda t: -sign * t[0])
        out.extend(rec for _, rec in kept[:top_k])
    return out


def _segment(end: Node, by_id: Mapping[str, Node]) -> list[Node] | None:
    """``[head, debug, ..., end]`` walking up Debug parents, or None without a head."""
    chain = [end]
    node = end
    while node.operator is Operator.DEBUG:
        if len(node.parent_ids) != 1 or node.parent_ids[0] not in by_id:
            return None
        node = by_id[node.parent_ids[0]]
        chain.append(node)
    if node.operator not in _HEADS:
        return None
    return chain[::-1]


def _medal_rules(
    leaderboards: Mapping[str, Sequence[float]] | None, name: str, hib: bool
) -> MedalThresholds | None:
    board = None if leaderboards is None else leaderboards.get(name)
    if board is None:
        return None
    return medal_thresholds(list(board), higher_is_better=hib)


def evolutionary_records(
    run_dirs: Iterable[str | Path | RunDir],
    *,
    task: TaskInfo | None = None,
    prompts: PromptBuilder | None = None,
    leaderboards: Mapping[str, Sequence[float]] | None = None,
) -> list[SFTRecord]:
    """The evolutionary path: kept segments (see the module docstring), one record per node.

    Args:
        run_dirs: run directories.
        task: what prompts say about the task (default: from each manifest).
        prompts: rebuilds the prompt of a node without a recorded request (default
            ``OperatorPrompts(memory=None)``); recorded requests are used as they are.
        leaderboards: task name -> leaderboard scores (best first); a segment of a task listed
            here must also end at a bronze-medal score or better (in the task's direction).

    Returns:
        Records in run order, then segment order (by the step of the segment's end), then
        position.

    Raises:
        InvalidArgument: a listed leaderboard has no finite score.
        RunDirError: a path is not a run directory, or a recorded request is missing or does
            not match its hash.
    """
    builder = prompts or OperatorPrompts(memory=None)
    out: list[SFTRecord] = []
    for rd in (_open(r) for r in run_dirs):
        info, run_id = _run_info(rd, task)
        hib = info.higher_is_better
        medals = _medal_rules(leaderboards, info.name, hib)
        nodes = rd.nodes()
        by_id = {n.node_id: n for n in nodes}
        source = _Prompts(rd, builder, info)
        for end in nodes:
            final = _valid(end)
            if final is None:
                continue
            if medals is not None and medal_of(final, medals) is None:
                continue  # the task has a leaderboard: the segment must end at a medal
            chain = _segment(end, by_id)
            if chain is None:
                continue
            head = chain[0]
            if head.operator is not Operator.DRAFT:
                ref: float | None = None
                for pid in head.parent_ids:
                    parent = by_id.get(pid)
                    ref = _better(ref, None if parent is None else _valid(parent), hib)
                if not _beats(final, ref, hib):
                    continue
            built = [source.of(n, by_id) for n in chain]
            if any(m is None for m in built):
                continue
            for pos, (n, prompt) in enumerate(zip(chain, built, strict=True)):
                if prompt is None:
                    raise AssertionError("internal invariant broken: prompt is not None")
                msgs, how, sha = prompt
                out.append(
                    SFTRecord(
                        messages=msgs,
                        task=info.name,
                        run_id=run_id,
                        path="evolutionary",
                        operator=n.operator.value,
                        node_id=n.node_id,
                        score=_valid(n),
                        segment_id=head.node_id,
                        position=pos,
                        segment_score=final,
                        prompt_source=how,
                        request_sha256=sha,
                    )
                )
    return out


def estimate_tokens(messages: Sequence[Message]) -> int:
    """The default token count of a record: ``ceil(characters / 4)`` summed over its messages.

    A rough estimate (about right for English prose and Python code with BPE tokenizers; the
    chat template's own tokens are not counted). For an exact limit pass
    ``count_tokens=`` to :func:`export_sft`, e.g. with an :class:`openmle.train.Tokenizer`
    ``tok``: ``lambda msgs: sum(map(len, encode_chat(tok, msgs[:-1], msgs[-1].content)))``.
    """
    return sum(-(-len(m.content) // 4) for m in messages)


@final
@frozen(kw_only=True)
class SFTExportSummary:
    """What :func:`export_sft` selected, wrote and dropped.

    Attributes:
        selected: records the selections produced (duplicates included).
        written: records written to the file.
        duplicates: records dropped because an earlier one had the same node identity
            (run, node id and messages).
        over_limit: records dropped because they had more than ``max_tokens`` tokens.
        max_tokens: the limit applied (None: no limit).
        longest: the token count of the longest written record (0 when none was written).
        judged: records the step judge was asked about (0 without ``judge=``).
        judge_dropped: records the judge dropped (its "keep": false, or an error under
            ``judge_on_error="drop"``).
        judge_errors: verdicts that could not be read (malformed answer or failed call).
        verdicts: every verdict of the judge, in record order
            (:class:`~openmle.search.StepVerdict`: keep, reason, error, the segment's size).
    """

    selected: int
    written: int
    duplicates: int
    over_limit: int
    max_tokens: int | None
    longest: int
    judged: int = 0
    judge_dropped: int = 0
    judge_errors: int = 0
    verdicts: tuple[StepVerdict, ...] = ()


@final
class SFTExport(list[SFTRecord]):
    """The records :func:`export_sft` wrote (a ``list``, as before) with its :attr:`summary`."""

    summary: SFTExportSummary

    def __init__(self, records: Iterable[SFTRecord], summary: SFTExportSummary) -> None:
        super().__init__(records)
        self.summary = summary


def _write_parquet(records: Sequence[SFTRecord], out: Path) -> None:
    pa = require("pyarrow", "data")
    pq = require("pyarrow.parquet", "data")
    schema = pa.schema(
        [
            (
                "messages",
                pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())])),
            ),
            ("task", pa.string()),
            ("run_id", pa.string()),
            ("path", pa.string()),
            ("operator", pa.string()),
            ("node_id", pa.string()),
            ("score", pa.float64()),
            ("segment_id", pa.string()),
            ("position", pa.int64()),
            ("segment_score", pa.float64()),
            ("prompt_source", pa.string()),
            ("request_sha256", pa.string()),
        ]
    )
    rows = [r.to_dict() for r in records]
    table = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(table, out)


def export_sft(
    run_dirs: Iterable[str | Path | RunDir],
    out: str | Path,
    *,
    path: Literal["parallel", "evolutionary", "both"] = "both",
    format: Literal["parquet", "jsonl"] | None = None,
    top_k: int = 4,
    task: TaskInfo | None = None,
    prompts: PromptBuilder | None = None,
    leaderboards: Mapping[str, Sequence[float]] | None = None,
    max_tokens: int | None = None,
    count_tokens: Callable[[Sequence[Message]], int] = estimate_tokens,
    judge: OperatorModel | None = None,
    judge_concurrency: int = 4,
    judge_on_error: Literal["drop", "keep"] = "drop",
) -> SFTExport:
    """Write SFT records from run directories to ``out`` (parquet or JSONL).

    Three rules apply after the selections, in this order (the third only with ``judge``):

    1. **No duplicates.** A node kept by both selections (a Draft among the parallel top
       ``top_k`` that also forms a one-node segment) or by two nested evolutionary segments
       would be written twice; records are deduplicated by node identity (run id, node id and
       messages), keeping the first (so a parallel record wins over its evolutionary copy).
    2. **Over-long examples are dropped, never truncated** (a cut program is a bad target):
       with ``max_tokens``, a record whose ``count_tokens(record.messages)`` exceeds it is not
       written. The paper trains with a 32,768-token context (``SFTConfig.paper().max_length``).
    3. **The step judge** (optional, ``judge=``): each remaining record is judged by
       :func:`~openmle.search.judge_sft_records`, seeing its whole segment up to the endpoint
       (built from every selected record); records it drops are not written.

    The counts, and the judge's verdicts and errors, are in the returned
    :attr:`SFTExport.summary`.

    Args:
        run_dirs: run directories.
        out: the file to write; its parent directory is created.
        path: which selection(s) to export.
        format: ``"parquet"`` (pandas, ``datasets``) or ``"jsonl"``; default from the suffix
            (``.parquet`` -> parquet, anything else -> JSONL).
        top_k, task, prompts: see :func:`parallel_records` / :func:`evolutionary_records`.
        leaderboards: the medal rule of :func:`evolutionary_records`.
        max_tokens: drop records with more tokens than this (None: keep every length).
        count_tokens: a record's token count (prompt and answer); default
            :func:`estimate_tokens` (characters / 4, rounded up, per message).
        judge: an operator model that judges each step (None: no judge). The export then
            runs an event loop: call it from synchronous code (or a worker thread).
        judge_concurrency: judge calls in flight at once.
        judge_on_error: a record whose verdict could not be read is dropped (``"drop"``,
            default) or kept (``"keep"``); the error is in the summary either way.

    Returns:
        The records written, parallel ones first: a ``list`` of :class:`SFTRecord` with a
        ``summary`` (:class:`SFTExportSummary`).

    Raises:
        InvalidArgument: an unknown ``path`` or ``format``, or ``max_tokens`` < 1.
        MissingDependency: parquet without pyarrow.
        RunDirError: a recorded request is missing or does not match its hash.
    """
    check_choice(path, _PATHS, "path")
    dirs = [_open(r) for r in run_dirs]
    fmt = format or ("parquet" if str(out).endswith(".parquet") else "jsonl")
    check_choice(fmt, _FORMATS, "format")
    if max_tokens is not None and (
        isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
    ):
        raise fail("an integer >= 1 or None", "max_tokens", max_tokens)
    selected: list[SFTRecord] = []
    if path in ("parallel", "both"):
        selected += parallel_records(dirs, top_k=top_k, task=task, prompts=prompts)
    if path in ("evolutionary", "both"):
        selected += evolutionary_records(
            dirs, task=task, prompts=prompts, leaderboards=leaderboards
        )
    records, duplicates, over_limit, longest = _unique_within(selected, max_tokens, count_tokens)
    verdicts: tuple[StepVerdict, ...] = ()
    if judge is not None:
        from openmle.search._runs.sft_judge import judge_sft_records

        judged = judge_sft_records(
            records, judge, concurrency=judge_concurrency, on_error=judge_on_error,
            context=selected,
        )  # fmt: skip
        verdicts = judged.verdicts
        records = list(judged.kept)
        longest = max((count_tokens(r.messages) for r in records), default=0)
    _write_records(records, Path(out), fmt)
    summary = SFTExportSummary(
        selected=len(selected), written=len(records), duplicates=duplicates,
        over_limit=over_limit, max_tokens=max_tokens, longest=longest,
        judged=len(verdicts), judge_dropped=sum(not v.keep for v in verdicts),
        judge_errors=sum(v.error is not None for v in verdicts), verdicts=verdicts,
    )  # fmt: skip
    return SFTExport(records, summary)


def _unique_within(
    selected: Sequence[SFTRecord],
    max_tokens: int | None,
    count_tokens: Callable[[Sequence[Message]], int],
) -> tuple[list[SFTRecord], int, int, int]:
    """``selected`` without repeated nodes (the first kept) and without records over
    ``max_tokens``: the records, the duplicates and over-long ones left out, the longest kept.
    """
    seen: set[tuple[str, str, tuple[Message, ...]]] = set()
    records: list[SFTRecord] = []
    duplicates = over_limit = longest = 0
    for rec in selected:
        key = (rec.run_id, rec.node_id, rec.messages)
        if key in seen:
            duplicates += 1
            continue
        seen.add(key)
        n = count_tokens(rec.messages)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise fail("an integer >= 0 from count_tokens", "count_tokens", n)
        if max_tokens is not None and n > max_tokens:
            over_limit += 1
            continue
        longest = max(longest, n)
        records.append(rec)
    return records, duplicates, over_limit, longest


def _write_records(records: Sequence[SFTRecord], dest: Path, fmt: str) -> None:
    """``records`` to ``dest`` as parquet or JSONL (the parent directory made)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        _write_parquet(records, dest)
        return
    with dest.open("w") as f:
        for r in records:
            f.write(json.dumps(r.to_dict(), sort_keys=True, allow_nan=False) + "\n")


def read_sft_jsonl(path: str | Path) -> list[SFTRecord]:
    """Records from a JSONL file written by :func:`export_sft`."""
    lines = Path(path).read_text().splitlines()
    return [SFTRecord.from_dict(json.loads(x)) for x in lines if x.strip()]
