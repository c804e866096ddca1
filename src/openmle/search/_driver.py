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
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, final

import anyio
from anyio.abc import TaskGroup
from attrs import define, field, frozen

from openmle._protocols import OperatorModel, Sandbox, Selector
from openmle._types import Job, ModelRequest, ModelResponse, Outcome, RunResult, Split, Usage
from openmle.errors import InvalidArgument, ModelError, SandboxError
from openmle.search._board import Board
from openmle.search._budget import Budget
from openmle.search._loop import Evaluation, Node, Proposal, SearchConfig, SearchCore
from openmle.search._prompts import (
    DeferringPromptBuilder,
    OperatorPrompts,
    PendingRequest,
    PromptBuilder,
    TaskInfo,
)
from openmle.search._select import ThreeFactorSelector

if TYPE_CHECKING:
    from openmle.search._rundir import RunDir

__all__ = ["Progress", "Recorder", "SearchResult", "arun_search", "run_search"]


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

    def node(self, node: Node, logs: str) -> None:
        """Journal a committed node and store its program and full logs."""
        ...

    def cancel(self, step: int, reason: str) -> None:
        """Journal a cancelled step."""
        ...

    def final(self, node: Node, result: RunResult) -> None:
        """Journal the best node's test-split result."""
        ...


class _NullRecorder:
    def proposal(self, proposal: Proposal, rng_state: Mapping[str, Any]) -> None:
        pass

    def node(self, node: Node, logs: str) -> None:
        pass

    def cancel(self, step: int, reason: str) -> None:
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
    _t0: float = field(init=False, default=0.0)
    _lock: anyio.Lock = field(factory=anyio.Lock, init=False)
    _buffer: dict[int, tuple[Proposal, Evaluation, str]] = field(factory=dict, init=False)
    _scopes: dict[int, anyio.CancelScope] = field(factory=dict, init=False)
    _requests: dict[int, ModelRequest | PendingRequest] = field(factory=dict, init=False)
    _tg: TaskGroup | None = field(default=None, init=False)
    _wall_base: float = field(default=0.0, init=False)

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
        assert self._tg is not None
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
            self.prompts, proposal, parents, self.task, board=self.core.board, time_left_s=left
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
            if evaluation is None:  # cancelled by the budget
                self.core.cancel(proposal.step)
                self.recorder.cancel(
                    proposal.step, self.core.ledger.hard_exhausted() or "cancelled"
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
            self.recorder.node(node, logs)
            self._progress(node)
            if self.core.budget.on_exhaust == "cancel" and self.core.ledger.hard_exhausted():
                for scope in self._scopes.values():
                    scope.cancel()
            if self.ordered:
                self._fill()

    async def _evaluate(self, proposal: Proposal) -> tuple[Evaluation, str]:
        t0 = self.clock()
        pending = self._requests.pop(proposal.step, None) or self.prepare(proposal)
        summary_usage = Usage()
        summary_cost: float | None = 0.0  # no summary call: nothing to add
        m0 = self.clock()
        if isinstance(pending, PendingRequest):
            request, summary_usage, summary_cost = await pending.resolve(self._code_of)
        else:
            request = pending
        response: ModelResponse | None = None
        error = ""
        for attempt in range(self.core.config.retries + 1):
            try:
                response = await self.model.complete(request)
                break
            except ModelError as exc:
                error = f"{type(exc).__name__}: {exc}"
                if attempt < self.core.config.retries:
                    await anyio.sleep(self.core.config.retry_backoff_s * 2**attempt)
        model_s = self.clock() - m0
        if response is None:
            result = RunResult.infra_error(f"model failed after retries: {error}")
            ev = Evaluation(
                code="",
                result=result,
                usage=summary_usage,
                model_s=model_s,
                wall_s=self.clock() - t0,
                cost_usd=summary_cost or None,
            )
            return ev, result.logs
        plan, code = self.prompts.parse(response.text)
        code = code or ""
        if not code.strip():
            result = RunResult(
                outcome=Outcome.MISSING_CODE,
                error_signature="missing_code",
                detail="the response held no program",
            )
        else:
            result = await self._run_job(code, proposal)
        ev = Evaluation(
            code=code,
            plan=plan,
            result=result,
            usage=response.usage + summary_usage,
            model=response.model,
            model_s=model_s,
            wall_s=self.clock() - t0,
            cost_usd=_add_costs(response.cost_usd, summary_cost),
        )
        return ev, result.logs

    async def _run_job(self, code: str, proposal: Proposal) -> RunResult:
        job = Job(
            code=code,
            task=self.task.name,
            split=Split.VALID,
            timeout_s=self.core.config.timeout_s,
            name=proposal.node_id,
        )
        runtime = 0.0
        queue = 0.0
        result = RunResult.infra_error("not run")
        for attempt in range(self.core.config.retries + 1):
            try:
                result = await self.sandbox.run(job)
            except SandboxError as exc:
                result = RunResult.infra_error(f"{type(exc).__name__}: {exc}")
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
            timeout_s=self.core.config.timeout_s,
            name=f"{best.node_id}-test",
        )
        try:
            result = await self.sandbox.run(job)
        except SandboxError as exc:
            result = RunResult.infra_error(f"{type(exc).__name__}: {exc}", split=Split.TEST)
        self.recorder.final(best, result)
        return best, result


