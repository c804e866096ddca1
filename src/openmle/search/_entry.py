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
import os
import sys
import warnings
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TypeVar, final

import anyio
import attrs
from attrs import field, frozen

from openmle._exports import warn_deprecated
from openmle._protocols import OperatorModel, Sandbox, Selector
from openmle._types import ModelRequest, Resources, Split, TaskMeta, Usage
from openmle.errors import (
    InvalidArgument,
    InvalidArgumentType,
    MultipleErrors,
    OpenMLEError,
    _leaves,
)
from openmle.search._budget import Budget
from openmle.search._display import ProgressLine
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
from openmle.search._loop import Proposal, SearchConfig, SearchCore, island_base
from openmle.search._priors import SearchPriors, check_resume_priors
from openmle.search._prompts import OperatorPrompts, PendingRequest, PromptBuilder, TaskInfo
from openmle.search._routing import DEFAULT_ROUTE, OperatorRouter
from openmle.search._rundir import RunDir, check_new_run_dir
from openmle.search._tracking import TrackingRecorder, log_summary, tracking
from openmle.tracking import Tracker

log = logging.getLogger("openmle.search")

__all__ = [
    "ResumeSpec",
    "SearchSpec",
    "aresume_search",
    "arun_search",
    "resolve_task_meta",
    "resume_search",
    "run_search",
    "task_description",
    "task_direction",
]

_SpecT = TypeVar("_SpecT", "SearchSpec", "ResumeSpec")


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
    """Blocking :func:`resolve_task_meta` for synchronous callers (the CLI): the direction.

    Raises:
        InvalidArgument: as :func:`resolve_task_meta`.
    """
    meta: TaskMeta = anyio.run(resolve_task_meta, task, sandbox)
    return meta.higher_is_better


def task_description(task: str) -> str:
    """The task's public ``description.txt`` (validation split) as the search shows it when
    :attr:`SearchSpec.description` is None; empty when the task does not resolve here
    (:func:`openmle.gym.resolve_task`). What to retrieve priors for
    (:func:`openmle.priors.priors_for_search`).
    """
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


def _run_dir_arg(run_dir: object) -> str | Path:
    """``run_dir`` as given, when it is a path (a str or an ``os.PathLike``).

    Raises:
        InvalidArgumentType: anything else, naming ``run_dir``.
    """
    if isinstance(run_dir, str | Path):
        return run_dir
    if isinstance(run_dir, os.PathLike):
        return Path(run_dir)
    raise InvalidArgumentType(
        f"Expected a directory path (str or Path) but got run_dir={run_dir!r} "
        f"(type={type(run_dir).__name__})"
    )


