"""``openmle task``: validate task packages, grade submissions, list bundled tasks.

Exit codes: 0 the package is valid / the submission graded; 1 validation errors / an invalid
submission; 2 usage errors (no such task, bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from openmle._cli._interrupts import run_async
from openmle.errors import InvalidArgument

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add ``task validate``, ``grade``, ``list``, ``raw``, ``blocklist``, ``build`` and
    ``build-many`` to the ``openmle`` parser.
    """
    task = subparsers.add_parser(
        "task",
        help="validate task packages and grade submissions",
        description="Validate task packages, grade submissions and list the bundled tasks. "
        "Exit codes: 0 ok, 1 validation errors or an invalid submission, 2 usage errors.",
    )
    sub = task.add_subparsers(dest="task_command", metavar="SUBCOMMAND")
    task.set_defaults(handler=lambda args: _usage(task))

    v = sub.add_parser("validate", help="run the deterministic checks of a task package")
    v.add_argument("path", metavar="PATH", help="task package directory or bundled task name")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument(
        "--no-smoke-test",
        dest="smoke_test",
        action="store_false",
        help="skip grading the sample submissions",
    )
    v.set_defaults(handler=_validate)

    g = sub.add_parser("grade", help="grade a submission CSV (in a separate process)")
    g.add_argument("path", metavar="PATH", help="task package directory or bundled task name")
    g.add_argument("submission", metavar="SUBMISSION", help="the CSV to grade")
    g.add_argument(
        "--split",
        choices=("valid", "test"),
        default="test",
        help="answers to grade against: the validation hold-out or the private test answers",
    )
    g.add_argument("--json", action="store_true", help="print the report as JSON")
    g.set_defaults(handler=_grade)

    ls = sub.add_parser("list", help="list the bundled tasks (generated on first use)")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    ls.set_defaults(handler=_list)

    r = sub.add_parser(
        "raw",
        help="write a bundled task's raw data (data.csv, description.txt) as a raw directory",
        description="Write bundled task NAME's raw data into the new directory --out, for "
        "openmle task build. It is evaluation data: the builder's shipped blocklist refuses it "
        "unless the build gets --no-shipped-blocklist.",
    )
    r.add_argument("name", metavar="NAME", help="a bundled task name (openmle task list)")
    r.add_argument("--out", required=True, metavar="RAW_DIR", help="the new raw directory")
    r.set_defaults(handler=_raw)

    bl = sub.add_parser(
        "blocklist",
        help="print blocklist lines (file and table fingerprints) of evaluation data you hold",
        description="Print a blocklist line for every file under PATH: sha256:<hex> (the "
        "bytes: refuses a renamed copy) and, for a CSV/TSV/JSON table, table:<hex> (its "
        "content: refuses a renamed and re-saved copy). With --to FILE the lines are appended "
        "to FILE, for openmle task build --blocklist FILE.",
    )
    bl.add_argument("paths", nargs="+", metavar="PATH", help="data files or folders")
    bl.add_argument("--to", default=None, metavar="FILE", help="append the lines to FILE")
    bl.add_argument("--name", default="", help="also refuse this dataset name (a name: line)")
    bl.set_defaults(handler=_blocklist)

    _register_build(sub)


