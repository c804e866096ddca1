"""``openmle bench`` for campaigns: engines, routed models, job arrays, live progress.

``bench run|resume --launcher slurm|local`` (a job array through submitit), ``bench status``
(queued, running, finished...), the live table on a terminal and the routed ``--model`` /
``--summary-model`` of a bench; :mod:`openmle._cli._bench` holds the rest of ``bench``.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from openmle.errors import InvalidArgument

__all__ = ["SANDBOX_HELP", "bench_models", "launch", "status", "submit"]


def _summary_spec(s: dict[str, Any]) -> str | None:
    """``--summary-model SPEC`` (one model, never routes), or None."""
    spec = s.get("summary_model")
    if spec is None:
        return None
    from openmle._cli._search import _ROUTE_START

    if _ROUTE_START.match(str(spec)):
        raise InvalidArgument(
            f"--summary-model {spec!r}: one model writes the summaries; give one SPEC "
            "(e.g. --summary-model offline), not routes"
        )
    return str(spec)


def bench_models(model: str, summary: str | None) -> tuple[Any, Any]:
    """The operator model of a ``--model`` spec (routed ``draft=SPEC,...,default=SPEC`` as in
    ``openmle search``) and the ``--summary-model`` one (None without it).
    """
    from openmle._cli._search import _model_for_run

    ns = argparse.Namespace()
    built = _model_for_run(model, ns, None)
    return built, (
        None if summary is None else _model_for_run(summary, ns, None, flag="--summary-model")
    )


def _go(
    args: argparse.Namespace,
    out: Path,
    bench: Any,
    emitter: Callable[[argparse.Namespace], Any],
    done: Callable[..., int],
) -> int:
    """Run ``bench(emit=..., board=...)``: a live table on a terminal, plain lines from
    ``emitter(args)`` otherwise; then ``done(args, out, reports, write_report)``.
    """
    import contextlib

    from openmle._cli._interrupts import run_async
    from openmle.bench import write_report

    board = _board(args)
    emit = board.log if board is not None else emitter(args)
    with board if board is not None else contextlib.nullcontext():
        reports = run_async(lambda: bench(emit=emit, board=board))
    return done(args, out, reports, write_report)


def _board(args: argparse.Namespace) -> Any:
    """A live table when standard output is a terminal and ``rich`` is installed, else None."""
    if args.json or args.quiet or getattr(args, "plain", False) or not sys.stdout.isatty():
        return None
    try:
        from openmle.bench import LiveBoard

        return LiveBoard()
    except ImportError:  # MissingDependency: no rich, plain lines
        return None


SANDBOX_HELP = (
    "where programs run: local (default), docker, ray (a Ray cluster: RAY_ADDRESS or a new "
    "local one), service:URL (an `openmle serve` started with --sandbox "
    "openmle.bench:bench_task_sandbox, --sandbox-option data_roots=DIR naming the benchmark's "
    "data, and a --task-root holding the bench directory), "
    "module:callable or an openmle.sandboxes entry point"
)


def _add_launch_flags(p: Any) -> None:
    """``--launcher`` and ``--launcher-option`` (a job array through submitit)."""
    p.add_argument(
        "--launcher",
        choices=("slurm", "local"),
        help="submit each unfinished competition x seed run as one task of a job array "
        "(slurm: sbatch through submitit; local: submitit's local executor) and return; "
        "follow it with `openmle bench status BENCH_DIR` (needs the slurm extra)",
    )
    p.add_argument(
        "--launcher-option",
        dest="launcher_option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a submitit parameter, repeatable (slurm_partition=gpu, timeout_min=720, "
        "cpus_per_task=8, slurm_array_parallelism=16, ...)",
    )


def _add_status(sub: Any) -> None:
    """Add ``bench status``: where each run stands (queued, running, finished...)."""
    st = sub.add_parser(
        "status", help="where each run of a bench stands: queued, running, finished, ..."
    )
    st.add_argument("bench_dir", metavar="BENCH_DIR")
    st.add_argument("--json", action="store_true", help="print the runs as JSON")

    def handler(args: argparse.Namespace) -> int:
        from openmle._cli._bench_campaign import status

        return status(args)

    st.set_defaults(handler=handler)


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


# The parameters submitit's LocalExecutor uses (it ignores any other silently), and the two
# every launcher is given here.
_LOCAL_KEYS = (
    "cpus_per_task",
    "gpus_per_node",
    "name",
    "nodes",
    "setup",
    "signal_delay_s",
    "tasks_per_node",
    "timeout_min",
    "visible_gpus",
)


def _launcher_options(args: argparse.Namespace, config: Any, launcher: str) -> dict[str, Any]:
    """Submitit parameters: per task the CPUs and GPUs of one run, a time limit from the
    budget's ``wall_s`` (plus an hour; none: a day), the array's parallelism from
    ``--concurrency``; then each ``--launcher-option KEY=VALUE`` (JSON values, else text).

    Raises:
        InvalidArgument: an option not KEY=VALUE, or (``local``) a key the executor ignores.
    """
    res = config.resources
    workers = max([config.workers, *(a.workers for a in config.arms)])
    wall = config.budget.get("wall_s")
    params: dict[str, Any] = {
        "cpus_per_task": max(1, math.ceil(res.cpus * workers)),
        "timeout_min": math.ceil(float(wall) / 60) + 60 if wall else 24 * 60,
        "name": "openmle-bench",
    }
    if res.gpus:
        params["gpus_per_node"] = res.gpus * workers
    if config.concurrency and launcher == "slurm":
        params["slurm_array_parallelism"] = config.concurrency
    for item in getattr(args, "launcher_option", None) or []:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise InvalidArgument(
                f"Expected --launcher-option KEY=VALUE (e.g. slurm_partition=gpu) but got {item!r}"
            )
        if launcher == "local" and key.strip() not in _LOCAL_KEYS:
            raise InvalidArgument(
                f"--launcher-option {key.strip()}: --launcher local takes none such; it takes "
                f"{', '.join(_LOCAL_KEYS)}"
            )
        params[key.strip()] = _option_value(value.strip())
    return params


def check_launcher_options(launcher: str, params: Mapping[str, Any]) -> None:
    """Hand ``params`` to a throwaway executor, so that an option the launcher refuses (an
    unknown key, a malformed value) fails before the bench directory is made.

    Raises:
        InvalidArgument: the option, as the executor refused it.
        MissingDependency: ``submitit`` is not installed.
    """
    from openmle.bench import array_executor

    with tempfile.TemporaryDirectory(prefix="openmle-launch-check-") as scratch:
        array_executor(launcher, Path(scratch) / "submitit", params)


def array_models(model: str, summary: str | None) -> tuple[Any, Any]:
    """Run in each task of a job array: :func:`bench_models` (picklable by reference)."""
    return bench_models(model, summary)


def launch(args: argparse.Namespace, out: Path, config: Any, launcher: str) -> int:
    """``bench run --launcher``: make the bench directory (manifest, preflight; no run) and
    submit its runs as a job array.
    """
    from openmle._cli._interrupts import run_async
    from openmle.bench import arun_bench

    check_launcher_options(launcher, _launcher_options(args, config, launcher))
    run_async(lambda: arun_bench(out, config=config, model=None, only=()))
    return submit(args, out, launcher, config.model, config.summary_model, config.sandbox)


def submit(
    args: argparse.Namespace,
    out: Path,
    launcher: str,
    model: str,
    summary: str | None,
    sandbox: str,
) -> int:
    """Submit every unfinished run of the bench at ``out`` as one task of a job array."""
    from openmle.bench import BenchRun, array_executor, submit_array

    run = BenchRun.open(out)
    bench_models(model, summary)  # a bad spec fails here, not in every task
    ex = array_executor(
        launcher, run.path / "launch" / "submitit", _launcher_options(args, run.config, launcher)
    )
    ids = submit_array(
        run.path,
        executor=ex,
        models=functools.partial(array_models, model, summary),
        launcher=launcher,
        sandbox=sandbox,
    )
    if args.json:
        print(json.dumps({"bench_dir": str(run.path), "launcher": launcher, "jobs": ids}))
    else:
        print(
            f"submitted {len(ids)} runs as a {launcher} job array; follow them with "
            f"`openmle bench status {run.path}`, then `openmle bench report {run.path}`"
        )
    return 0


def status(args: argparse.Namespace) -> int:
    """``bench status BENCH_DIR``: one line per run and the count per state."""
    from openmle.bench import launch_status

    rows = launch_status(args.bench_dir)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=2))
        return 0
    width = max([len("competition"), *(len(r.competition_id) for r in rows)])
    arms = any(r.arm for r in rows)
    print(f"{'competition':<{width}}  {'arm  ' if arms else ''}seed  {'state':<11}  job  host")
    for r in rows:
        arm = f"{r.arm or '-':<4} " if arms else ""
        print(
            f"{r.competition_id:<{width}}  {arm}{r.seed:>4}  {r.state:<11}  {r.job_id or '-'}  "
            f"{r.host or '-'}"
        )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    shown = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    print(f"{len(rows)} runs: {shown}")
    return 0
