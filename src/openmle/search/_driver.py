"""The async driver: N expansions in flight over one :class:`SearchCore`, steady state.

A new expansion starts as soon as one finishes (no generation barrier), up to ``workers`` at a
time, each holding a token of a :class:`anyio.CapacityLimiter` (pass your own to share one cap
across several searches). An expansion asks the model for a program, runs it in the sandbox on
the validation split and hands the result to the core. Every core call is journalled before
the next await, so the run directory replays to exactly this state.

``ordered=True`` makes a concurrent search deterministic: results are committed in step order
and step ``s`` is proposed only after steps ``< s - workers + 1`` are committed, so what each
proposal sees does not depend on timing. With a deterministic model and sandbox, an ordered
run (or any run with one worker) gives the same journal however it is interrupted and resumed.
Unordered runs (the default) keep every worker busy and still never lose or duplicate a node.

Departures from the released system (reference 5.2, 5.11; peers: OpenEvolve's worker pool):
no generation barrier, no global lock held across model or sandbox calls, no attempt-id gaps
after a crash (in-flight steps are re-run with their journalled proposal), and a model or
sandbox failure becomes an ``INFRA_ERROR`` node after bounded retries instead of killing the
worker.

Failures of the harness never kill the search. Any exception from ``Sandbox.run`` or from the
model (not only :class:`~openmle.errors.SandboxError` / :class:`~openmle.errors.ModelError`:
a ``RecursionError``, a ``JSONDecodeError``, anything but cancellation and
``KeyboardInterrupt``; but a :class:`~openmle.errors.ModelAuthError` or
:class:`~openmle.errors.ModelNotFoundError`, which no retry can fix, stops the search at once
with that one error, the step left pending for ``resume``) is retried like an infrastructure
failure and then committed as that
step's ``INFRA_ERROR`` node, with the error type and a truncated message in its ``detail``; a
resumed run therefore moves past it instead of re-running a step that crashes. After
``SearchConfig.max_infra_errors`` consecutive ``INFRA_ERROR`` nodes in one session the search
stops with one :class:`~openmle.errors.BackendError` (steps still in flight stay pending and
are re-run by ``resume``). A program that cannot be encoded as UTF-8 (a lone surrogate in the
model's code) is not run: it is a ``RUNTIME_ERROR`` outcome. Token usage and cost the model
reports are checked (integers in [0, 1e9] tokens a step, a finite cost >= 0); invalid ones are
replaced by an estimate (characters / 4) or "unknown" and noted in the node's ``warnings``. The
wall-clock cap (``Budget.wall_s``) is a hard deadline for model calls whatever ``on_exhaust``
says: a call still running then is cancelled and its step journalled as cancelled (``wall_s``),
so the run ends on time and can be resumed with a larger budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, final

import anyio
import attrs
from anyio.abc import TaskGroup
from attrs import define, field, frozen

from openmle._protocols import OperatorModel, Sandbox, Selector
from openmle._types import (
    Job,
    ModelRequest,
    ModelResponse,
    Operator,
    Outcome,
    Resources,
    RunResult,
    Split,
    Usage,
)
from openmle.errors import BackendError, ModelAuthError, ModelNotFoundError
from openmle.search._board import Board
from openmle.search._budget import check_cost, check_usage
from openmle.search._loop import Evaluation, Node, Proposal, SearchCore
from openmle.search._prompts import (
    DeferringPromptBuilder,
    OperatorPrompts,
    PendingRequest,
    PromptBuilder,
    TaskInfo,
)
from openmle.search._routing import routed_model
from openmle.search._select import ThreeFactorSelector

__all__ = ["JobLimits", "Progress", "Recorder", "SearchResult", "default_selector"]


@final
@frozen(kw_only=True)
class Progress:
    """A snapshot for live displays.

    Args:
        steps_done: committed or cancelled steps; in_flight: expansions running.
        best_score: best selection score so far (None if none); best_node: its id.
        spent: totals from the ledger; fractions: share of each capped quantity used.
        last: the node just committed, if any.
    """

    steps_done: int
    in_flight: int
    best_score: float | None
    best_node: str | None
    spent: Mapping[str, float]
    fractions: Mapping[str, float]
    last: Node | None = None


@final
@frozen(kw_only=True)
class SearchResult:
    """How a search ended.

    Args:
        nodes: every node, in step order.
        best: the node with the best validation score (None when nothing succeeded).
        test_result: the best program's single run on the test split (None when skipped).
        stop_reason: the budget cap that ended the search (or ``"stopped"``).
        spent: ledger totals.
        run_dir: the run directory, when one was written.
    """

    nodes: tuple[Node, ...]
    best: Node | None
    test_result: RunResult | None
    stop_reason: str | None
    spent: Mapping[str, float]
    run_dir: Path | None = None

    @property
    def best_valid_score(self) -> float | None:
        """The best node's validation (selection) score."""
        return None if self.best is None else self.best.score

    @property
    def test_score(self) -> float | None:
        """The best program's test score, if graded."""
        return None if self.test_result is None else self.test_result.score


