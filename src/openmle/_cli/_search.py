"""``openmle demo | search | resume | export | report``: run and inspect searches.

Exit codes: 0 the command did its job (a search that found no working program still exits 0
and says so); 1 an error (bad run directory, missing dependency, failed backend); 2 usage
errors (argparse). ``--json`` prints one JSON object on stdout and the progress on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio

from openmle.errors import InvalidArgument

__all__ = ["build_model", "build_selector", "parse_budget", "register"]

MODEL_HELP = (
    "offline (writes programs without an LLM), offline-numpy (no scikit-learn), "
    "replay:FILE (answers recorded with --record), or openai:URL[#MODEL] "
    "(an OpenAI-compatible server, when the openai backend is installed)"
)
SELECTORS = ("three-factor", "three-factor-paper", "greedy", "uniform")


# ----------------------------------------------------------------------------------- builders


def parse_budget(spec: str, *, on_exhaust: str = "finish") -> Any:
    """``"steps=30,sandbox_s=600,wall_s=900,tokens=2e6,usd=5"`` -> :class:`Budget`.

    Raises:
        InvalidArgument: an unknown key or a non-numeric value, naming it.
    """
    from openmle.search import Budget

    kwargs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in {"steps", "sandbox_s", "wall_s", "tokens", "usd"}:
            raise InvalidArgument(
                f"Expected KEY=VALUE with KEY in steps, sandbox_s, wall_s, tokens, usd but got "
                f"--budget part {part!r}; for example --budget steps=30,wall_s=900"
            )
        try:
            number = float(value)
        except ValueError:
            raise InvalidArgument(f"Expected a number but got --budget {key}={value!r}") from None
        kwargs[key] = int(number) if key in {"steps", "tokens"} else number
    if on_exhaust not in ("finish", "cancel"):
        raise InvalidArgument(f"Expected --on-exhaust finish or cancel but got {on_exhaust!r}")
    return Budget(**kwargs, on_exhaust="cancel" if on_exhaust == "cancel" else "finish")


def build_model(spec: str, *, record: str | None = None) -> Any:
    """Build an operator model from a ``--model`` spec (see ``MODEL_HELP``)."""
    from openmle import backends

    model: Any
    if spec in ("offline", "offline-numpy"):
        model = backends.OfflineModel(sklearn=False if spec == "offline-numpy" else None)
    elif spec.startswith("replay:"):
        model = backends.ReplayModel(spec[len("replay:") :])
    elif spec.startswith("openai:"):
        if "OpenAIModel" not in backends.__all__:
            raise InvalidArgument(
                "--model openai:URL needs the OpenAI-compatible backend, which this build of "
                "openmle does not include; use --model offline or replay:FILE"
            )
        url, _, name = spec[len("openai:") :].partition("#")
        model = backends.OpenAIModel(base_url=url, model=name or "default")
    else:
        raise InvalidArgument(f"Expected --model to be one of: {MODEL_HELP}; got {spec!r}")
    if record:
        model = backends.RecordingModel(model, record)
    return model


def build_sandbox(spec: str) -> Any:
    """Build a sandbox from a ``--sandbox`` spec.

    ``local`` (default), ``docker`` (a Docker Engine API at ``$DOCKER_HOST``), ``ray`` (a Ray
    cluster, ``ray.init`` from the environment, local sandboxes on the workers) or
    ``service:URL`` (a job service; the key comes from ``$OPENMLE_SERVICE_API_KEY``).
    """
    from openmle import backends

    if spec == "local":
        return backends.LocalSandbox()
    if spec == "docker":
        return backends.DockerSandbox()
    if spec == "ray":
        return backends.RaySandbox()
    if spec.startswith("service:") and len(spec) > len("service:"):
        return backends.JobServiceSandbox(base_url=spec.removeprefix("service:"))
    raise InvalidArgument(f"Expected --sandbox local, docker, ray or service:URL but got {spec!r}")


def build_selector(name: str, higher_is_better: bool) -> Any:
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


class _Display:
    """One line per committed node: step, operator, outcome, score, best so far, budget."""

    def __init__(self, stream: TextIO, total: int | None) -> None:
        self.stream = stream
        self.total = total
        self.t0 = time.monotonic()

    def __call__(self, progress: Any) -> None:
        node = progress.last
        if node is None:
            return
        done = progress.steps_done
        of = f"/{self.total}" if self.total else ""
        score = "      —" if node.score is None else f"{node.score:9.5g}"
        best = "—" if progress.best_score is None else f"{progress.best_score:.5g}"
        fr = dict(progress.fractions)
        if "steps" in fr and self.total:
            fr["steps"] = done / self.total  # finished steps, not proposed ones
        used = max(fr.values()) if fr else 0.0
        self.stream.write(
            f"[{done:>3}{of}] {node.node_id} {node.operator.value:<9} "
            f"{('ok' if node.ok else node.outcome.value):<18} {score}  best {best:<9} "
            f"budget {100 * used:3.0f}%  {time.monotonic() - self.t0:6.1f}s\n"
        )
        self.stream.flush()


def _summary(result: Any, run_dir: Path | None, report: Path | None) -> dict[str, Any]:
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


def _finish(args: argparse.Namespace, result: Any, run_dir: Path | None) -> int:
    report = None
    if run_dir is not None and not getattr(args, "no_report", False):
        from openmle.search._report import write_report

        report = write_report(run_dir)
    s = _summary(result, run_dir, report)
    if args.json:
        print(json.dumps(s, sort_keys=True))
    else:
        _print_summary(s, sys.stdout)
    return 0


def _default_out(prefix: str) -> Path:
    return Path("openmle-runs") / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def _run(args: argparse.Namespace, *, task: str, model_spec: str, budget: Any) -> int:
    from openmle.search._driver import _higher_is_better

    hib = _higher_is_better(task)
    out = Path(args.out) if args.out else _default_out(args.command)
    model = build_model(model_spec, record=getattr(args, "record", None))
    sandbox = build_sandbox(args.sandbox)
    with _closing(sandbox):
        result = _run_search_cli(args, task, out, model, model_spec, sandbox, budget, hib)
    return _finish(args, result, out)


def _run_search_cli(
    args: argparse.Namespace,
    task: str,
    out: Path,
    model: Any,
    model_spec: str,
    sandbox: Any,
    budget: Any,
    hib: bool,
) -> Any:
    from openmle.search import SearchConfig, run_search

    selector = build_selector(args.selector, hib)
    config = SearchConfig(
        seed=args.seed,
        timeout_s=args.timeout,
        trust_printed_score=getattr(args, "trust_printed_score", False),
    )
    stream = sys.stderr if args.json else sys.stdout
    if not args.json:
        stream.write(
            f"openmle {args.command}: task {task}, model {model_spec}, sandbox {args.sandbox}, "
            f"selector {args.selector}, {args.workers} workers, writing {out}\n"
        )
    return run_search(
        task,
        model=model,
        sandbox=sandbox,
        budget=budget,
        selector=selector,
        config=config,
        workers=args.workers,
        ordered=getattr(args, "ordered", False),
        run_dir=out,
        higher_is_better=hib,
        on_progress=None if args.quiet else _Display(stream, budget.steps),
        prompts=_prompts(model, args.summaries),
        manifest_extra={
            "cli": {
                "model": model_spec,
                "sandbox": args.sandbox,
                "selector": args.selector,
                "record": getattr(args, "record", None),
                "summaries": bool(args.summaries),
            }
        },
    )


@contextlib.contextmanager
def _closing(sandbox: Any) -> Iterator[None]:
    """Close ``sandbox`` (``aclose``) however the block ends, an interruption included.

    SIGINT and SIGTERM are held off while closing, so a second Ctrl-C cannot leave the
    sandbox's containers or files behind; the last one held is re-raised after.
    """
    try:
        yield
    finally:
        close = getattr(sandbox, "aclose", None)
        if close is not None:
            held: list[int] = []
            in_main = threading.current_thread() is threading.main_thread()
            previous: dict[int, Any] = {}
            if in_main:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    previous[sig] = signal.signal(sig, lambda s, f: held.append(int(s)))
            try:
                anyio.run(close)
            except Exception as exc:  # closing must not hide the search's own outcome
                print(f"openmle: closing the sandbox failed: {exc}", file=sys.stderr)
            finally:
                for signum, handler in previous.items():
                    signal.signal(signum, handler)
            if held:
                raise KeyboardInterrupt


def _demo(args: argparse.Namespace) -> int:
    if args.rewards:
        from openmle._cli import _demo as rewards_demo

        fig = rewards_demo.run_demo()
        if args.json:
            print(json.dumps(fig, sort_keys=True))
        else:
            rewards_demo._print_table(fig)
        return 0
    budget = parse_budget(f"steps={args.steps}")
    return _run(args, task=args.task, model_spec="offline", budget=budget)


def _search(args: argparse.Namespace) -> int:
    budget = parse_budget(args.budget, on_exhaust=args.on_exhaust)
    return _run(args, task=args.task, model_spec=args.model, budget=budget)


def _resume(args: argparse.Namespace) -> int:
    from openmle.search import RunDir, resume_search

    rd = RunDir.open(args.run_dir)
    cli = dict(rd.manifest.get("extra", {}).get("cli") or {})
    model_spec = args.model or cli.get("model")
    if not model_spec:
        raise InvalidArgument(
            f"{args.run_dir} was not started by the CLI; pass --model to say which model to use"
        )
    hib = bool(rd.manifest["task"]["higher_is_better"])
    budget = parse_budget(args.budget) if args.budget else None
    stream = sys.stderr if args.json else sys.stdout
    steps = budget.steps if budget else rd.manifest["budget"].get("steps")
    model = build_model(model_spec, record=cli.get("record"))
    sandbox = build_sandbox(cli.get("sandbox", "local"))
    with _closing(sandbox):
        result = resume_search(
            rd.path,
            model=model,
            sandbox=sandbox,
            selector=build_selector(cli.get("selector", "three-factor"), hib),
            prompts=_prompts(model, bool(cli.get("summaries", False))),
            budget=budget,
            on_progress=None if args.quiet else _Display(stream, steps),
        )
    return _finish(args, result, rd.path)


def _export(args: argparse.Namespace) -> int:
    from openmle.search._export import export_run

    path = export_run(args.run_dir, format=args.format, out=args.out)
    if args.json:
        print(json.dumps({"path": str(path), "format": args.format}))
    else:
        print(f"wrote {path}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from openmle.search._report import write_report

    path = write_report(args.run_dir, args.out)
    if args.json:
        print(json.dumps({"report": str(path)}))
    else:
        print(f"wrote {path}")
    return 0


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--sandbox",
        default="local",
        help="where programs run: local (default), docker, ray or service:URL",
    )
    p.add_argument(
        "--selector",
        default="three-factor",
        choices=SELECTORS,
        help="parent selection (default: three-factor, the released weights 1.0/0.4/0.25)",
    )
    p.add_argument("--workers", type=int, default=2, help="expansions in flight (default: 2)")
    p.add_argument("--seed", type=int, default=0, help="search seed (default: 0)")
    p.add_argument(
        "--timeout", type=float, default=300.0, help="per-run limit in seconds (default: 300)"
    )
    p.add_argument("--out", metavar="RUN_DIR", help="run directory (default: openmle-runs/...)")
    p.add_argument("--no-report", action="store_true", help="do not write report.html")
    p.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    p.add_argument("--quiet", action="store_true", help="no per-node progress lines")
    p.add_argument(
        "--summaries",
        action="store_true",
        help="memory shows node summaries written by the model on demand (cached in the run "
        "directory; their tokens count in the budget)",
    )


def _prompts(model: Any, summaries: bool) -> Any:
    from openmle.search import OperatorPrompts, SummaryStore

    return OperatorPrompts(summaries=SummaryStore(model=model) if summaries else None)


def register(subparsers: Any) -> None:
    """Add ``demo``, ``search``, ``resume``, ``export`` and ``report``."""
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
    demo.add_argument("--steps", type=int, default=20, help="nodes to try (default: 20)")
    demo.add_argument(
        "--rewards", action="store_true", help="instead, print the worked reward example"
    )
    _common(demo)
    demo.set_defaults(handler=_demo)

    search = subparsers.add_parser(
        "search",
        help="search a task with Draft/Improve/Debug/Crossover under a budget",
        description="Search a task and write a resumable run directory.",
    )
    search.add_argument("--task", required=True, help="task package path or bundled task name")
    search.add_argument("--model", default="offline", help=MODEL_HELP)
    search.add_argument(
        "--budget",
        default="steps=30",
        help="caps, e.g. steps=30,sandbox_s=1800,wall_s=3600,tokens=2e6,usd=5 (default: steps=30)",
    )
    search.add_argument(
        "--on-exhaust",
        choices=("finish", "cancel"),
        default="finish",
        help="when a cap is reached: let running work finish (default) or cancel it",
    )
    search.add_argument("--record", metavar="FILE", help="record the model's answers (JSONL)")
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
    _common(search)
    search.set_defaults(handler=_search)

    resume = subparsers.add_parser(
        "resume",
        help="continue an interrupted search (also after kill -9)",
        description="Continue a search from its run directory: in-flight steps are re-run, "
        "nothing is lost or duplicated.",
    )
    resume.add_argument("run_dir", metavar="RUN_DIR")
    resume.add_argument("--model", help=f"override the model ({MODEL_HELP})")
    resume.add_argument("--budget", help="a new budget, e.g. steps=60 to extend the run")
    resume.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    resume.add_argument("--quiet", action="store_true", help="no per-node progress lines")
    resume.add_argument("--no-report", action="store_true", help="do not write report.html")
    resume.set_defaults(handler=_resume)

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
        help="write a self-contained HTML report of a run",
        description="Search tree, score curves, best lineage and budget use in one HTML file, "
        "plus score.png/score.svg.",
    )
    report.add_argument("run_dir", metavar="RUN_DIR")
    report.add_argument("--out", metavar="FILE", help="HTML path (default: RUN_DIR/report.html)")
    report.add_argument("--json", action="store_true", help="print the path as JSON")
    report.set_defaults(handler=_report)
