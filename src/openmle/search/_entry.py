"""The four entry points (:func:`run_search`, :func:`arun_search`, :func:`resume_search`,
:func:`aresume_search`) and task resolution.

Layering: this module sits on top of the driver (:mod:`openmle.search._driver`, the async
expansion loop) and the run directory (:mod:`openmle.search._rundir`, persistence only); neither
of them imports it.

Preflight: before anything is written, an entry point checks its arguments (the sandbox, the
model, the prompt builder, workers) and resolves the task's metric direction:

1. ``higher_is_better=`` when the caller passes it;
2. else the task package, when :func:`openmle.gym.resolve_task` can resolve the task here;
3. else the sandbox, when it has the optional method ``async task_meta(task) -> TaskMeta | None``
   (a remote job service knows its tasks; ``None`` means "cannot tell"; a plain function works
   too) or a ``task_meta`` mapping of task to ``TaskMeta`` (as ``JobServiceSandbox`` has);
4. else the search refuses to start (:class:`~openmle.errors.InvalidArgument` naming
   ``higher_is_better``): optimising in a guessed direction would maximise an error metric.

Errors: a failure inside the search's task groups reaches the caller as the one underlying
exception (an :class:`~openmle.errors.OpenMLEError` such as a ``RunDirError``, or whatever a
user callback raised), never an ``ExceptionGroup``; when several errors happened at once the
caller gets :class:`~openmle.errors.MultipleErrors`, which carries them.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import logging
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, NoReturn

import anyio
import attrs

from openmle._protocols import OperatorModel, Sandbox, Selector
from openmle._types import ModelRequest, Resources, Split, TaskMeta
from openmle.errors import (
    InvalidArgument,
    InvalidArgumentType,
    MultipleErrors,
    OpenMLEError,
    _leaves,
)
from openmle.search._budget import Budget
from openmle.search._driver import (
    JobLimits,
    Progress,
    Recorder,
    SearchResult,
    _build_request,
    _drive,
    _job_limits,
    _NullRecorder,
    _with_summary_cache,
    default_selector,
    remaining,
)
from openmle.search._loop import Proposal, SearchConfig, SearchCore
from openmle.search._priors import check_resume_priors, priors_for_run
from openmle.search._prompts import OperatorPrompts, PendingRequest, PromptBuilder, TaskInfo
from openmle.search._rundir import RunDir, check_new_run_dir

log = logging.getLogger("openmle.search")

__all__ = ["aresume_search", "arun_search", "resolve_task_meta", "resume_search", "run_search"]


# ---------------------------------------------------------------------------------- errors


def _one_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception the caller should see for ``group``: its only leaf, the first leaf that is
    not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``), the first leaf when every leaf
    is the same error (several workers met one cause), or :class:`MultipleErrors`.
    """
    leaves = _leaves(group)
    if len(leaves) == 1:
        return leaves[0]
    for exc in leaves:
        if not isinstance(exc, Exception):
            return exc
    if len({(type(exc), str(exc)) for exc in leaves}) == 1:
        return leaves[0]  # several workers met the same error: one cause
    return MultipleErrors(group)


def _writing(rd: RunDir | None) -> contextlib.AbstractAsyncContextManager[None]:
    """Journal writes off the event loop while the search runs (nothing without a run dir)."""
    return contextlib.nullcontext() if rd is None else rd.writing()


def _raise_one(group: BaseExceptionGroup[BaseException]) -> NoReturn:
    raise _one_error(group)


# ---------------------------------------------------------------------------------- preflight


def _local_task(task: str) -> tuple[Any, str | None]:
    """``(task, None)`` when :func:`openmle.gym.resolve_task` resolves it here, else
    ``(None, why)``.
    """
    from openmle.gym import resolve_task

    try:
        return resolve_task(task), None
    except (OpenMLEError, OSError) as exc:
        return None, str(exc)


async def _sandbox_task_meta(sandbox: object, task: str) -> tuple[TaskMeta | None, str | None]:
    """What the sandbox's optional ``task_meta(task)`` says (None when it has none or cannot
    tell), and why not.
    """
    hook = getattr(sandbox, "task_meta", None)
    if isinstance(hook, Mapping):  # a table by task (JobServiceSandbox.task_meta)
        found = hook.get(task)
        if found is None:
            return None, f"the sandbox's task_meta table has no entry for {task!r}"
        hook = lambda _: found  # noqa: E731
    if hook is None or not callable(hook):
        return None, f"the sandbox ({type(sandbox).__name__}) has no task_meta(task) method"
    try:
        answer = hook(task)
        if inspect.isawaitable(answer):
            answer = await answer
    except (OpenMLEError, OSError) as exc:
        return None, f"the sandbox's task_meta({task!r}) failed: {type(exc).__name__}: {exc}"
    if answer is None:
        return None, f"the sandbox's task_meta({task!r}) does not know the task"
    if not isinstance(answer, TaskMeta):
        raise InvalidArgumentType(
            f"{type(sandbox).__name__}.task_meta({task!r}) returned a {type(answer).__name__}; "
            "it must return an openmle.TaskMeta or None"
        )
    return answer, None