class Recorder(Protocol):
    """Where the driver journals core calls (a run directory, or nothing)."""

    def proposal(self, proposal: Proposal, rng_state: Mapping[str, Any]) -> None:
        """Journal a proposal and the generator state after it."""
        ...

    def node(self, node: Node, logs: str, *, request: ModelRequest | None = None) -> None:
        """Journal a committed node and store its program and full logs (and ``request``, the
        exact request the model was sent for it, when there was one).
        """
        ...

    def cancel(self, step: int, reason: str, *, elapsed_s: float = 0.0) -> None:
        """Journal a cancelled step (``elapsed_s``: run seconds across sessions when it was
        cancelled, so a resumed run's wall clock carries it over).
        """
        ...

    def final(self, node: Node, result: RunResult) -> None:
        """Journal the best node's test-split result."""
        ...


class _NullRecorder:
    def proposal(self, proposal: Proposal, rng_state: Mapping[str, Any]) -> None:
        pass

    def node(self, node: Node, logs: str, *, request: ModelRequest | None = None) -> None:
        pass

    def cancel(self, step: int, reason: str, *, elapsed_s: float = 0.0) -> None:
        pass

    def final(self, node: Node, result: RunResult) -> None:
        pass


def default_selector(higher_is_better: bool) -> Selector:
    """The three-factor selector with the released weights (1.0/0.4/0.25), temperature 1."""
    return ThreeFactorSelector(higher_is_better=higher_is_better)


