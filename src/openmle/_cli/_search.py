"""``openmle demo | search | resume | export | report``: run and inspect searches.

Exit codes: 0 the command did its job; 1 a failure (a search in which no node succeeded, which
the summary says, a bad run directory, a missing dependency, a failed backend or model); 2 a
usage error (a bad flag or value, an unknown or broken ``--task``), checked before anything is
written; 130 interrupted (the ``openmle resume RUN_DIR`` line follows). ``--json`` prints one
JSON object on stdout and the progress on stderr. The flags' values are checked here, so a
message names the flag (``--budget steps=0``), not the library field it becomes.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import math
import re
import sys
import time
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio

from openmle._cli._common import (
    APP_DIR_HELP,
    EXIT_FAILURE,
    EXIT_OK,
    interrupted,
    recorded_spec,
)
from openmle._cli._interrupts import deferred, run_async
from openmle._cli._track import add_track_flag, close_track, finish_track, open_track
from openmle.errors import InvalidArgument, ModelError, TaskPackageError

if TYPE_CHECKING:
    from openmle import OperatorModel, Sandbox, Selector
    from openmle.search import Budget, OperatorPrompts, Preset, PriceTable, SearchResult

__all__ = [
    "build_model",
    "build_selector",
    "check_out",
    "check_task",
    "load_prices",
    "parse_budget",
    "preflight_model",
    "register",
]

MODEL_HELP = (
    "offline (writes programs without an LLM), offline-numpy (no scikit-learn), "
    "replay:FILE (answers recorded with --record), module:callable (a factory returning an "
    "OperatorModel), a name registered in entry-point group openmle.models, or "
    "openai:URL[#MODEL] (an OpenAI-compatible "
    "server; URL is the API root with /v1, e.g. openai:http://127.0.0.1:8000/v1#Qwen/Qwen3-8B; "
    "without #MODEL the server's only model is used). The API key comes from --api-key-file, "
    "else $OPENAI_API_KEY; the key, the URL and the model are checked with one request before "
    "the first step. Several models in one run: draft=SPEC,improve=SPEC,debug=SPEC,"
    "crossover=SPEC, with default=SPEC for the operators without an entry"
)
SANDBOX_HELP = (
    "where programs run: local (default), docker, ray, service:URL, module:callable (a "
    "factory returning a Sandbox) or a name registered in entry-point group openmle.sandboxes"
)
_BUDGET_KEYS = ("steps", "sandbox_s", "wall_s", "tokens", "usd", "gpu_s")
SELECTORS = ("three-factor", "three-factor-paper", "greedy", "uniform")


# ----------------------------------------------------------------------------------- builders


def parse_budget(
    spec: str,
    *,
    on_exhaust: str = "finish",
    steps: int | None = None,
    prices: PriceTable | None = None,
    flag: str = "--budget",
) -> Budget:
    """``"steps=30,sandbox_s=600,wall_s=900,tokens=2e6,usd=5"`` -> :class:`Budget`.

    Args:
        spec: the ``--budget`` value.
        on_exhaust: the ``--on-exhaust`` value.
        steps: the ``--steps`` value (the same cap as ``steps=`` in ``spec``; not both).
        prices: a :class:`~openmle.search.PriceTable` (``--prices``); ``usd=`` needs one.
        flag: the flag named in messages.

    Raises:
        InvalidArgument: an unknown key, a value that is not a number, not positive or (for
            steps and tokens) not a whole number, ``usd=`` without prices; the message names
            the flag and the fix.
    """
    from openmle.search import Budget

    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _BUDGET_KEYS:
            raise InvalidArgument(
                f"Expected KEY=VALUE with KEY in {', '.join(_BUDGET_KEYS)} but got "
                f"{flag} part {part!r}; for example {flag} steps=30,wall_s=900"
            )
        if key in kwargs:
            raise InvalidArgument(f"{flag} names {key}= twice; give each cap once")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        whole = key in {"steps", "tokens"}
        if not math.isfinite(number) or number <= 0 or (whole and not number.is_integer()):
            kind = "a whole number >= 1" if whole else "a number > 0"
            raise InvalidArgument(
                f"Expected {kind} for {flag} {key}= but got {key}={value.strip()!r}; "
                f"for example {flag} {key}={30 if key == 'steps' else 900}"
            )
        kwargs[key] = int(number) if whole else number
    if steps is not None:
        if "steps" in kwargs:
            raise InvalidArgument(
                f"--steps {steps} and {flag} steps={kwargs['steps']} both set the step cap; "
                "give one of them"
            )
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise InvalidArgument(f"Expected --steps to be an integer >= 1 but got {steps!r}")
        kwargs["steps"] = steps
    if not kwargs:
        raise InvalidArgument(f"{flag} sets no cap; for example {flag} steps=30")
    if "usd" in kwargs and prices is None:
        raise InvalidArgument(
            f"{flag} usd={kwargs['usd']:g} needs prices to count money: pass --prices FILE "
            "(USD per million prompt and completion tokens per model id, JSON or TOML), or cap "
            "tokens= instead. A cost the server reports is counted as well, but is not known "
            "before the run"
        )
    if on_exhaust not in ("finish", "cancel"):
        raise InvalidArgument(f"Expected --on-exhaust finish or cancel but got {on_exhaust!r}")
    return Budget(
        **kwargs, prices=prices, on_exhaust="cancel" if on_exhaust == "cancel" else "finish"
    )


def load_prices(path: str) -> PriceTable:
    """Read a ``--prices`` file: a :class:`~openmle.search.PriceTable`.

    JSON or TOML (by the ``.toml`` suffix), a table of model id (``"*"`` for any model) to
    ``[usd_per_million_prompt_tokens, usd_per_million_completion_tokens]``, e.g.
    ``{"gpt-4o-mini": [0.15, 0.6]}``.

    Raises:
        InvalidArgument: a missing or unreadable file, or a table that is not of that shape.
    """
    from openmle.search import PriceTable

    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"--prices {path}: cannot read it ({exc})") from None
    try:
        raw = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgument(
            f"--prices {path}: not {'TOML' if p.suffix == '.toml' else 'JSON'} ({exc})"
        ) from None
    example = 'e.g. {"gpt-4o-mini": [0.15, 0.6]}'
    if not isinstance(raw, dict) or not raw:
        raise InvalidArgument(
            f"--prices {path}: expected a table of model id to [prompt, completion] USD per "
            f"million tokens, {example}"
        )
    try:
        return PriceTable(prices={str(k): tuple(v) for k, v in raw.items()})
    except (InvalidArgument, TypeError, ValueError) as exc:
        raise InvalidArgument(
            f"--prices {path}: {exc}; expected model id -> [prompt, completion] USD per million "
            f"tokens, {example}"
        ) from None


def _read_key_file(path: str) -> str:
    p = Path(path).expanduser()
    try:
        key = p.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"--api-key-file {path}: cannot read it ({exc})") from None
    if not key or len(key.split()) != 1:
        raise InvalidArgument(
            f"--api-key-file {path}: expected one key (a single line without spaces)"
        )
    return key


def build_model(
    spec: str, *, record: str | None = None, api_key_file: str | None = None
) -> OperatorModel:
    """Build an operator model from a ``--model`` spec (see ``MODEL_HELP``).

    ``openai:URL`` without ``#MODEL`` builds a model named ``""`` until :func:`preflight_model`
    asks the server which model it serves.
    """
    from openmle import backends

    model: OperatorModel
    if spec.startswith("openai:"):  # the CLI adds the key file and the server's only model
        if "OpenAIModel" not in backends.__all__:
            raise InvalidArgument(
                "--model openai:URL needs the OpenAI-compatible backend, which this build of "
                "openmle does not include; use --model offline or replay:FILE"
            )
        url, _, name = spec[len("openai:") :].partition("#")
        if not url.startswith(("http://", "https://")):
            raise InvalidArgument(
                f"Expected --model openai:URL[#MODEL] with an http:// or https:// URL but got "
                f"{spec!r}; for example --model openai:http://127.0.0.1:8000/v1#MODEL"
            )
        key = _read_key_file(api_key_file) if api_key_file else None
        model = backends.OpenAIModel(base_url=url, model=name or _AUTO, api_key=key)
    elif api_key_file:
        raise InvalidArgument("--api-key-file is for --model openai:URL; this model needs no key")
    else:  # every other spec: the one registry (built-ins, module:callable, entry points)
        model = backends.make_model(spec)
    if record:
        model = backends.RecordingModel(model, record)
    return model


_AUTO = "(the server's only model)"


def preflight_model(model: OperatorModel, spec: str) -> OperatorModel:
    """Check an ``openai:`` model with one request before anything runs; the model to use.

    Picks the server's model when ``spec`` names none and the server serves exactly one.
    Other models are returned as they are.

    Raises:
        ModelError: the key, the URL or the model id is wrong (the subclass says which; the
            message is the server's, prefixed with the ``--model`` flag).
        InvalidArgument: ``spec`` names no model and the server serves none or several.
    """
    import attrs

    from openmle import backends

    if "OpenAIModel" not in backends.__all__ or not isinstance(model, backends.OpenAIModel):
        return model

    async def check() -> OperatorModel:
        m = model
        try:
            if m.model == _AUTO:
                served = await m.list_models()
                if len(served) != 1:
                    raise InvalidArgument(
                        f"--model {spec}: name the model as openai:URL#MODEL; the server "
                        f"serves {served if served else 'no model'}"
                    )
                await m.aclose()
                m = attrs.evolve(m, model=served[0])
            await m.preflight()
            return m
        finally:
            await m.aclose()

    try:
        checked: OperatorModel = run_async(check)
    except ModelError as exc:
        raise type(exc)(f"--model {spec}: {exc}") from None
    return checked


_DEFAULT_ROUTE = "default"
_ROUTE_NAMES = ("draft", "improve", "debug", "crossover", _DEFAULT_ROUTE)
_ROUTE_START = re.compile(rf"^(?:{'|'.join(_ROUTE_NAMES)})=")
_KEY_START = re.compile(r"^[A-Za-z_][\w-]*=")
_KEY_SPLIT = re.compile(r",(?=[A-Za-z_][\w-]*=)")


def _parse_routes(value: str, *, flag: str = "--model") -> dict[str, str] | None:
    """Split a routed model value, ``draft=SPEC,improve=SPEC,default=SPEC``, into route name
    to spec; None when ``value`` is one plain spec (every operator uses it).

    A value that starts with ``KEY=`` is routed. A spec may hold commas and ``=`` in a URL's
    query: a comma followed by ``KEY=`` inside a spec that holds a ``?`` continues that spec;
    elsewhere it starts an entry, whose key must be a route name.

    Raises:
        InvalidArgument: a key that is no route name (the message lists them), an empty or
            repeated entry, or an operator without a model and no ``default=`` (the message
            names ``flag``, the operator and the fix).
    """
    if not _KEY_START.match(value):
        return None
    parts: list[str] = []
    for piece in _KEY_SPLIT.split(value):
        key = piece.partition("=")[0]
        if parts and key not in _ROUTE_NAMES and "?" in parts[-1]:
            parts[-1] += "," + piece  # a URL query's next parameter
        elif key not in _ROUTE_NAMES:
            close = difflib.get_close_matches(key, _ROUTE_NAMES, n=1)
            hint = f" (did you mean {close[0]}=?)" if close else ""
            raise InvalidArgument(
                f"{flag} {value!r}: {key}= is no operator{hint}; the keys are "
                f"{', '.join(_ROUTE_NAMES)} (default= for the operators without an entry)"
            )
        else:
            parts.append(piece)
    out: dict[str, str] = {}
    for part in parts:
        name, _, spec = part.partition("=")
        if name in out:
            raise InvalidArgument(f"{flag} {value!r}: {name}= is given twice; give it once")
        if not spec.strip():
            raise InvalidArgument(
                f"{flag} {value!r}: {name}= names no model; write {name}=SPEC (e.g. {name}=offline)"
            )
        out[name] = spec
    if _DEFAULT_ROUTE not in out:
        missing = [o for o in _ROUTE_NAMES[:-1] if o not in out]
        if missing:
            raise InvalidArgument(
                f"{flag} {value!r}: no model for operator {missing[0]!r}; add "
                f"{missing[0]}=SPEC or default=SPEC for the operators without an entry"
            )
    return out


def _model_for_run(
    spec: str, args: argparse.Namespace, record: str | None, *, flag: str = "--model"
) -> OperatorModel:
    """Build, check (one request for ``openai:``) and, with ``--record``, wrap the model; a
    routed spec (``draft=SPEC,...,default=SPEC``) builds an :class:`OperatorRouter` of them.

    Raises:
        InvalidArgument: a bad spec or route (the message names ``flag``).
    """
    from openmle import backends
    from openmle.search import OperatorRouter

    key_file = getattr(args, "api_key_file", None)
    routes = _parse_routes(spec, flag=flag)
    if routes is None:
        model = preflight_model(build_model(spec, api_key_file=key_file), spec)
    else:
        built: dict[str, OperatorModel] = {}
        for name, part in routes.items():
            try:
                built[name] = preflight_model(build_model(part, api_key_file=key_file), part)
            except InvalidArgument as exc:
                raise InvalidArgument(f"{flag} {name}={part}: {exc}") from None
        default = built.pop(_DEFAULT_ROUTE, None)
        model = OperatorRouter(routes=built, default=default)
    return backends.RecordingModel(model, record) if record else model


def _checked_recorded(spec: object, flag: str, where: str) -> str | None:
    """A (possibly routed) spec read from a manifest: each routed part is held to
    :func:`openmle._cli._common.recorded_spec` (one that talks to a server is refused).
    """
    if not isinstance(spec, str) or not spec:
        return None
    routes = _parse_routes(spec, flag=flag)
    for part in [spec] if routes is None else list(routes.values()):
        recorded_spec(part, flag=flag, where=where)
    return spec


def check_task(ref: str, sandbox: str) -> None:
    """Check ``--task`` before anything is written: a bundled name or a loadable package.

    A task run by a job service (``--sandbox service:URL``) is resolved by the service.

    Raises:
        InvalidArgument: no such task (names the bundled tasks).
        TaskPackageError: the package is broken; every error finding is listed once.
    """
    from openmle.gym import bundled_names, load_task, validate_path

    if sandbox.startswith("service:") or ref in bundled_names():
        return
    path = Path(ref).expanduser()
    if not path.is_dir():
        close = difflib.get_close_matches(ref, bundled_names(), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise InvalidArgument(
            f"--task {ref!r}: no such task: {hint}not a bundled task "
            f"({', '.join(bundled_names())}) and not a directory; pass a bundled name "
            "(openmle task list) or the path of a task package"
        )
    try:
        _ = load_task(path).higher_is_better
    except TaskPackageError:
        report = validate_path(path, smoke_test=False)
        errors = [str(p) for p in report.errors] or ["the package does not load"]
        raise TaskPackageError(
            f"--task {ref}: the task package has {len(errors)} error(s):\n  "
            + "\n  ".join(errors)
            + f"\n(openmle task validate {ref} shows the full report)"
        ) from None


def check_out(out: Path) -> None:
    """Check ``--out`` before anything is written: a new or empty folder (or one holding only
    a run that never committed a step, which the search starts over in).

    Raises:
        InvalidArgument: ``out`` is a file or holds other files (names ``--out`` and the fix).
    """
    from openmle.search import check_new_run_dir

    try:
        check_new_run_dir(out)
    except InvalidArgument as exc:
        raise InvalidArgument(f"--out {out}: {exc}") from None


def build_sandbox(spec: str, task: str | None = None) -> Sandbox:
    """Build a sandbox from a ``--sandbox`` spec (see ``SANDBOX_HELP``).

    A ``service:URL`` sandbox is given ``task``'s metadata as ``task_meta`` when the task
    resolves here (what a Python caller passes as ``JobServiceSandbox(task_meta=...)``), so a
    score from the service outside the task's metric range is an ``INFRA_ERROR``, never a score.
    """
    from openmle import backends
    from openmle.errors import OpenMLEError
    from openmle.gym import resolve_task

    options: dict[str, Any] = {}
    if task is not None and spec.startswith("service:"):
        # A task only the service knows: its answers are checked for shape only.
        with contextlib.suppress(OpenMLEError, OSError):
            options["task_meta"] = {task: resolve_task(task).meta}
    return backends.make_sandbox(spec, **options)


def build_selector(name: str, higher_is_better: bool) -> Selector:
    """Build a parent selector from its ``--selector`` name (see ``SELECTORS``)."""
    from openmle.search import GreedySelector, ThreeFactorSelector, UniformSelector

    if name == "three-factor":
        return ThreeFactorSelector.preset("released", higher_is_better=higher_is_better)
    if name == "three-factor-paper":
        return ThreeFactorSelector.preset("paper", higher_is_better=higher_is_better)
    if name == "greedy":
        return GreedySelector(higher_is_better=higher_is_better)
    if name == "uniform":
        return UniformSelector()
    raise InvalidArgument(f"Expected --selector in {SELECTORS} but got {name!r}")


# ------------------------------------------------------------------------------------ display


def _summary(result: SearchResult, run_dir: Path | None, report: Path | None) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for n in result.nodes:
        key = "success" if n.ok else n.outcome.value
        counts[key] = counts.get(key, 0) + 1
    return {
        "nodes": len(result.nodes),
        "outcomes": counts,
        "best_node": None if result.best is None else result.best.node_id,
        "best_valid_score": result.best_valid_score,
        "test_score": result.test_score,
        "test_outcome": None if result.test_result is None else result.test_result.outcome.value,
        "stop_reason": result.stop_reason,
        "spent": dict(result.spent),
        "run_dir": None if run_dir is None else str(run_dir),
        "report": None if report is None else str(report),
    }


def _print_summary(s: dict[str, Any], stream: TextIO) -> None:
    rows = [
        (
            "nodes",
            f"{s['nodes']}  ({', '.join(f'{k} {v}' for k, v in sorted(s['outcomes'].items()))})",
        ),
        ("best node", s["best_node"] or "none succeeded"),
        (
            "best validation score",
            "—" if s["best_valid_score"] is None else f"{s['best_valid_score']:.6g}",
        ),
        (
            "test score (chosen program)",
            "—" if s["test_score"] is None else f"{s['test_score']:.6g}",
        ),
        ("stopped by", s["stop_reason"] or "—"),
        ("sandbox seconds", f"{s['spent']['sandbox_s']:.1f}"),
        ("wall seconds", f"{s['spent']['wall_s']:.1f}"),
        ("tokens", f"{int(s['spent']['tokens']):,}"),
        ("run directory", s["run_dir"] or "—"),
        ("report", s["report"] or "—"),
    ]
    width = max(len(k) for k, _ in rows)
    stream.write("\n")
    for k, v in rows:
        stream.write(f"  {k:<{width}}  {v}\n")
    stream.flush()


# ----------------------------------------------------------------------------------- commands


def _finish(
    args: argparse.Namespace, result: SearchResult, run_dir: Path | None, tracker: Any = None
) -> int:
    report = None
    if run_dir is not None and not getattr(args, "no_report", False):
        from openmle.search import write_report

        report = write_report(run_dir)
    finish_track(tracker, [report])
    s = _summary(result, run_dir, report)
    if args.json:
        print(json.dumps(s, sort_keys=True))
    else:
        _print_summary(s, sys.stdout)
    if result.best is None:
        print(
            f"openmle: error: no node succeeded ({s['nodes']} tried); see the outcomes above"
            + ("" if run_dir is None else f" and {run_dir / 'journal.jsonl'}"),
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return EXIT_OK


def _default_out(prefix: str) -> Path:
    return Path("openmle-runs") / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def _run(args: argparse.Namespace, *, task: str, model_spec: str, budget: Budget) -> int:
    from openmle.search import (
        ProgressLine,
        SearchConfig,
        SearchSpec,
        arun_search,
        preflight_sandbox,
        task_description,
        task_direction,
    )

    # Every flag is checked before the header is printed or anything is written.
    check_task(task, args.sandbox)
    out = Path(args.out) if args.out else _default_out(args.command)
    check_out(out)
    config = SearchConfig(
        seed=args.seed,
        timeout_s=300.0 if args.timeout is None else args.timeout,
        trust_printed_score=getattr(args, "trust_printed_score", False),
        islands=getattr(args, "islands", None) or 0,
    )
    priors = getattr(args, "priors", None)
    library = None
    if priors is not None:
        from openmle.priors import load_library

        library = load_library(priors)  # a missing or malformed library: refused before the run
    model = _model_for_run(model_spec, args, getattr(args, "record", None))
    sandbox = build_sandbox(args.sandbox, task)
    with _closing_on_error(sandbox):
        # A missing engine, a wrong address or key: said before the header, nothing written.
        run_async(lambda: preflight_sandbox(sandbox))
        hib = task_direction(task, sandbox)  # the task package's, else the sandbox's task_meta
    selector = build_selector(args.selector, hib)
    summary_spec = getattr(args, "summary_model", None)
    prompts = _prompts(model, args.summaries, _summary_model(summary_spec, args))
    preset = _preset_parts(args, task, budget, config, prompts)
    config = preset.get("config", config)
    prompts = preset.get("prompts", prompts)
    block = None
    if library is not None:
        block = library.for_search(task=task, description=task_description(task))
    with _closing_on_error(sandbox):  # the spec's own checks (prices) precede the header
        spec = SearchSpec(
            task=task,
            model=model,
            sandbox=sandbox,
            workers=args.workers,
            budget=budget,
            selector=selector,
            config=config,
            ordered=getattr(args, "ordered", False),
            higher_is_better=hib,
            prompts=prompts,
            priors=block,
            manifest_extra={
                **({"preset": preset["entry"]} if preset else {}),
                "cli": {
                    "model": model_spec,
                    "sandbox": args.sandbox,
                    "selector": args.selector,
                    "record": getattr(args, "record", None),
                    "summaries": bool(args.summaries),
                    "summary_model": summary_spec,
                    "priors": priors,
                    "data": getattr(args, "data_record", None),
                },
            },
        )
    stream = sys.stderr if args.json else sys.stdout
    if not args.json:
        stream.write(_header(args, task, model_spec, model, sandbox, out))
    tracker = None
    try:
        with _closing(sandbox):
            tracker = open_track(args, out.name)
            result = _search_run(
                arun_search,
                spec,
                run_dir=out,
                on_progress=None if args.quiet else ProgressLine(stream, budget.steps),
                quiet=args.quiet,
                track=tracker,
            )
    except KeyboardInterrupt:
        close_track(tracker)
        return interrupted(out)
    except BaseException:
        close_track(tracker)
        raise
    return _finish(args, result, out, tracker)


def _header(
    args: argparse.Namespace,
    task: str,
    model_spec: str,
    model: OperatorModel,
    sandbox: Sandbox,
    out: Path,
) -> str:
    """The run's header line: what is searched, with which model and sandbox, written where."""
    shown = model_spec
    if model_spec.startswith("openai:") and "#" not in model_spec:
        shown += f" (model {getattr(model, 'model', '?')})"
    if getattr(sandbox, "trusted", False) is True:  # recorded in the manifest too
        box = f"{args.sandbox} (trusted: its programs can read the answers)"
    else:
        box = args.sandbox
    return (
        f"openmle {args.command}: task {task}, model {shown}, sandbox {box}, "
        f"selector {args.selector}, {args.workers} workers, writing {out}\n"
    )


@contextlib.contextmanager
def _closing(sandbox: Sandbox) -> Iterator[None]:
    """Close ``sandbox`` (``aclose``) however the block ends, an interruption included.

    A first Ctrl-C or SIGTERM that comes while closing is held off until the sandbox is
    closed (then raised), so it cannot leave the sandbox's containers or files behind; a
    second is absorbed, a third exits at once (``openmle._cli._interrupts``).
    """
    try:
        yield
    finally:
        close = getattr(sandbox, "aclose", None)
        if close is not None:
            with deferred():
                try:
                    anyio.run(close)
                except Exception as exc:  # closing must not hide the search's own outcome
                    print(f"openmle: closing the sandbox failed: {exc}", file=sys.stderr)


@contextlib.contextmanager
def _closing_on_error(sandbox: Sandbox) -> Iterator[None]:
    """Close ``sandbox`` when the block raises (a check refused the run); keep it open else."""
    try:
        yield
    except BaseException:
        with _closing(sandbox):
            raise


def _search_run(run: Any, *a: Any, **kw: Any) -> Any:
    """Run ``run(*a, **kw)`` (arun_search / aresume_search) in an event loop whose main task
    the first interrupt cancels (``openmle._cli._interrupts.run_async``); an interrupt inside
    a group is re-raised as a plain KeyboardInterrupt so the caller can name the run directory.
    """
    try:
        return run_async(lambda: run(*a, **kw))
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is not None:
            raise KeyboardInterrupt from None
        raise


def _demo(args: argparse.Namespace) -> int:
    if args.rewards:
        from openmle._cli import _demo as rewards_demo

        fig = rewards_demo.run_demo()
        if args.json:
            print(json.dumps(fig, sort_keys=True))
        else:
            rewards_demo._print_table(fig)
        return 0
    budget = parse_budget("", steps=args.steps)
    return _run(args, task=args.task, model_spec="offline", budget=budget)


def _search(args: argparse.Namespace) -> int:
    prices = load_prices(args.prices) if args.prices else None
    spec = args.budget
    if spec is None:
        spec = "" if args.steps is not None else "steps=30"
    preset = _preset(args)
    if preset is not None:  # the preset's caps, then the user's (a key given wins)
        mine = {"steps": preset.steps, "sandbox_s": preset.sandbox_s, "wall_s": preset.wall_s}
        given = {p.split("=", 1)[0].strip(): p for p in (args.budget or "").split(",") if p}
        if args.steps is not None:
            given.pop("steps", None)
            mine.pop("steps")
        spec = ",".join(
            [f"{k}={v:g}" for k, v in mine.items() if k not in given] + list(given.values())
        )
    budget = parse_budget(spec, on_exhaust=args.on_exhaust, steps=args.steps, prices=prices)
    _check_islands(args)
    task = _data_task(args)
    if task is None:
        return EXIT_FAILURE
    return _run(args, task=task, model_spec=args.model, budget=budget)


def _data_flags(p: argparse.ArgumentParser) -> None:
    """``--data RAW_DIR``, ``--goal`` and ``--metric``: build the task, then search it."""
    p.add_argument(
        "--data",
        metavar="RAW_DIR",
        help="instead of --task: a raw data folder (files as downloaded; a sample submission "
        "and description.txt are followed) built into RUN_DIR/task with the task builder "
        "(same --model and --sandbox), then searched",
    )
    p.add_argument(
        "--goal",
        default="",
        metavar="TEXT",
        help='with --data: the task in words, e.g. "predict Survived" (the column it names '
        "is the target, a metric it names is used; shown to the model)",
    )
    p.add_argument(
        "--metric",
        default=None,
        metavar="NAME",
        help="with --data: the task's metric (accuracy, auc, log_loss, macro_f1, map@k, "
        "rmse, rmsle, mae)",
    )


def _data_task(args: argparse.Namespace) -> str | None:
    """The task to search: ``--task``, or the package ``--data`` builds into the run directory
    (``RUN_DIR/task``, recorded in the manifest's ``extra.cli.data``); None when the build did
    not produce a package (its stage and reason are printed).

    Raises:
        InvalidArgument: neither or both of --task and --data, --goal/--metric without --data,
            a bad --metric, or a run directory that cannot take a new run.
    """
    if (args.task is None) == (args.data is None):
        raise InvalidArgument("give exactly one of --task TASK and --data RAW_DIR")
    if args.data is None:
        if args.goal or args.metric:
            raise InvalidArgument("--goal and --metric go with --data RAW_DIR (a task to build)")
        return str(args.task)
    from openmle.builder import BuildOptions, build_task, sandbox_factory
    from openmle.search import DATA_TASK_DIR

    if not Path(args.data).expanduser().is_dir():
        raise InvalidArgument(
            f"--data {args.data}: not a directory; pass the folder holding the raw data files "
            "(as downloaded)"
        )
    out = Path(args.out) if args.out else _default_out(args.command)
    check_out(out)
    args.out = str(out)
    package = (out / DATA_TASK_DIR).absolute()
    options = BuildOptions(goal=args.goal, metric=args.metric)
    box = sandbox_factory(args.sandbox)
    stream = sys.stderr if args.json else sys.stdout
    stream.write(f"openmle search: building {args.data} into {package}\n")
    result = run_async(
        lambda: build_task(
            args.data, package, build_model(args.model), sandbox=box, options=options
        )
    )
    if result.status != "built":
        print(
            f"openmle: error: the task build {result.status} at stage {result.stage}: "
            f"{result.reason[:2000]}",
            file=sys.stderr,
        )
        return None
    spec = result.record["spec"]["spec"]
    args.data_record = {
        "raw_dir": str(Path(args.data).absolute()),
        "package": DATA_TASK_DIR,
        "goal": args.goal,
        "metric": spec["metric"],
        "target": spec["target"],
    }
    stream.write(
        f"openmle search: built task: predict {spec['target']!r} of {spec['data_file']!r}, "
        f"metric {spec['metric']}\n"
    )
    return str(package)


# ---------------------------------------------------------------- --preset (one group)


def _preset(args: argparse.Namespace) -> Preset | None:
    """The ``--preset`` of ``openmle search`` (None without one)."""
    name = getattr(args, "preset", None)
    if not name:
        return None
    from openmle.search import Preset

    return Preset.named(name)


def _preset_parts(
    args: argparse.Namespace, task: str, budget: Any, config: Any, prompts: Any
) -> dict[str, Any]:
    """With ``--preset``: the search config, prompt builder and manifest entry of the preset
    (deviations: every preset field the run does not hold at its value); else nothing.
    """
    preset = _preset(args)
    if preset is None:
        return {}
    import attrs

    from openmle._types import Split
    from openmle.errors import OpenMLEError
    from openmle.gym import data_preview, resolve_task
    from openmle.operators import PromptBudget

    timeout = args.timeout if args.timeout is not None else preset.time_limit_s
    config = attrs.evolve(config, timeout_s=timeout, max_debug_depth=preset.max_debug_depth)
    preview = ""
    try:
        t = resolve_task(task)
        preview = data_preview(t.public_dir(Split.VALID), exclude=t.private_paths)
    except (OpenMLEError, OSError):
        preview = ""
    prompts = attrs.evolve(
        prompts,
        budget=PromptBudget(operator_max_chars=dict(preset.prompt_chars)),
        data_preview=preview,
    )
    used = {
        "steps": budget.steps,
        "sandbox_s": budget.sandbox_s,
        "wall_s": budget.wall_s,
        "time_limit_s": timeout,
        "seeds": 1,
        "max_debug_depth": preset.max_debug_depth,
        "selector": "released" if args.selector == "three-factor" else args.selector,
        "prompt_chars": dict(preset.prompt_chars),
        "data_preview": bool(preview),
        "budget_line": True,
        "validation": "split",
        "gpu_memory_gb": None,
    }
    entry = {"preset": preset.to_dict(), "deviations": preset.deviations(used)}
    return {"config": config, "prompts": prompts, "entry": entry}


def _resume(args: argparse.Namespace) -> int:
    from openmle.search import ProgressLine, ResumeSpec, RunDir, aresume_search

    rd = RunDir.open(args.run_dir)
    cli = dict(rd.manifest.get("extra", {}).get("cli") or {})
    where = f"{args.run_dir}/manifest.json"
    model_spec = args.model or _checked_recorded(
        cli.get("model") or _recorded_spec(rd.manifest, "model"), "--model", where
    )
    summary_spec = args.summary_model or _checked_recorded(
        cli.get("summary_model"), "--summary-model", where
    )
    if not model_spec:
        raise InvalidArgument(
            f"{args.run_dir} was started with model {_recorded_class(rd.manifest, 'model')}, "
            "which openmle cannot rebuild; pass --model SPEC to say which model to resume with"
        )
    # A CLI run from before --sandbox existed ran on the local sandbox.
    sandbox_spec = args.sandbox or _from_manifest(
        cli.get("sandbox", "local" if cli else None) or _recorded_spec(rd.manifest, "sandbox"),
        "--sandbox",
        where,
    )
    if not sandbox_spec:
        raise InvalidArgument(
            f"{args.run_dir} was started with sandbox "
            f"{_recorded_class(rd.manifest, 'sandbox')}, which openmle cannot rebuild; pass "
            "--sandbox SPEC (local, docker, ray, service:URL, module:callable or a registered "
            "name) to say which sandbox to resume on"
        )
    hib = bool(rd.manifest["task"]["higher_is_better"])
    budget = resumed_budget(rd.budget(), args.budget, args.prices)
    stream = sys.stderr if args.json else sys.stdout
    steps = budget.steps
    priors_sha256 = _library_hash(args.priors)  # a bad library: refused before anything runs
    model = _model_for_run(model_spec, args, cli.get("record"))
    sandbox = build_sandbox(sandbox_spec, str(rd.manifest["task"]["name"]))
    tracker = None
    try:
        with _closing(sandbox):
            tracker = open_track(args, rd.path.name)
            result = _search_run(
                aresume_search,
                rd.path,
                ResumeSpec(
                    model=model,
                    sandbox=sandbox,
                    selector=build_selector(cli.get("selector", "three-factor"), hib),
                    prompts=_prompts(
                        model,
                        bool(cli.get("summaries", False)),
                        _summary_model(summary_spec, args),
                    ),
                    budget=budget,
                    priors_sha256=priors_sha256,
                ),
                on_progress=None if args.quiet else ProgressLine(stream, steps),
                quiet=args.quiet,
                track=tracker,
            )
    except KeyboardInterrupt:
        close_track(tracker)
        return interrupted(rd.path)
    except BaseException:
        close_track(tracker)
        raise
    return _finish(args, result, rd.path, tracker)


def resumed_budget(in_force: Budget, spec: str | None, prices_path: str | None) -> Budget:
    """The budget of a resumed session: ``in_force`` (the run's budget in force) with the caps
    ``--budget`` names replaced (``steps=60`` extends the step cap and keeps ``wall_s``), and
    ``--prices`` replacing the price table when given.

    Raises:
        InvalidArgument: a bad ``--budget`` or ``--prices`` (as :func:`parse_budget`).
    """
    import attrs

    prices = load_prices(prices_path) if prices_path else in_force.prices
    changes: dict[str, Any] = {} if prices_path is None else {"prices": prices}
    if spec:
        given = parse_budget(spec, prices=prices, on_exhaust=in_force.on_exhaust)
        named = {p.partition("=")[0].strip() for p in spec.split(",") if p.strip()}
        changes.update({key: getattr(given, key) for key in named})
    return attrs.evolve(in_force, **changes)


def _from_manifest(spec: object, flag: str, where: str) -> str | None:
    """A spec read from the manifest: None when absent or not text; refused when it talks
    to a server (see :func:`openmle._cli._common.recorded_spec`).
    """
    if not isinstance(spec, str) or not spec:
        return None
    return recorded_spec(spec, flag=flag, where=where)


def _library_hash(path: str | None) -> str | None:
    """The content hash of the prior library file ``path`` (None for None)."""
    if path is None:
        return None
    from openmle.priors import load_library

    return load_library(path).content_hash


def _recorded_spec(manifest: dict[str, Any], part: str) -> str | None:
    spec = (manifest.get(part) or {}).get("spec")
    return spec if isinstance(spec, str) and spec else None


def _recorded_class(manifest: dict[str, Any], part: str) -> str:
    return str((manifest.get(part) or {}).get("class") or "(not recorded)")


def _export(args: argparse.Namespace) -> int:
    from openmle.search import export_run

    path = export_run(args.run_dir, format=args.format, out=args.out)
    if args.json:
        print(json.dumps({"path": str(path), "format": args.format}))
    else:
        print(f"wrote {path}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from openmle.search import write_comparison, write_report

    if args.run_b is not None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UserWarning)
            path, comp = write_comparison(args.run_dir, args.run_b, args.out)
        for w in caught:
            print(f"openmle: warning: {w.message}", file=sys.stderr)
        if args.json:
            print(
                json.dumps(
                    {
                        "report": str(path),
                        "first_divergence": comp.first_divergence,
                        "divergence": comp.divergence,
                    }
                )
            )
        else:
            print(comp.summary())
            print(f"wrote {path}")
        return 0
    path = write_report(args.run_dir, args.out)
    if args.json:
        print(json.dumps({"report": str(path)}))
    else:
        print(f"wrote {path}")
    return 0


def _common(p: argparse.ArgumentParser, *, preset: bool = False) -> None:
    """The flags ``demo`` and ``search`` share (``preset``: the command has ``--preset``)."""
    p.add_argument(
        "--sandbox",
        default="local",
        help=SANDBOX_HELP,
    )
    p.add_argument(
        "--selector",
        default="three-factor",
        choices=SELECTORS,
        help="parent selection (default: three-factor, the released weights 1.0/0.4/0.25)",
    )
    p.add_argument(
        "--workers", type=_positive(int), default=2, help="expansions in flight (default: 2)"
    )
    p.add_argument("--seed", type=int, default=0, help="search seed (default: 0)")
    p.add_argument(
        "--timeout",
        type=_positive(float),
        default=None,
        help="per-run limit of one program in seconds (default: 300"
        + ("; --preset paper: 7200)" if preset else ")"),
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default: openmle-runs/...)")
    p.add_argument("--app-dir", metavar="DIR", help=APP_DIR_HELP)
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--quiet", action="store_true", help="no per-node progress lines")
    add_track_flag(p)
    p.add_argument(
        "--summaries",
        action="store_true",
        help="memory shows node summaries written by the model on demand (cached in the run "
        "directory; their tokens count in the budget)",
    )
    p.add_argument(
        "--summary-model",
        metavar="SPEC",
        help="with --summaries: a separate (cheaper) model writes the summaries, recorded in "
        "the manifest and counted in the budget at its own price (default: --model)",
    )


def _positive(kind: type[int] | type[float]) -> Any:
    """An argparse type: a finite number > 0 (argparse names the flag and exits 2)."""

    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value <= 0:
            what = "an integer >= 1" if kind is int else "a number of seconds > 0"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        return value

    parse.__name__ = "integer" if kind is int else "number"
    return parse


def _at_least_two(text: str) -> int:
    """The argparse type of ``--islands``: an integer >= 2 (argparse names the flag)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(
            f"expected an integer >= 2 (islands need at least two populations), got {text!r}"
        )
    return value


_ISLAND_SELECTORS = ("three-factor", "three-factor-paper")


def _check_islands(args: argparse.Namespace) -> None:
    """``--islands N`` needs a three-factor ``--selector`` (checked before anything runs)."""
    islands = getattr(args, "islands", None)
    if islands and args.selector not in _ISLAND_SELECTORS:
        raise InvalidArgument(
            f"--islands {islands} needs --selector three-factor or three-factor-paper (parents "
            f"are chosen within an island by it), not --selector {args.selector}; change "
            "--selector or drop --islands"
        )


def _model_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--api-key-file",
        metavar="FILE",
        help="file holding the API key of an openai: model (default: $OPENAI_API_KEY; a local "
        "server without auth needs none)",
    )
    p.add_argument(
        "--prices",
        metavar="FILE",
        help="JSON or TOML table of model id ('*' for any) to [prompt, completion] USD per "
        'million tokens, e.g. {"gpt-4o-mini": [0.15, 0.6]}; needed by --budget usd=...; a cost '
        "the server reports (usage.cost) is counted as it is",
    )


def _summary_model(spec: str | None, args: argparse.Namespace) -> OperatorModel | None:
    """The model ``--summary-model SPEC`` names (None without it: the main model)."""
    if spec is None:
        return None
    if not getattr(args, "summaries", True):
        raise InvalidArgument(
            "--summary-model writes node summaries, which this run does not use: add "
            "--summaries, or drop --summary-model"
        )
    if _ROUTE_START.match(spec):
        raise InvalidArgument(
            f"--summary-model {spec!r}: one model writes the summaries; give one SPEC "
            "(e.g. --summary-model offline), not routes"
        )
    return _model_for_run(spec, args, None, flag="--summary-model")


def _prompts(
    model: OperatorModel, summaries: bool, summary_model: OperatorModel | None = None
) -> OperatorPrompts:
    """The prompt builder; with ``summaries``, node summaries written by ``summary_model``
    (default: ``model``).
    """
    from openmle.search import OperatorPrompts, SummaryStore

    writer = model if summary_model is None else summary_model
    return OperatorPrompts(summaries=SummaryStore(model=writer) if summaries else None)


def register(subparsers: Any) -> None:
    """Add ``demo``, ``search``, ``resume``, ``export`` and ``report``."""
    _register_demo(subparsers)
    _register_search(subparsers)
    _register_resume(subparsers)
    _register_export_and_report(subparsers)


def _register_demo(subparsers: Any) -> None:
    demo = subparsers.add_parser(
        "demo",
        help="search a bundled task with the offline model and the local sandbox",
        description=(
            "Search a bundled task with the offline operator model (no LLM, no network) and the "
            "local sandbox, print live progress and a summary, and write the run directory "
            "and its HTML report. A few minutes on 2 cores."
        ),
    )
    demo.add_argument("--task", default="tabular-binary", help="bundled task name or path")
    demo.add_argument("--steps", type=_positive(int), default=20, help="nodes to try (default: 20)")
    demo.add_argument(
        "--rewards", action="store_true", help="instead, print the worked reward example"
    )
    _common(demo)
    demo.set_defaults(handler=_demo)


def _register_search(subparsers: Any) -> None:
    search = subparsers.add_parser(
        "search",
        help="search a task with Draft/Improve/Debug/Crossover under a budget",
        description="Search a task and write a resumable run directory.",
    )
    search.add_argument("--task", help="task package path or bundled task name")
    search.add_argument("--model", default="offline", help=MODEL_HELP)
    _data_flags(search)
    search.add_argument(
        "--budget",
        default=None,
        help="caps, e.g. steps=30,sandbox_s=1800,wall_s=3600,tokens=2e6,usd=5 (usd needs "
        "--prices) (default: steps=30)",
    )
    search.add_argument(
        "--steps",
        type=_positive(int),
        default=None,
        help="nodes to try: the same cap as --budget steps=N, spelled as for demo",
    )
    search.add_argument(
        "--on-exhaust",
        choices=("finish", "cancel"),
        default="finish",
        help="when a cap is reached: let running work finish (default) or cancel it",
    )
    search.add_argument("--record", metavar="FILE", help="record the model's answers (JSONL)")
    _model_flags(search)
    search.add_argument(
        "--ordered",
        action="store_true",
        help="commit in step order (deterministic with a deterministic model and sandbox)",
    )
    search.add_argument(
        "--trust-printed-score",
        action="store_true",
        help="select by the score programs print instead of the sandbox's (recorded in the "
        "manifest; off by default)",
    )
    search.add_argument(
        "--priors",
        metavar="FILE",
        help="a prior library (JSONL, see openmle.priors): the priors retrieved for the task "
        "are shown to Draft and Improve prompts; its hash is kept in the manifest",
    )
    search.add_argument(
        "--preset",
        choices=("paper",),
        help="the paper's operating point (800 steps, 43200 sandbox s, 64800 s wall, 7200 s "
        "per program, debug depth 10, per-operator prompt caps, data preview); flags given "
        "override it and are recorded in the manifest as deviations",
    )
    search.add_argument(
        "--islands",
        type=_at_least_two,
        default=None,
        help="island populations (N >= 2: nodes live on islands, parents are chosen within "
        "one, the weaker half is reset every 10 nodes; needs --selector three-factor)",
    )
    _common(search, preset=True)
    search.set_defaults(handler=_search)


def _register_resume(subparsers: Any) -> None:
    resume = subparsers.add_parser(
        "resume",
        help="continue an interrupted search (also after kill -9)",
        description="Continue a search from its run directory: in-flight steps are re-run, "
        "nothing is lost or duplicated.",
    )
    resume.add_argument("run_dir", metavar="RUN_DIR")
    resume.add_argument("--model", help=f"override the model ({MODEL_HELP})")
    resume.add_argument(
        "--summary-model",
        metavar="SPEC",
        help="override the model that writes node summaries (default: the one the run "
        "recorded, else --model)",
    )
    resume.add_argument(
        "--sandbox",
        help="override the sandbox (default: the one the run recorded; " + SANDBOX_HELP + ")",
    )
    resume.add_argument("--app-dir", metavar="DIR", help=APP_DIR_HELP)
    resume.add_argument(
        "--budget",
        help="caps to change, e.g. steps=60 to extend the run; the caps not named keep their "
        "values (default: the budget in force, the latest session's)",
    )
    resume.add_argument(
        "--priors",
        metavar="FILE",
        help="check that the run resumes with this prior library (refused when its hash "
        "differs from the manifest's); default: the block the run recorded",
    )
    _model_flags(resume)
    resume.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    resume.add_argument("--quiet", action="store_true", help="no per-node progress lines")
    resume.add_argument("--no-report", action="store_true", help="do not write report.html")
    add_track_flag(resume)
    resume.set_defaults(handler=_resume)


def _register_export_and_report(subparsers: Any) -> None:
    export = subparsers.add_parser(
        "export",
        help="export a run's nodes as parquet or JSONL",
        description="One row per node (lineage, operator, outcome, scores, cost, plan, code).",
    )
    export.add_argument("run_dir", metavar="RUN_DIR")
    export.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    export.add_argument("--out", metavar="FILE", help="output file (default: RUN_DIR/nodes.EXT)")
    export.add_argument("--json", action="store_true", help="print the path as JSON")
    export.set_defaults(handler=_export)

    report = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a run (or of two runs side by side)",
        description="Search tree, score curves, best lineage, budget use and each node's "
        "request and answer in one HTML file, plus score.png/score.svg. With two run "
        "directories: both runs side by side (scores over steps, operators, outcomes) and the "
        "first step where they diverge, as one HTML file and a short summary.",
    )
    report.add_argument("run_dir", metavar="RUN_DIR")
    report.add_argument(
        "run_b", metavar="RUN_B", nargs="?", help="a second run to compare RUN_DIR with"
    )
    report.add_argument(
        "--out",
        metavar="FILE",
        help="HTML path (default: RUN_DIR/report.html, or RUN_DIR/compare-<RUN_B name>.html)",
    )
    report.add_argument("--json", action="store_true", help="print the path as JSON")
    report.set_defaults(handler=_report)