async def resolve_task_meta(task: str, sandbox: object) -> TaskMeta:
    """The metric direction (and bounds) of ``task``: from its package when it resolves here,
    else from the sandbox's optional ``task_meta(task)`` method.

    Raises:
        InvalidArgument: neither can say; the message gives both reasons and says to pass
            ``higher_is_better`` (CLI: fix ``--task``, or use a sandbox that knows the task).
    """
    local, why_local = _local_task(task)
    if local is not None:
        meta = local.meta
        if not isinstance(meta, TaskMeta):
            raise TypeError(f"internal invariant broken: Task.meta is a {type(meta).__name__}")
        return meta
    meta, why_sandbox = await _sandbox_task_meta(sandbox, task)
    if meta is not None:
        return meta
    raise InvalidArgument(
        f"cannot tell whether task={task!r} is maximised or minimised: {why_local}; and "
        f"{why_sandbox}. Fix the task name, or pass higher_is_better=True or False "
        "explicitly (never guessed: a wrong guess optimises the metric the wrong way)"
    )


def task_direction(task: str, sandbox: object) -> bool:
    """Blocking :func:`resolve_task_meta` for synchronous callers (the CLI): the direction."""
    meta: TaskMeta = anyio.run(resolve_task_meta, task, sandbox)
    return meta.higher_is_better


def _description(task: str) -> str:
    """The task's public description (empty when it cannot be resolved here)."""
    t, _ = _local_task(task)
    if t is None:
        return ""
    path = Path(t.public_dir(Split.VALID)) / "description.txt"
    return path.read_text() if path.exists() else ""


def _check_workers(workers: int) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InvalidArgument(f"Expected an integer >= 1 but got workers={workers!r}")
    return workers


async def preflight_sandbox(sandbox: object) -> None:
    """Call the sandbox's optional ``preflight()`` (an engine or service that cannot answer
    stops the search before its first step, not after a streak of infrastructure errors).

    Raises:
        SandboxError: what the sandbox's preflight raised (its message names the fix).
    """
    hook = getattr(sandbox, "preflight", None)
    if hook is None or not callable(hook):
        return
    answer = hook()
    if inspect.isawaitable(answer):
        await answer


def _check_parts(
    *,
    model: object,
    sandbox: object,
    prompts: object | None,
    selector: object | None,
    budget: object | None,
    config: object | None = None,
) -> None:
    """Type-check the parts of a search before anything is written."""
    checks: tuple[tuple[str, object, type, str], ...] = (
        ("sandbox", sandbox, Sandbox, "an openmle.Sandbox (async run(job) and aclose())"),
        ("model", model, OperatorModel, "an openmle.OperatorModel (async complete(request))"),
    )
    for name, value, kind, what in checks:
        if not isinstance(value, kind):
            raise InvalidArgumentType(
                f"Expected {what} but got {name}={value!r} (type={type(value).__name__})"
            )
    if selector is not None and not isinstance(selector, Selector):
        raise InvalidArgumentType(
            f"Expected an openmle.Selector (select(candidates, rng, k=...)) but got "
            f"selector={selector!r} (type={type(selector).__name__})"
        )
    if prompts is not None and not (
        callable(getattr(prompts, "build", None)) and callable(getattr(prompts, "parse", None))
    ):
        raise InvalidArgumentType(
            f"Expected a PromptBuilder (build(...) and parse(text)) but got prompts={prompts!r} "
            f"(type={type(prompts).__name__})"
        )
    if budget is not None and not isinstance(budget, Budget):
        raise InvalidArgumentType(
            f"Expected an openmle.search.Budget but got budget={budget!r} "
            f"(type={type(budget).__name__})"
        )
    if config is not None and not isinstance(config, SearchConfig):
        raise InvalidArgumentType(
            f"Expected an openmle.search.SearchConfig but got config={config!r} "
            f"(type={type(config).__name__})"
        )