@define(eq=False)
class _Driver:
    core: SearchCore
    model: OperatorModel
    sandbox: Sandbox
    task: TaskInfo
    prompts: PromptBuilder
    recorder: Recorder
    workers: int
    ordered: bool
    limiter: anyio.CapacityLimiter
    on_progress: Callable[[Progress], None] | None
    clock: Callable[[], float] = time.monotonic
    limits: JobLimits = field(factory=lambda: JobLimits())
    _t0: float = field(init=False, default=0.0)
    _lock: anyio.Lock = field(factory=anyio.Lock, init=False)
    _buffer: dict[int, tuple[Proposal, Evaluation, str]] = field(factory=dict, init=False)
    _scopes: dict[int, anyio.CancelScope] = field(factory=dict, init=False)
    _requests: dict[int, ModelRequest | PendingRequest] = field(factory=dict, init=False)
    _sent: dict[int, ModelRequest] = field(factory=dict, init=False)
    _tg: TaskGroup | None = field(default=None, init=False)
    _wall_base: float = field(default=0.0, init=False)
    _infra_streak: int = field(default=0, init=False)
    _aborted: str | None = field(default=None, init=False)

    # ------------------------------------------------------------------------------ lifecycle

    def elapsed(self) -> float:
        return self._wall_base + (self.clock() - self._t0)

    async def run(self, requeue: Sequence[tuple[Proposal, ModelRequest | PendingRequest]]) -> None:
        self._t0 = self.clock()
        self._wall_base = self.core.last_elapsed_s
        self.core.ledger.wall_offset_s = self._wall_base
        async with anyio.create_task_group() as outer:
            outer.start_soon(self._ticker)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for p, request in requeue:
                    self._requests[p.step] = request
                    self._start(p)
                async with self._lock:
                    self._fill()
            outer.cancel_scope.cancel()
        self._tick()
        if self._aborted is not None:
            raise BackendError(self._aborted)

    async def _ticker(self) -> None:
        while True:
            await anyio.sleep(0.25)
            self._tick()

    def _tick(self) -> None:
        self.core.ledger.wall_now_s = self.clock() - self._t0
        if self.core.budget.on_exhaust == "cancel" and self.core.ledger.hard_exhausted():
            for scope in self._scopes.values():
                scope.cancel()
        self._progress(None)

    def _progress(self, last: Node | None) -> None:
        if self.on_progress is None:
            return
        best = self.core.best()
        self.on_progress(
            Progress(
                steps_done=self.core.steps_done,
                in_flight=self.core.in_flight,
                best_score=None if best is None else best.score,
                best_node=None if best is None else best.node_id,
                spent=self.core.ledger.to_dict(),
                fractions=self.core.ledger.fractions(),
                last=last,
            )
        )

    def _may_propose(self) -> bool:
        core = self.core
        if self.ordered:
            return core.next_step < core.committed_prefix + self.workers
        return core.in_flight < self.workers

    def _fill(self) -> None:
        """Propose and start expansions while a worker slot is free (call under the lock)."""
        self.core.ledger.wall_now_s = self.clock() - self._t0
        while self._may_propose():
            proposal = self.core.propose()
            if proposal is None:
                return
            self.recorder.proposal(proposal, self.core.rng_state())
            self.prepare(proposal)
            self._start(proposal)

    def _start(self, proposal: Proposal) -> None:
        if self._tg is None:
            raise AssertionError("internal invariant broken: self._tg is not None")
        scope = anyio.CancelScope()
        self._scopes[proposal.step] = scope
        self._tg.start_soon(self._expand, proposal, scope)

    # ------------------------------------------------------------------------------ expansion

    def prepare(self, proposal: Proposal) -> ModelRequest | PendingRequest:
        """Build the proposal's request from the state *at proposal time* (kept until run).

        Building it here, not when a worker picks it up, keeps the prompt independent of
        timing; a resumed run rebuilds it at the same point of the journal. A request that
        waits for node summaries (:class:`PendingRequest`) is resolved by the worker.
        """
        parents = [self.core.nodes[p] for p in proposal.parent_ids]
        left = None
        if self.core.budget.wall_s is not None:
            left = max(1.0, self.core.budget.wall_s - self.core.ledger.wall_s)
        request = _build_request(
            self.prompts,
            proposal,
            parents,
            remaining(self.task, self.core, proposal),
            board=self.core.board,
            time_left_s=left,
        )
        self._requests[proposal.step] = request
        return request

    def _code_of(self, node_id: str) -> str | None:
        node = self.core.nodes.get(node_id)
        return None if node is None else node.code

    async def _expand(self, proposal: Proposal, scope: anyio.CancelScope) -> None:
        evaluation: tuple[Evaluation, str] | None = None
        with scope:
            async with self.limiter:
                evaluation = await self._evaluate(proposal)
        async with self._lock:
            self._scopes.pop(proposal.step, None)
            if self._aborted is not None:
                return  # left pending: a resumed run re-runs it
            if evaluation is None:  # cancelled by the budget (or the wall-clock deadline)
                self._sent.pop(proposal.step, None)
                self.core.ledger.wall_now_s = self.clock() - self._t0
                self.core.cancel(proposal.step)
                self.recorder.cancel(
                    proposal.step,
                    self.core.ledger.hard_exhausted() or "cancelled",
                    elapsed_s=self.elapsed(),
                )
                self._flush()
            else:
                self._buffer[proposal.step] = (proposal, *evaluation)
                self._flush()
            self._fill()

    def _flush(self) -> None:
        """Commit buffered evaluations (in step order when ``ordered``)."""
        while self._buffer:
            if self.ordered:
                step = self.core.committed_prefix
                if step not in self._buffer:
                    return
            else:
                step = next(iter(self._buffer))
            proposal, evaluation, logs = self._buffer.pop(step)
            node = self.core.commit(proposal, evaluation, elapsed_s=self.elapsed())
            self.recorder.node(node, logs, request=self._sent.pop(step, None))
            self._progress(node)
            self._count_infra(node)
            if self._aborted is not None:
                return
            if self.core.budget.on_exhaust == "cancel" and self.core.ledger.hard_exhausted():
                for scope in self._scopes.values():
                    scope.cancel()
            if self.ordered:
                self._fill()

    def _count_infra(self, node: Node) -> None:
        """Stop the search after ``max_infra_errors`` consecutive INFRA_ERROR nodes."""
        if node.outcome is not Outcome.INFRA_ERROR:
            self._infra_streak = 0
            return
        self._infra_streak += 1
        limit = self.core.config.max_infra_errors
        if limit and self._infra_streak >= limit:
            self._aborted = (
                f"the search stopped after {self._infra_streak} consecutive infrastructure "
                f"errors (SearchConfig.max_infra_errors={limit}); the last, at node "
                f"{node.node_id}: {node.detail[:300]}. Fix the sandbox or model service, then "
                "continue the run with `openmle resume` (the failed steps stay recorded)"
            )
            self.core.stop("infra_errors")
            for scope in self._scopes.values():
                scope.cancel()

    def _model_time_left(self) -> float | None:
        """Seconds until the wall-clock cap (None when uncapped): model calls end there."""
        cap = self.core.budget.wall_s
        return None if cap is None else max(0.0, cap - self.elapsed())

    def _price_model(self, answered: str, operator: Operator | None = None) -> str:
        """The model id the price table should price: the one the user asked for (with an
        :class:`~openmle.search.OperatorRouter`, the one routed for ``operator``).
        """
        return _model_id(routed_model(self.model, operator)) or answered

    def _priced(self, cost: float | None, model_id: str, usage: Usage) -> float | None:
        """``cost``, or when it is unknown, ``usage`` priced as ``model_id`` by the budget's
        price table (None when it has no price for it): each model at its own price.
        """
        prices = self.core.budget.prices
        if cost is not None or prices is None or not model_id:
            return cost
        return prices.cost(model_id, usage)

    def _summary_charge(
        self,
        pending: PendingRequest,
        request: ModelRequest,
        usage: Usage,
        cost: float | None,
        warnings: list[str],
    ) -> tuple[Usage, float | None]:
        """The trusted usage and cost of the summary calls behind ``request``, priced as the
        summary model when it did not report its cost.
        """
        usage, cost = _trusted(usage, cost, request, "", warnings, "summary")
        return usage, self._priced(cost, _model_id(pending.store.model), usage)

    def _answer_charge(
        self,
        answered: str,
        request: ModelRequest,
        usage: Usage,
        cost: float | None,
        summary_cost: float | None,
    ) -> tuple[str, float | None]:
        """The id to price the answer as, and its cost: priced here when summary calls were
        made too (each model at its own price), else left to the loop's price table.
        """
        price_model = self._price_model(answered, request.operator)
        if summary_cost == 0.0:  # no summary call: the loop prices the step's tokens
            return price_model, cost
        return price_model, self._priced(cost, price_model, usage)

    async def _evaluate(self, proposal: Proposal) -> tuple[Evaluation, str] | None:
        t0 = self.clock()
        pending = self._requests.pop(proposal.step, None) or self.prepare(proposal)
        summary_usage = Usage()
        summary_cost: float | None = 0.0  # no summary call: nothing to add
        warnings: list[str] = []
        m0 = self.clock()
        response: ModelResponse | None = None
        error = ""
        with anyio.move_on_after(self._model_time_left()) as deadline:
            if isinstance(pending, PendingRequest):
                try:
                    request, summary_usage, summary_cost = await pending.resolve(self._code_of)
                except Exception as exc:
                    return self._infra(f"node summaries failed: {_describe_exc(exc)}", t0, m0)
                summary_usage, summary_cost = self._summary_charge(
                    pending, request, summary_usage, summary_cost, warnings
                )
            else:
                request = pending
            self._sent[proposal.step] = request  # what the model sees: recorded with the node
            for attempt in range(self.core.config.retries + 1):
                try:
                    answer = await self.model.complete(request)
                    if not isinstance(answer, ModelResponse) or not isinstance(answer.text, str):
                        raise TypeError(f"the model returned {type(answer).__name__}")
                    response = answer
                    break
                except (ModelAuthError, ModelNotFoundError):
                    # A revoked key or a removed model: no retry or later step can succeed,
                    # so the search stops with this error (the step stays pending: resume).
                    raise
                except Exception as exc:  # ModelError, and whatever a broken client raises
                    error = _describe_exc(exc)
                    if attempt < self.core.config.retries:
                        await anyio.sleep(self.core.config.retry_backoff_s * 2**attempt)
        if deadline.cancelled_caught:
            return None  # the wall-clock cap: journalled as a cancelled step
        model_s = self.clock() - m0
        if response is None:
            return self._infra(
                f"model failed after retries: {error}",
                t0,
                m0,
                usage=summary_usage,
                cost=summary_cost or None,
                warnings=warnings,
            )
        usage, cost = _trusted(
            response.usage, response.cost_usd, request, response.text, warnings, "model"
        )
        answered = response.model if isinstance(response.model, str) else repr(response.model)
        price_model, cost = self._answer_charge(answered[:200], request, usage, cost, summary_cost)
        try:
            plan, code = self.prompts.parse(response.text)
        except Exception as exc:
            return self._infra(
                f"the model's answer could not be parsed: {_describe_exc(exc)}",
                t0,
                m0,
                usage=usage + summary_usage,
                cost=_add_costs(cost, summary_cost),
                warnings=warnings,
            )
        code = code or ""
        unencodable = _unencodable(code)
        if unencodable is not None:
            code = code.encode("utf-8", "backslashreplace").decode("utf-8")
            result = RunResult(
                outcome=Outcome.RUNTIME_ERROR,
                error_signature="UnicodeEncodeError: program is not valid UTF-8",
                detail=f"the program was not run: {unencodable}",
                logs=f"UnicodeEncodeError: {unencodable}\n",
            )
        elif not code.strip():
            result = RunResult(
                outcome=Outcome.MISSING_CODE,
                error_signature="missing_code",
                detail="the response held no program",
            )
        else:
            result = await self._run_job(code, proposal)
        plan = plan.encode("utf-8", "backslashreplace").decode("utf-8")
        ev = Evaluation(
            code=code,
            plan=plan,
            result=result,
            usage=usage + summary_usage,
            model=answered[:200],
            price_model=price_model,
            model_s=model_s,
            wall_s=self.clock() - t0,
            cost_usd=_add_costs(cost, summary_cost),
            warnings=tuple(warnings),
            priors_shown=_priors_shown(request),
            gpus=float(_leased_gpus(self.limits.resources)),
        )
        return ev, result.logs

    def _infra(
        self,
        detail: str,
        t0: float,
        m0: float,
        *,
        usage: Usage | None = None,
        cost: float | None = None,
        warnings: Sequence[str] = (),
    ) -> tuple[Evaluation, str]:
        result = RunResult.infra_error(detail)
        ev = Evaluation(
            code="",
            result=result,
            usage=usage or Usage(),
            model_s=self.clock() - m0,
            wall_s=self.clock() - t0,
            cost_usd=cost,
            price_model=self._price_model(""),
            warnings=tuple(warnings),
        )
        return ev, result.logs

    async def _run_job(self, code: str, proposal: Proposal) -> RunResult:
        job = Job(
            code=code,
            task=self.task.name,
            split=Split.VALID,
            timeout_s=self.limits.timeout(self.core.config.timeout_s),
            resources=self.limits.resources,
            name=proposal.node_id,
        )
        runtime = 0.0
        queue = 0.0
        result = RunResult.infra_error("not run")
        for attempt in range(self.core.config.retries + 1):
            result = await _safe_run(self.sandbox, job)
            runtime += result.runtime_s
            queue += result.queue_s
            if not result.outcome.is_infra:
                break
            if attempt < self.core.config.retries:
                await anyio.sleep(self.core.config.retry_backoff_s * 2**attempt)
        if runtime != result.runtime_s or queue != result.queue_s:
            d = result.to_dict()
            d.update(runtime_s=runtime, queue_s=queue)
            result = RunResult.from_dict(d)
        return result

    async def final(self) -> tuple[Node, RunResult] | None:
        best = self.core.best()
        if best is None:
            return None
        job = Job(
            code=best.code,
            task=self.task.name,
            split=Split.TEST,
            timeout_s=self.limits.timeout(self.core.config.timeout_s),
            resources=self.limits.resources,
            name=f"{best.node_id}-test",
        )
        result = await _safe_run(self.sandbox, job)
        self.recorder.final(best, result)
        return best, result