def _check_parts(spec: SearchSpec | ResumeSpec) -> None:
    """Type-check the parts of a search or resume spec before anything is written (a
    :class:`ResumeSpec` has no ``config``).
    """
    model, sandbox, prompts = spec.model, spec.sandbox, spec.prompts
    selector, budget = spec.selector, spec.budget
    config = spec.config if isinstance(spec, SearchSpec) else None
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
    if isinstance(spec, SearchSpec) and not isinstance(spec.task, str):
        raise InvalidArgumentType(
            f"Expected a bundled task name or a task package path (a str) but got "
            f"task={spec.task!r} (type={type(spec.task).__name__}); pass str(path) for a Path"
        )
    if budget is None and isinstance(spec, SearchSpec):
        raise InvalidArgumentType(
            "Expected an openmle.search.Budget with at least one cap but got budget=None; pass "
            "e.g. budget=Budget(steps=20)"
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


def _priced_models(model: object, prompts: object) -> list[object]:
    """The models whose answers a price table may price: each routed model (an
    :class:`OperatorRouter`, also inside a wrapper's ``inner``) and the summary model.
    """
    out: list[object] = []
    for m in (model, getattr(getattr(prompts, "summaries", None), "model", None)):
        router = m if isinstance(m, OperatorRouter) else getattr(m, "inner", None)
        if isinstance(router, OperatorRouter):
            out += [*router.routes.values(), *([router.default] if router.default else [])]
        elif m is not None:
            out.append(getattr(m, "inner", m))
    return out


def _check_prices(model: object, prompts: object, budget: Budget | None) -> None:
    """Refuse, before anything runs, a ``usd`` cap whose price table (or the lack of one)
    cannot price a model that is known to need a price: a model with ``unpriced_models`` (a
    :class:`~openmle.backends.ReplayModel`: the recorded ids of answers without a cost). Other
    models may report their own cost, which is known only at run time.

    Raises:
        InvalidArgument: names the model id the table has no price for, and the fix.
    """
    if budget is None or budget.usd is None:
        return
    table = budget.prices
    probe = Usage(prompt_tokens=1, completion_tokens=1)
    for m in _priced_models(model, prompts):
        needed = getattr(m, "unpriced_models", ())
        for model_id in needed if isinstance(needed, tuple) else ():
            if table is None or table.cost(str(model_id), probe) is None:
                known = ", ".join(map(repr, sorted(table.prices if table else ()))) or "no model"
                raise InvalidArgument(
                    f"Budget.usd is set but Budget.prices has no price for model "
                    f"{model_id!r}, whose recorded answers carry no cost (it prices {known}); "
                    f"add {model_id!r} (or '*') to the price table (CLI: --prices FILE) or "
                    "drop the usd cap"
                )


# ---------------------------------------------------------------------------------- the specs


def _model_or_router(value: OperatorModel | Mapping[str, OperatorModel]) -> OperatorModel:
    """``value``, or the :class:`OperatorRouter` a mapping of operator name (and
    ``"default"``) to model describes.
    """
    if isinstance(value, Mapping):
        routes = {k: v for k, v in value.items() if k != DEFAULT_ROUTE}
        return OperatorRouter(routes=routes, default=value.get(DEFAULT_ROUTE))
    return value


def _config_or_default(value: SearchConfig | None) -> SearchConfig:
    return SearchConfig() if value is None else value


@final
@frozen(kw_only=True)
class SearchSpec:
    """What to search, with which model and sandbox, under which budget, prompts and priors:
    the one argument of :func:`run_search` and :func:`arun_search`.

    Args:
        task: a bundled task name or a task package path, passed to the sandbox in each job.
        model: writes the programs (an :class:`~openmle.OperatorModel`); several models in
            one run: an :class:`~openmle.search.OperatorRouter`, or a mapping of operator
            name (``"draft"``, ``"improve"``, ``"debug"``, ``"crossover"``, and ``"default"``
            for the rest) to model, which becomes one. The manifest records each routed
            model (``model.routes``). Node summaries use the model of
            ``prompts.summaries`` (``SummaryStore(model=...)``, recorded as
            ``summary_model``).
        sandbox: runs and grades them (validation split during search, test split once for
            the chosen program).
        budget: the caps (at least one).
        selector: chooses parents; default: :class:`ThreeFactorSelector` with the released
            weights (1.0/0.4/0.25), temperature 1, in the task's direction.
        config: expansion settings (phases, ratios, seed, per-run timeout); default
            ``SearchConfig()``.
        workers: expansions in flight at once (>= 1).
        ordered: commit in step order so a concurrent run is deterministic (see the driver).
        higher_is_better: metric direction; default: the task package's metadata (via
            ``openmle.gym``), else the sandbox's ``task_meta(task)`` method; when neither can
            say, the search refuses to start.
        description: the task description shown in prompts; default: the task's public
            ``description.txt`` via ``openmle.gym``.
        prompts: builds requests and parses responses; default :class:`OperatorPrompts`
            (``openmle.operators`` prompts with operator-conditioned memory).
        resources: what every job asks the sandbox for (CPUs, GPUs, memory); default: the
            task package's ``[resources]`` via ``openmle.gym``, else one CPU and no GPU.
        time_limit_s: the task's per-run limit, capping ``config.timeout_s`` for every job;
            default: the task package's ``time_limit_s``, else no cap.
        priors: the priors block to show every Draft and Improve prompt, already retrieved
            and rendered (:func:`openmle.priors.priors_for_search`); its ids are recorded per
            node as ``priors_shown``, the library's hash, the ids and the block in the
            manifest's ``extra.priors``. None: no priors.
        final_test: grade the chosen program once on the test split at the end.
        manifest_extra: extra JSON-ready entries for the manifest (e.g. how to rebuild the
            model).

    Raises:
        InvalidArgumentType: a part of the wrong type (the message names the field).
        InvalidArgument: ``workers`` below 1.
    """

    task: str
    model: OperatorModel = field(converter=_model_or_router)
    sandbox: Sandbox
    budget: Budget
    selector: Selector | None = None
    config: SearchConfig = field(default=None, converter=_config_or_default)
    workers: int = 2
    ordered: bool = False
    higher_is_better: bool | None = None
    description: str | None = None
    prompts: PromptBuilder | None = None
    resources: Resources | None = None
    time_limit_s: float | None = None
    priors: SearchPriors | None = None
    final_test: bool = True
    manifest_extra: Mapping[str, Any] | None = None

    def __attrs_post_init__(self) -> None:
        _check_parts(self)
        _check_workers(self.workers)
        _check_priors(self.priors)
        _check_prices(self.model, self.prompts, self.budget)
        if self.selector is not None:
            island_base(self.config, self.selector)  # islands need a three-factor selector


@final
@frozen(kw_only=True)
class ResumeSpec:
    """How to continue a run: the one argument (besides the run directory) of
    :func:`resume_search` and :func:`aresume_search`. Pass the same kind of model, sandbox and
    selector as the original run (the manifest records which were used).

    Args:
        model: writes the programs (a mapping of operator name to model, as in
            :class:`SearchSpec`, becomes an :class:`~openmle.search.OperatorRouter`).
        sandbox: runs and grades them.
        selector: chooses parents; default: :class:`ThreeFactorSelector` with the released
            weights (1.0/0.4/0.25), temperature 1, in the task's direction.
        prompts: builds requests and parses responses; default :class:`OperatorPrompts`.
        budget: the budget of this session, replacing the one in force as a whole (a cap it
            leaves unset is no cap); default: the budget in force (:meth:`RunDir.budget`: the
            latest session's, else the manifest's). To change one cap and keep the others,
            evolve the budget in force, e.g. ``attrs.evolve(RunDir.open(d).budget(),
            steps=60)`` (what ``openmle resume --budget steps=60`` does). The budget is
            recorded in ``sessions.jsonl``, and the report shows it.
        final_test: grade the chosen program on the test split at the end. A run extended
            past its first end is graded again (a second ``final`` record); the report and the
            export use the latest.
        description: the task description the run started with, for tasks ``openmle.gym``
            cannot resolve (default: the task package's); it must match the manifest's hash.
        priors_sha256: the content hash of the prior library the run started with
            (``PriorLibrary.content_hash``; a different one is refused). The run shows the
            block recorded in its manifest either way. None: no check.

    Raises:
        InvalidArgumentType: a part of the wrong type (the message names the field).
    """

    model: OperatorModel = field(converter=_model_or_router)
    sandbox: Sandbox
    selector: Selector | None = None
    prompts: PromptBuilder | None = None
    budget: Budget | None = None
    final_test: bool = True
    description: str | None = None
    priors_sha256: str | None = None

    def __attrs_post_init__(self) -> None:
        _check_parts(self)
        _check_prices(self.model, self.prompts, self.budget)


def _spec_of(kind: type[_SpecT], first: object, legacy: Mapping[str, Any], call: str) -> _SpecT:
    """``first`` when it is already a spec, else the spec built from the deprecated keyword
    form (warning through :func:`openmle._exports.warn_deprecated`).
    """
    if isinstance(first, kind) and not legacy:
        return first
    if first is None and kind is SearchSpec and "task" in legacy:
        legacy = dict(legacy)
        first = legacy.pop("task")  # the old keyword form: task="..."
    if first is None and kind is SearchSpec:
        raise TypeError(f"{call}() missing its first argument: a SearchSpec")
    if isinstance(first, SearchSpec | ResumeSpec):
        raise InvalidArgumentType(
            f"{call}() takes a {kind.__name__} and keyword options (run_dir, on_progress, "
            f"quiet); move {', '.join(sorted(legacy))} into the {kind.__name__}"
        )
    fields = {a.name for a in attrs.fields(kind)}
    unknown = sorted(set(legacy) - fields - {"priors", "retriever"})  # the old names
    if unknown:
        raise TypeError(f"{call}() got an unexpected keyword argument {unknown[0]!r}")
    warn_deprecated(
        f"{call}(<{'task' if kind is SearchSpec else 'run_dir'}>, model=..., sandbox=..., ...)",
        f"pass one openmle.search.{kind.__name__}(...) and keep run_dir=, on_progress=, quiet= "
        "(and limiter=) as keywords",
        stacklevel=3,
    )
    if kind is SearchSpec:
        if not isinstance(first, str):
            raise InvalidArgumentType(
                f"Expected a SearchSpec (or, deprecated, a task name) but got "
                f"{type(first).__name__} as {call}()'s first argument"
            )
        return kind(task=first, **_legacy_priors(first, legacy))
    return kind(**_legacy_priors(None, legacy))


def _legacy_priors(task: str | None, legacy: Mapping[str, Any]) -> dict[str, Any]:
    """The deprecated keywords with a prior library (``priors=library, retriever=...``) turned
    into what the specs take: its rendered block (:meth:`openmle.priors.PriorLibrary.for_search`,
    new runs) or its content hash (``priors_sha256``, resumes). A library path is refused with
    the fix (the search does not load libraries).
    """
    out = dict(legacy)
    library = out.pop("priors", None)
    retriever = out.pop("retriever", None)
    if library is None or isinstance(library, SearchPriors):
        return out if library is None else {**out, "priors": library}
    if isinstance(library, str | Path) or not hasattr(library, "content_hash"):
        raise InvalidArgumentType(
            f"Expected priors= an openmle.search.SearchPriors but got {type(library).__name__}; "
            "make it with openmle.priors.priors_for_search(library_or_path, task=..., "
            "description=...)"
        )
    if task is None:
        return {**out, "priors_sha256": str(library.content_hash)}
    described = out.get("description")
    shown = library.for_search(
        task=task,
        description=task_description(task) if described is None else described,
        retriever=retriever,
    )
    return {**out, "priors": shown}


def _check_priors(priors: object) -> None:
    if priors is not None and not isinstance(priors, SearchPriors):
        raise InvalidArgumentType(
            f"Expected priors= an openmle.search.SearchPriors (or None) but got "
            f"{type(priors).__name__}; make it with openmle.priors.priors_for_search("
            "library_or_path, task=..., description=...)"
        )


def _progress_of(
    on_progress: Callable[[Progress], None] | None, quiet: bool, steps: int | None
) -> Callable[[Progress], None] | None:
    """The caller's ``on_progress``; else, unless ``quiet``, a :class:`ProgressLine` on
    stderr.
    """
    if on_progress is not None or quiet:
        return on_progress
    return ProgressLine(sys.stderr, steps)


# ---------------------------------------------------------------------------------- new runs


async def arun_search(
    spec: SearchSpec | str | None = None,
    /,
    *,
    run_dir: str | Path | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    quiet: bool = False,
    limiter: anyio.CapacityLimiter | None = None,
    track: Tracker | None = None,
    **legacy: Any,
) -> SearchResult:
    """Search ``spec.task`` with Draft/Improve/Debug/Crossover until a budget cap is reached.

    Args:
        spec: what to search, with which model, sandbox, budget, prompts and priors.
        run_dir: where to write the journal, programs, logs and manifest (None: nothing written).
            It must not exist, be empty, or hold a run with no committed step (that run is
            started over, with a warning); use :func:`aresume_search` to continue one.
        on_progress: called with a :class:`Progress` after every node and periodically;
            default: a :class:`ProgressLine` on stderr (one line per node).
        quiet: no default progress line (``on_progress`` still runs when given).
        limiter: a shared limiter capping concurrent expansions (default: ``spec.workers``
            tokens).
        track: report to this :class:`~openmle.tracking.Tracker` (default: none): the manifest
            as parameters, each node's metrics at its step, the run's summary (see
            ``docs/how-to/track-experiments.md``). Its calls run off the event loop and its
            first failure turns tracking off (logged once); the caller closes it.
        legacy: deprecated: the task as ``spec`` and the spec's fields as keywords (removed in
            openmle 0.2.0; warns).

    Returns:
        The nodes, the best one by validation score, and its test result.

    Raises:
        InvalidArgument: bad arguments, a task whose direction nobody can tell, or a
            ``run_dir`` holding committed steps. Raised before anything is written.
        RunDirError: the run directory cannot be written.
        MultipleErrors: several errors ended the search at once (each in ``exceptions``).
        OpenMLEError: otherwise the one error that ended the search, never an exception group.
    """
    s = _spec_of(SearchSpec, spec, legacy, "arun_search")
    await preflight_sandbox(s.sandbox)
    info, limits, extra = await _new_task_info(s)
    sel = s.selector or default_selector(info.higher_is_better)
    core = SearchCore(
        config=s.config, selector=sel, budget=s.budget, higher_is_better=info.higher_is_better
    )
    rd: RunDir | None = None
    if run_dir is not None:
        check_new_run_dir(_run_dir_arg(run_dir))
        rd = RunDir.create(
            run_dir,
            task=info,
            config=s.config,
            budget=s.budget,
            workers=s.workers,
            ordered=s.ordered,
            selector=sel,
            model=s.model,
            sandbox=s.sandbox,
            prompts=s.prompts or OperatorPrompts(),
            extra=extra,
        )
    path = None if rd is None else rd.path
    params = rd.manifest if rd is not None else _spec_params(s, info)

    async def drive(recorder: Recorder) -> SearchResult:
        return await _drive(
            core,
            model=s.model,
            sandbox=s.sandbox,
            task=info,
            prompts=_with_summary_cache(s.prompts or OperatorPrompts(), path),
            recorder=recorder,
            workers=s.workers,
            ordered=s.ordered,
            limiter=limiter,
            on_progress=_progress_of(on_progress, quiet, s.budget.steps),
            final_test=s.final_test,
            run_dir=path,
            limits=limits,
        )

    return await _drive_recorded(drive, rd, track, params, info.higher_is_better)


async def _drive_recorded(
    drive: Callable[[Recorder], Awaitable[SearchResult]],
    rd: RunDir | None,
    track: Tracker | None,
    params: Mapping[str, Any],
    higher_is_better: bool,
) -> SearchResult:
    """``drive(recorder)`` with the run directory (if any) journalling and ``track`` (if
    any) reporting: the session's end is journalled and the summary logged; the run directory
    is closed whatever happens, and an exception group leaves as its one error.
    """
    try:
        async with _writing(rd), tracking(track, params) as guard:
            recorder: Recorder = _NullRecorder() if rd is None else rd
            if guard is not None:
                recorder = TrackingRecorder(recorder, guard, higher_is_better)
            result = await drive(recorder)
            if rd is not None:
                rd.session("end", stop_reason=result.stop_reason)
            log_summary(guard, result)
        return result
    except BaseExceptionGroup as group:
        _raise_one(group)
    finally:
        if rd is not None:
            rd.close()


def _spec_params(s: SearchSpec, info: TaskInfo) -> dict[str, Any]:
    """What a search without a run directory reports as parameters (the manifest's core)."""
    return {
        "task": {"name": info.name, "higher_is_better": info.higher_is_better},
        "budget": s.budget.to_dict(),
        "config": s.config.to_dict(),
        "workers": s.workers,
        "ordered": s.ordered,
        "model": {"id": str(getattr(s.model, "model", type(s.model).__name__))},
    }


async def _new_task_info(s: SearchSpec) -> tuple[TaskInfo, JobLimits, dict[str, Any]]:
    """The task as the prompts see it, the job limits and the manifest's ``extra`` of a new
    run (the direction resolved, the description read, the priors retrieved).
    """
    if s.higher_is_better is None:
        hib = (await resolve_task_meta(s.task, s.sandbox)).higher_is_better
    else:
        hib = bool(s.higher_is_better)
    limits = _job_limits(s.task, s.resources, s.time_limit_s)
    info = TaskInfo(
        name=s.task,
        description=task_description(s.task) if s.description is None else s.description,
        higher_is_better=hib,
        timeout_s=limits.timeout(s.config.timeout_s),
    )
    extra: dict[str, Any] = {**(s.manifest_extra or {}), "job_limits": limits.to_dict()}
    if s.priors is not None:
        info = attrs.evolve(info, priors=s.priors.block, priors_shown=s.priors.shown)
        extra["priors"] = s.priors.to_manifest()
    return info, limits, extra


def run_search(
    spec: SearchSpec | str | None = None,
    /,
    *,
    run_dir: str | Path | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    quiet: bool = False,
    track: Tracker | None = None,
    **legacy: Any,
) -> SearchResult:
    """Blocking twin of :func:`arun_search` (same arguments but ``limiter``, an event-loop
    object); runs its own event loop, so call it from synchronous code only.
    """
    s = _spec_of(SearchSpec, spec, legacy, "run_search")
    return _blocking(
        partial(arun_search, s, run_dir=run_dir, on_progress=on_progress, quiet=quiet, track=track)
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
    spec: ResumeSpec | None = None,
    /,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    quiet: bool = False,
    limiter: anyio.CapacityLimiter | None = None,
    track: Tracker | None = None,
    **legacy: Any,
) -> SearchResult:
    """Continue the search in ``run_dir`` after an interruption (including ``kill -9``).

    In-flight steps are re-run with their journalled proposal; the random state is the one
    journalled after the last proposal. A run directory that holds no committed step is
    resumed from its beginning (logged as a warning on ``openmle.search``).

    Args:
        run_dir: the run to continue.
        spec: the model, sandbox and the rest (:class:`ResumeSpec`).
        on_progress, quiet, limiter, track: as for :func:`arun_search` (the tracker gets the
            manifest, the nodes committed in this session and the summary).
        legacy: deprecated: the spec's fields as keywords (removed in openmle 0.2.0; warns).

    Returns:
        A :class:`~openmle.search.SearchResult`.

    Raises:
        InvalidArgument: bad arguments (raised before anything is written), or a
            ``description`` that differs from the one the run started with.
        RunDirError: not a run directory, or a damaged journal.
        MultipleErrors: several errors ended the search at once (each in ``exceptions``).
        OpenMLEError: otherwise the one error that ended the search, never an exception group.
    """
    s = _spec_of(ResumeSpec, spec, legacy, "aresume_search")
    rd = RunDir.open(_run_dir_arg(run_dir))
    await preflight_sandbox(s.sandbox)
    if not rd.chained:
        warnings.warn(
            f"{rd.path} was written before the journal hash chain: it is resumed, but edits "
            "to its journal cannot be detected (new lines stay unchained)",
            UserWarning,
            stacklevel=2,
        )
    m = rd.manifest
    info, limits = _resumed_task_info(rd, s)
    cfg = SearchConfig.from_dict(m["config"])
    bud = s.budget or rd.budget()
    _check_prices(s.model, s.prompts, bud)
    hib = info.higher_is_better
    core = SearchCore(
        config=cfg, selector=s.selector or default_selector(hib), budget=bud, higher_is_better=hib
    )
    prompts = _with_summary_cache(s.prompts or OperatorPrompts(), rd.path)
    built: dict[int, ModelRequest | PendingRequest] = {}

    def build(p: Proposal) -> None:
        parents = [core.nodes[q] for q in p.parent_ids]
        built[p.step] = _build_request(
            prompts, p, parents, remaining(info, core, p), board=core.board
        )

    rd.claim()  # a second driver of the run is refused before it reads or writes anything
    try:
        pending = rd.replay(core, on_proposal=build)
        if not core.nodes:
            log.warning("%s holds no committed step: the run is resumed from its start", rd.path)
        requeue = [(p, built[p.step]) for p in pending]
        done = rd.final_result()
        final_done = None
        if done is not None and not requeue and core.exhausted() is not None:
            final_done = (core.nodes[done[0]], done[1])
        rd.session("resume", requeued=[p.step for p in pending], budget=bud.to_dict())
    except BaseException:
        rd.close()
        raise

    async def drive(recorder: Recorder) -> SearchResult:
        return await _drive(
            core,
            model=s.model,
            sandbox=s.sandbox,
            task=info,
            prompts=prompts,
            recorder=recorder,
            workers=int(m["workers"]),
            ordered=bool(m["ordered"]),
            limiter=limiter,
            on_progress=_progress_of(on_progress, quiet, bud.steps),
            final_test=s.final_test,
            requeue=requeue,
            final_done=final_done,
            run_dir=rd.path,
            limits=limits,
        )

    return await _drive_recorded(drive, rd, track, m, hib)


def _resumed_task_info(rd: RunDir, s: ResumeSpec) -> tuple[TaskInfo, JobLimits]:
    """The task as the run showed it (the recorded priors block included) and its job limits.

    Raises:
        InvalidArgument: a description or a prior library other than the run's.
    """
    m = rd.manifest
    extra = m.get("extra", {})
    limits = (
        JobLimits.from_dict(extra["job_limits"])
        if "job_limits" in extra
        else _job_limits(m["task"]["name"])
    )
    if s.description is not None:
        want = m["task"].get("description_sha256")
        if want and hashlib.sha256(s.description.encode()).hexdigest() != want:
            raise InvalidArgument(
                f"the description given to resume {str(rd.path)!r} differs from the one the "
                "run started with; pass the original description"
            )
    recorded = extra.get("priors")
    check_resume_priors(str(rd.path), recorded, s.priors_sha256)
    info = TaskInfo(
        name=m["task"]["name"],
        description=task_description(m["task"]["name"]) if s.description is None else s.description,
        higher_is_better=bool(m["task"]["higher_is_better"]),
        timeout_s=limits.timeout(SearchConfig.from_dict(m["config"]).timeout_s),
    )
    if isinstance(recorded, Mapping):
        info = attrs.evolve(
            info,
            priors=str(recorded.get("block", "")),
            priors_shown=tuple(str(x) for x in recorded.get("shown", ())),
        )
    return info, limits


def resume_search(
    run_dir: str | Path,
    spec: ResumeSpec | None = None,
    /,
    *,
    on_progress: Callable[[Progress], None] | None = None,
    quiet: bool = False,
    track: Tracker | None = None,
    **legacy: Any,
) -> SearchResult:
    """Blocking twin of :func:`aresume_search` (same arguments but ``limiter``)."""
    s = _spec_of(ResumeSpec, spec, legacy, "resume_search")
    return _blocking(
        partial(aresume_search, run_dir, s, on_progress=on_progress, quiet=quiet, track=track)
    )