def _blocklist(args: argparse.Namespace) -> int:
    from openmle.builder import fingerprint_lines

    lines = fingerprint_lines(args.paths, name=args.name)
    text = "".join(line + "\n" for line in lines)
    if args.to is None:
        print(text, end="")
        return EXIT_OK
    try:
        with open(Path(args.to).expanduser(), "a", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        print(f"openmle: error: --to {args.to!r}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"appended {len(lines)} line(s) to {args.to}")
    return EXIT_OK


def _raw(args: argparse.Namespace) -> int:
    from openmle.gym import bundled_raw

    try:
        out = bundled_raw(args.name, args.out)
    except OSError as exc:  # the command line was right; writing failed
        print(f"openmle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(f"wrote {out}")
    return EXIT_OK


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return EXIT_USAGE


def _root_of(ref: str) -> Path:
    """The package root ``ref`` names: a bundled task or a directory.

    Raises:
        InvalidArgument: neither (exit 2); a misspelt bundled name gets "did you mean", as
            ``search --task`` and :func:`openmle.gym.resolve_task` say it.
    """
    from openmle.gym import bundled, bundled_names, resolve_task

    if ref in bundled_names():
        return bundled(ref).root
    path = Path(ref).expanduser()
    if not path.is_dir():
        resolve_task(ref)  # raises, naming the closest bundled task
    return path


def _validate(args: argparse.Namespace) -> int:
    from openmle.gym import validate_path

    report = validate_path(_root_of(args.path), smoke_test=args.smoke_test)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(f"task {report.task} ({report.path})")
        print(f"checks: {', '.join(report.checks)}")
        if report.sample_score is not None:
            print(f"sample submission scores {report.sample_score:.6g} on the test split")
        verdict = "OK" if report.ok else "FAILED"
        print(f"{verdict}: {len(report.errors)} error(s), {len(report.warnings)} warning(s)")
        for p in report.problems:
            print(f"  {p}")
    return EXIT_OK if report.ok else EXIT_FAILURE


def _grade(args: argparse.Namespace) -> int:
    from openmle.gym import load_task

    task = load_task(_root_of(args.path))
    report = task.grade(Path(args.submission), args.split)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return EXIT_OK if report.valid else EXIT_FAILURE
    direction = "higher" if report.higher_is_better else "lower"
    head = f"task {report.task}, split {report.split.value}"
    if not report.valid:
        print(f"{head}: INVALID submission: {report.reason}")
        return EXIT_FAILURE
    print(f"{head}: score {report.score:.6g} ({direction} is better)")
    if report.leaderboard_size:
        rank = report.human_rank or 0.0
        print(
            f"leaderboard ({report.leaderboard_size} entries): beats {rank:.1%}, medal "
            f"{report.medal or 'none'}, above median: {'yes' if report.above_median else 'no'} "
            f"(gold {report.gold_threshold:.6g}, silver {report.silver_threshold:.6g}, "
            f"bronze {report.bronze_threshold:.6g}, median {report.median_threshold:.6g})"
        )
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    from openmle.gym import bundled, bundled_names

    rows = []
    for name in bundled_names():
        try:
            task = bundled(name)
        except InvalidArgument as exc:  # pragma: no cover - names come from the registry
            print(f"openmle: error: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        rows.append(
            {
                "name": name,
                "metric": task.metric_name,
                "higher_is_better": task.higher_is_better,
                "path": str(task.root),
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        table = [["task", "metric", "better", "path"]]
        for r in rows:
            way = "higher" if r["higher_is_better"] else "lower"
            table.append([str(r["name"]), str(r["metric"]), way, str(r["path"])])
        print("\n".join(_aligned(table)))
    return EXIT_OK


def _aligned(table: list[list[str]]) -> list[str]:
    """The rows of ``table`` as lines, each column padded to its widest cell (two spaces
    between columns, the last column unpadded).
    """
    widths = [max(len(row[j]) for row in table) for j in range(len(table[0]) - 1)]
    return [
        "  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]])
        for row in table
    ]


# -------------------------------------------------------------------------- task build(-many)


def _build_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model",
        default="offline",
        help="operator model: offline (default), replay:FILE or openai:URL#MODEL",
    )
    p.add_argument(
        "--sandbox",
        default="local",
        metavar="SPEC",
        help="where prepare.py and the baselines run: local (default; bubblewrap, no "
        "network), docker, or any sandbox factory taking resolver= (module:callable, a "
        "registered name, an openmle.sandboxes entry point)",
    )
    p.add_argument(
        "--blocklist",
        action="append",
        default=[],
        metavar="FILE",
        help="more evaluation data to refuse (sha256:<hex> / md5:<hex> / table:<hex> / "
        "name:<text> / id:<text> lines, e.g. from openmle task blocklist); repeatable, added "
        "to the shipped list",
    )
    p.add_argument(
        "--no-shipped-blocklist",
        dest="shipped_blocklist",
        action="store_false",
        help="do not refuse the data on openmle's shipped list (the bundled tasks' data, "
        "all 75 MLE-bench competitions); only --blocklist files apply. For checking the builder on "
        "evaluation data, never for training corpora",
    )
    p.add_argument(
        "--no-solvability",
        dest="solvability",
        action="store_false",
        help="skip the baselines (no leaderboard)",
    )
    p.add_argument(
        "--judge",
        action="store_true",
        help="run the model's quality gate (five dimensions; rejected tasks are not emitted)",
    )
    p.add_argument(
        "--prepare-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="wall-clock limit of one prepare.py run (default 300)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")


def _goal_options(p: argparse.ArgumentParser) -> None:
    """``--goal`` and ``--metric``: what the user wants the task to be."""
    p.add_argument(
        "--goal",
        default="",
        metavar="TEXT",
        help='the task in words, e.g. "predict Survived": the column it names is the target, '
        "a metric it names is used; shown to the model",
    )
    p.add_argument(
        "--metric",
        default=None,
        metavar="NAME",
        help="the task's metric, from the builder's vetted library (accuracy, auc, log_loss, "
        "macro_f1, map@k, rmse, rmsle, mae; default: the raw description's, else by the "
        "answer format)",
    )


def _register_build(sub: Any) -> None:
    b = sub.add_parser("build", help="build a verified task package from a raw data directory")
    b.add_argument("raw_dir", metavar="RAW_DIR", help="the raw data, files as downloaded")
    b.add_argument("--out", required=True, metavar="PKG_DIR", help="where the package goes (new)")
    b.add_argument("--source", default="", help="where the data came from (URL or name)")
    b.add_argument("--licence", default="", help="the data's licence")
    b.add_argument("--name", default=None, help="task name (default: PKG_DIR's name)")
    _goal_options(b)
    _build_options(b)
    b.set_defaults(handler=_build)

    m = sub.add_parser(
        "build-many",
        help="build one package per source directory; resumable",
        description="Build SOURCES_DIR/<name>/ into CORPUS_DIR/tasks/<name>/. Rerun the same "
        "command after an interruption: finished sources are kept, the rest are built. Writes "
        "CORPUS_DIR/summary.json and index.txt (one package path a line).",
    )
    m.add_argument("sources_dir", metavar="SOURCES_DIR", help="one raw directory per source")
    m.add_argument("--out", required=True, metavar="CORPUS_DIR", help="the corpus directory")
    m.add_argument("--workers", type=int, default=1, help="builds at once (default 1)")
    _build_options(m)
    m.set_defaults(handler=_build_many)


def _builder_setup(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    from openmle._cli._search import build_model
    from openmle.builder import BuildOptions, load_blocklist, sandbox_factory

    build_model(args.model)  # fail early on a bad --model
    sandbox = sandbox_factory(args.sandbox)  # and on a bad --sandbox
    options = BuildOptions(
        source=getattr(args, "source", ""),
        licence=getattr(args, "licence", ""),
        name=getattr(args, "name", None),
        blocklist=load_blocklist(args.blocklist, shipped=args.shipped_blocklist),
        solvability=args.solvability,
        judge=args.judge,
        prepare_timeout_s=args.prepare_timeout,
        goal=getattr(args, "goal", ""),
        metric=getattr(args, "metric", None),
    )
    return (lambda: build_model(args.model)), sandbox, options


def _build(args: argparse.Namespace) -> int:
    from openmle.builder import build_task

    try:
        make_model, sandbox, options = _builder_setup(args)
        result = run_async(
            lambda: build_task(
                args.raw_dir, args.out, make_model(), sandbox=sandbox, options=options
            )
        )
    except OSError as exc:  # InvalidArgument (2) and MissingDependency (1) go to run_guarded
        print(f"openmle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    elif result.status == "built":
        spec = result.record["spec"]["spec"]
        print(
            f"built {result.package}: predict {spec['target']!r} of {spec['data_file']!r}, "
            f"metric {spec['metric']}"
        )
    else:
        print(f"{result.status.upper()} at stage {result.stage}: {result.reason}")
    return EXIT_OK if result.status == "built" else EXIT_FAILURE


def _build_many(args: argparse.Namespace) -> int:
    from openmle.builder import build_many

    def progress(name: str, entry: dict[str, Any]) -> None:
        if not args.json:
            print(f"{entry['status']:<9} {name}  {entry['reason'][:120]}", flush=True)

    try:
        make_model, sandbox, options = _builder_setup(args)
        summary = run_async(
            lambda: build_many(
                args.sources_dir,
                args.out,
                make_model,
                sandbox=sandbox,
                workers=args.workers,
                options=options,
                on_result=progress,
            )
        )
    except OSError as exc:  # InvalidArgument (2) and MissingDependency (1) go to run_guarded
        print(f"openmle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(json.dumps(summary.to_dict(), indent=2) if args.json else summary.table())
    return EXIT_OK