_MESSAGE_CHARS = 500


def _describe_exc(exc: BaseException) -> str:
    """``Type: message``, the message truncated (and safe to journal)."""
    try:
        text = str(exc)
    except Exception:  # a hostile __str__
        text = "<unprintable>"
    if len(text) > _MESSAGE_CHARS:
        text = text[:_MESSAGE_CHARS] + f"... [{len(text) - _MESSAGE_CHARS} characters dropped]"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"{type(exc).__name__}: {text}"


async def _safe_run(sandbox: Sandbox, job: Job) -> RunResult:
    """``sandbox.run(job)``, with any exception (cancellation and interrupts excepted) or a
    result of the wrong split or type turned into an ``INFRA_ERROR`` result.
    """
    try:
        result = await sandbox.run(job)
    except Exception as exc:
        return RunResult.infra_error(f"sandbox raised {_describe_exc(exc)}", split=job.split)
    if not isinstance(result, RunResult):
        return RunResult.infra_error(
            f"sandbox returned a {type(result).__name__}, not a RunResult", split=job.split
        )
    if result.split is not job.split:
        return RunResult.infra_error(
            f"sandbox returned a result for split {result.split.value!r}, not {job.split.value!r}",
            split=job.split,
        )
    return result


def _leased_gpus(resources: Resources) -> int:
    """How many GPUs a job with ``resources`` leases (explicit ids win over the count)."""
    return len(resources.gpu_ids) if resources.gpu_ids else resources.gpus