def _add_costs(a: float | None, b: float | None) -> float | None:
    """The sum, or None when either part is unknown (the budget's price table then prices the
    step's whole token usage, rather than counting only the part whose cost is known)."""
    return None if a is None or b is None else a + b


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
    ``summaries/`` directory (so a resumed run reads the summaries it had)."""
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


def _higher_is_better(task: str) -> bool:
    """The task's metric direction from its package (True when it cannot be resolved)."""
    t = _resolve(task)
    return True if t is None else bool(t.meta.higher_is_better)


def _description(task: str) -> str:
    """The task's public description (empty when it cannot be resolved)."""
    t = _resolve(task)
    if t is None:
        return ""
    path = Path(t.public_dir(Split.VALID)) / "description.txt"
    return path.read_text() if path.exists() else ""


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


def _check_workers(workers: int) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgument(f"Expected an integer >= 1 but got workers={workers!r}")
    return workers


async def arun_search(
    task: str,
    *,
    model: OperatorModel,
    sandbox: Sandbox,
    budget: Budget,
    selector: Selector | None = None,
    config: SearchConfig | None = None,
    workers: int = 2,
    ordered: bool = False,
    run_dir: str | Path | None = None,
    higher_is_better: bool | None = None,
    description: str | None = None,
    prompts: PromptBuilder | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    final_test: bool = True,
    manifest_extra: Mapping[str, Any] | None = None,
) -> SearchResult:
    """Search ``task`` with Draft/Improve/Debug/Crossover until a budget cap is reached.

    Args:
        task: a bundled task name or a task package path, passed to the sandbox in each job.
        model: writes the programs. sandbox: runs and grades them (validation split during
            search, test split once for the chosen program).
        budget: the caps (at least one).
        selector: chooses parents; default: :func:`default_selector`.
        config: expansion settings (phases, ratios, seed, per-run timeout).
        workers: expansions in flight at once (>= 1).
        ordered: commit in step order so a concurrent run is deterministic (see module doc).
        run_dir: where to write the journal, programs, logs and manifest (None: nothing written).
            It must not exist or be empty; use :func:`aresume_search` to continue one.
        higher_is_better: metric direction; default: from the task's metadata via
            ``openmle.gym``, else True.
        description: the task description shown in prompts; default: the task's public
            ``description.txt`` via ``openmle.gym``.
        prompts: builds requests and parses responses; default :class:`OperatorPrompts`
            (``openmle.operators`` prompts with operator-conditioned memory).
        limiter: a shared limiter capping concurrent expansions (default: ``workers`` tokens).
        on_progress: called with a :class:`Progress` after every node and periodically.
        final_test: grade the chosen program once on the test split at the end.
        manifest_extra: extra JSON-ready entries for the manifest (e.g. how to rebuild the model).

    Returns:
        The nodes, the best one by validation score, and its test result.

    Raises:
        InvalidArgument: bad arguments or a non-empty ``run_dir``.
        RunDirError: the run directory cannot be written.
    """
    cfg = config or SearchConfig()
    workers = _check_workers(workers)
    hib = _higher_is_better(task) if higher_is_better is None else bool(higher_is_better)
    info = TaskInfo(
        name=task,
        description=_description(task) if description is None else description,
        higher_is_better=hib,
        timeout_s=cfg.timeout_s,
    )
    sel = selector or default_selector(hib)
    core = SearchCore(config=cfg, selector=sel, budget=budget, higher_is_better=hib)
    recorder: Recorder = _NullRecorder()
    path: Path | None = None
    rd: RunDir | None = None
    if run_dir is not None:
        from openmle.search._rundir import RunDir

        rd = RunDir.create(
            run_dir,
            task=info,
            config=cfg,
            budget=budget,
            workers=workers,
            ordered=ordered,
            selector=sel,
            model=model,
            sandbox=sandbox,
            prompts=prompts or OperatorPrompts(),
            extra=manifest_extra or {},
        )
        recorder = rd
        path = rd.path
    builder = _with_summary_cache(prompts or OperatorPrompts(), path)
    try:
        result = await _drive(
            core,
            model=model,
            sandbox=sandbox,
            task=info,
            prompts=builder,
            recorder=recorder,
            workers=workers,
            ordered=ordered,
            limiter=limiter,
            on_progress=on_progress,
            final_test=final_test,
            run_dir=path,
        )
        if rd is not None:
            rd.session("end", stop_reason=result.stop_reason)
        return result
    finally:
        if rd is not None:
            rd.close()


def run_search(
    task: str,
    *,
    model: OperatorModel,
    sandbox: Sandbox,
    budget: Budget,
    selector: Selector | None = None,
    config: SearchConfig | None = None,
    workers: int = 2,
    ordered: bool = False,
    run_dir: str | Path | None = None,
    higher_is_better: bool | None = None,
    description: str | None = None,
    prompts: PromptBuilder | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    final_test: bool = True,
    manifest_extra: Mapping[str, Any] | None = None,
) -> SearchResult:
    """Blocking twin of :func:`arun_search` (same arguments but ``limiter``); runs its own
    event loop, so call it from synchronous code only."""
    return anyio.run(
        partial(
            arun_search,
            task,
            model=model,
            sandbox=sandbox,
            budget=budget,
            selector=selector,
            config=config,
            workers=workers,
            ordered=ordered,
            run_dir=run_dir,
            higher_is_better=higher_is_better,
            description=description,
            prompts=prompts,
            on_progress=on_progress,
            final_test=final_test,
            manifest_extra=manifest_extra,
        )
    )