# ---------------------------------------------------------------------------------- new runs


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
    resources: Resources | None = None,
    time_limit_s: float | None = None,
    priors: Any = None,
    retriever: Any = None,
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
        ordered: commit in step order so a concurrent run is deterministic (see the driver).
        run_dir: where to write the journal, programs, logs and manifest (None: nothing written).
            It must not exist, be empty, or hold a run with no committed step (that run is
            started over, with a warning); use :func:`aresume_search` to continue one.
        higher_is_better: metric direction; default: the task package's metadata (via
            ``openmle.gym``), else the sandbox's ``task_meta(task)`` method; when neither can
            say, the search refuses to start.
        description: the task description shown in prompts; default: the task's public
            ``description.txt`` via ``openmle.gym``.
        prompts: builds requests and parses responses; default :class:`OperatorPrompts`
            (``openmle.operators`` prompts with operator-conditioned memory).
        limiter: a shared limiter capping concurrent expansions (default: ``workers`` tokens).
        on_progress: called with a :class:`Progress` after every node and periodically.
        final_test: grade the chosen program once on the test split at the end.
        manifest_extra: extra JSON-ready entries for the manifest (e.g. how to rebuild the model).
        resources: what every job asks the sandbox for (CPUs, GPUs, memory); default: the
            task package's ``[resources]`` via ``openmle.gym``, else one CPU and no GPU.
        time_limit_s: the task's per-run limit, capping ``config.timeout_s`` for every job;
            default: the task package's ``time_limit_s``, else no cap.
        priors: a :class:`~openmle.priors.PriorLibrary` or the path of a library file: the
            priors retrieved for the task are shown to every Draft and Improve prompt (ids
            recorded per node as ``priors_shown``; the library's hash, the ids and the block in
            the manifest's ``extra.priors``). None: no priors.
        retriever: ranks the library's priors for the task (an
            :class:`~openmle.priors.Retriever`; default
            :class:`~openmle.priors.LexicalRetriever`).

    Returns:
        The nodes, the best one by validation score, and its test result.

    Raises:
        InvalidArgument: bad arguments, a task whose direction nobody can tell, or a
            ``run_dir`` holding committed steps. Raised before anything is written.
        RunDirError: the run directory cannot be written.
        MultipleErrors: several errors ended the search at once (each in ``exceptions``).
        OpenMLEError: otherwise the one error that ended the search, never an exception group.
    """
    cfg = config or SearchConfig()
    _check_parts(
        model=model,
        sandbox=sandbox,
        prompts=prompts,
        selector=selector,
        budget=budget,
        config=cfg,
    )
    workers = _check_workers(workers)
    await preflight_sandbox(sandbox)
    if higher_is_better is None:
        hib = (await resolve_task_meta(task, sandbox)).higher_is_better
    else:
        hib = bool(higher_is_better)
    limits = _job_limits(task, resources, time_limit_s)
    info = TaskInfo(
        name=task,
        description=_description(task) if description is None else description,
        higher_is_better=hib,
        timeout_s=limits.timeout(cfg.timeout_s),
    )
    extra: dict[str, Any] = {**(manifest_extra or {}), "job_limits": limits.to_dict()}
    if priors is not None:
        entry = priors_for_run(priors, retriever, task=task, description=info.description)
        info = attrs.evolve(info, priors=entry["block"], priors_shown=tuple(entry["shown"]))
        extra["priors"] = entry
    sel = selector or default_selector(hib)
    core = SearchCore(config=cfg, selector=sel, budget=budget, higher_is_better=hib)
    recorder: Recorder = _NullRecorder()
    path: Path | None = None
    rd: RunDir | None = None
    if run_dir is not None:
        check_new_run_dir(run_dir)
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
            extra=extra,
        )
        recorder = rd
        path = rd.path
    builder = _with_summary_cache(prompts or OperatorPrompts(), path)
    try:
        async with _writing(rd):
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
                limits=limits,
            )
            if rd is not None:
                rd.session("end", stop_reason=result.stop_reason)
        return result
    except BaseExceptionGroup as group:
        _raise_one(group)
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
    resources: Resources | None = None,
    time_limit_s: float | None = None,
    priors: Any = None,
    retriever: Any = None,
) -> SearchResult:
    """Blocking twin of :func:`arun_search` (same arguments but ``limiter``); runs its own
    event loop, so call it from synchronous code only.
    """
    return _blocking(
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
            resources=resources,
            time_limit_s=time_limit_s,
            priors=priors,
            retriever=retriever,
        )
    )


def _blocking(fn: Callable[[], Any]) -> SearchResult:
    try:
        result: SearchResult = anyio.run(fn)
    except BaseExceptionGroup as group:  # raised by the event loop's own machinery
        _raise_one(group)
    return result


# ---------------------------------------------------------------------------------- resume


async def aresume_search(
    run_dir: str | Path,
    *,
    model: OperatorModel,
    sandbox: Sandbox,
    selector: Selector | None = None,
    prompts: PromptBuilder | None = None,
    budget: Budget | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    final_test: bool = True,
    description: str | None = None,
    priors: Any = None,
) -> SearchResult:
    """Continue the search in ``run_dir`` after an interruption (including ``kill -9``).

    In-flight steps are re-run with their journalled proposal; the random state is the one
    journalled after the last proposal. Pass the same kind of model, sandbox and selector as
    the original run (the manifest records which were used). A run directory that holds no
    committed step is resumed from its beginning (logged as a warning on ``openmle.search``).

    Args:
        budget: a new budget (for example to extend a finished run); default: the manifest's.
        description: the task description the run started with, for tasks ``openmle.gym``
            cannot resolve (default: the task package's); it must match the manifest's hash.

    Returns:
        A :class:`~openmle.search.SearchResult`.

    Raises:
        InvalidArgument: bad arguments (raised before anything is written), or a
            ``description`` that differs from the one the run started with.
        RunDirError: not a run directory, or a damaged journal.
        MultipleErrors: several errors ended the search at once (each in ``exceptions``).
        OpenMLEError: otherwise the one error that ended the search, never an exception group.
    """
    _check_parts(model=model, sandbox=sandbox, prompts=prompts, selector=selector, budget=budget)
    rd = RunDir.open(run_dir)
    await preflight_sandbox(sandbox)
    if not rd.chained:
        warnings.warn(
            f"{rd.path} was written before the journal hash chain: it is resumed, but edits "
            "to its journal cannot be detected (new lines stay unchained)",
            UserWarning,
            stacklevel=2,
        )
    m = rd.manifest
    cfg = SearchConfig.from_dict(m["config"])
    bud = budget or Budget.from_dict(m["budget"])
    hib = bool(m["task"]["higher_is_better"])
    extra = m.get("extra", {})
    limits = (
        JobLimits.from_dict(extra["job_limits"])
        if "job_limits" in extra
        else _job_limits(m["task"]["name"])
    )
    if description is not None:
        want = m["task"].get("description_sha256")
        if want and hashlib.sha256(description.encode()).hexdigest() != want:
            raise InvalidArgument(
                f"the description given to resume {str(rd.path)!r} differs from the one the "
                "run started with; pass the original description"
            )
    recorded = extra.get("priors")
    check_resume_priors(str(rd.path), recorded, priors)
    info = TaskInfo(
        name=m["task"]["name"],
        description=_description(m["task"]["name"]) if description is None else description,
        higher_is_better=hib,
        timeout_s=limits.timeout(cfg.timeout_s),
    )
    if isinstance(recorded, Mapping):
        info = attrs.evolve(
            info,
            priors=str(recorded.get("block", "")),
            priors_shown=tuple(str(x) for x in recorded.get("shown", ())),
        )
    core = SearchCore(
        config=cfg, selector=selector or default_selector(hib), budget=bud, higher_is_better=hib
    )
    prompts = _with_summary_cache(prompts or OperatorPrompts(), rd.path)
    built: dict[int, ModelRequest | PendingRequest] = {}

    def build(p: Proposal) -> None:
        parents = [core.nodes[q] for q in p.parent_ids]
        built[p.step] = _build_request(
            prompts, p, parents, remaining(info, core, p), board=core.board
        )

    pending = rd.replay(core, on_proposal=build)
    if not core.nodes:
        log.warning("%s holds no committed step: the run is resumed from its beginning", rd.path)
    requeue = [(p, built[p.step]) for p in pending]
    done = rd.final_result()
    final_done = None
    if done is not None and not requeue and core.exhausted() is not None:
        final_done = (core.nodes[done[0]], done[1])
    rd.session("resume", requeued=[p.step for p in pending])
    try:
        async with rd.writing():
            result = await _drive(
                core,
                model=model,
                sandbox=sandbox,
                task=info,
                prompts=prompts,
                recorder=rd,
                workers=int(m["workers"]),
                ordered=bool(m["ordered"]),
                limiter=limiter,
                on_progress=on_progress,
                final_test=final_test,
                requeue=requeue,
                final_done=final_done,
                run_dir=rd.path,
                limits=limits,
            )
            rd.session("end", stop_reason=result.stop_reason)
        return result
    except BaseExceptionGroup as group:
        _raise_one(group)
    finally:
        rd.close()


def resume_search(
    run_dir: str | Path,
    *,
    model: OperatorModel,
    sandbox: Sandbox,
    selector: Selector | None = None,
    prompts: PromptBuilder | None = None,
    budget: Budget | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    final_test: bool = True,
    description: str | None = None,
    priors: Any = None,
) -> SearchResult:
    """Blocking twin of :func:`aresume_search` (same arguments but ``limiter``)."""
    return _blocking(
        partial(
            aresume_search,
            run_dir,
            model=model,
            sandbox=sandbox,
            selector=selector,
            prompts=prompts,
            budget=budget,
            on_progress=on_progress,
            final_test=final_test,
            description=description,
            priors=priors,
        )
    )