def _priors_shown(request: ModelRequest) -> tuple[str, ...]:
    """The prior ids the request's metadata says its prompt showed (strings only)."""
    shown = request.metadata.get("priors_shown")
    if not isinstance(shown, list | tuple):
        return ()
    return tuple(str(x)[:200] for x in shown if isinstance(x, str))


def _unencodable(text: str) -> str | None:
    """Why ``text`` cannot be written as UTF-8 (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"character {text[exc.start]!a} at position {exc.start} cannot be encoded as UTF-8"
    return None


def _model_id(model: object) -> str:
    """The id a model names itself by (``model`` or ``model_id``), or ``""``."""
    asked = getattr(model, "model", None) or getattr(model, "model_id", None)
    return asked if isinstance(asked, str) else ""


def _estimate(text: str) -> int:
    return len(text) // 4


def _trusted(
    usage: object,
    cost: object,
    request: ModelRequest,
    answer: str,
    warnings: list[str],
    what: str,
) -> tuple[Usage, float | None]:
    """Reported usage and cost if valid, else an estimate (characters / 4) and unknown cost,
    with a warning appended.
    """
    bad = check_usage(usage)
    if bad is not None or not isinstance(usage, Usage):
        prompt = sum(len(m.content) for m in request.messages if isinstance(m.content, str))
        warnings.append(f"{what} usage ignored ({bad}); estimated as characters / 4")
        usage = Usage(prompt_tokens=prompt // 4, completion_tokens=_estimate(answer))
    bad = check_cost(cost)
    if bad is not None:
        warnings.append(f"{what} cost ignored ({bad})")
        cost = None
    if not (cost is None or isinstance(cost, int | float)):
        raise AssertionError(
            "internal invariant broken: cost is None or isinstance(cost, int | float)"
        )
    return usage, None if cost is None else float(cost)


def _add_costs(a: float | None, b: float | None) -> float | None:
    """The sum, or None when either part is unknown (the budget's price table then prices the
    step's whole token usage, rather than counting only the part whose cost is known).
    """
    return None if a is None or b is None else a + b


def remaining(task: TaskInfo, core: SearchCore, proposal: Proposal) -> TaskInfo:
    """``task`` with what the budget has left at ``proposal``: steps after this one (from the
    step number, so a resumed run computes the same) and sandbox seconds not yet spent.
    """
    budget = core.budget
    steps = None if budget.steps is None else max(0, budget.steps - proposal.step - 1)
    sandbox = None
    if budget.sandbox_s is not None:
        sandbox = max(0.0, budget.sandbox_s - core.ledger.sandbox_s)
    if steps == task.steps_left and sandbox == task.sandbox_left_s:
        return task
    return attrs.evolve(task, steps_left=steps, sandbox_left_s=sandbox)


def _build_request(
    prompts: PromptBuilder,
    proposal: Proposal,
    parents: Sequence[Node],
    task: TaskInfo,
    *,
    board: Board | None,
    time_left_s: float | None = None,
) -> ModelRequest | PendingRequest:
    """``prompts.defer(...)`` when the builder can wait for summaries, else ``build``."""
    if isinstance(prompts, DeferringPromptBuilder):
        return prompts.defer(proposal, parents, task, board=board, time_left_s=time_left_s)
    return prompts.build(proposal, parents, task, board=board, time_left_s=time_left_s)


def _with_summary_cache(prompts: PromptBuilder, run_dir: Path | None) -> PromptBuilder:
    """Give an :class:`OperatorPrompts` summary store without a cache the run's
    ``summaries/`` directory (so a resumed run reads the summaries it had).
    """
    store = prompts.summaries if isinstance(prompts, OperatorPrompts) else None
    if run_dir is not None and store is not None and store.cache_dir is None:
        store.cache_dir = Path(run_dir) / "summaries"
    return prompts


def _resolve(task: str) -> Any:
    from openmle.errors import OpenMLEError
    from openmle.gym import resolve_task

    try:
        return resolve_task(task)
    except (OpenMLEError, OSError):
        return None


@frozen(kw_only=True)
class JobLimits:
    """What every job of a search asks for: the task's resources and its per-run time limit
    (which caps ``SearchConfig.timeout_s``; None: no task limit).
    """

    resources: Resources = field(factory=Resources)
    time_limit_s: float | None = None

    def timeout(self, configured_s: float) -> float:
        """The job's wall-clock limit: the configured one, capped by the task's."""
        if self.time_limit_s is None:
            return configured_s
        return min(configured_s, self.time_limit_s)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (kept in the run manifest so a resumed run asks for the same)."""
        return {"resources": self.resources.to_dict(), "time_limit_s": self.time_limit_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobLimits:
        """Inverse of :meth:`to_dict`."""
        t = data.get("time_limit_s")
        return cls(
            resources=Resources.from_dict(data.get("resources") or {}),
            time_limit_s=None if t is None else float(t),
        )


def _job_limits(
    task: str, resources: Resources | None = None, time_limit_s: float | None = None
) -> JobLimits:
    """The limits for ``task``'s jobs: the explicit ones, else the task package's (resources
    and ``time_limit_s`` via ``openmle.gym``), else the defaults.
    """
    t = _resolve(task) if resources is None or time_limit_s is None else None
    if resources is None:
        resources = getattr(t, "resources", None)
        if not isinstance(resources, Resources):
            resources = Resources()
    if time_limit_s is None:
        limit = getattr(t, "time_limit_s", None)
        time_limit_s = float(limit) if isinstance(limit, int | float) else None
    return JobLimits(resources=resources, time_limit_s=time_limit_s)


async def _drive(
    core: SearchCore,
    *,
    model: OperatorModel,
    sandbox: Sandbox,
    task: TaskInfo,
    prompts: PromptBuilder,
    recorder: Recorder,
    workers: int,
    ordered: bool,
    limiter: anyio.CapacityLimiter | None,
    on_progress: Callable[[Progress], None] | None,
    final_test: bool,
    requeue: Sequence[tuple[Proposal, ModelRequest | PendingRequest]] = (),
    final_done: tuple[Node, RunResult] | None = None,
    run_dir: Path | None = None,
    limits: JobLimits | None = None,
) -> SearchResult:
    driver = _Driver(
        core=core,
        model=model,
        sandbox=sandbox,
        task=task,
        prompts=prompts,
        recorder=recorder,
        workers=workers,
        ordered=ordered,
        limiter=limiter or anyio.CapacityLimiter(workers),
        on_progress=on_progress,
        limits=limits or _job_limits(task.name),
    )
    await driver.run(requeue)
    final = final_done
    if final is None and final_test:
        final = await driver.final()
    nodes = tuple(sorted(core.nodes.values(), key=lambda n: n.step))
    return SearchResult(
        nodes=nodes,
        best=core.best(),
        test_result=None if final is None else final[1],
        stop_reason=core.exhausted(),
        spent=core.ledger.to_dict(),
        run_dir=run_dir,
    )
