"""``openmle bench run|resume|report|doctor``: MLE-bench competitions (or NatureBench cases)
x seeds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openmle._cli._bench_campaign import (
    SANDBOX_HELP,
    _add_launch_flags,
    _add_status,
    _go,
    _summary_spec,
    bench_models,
)
from openmle._cli._common import EXIT_INTERRUPTED, interrupted
from openmle._cli._track import add_track_flag, closing_on_error, open_track, track_bench_dir
from openmle.errors import InvalidArgument

__all__ = ["register"]


class _Benchmarks:
    """``--benchmark``'s choices: the benchmark registry's names
    (:func:`openmle.bench.benchmark_names`), read when argparse first checks or shows them, so
    building the parser does not import the bench, and a benchmark a package registered
    (:func:`openmle.bench.register_benchmark`) is a choice too.
    """

    reference = "the names registered with `openmle.bench.register_benchmark`"
    """How the generated CLI reference names the choices (the registry grows at run time)."""

    def _names(self) -> tuple[str, ...]:
        from openmle.bench import benchmark_names

        return benchmark_names()

    def __contains__(self, value: object) -> bool:
        return value in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


_TOML_KEYS = {
    "suite",
    "data",
    "registry",
    "model",
    "sandbox",
    "seeds",
    "budget",
    "out",
    "concurrency",
    "workers",
    "gpus",
    "cpus",
    "memory_mb",
    "time_limit_s",
    "benchmark",
    "tasks_dir",
    "priors",
    "islands",
    "arms",
    "validation",
    "preset",
    "summary_model",
    "launcher",
}


def _experiment(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InvalidArgument(f"{path}: cannot read the experiment file ({exc})") from None
    unknown = sorted(set(data) - _TOML_KEYS)
    if unknown:
        raise InvalidArgument(
            f"{path}: unknown key(s) {unknown}; known keys are {sorted(_TOML_KEYS)}"
        )
    _check_types(path, data)
    if isinstance(data.get("budget"), dict):
        data["budget"] = ",".join(f"{k}={v}" for k, v in data["budget"].items())
    return data


_TOML_WHOLE = {"concurrency", "workers", "gpus", "memory_mb", "islands"}
_TOML_NUMBER = {"cpus", "time_limit_s"}


def _check_types(path: Path, data: dict[str, Any]) -> None:
    """Each experiment-file value of the type its flag takes: a whole number for ``workers``,
    ``gpus``, ``concurrency``, ``memory_mb``, ``islands``; a number for ``cpus`` and
    ``time_limit_s``; a string or a table for ``budget``; a string for the others (``seeds``
    is checked by :func:`_seed_list`). A quoted number, a float ``gpus`` or ``true`` gave a
    traceback or was read as another value (``gpus = 1.5`` ran with 1 GPU, ``time_limit_s =
    true`` with 1 s per program).

    Raises:
        InvalidArgument: naming the file, the key, the expected type and the value.
    """

    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    for key, value in data.items():
        if key == "seeds":
            continue
        if key in _TOML_WHOLE:
            ok, want = whole(value), "a whole number, e.g. 2"
        elif key in _TOML_NUMBER:
            ok = whole(value) or isinstance(value, float)
            want = f"a number, e.g. {8 if key == 'cpus' else 3600}"
        elif key == "budget":
            ok, want = isinstance(value, str | dict), 'a string or a table, e.g. "steps=30"'
        else:
            ok, want = isinstance(value, str), 'a string, e.g. "..."'
        if not ok:
            shown = json.dumps(value, default=str)
            raise InvalidArgument(
                f"{path}: expected {key} = {want} but got {key} = "
                f"{shown if len(shown) <= 60 else shown[:57] + '...'}"
            )


SMOKE = "smoke"
"""The suite name of the miniature shipped with openmle (no Kaggle, no MLE-bench checkout)."""


def _smoke_defaults(base: dict[str, Any]) -> None:
    """``smoke``: the shipped miniature's registry and data (built once in openmle's cache)
    unless --registry/--data are given, one seed and 2 steps unless set.
    """
    from openmle.bench import smoke_miniature

    if not base.get("registry") or not base.get("data"):
        registry, data = smoke_miniature()
        base["registry"] = base.get("registry") or str(registry)
        base["data"] = base.get("data") or str(data)
    base.setdefault("seeds", 1)
    base.setdefault("budget", "steps=2")


def _settings_given(args: argparse.Namespace) -> set[str]:
    """The settings the user gave (a flag, or a key of the experiment file)."""
    given = {k for k in _TOML_KEYS if getattr(args, k, None) is not None}
    if args.target.endswith(".toml"):
        given |= set(_experiment(Path(args.target)))
    return given


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """Experiment file values, overridden by the flags given."""
    base: dict[str, Any] = {}
    target = args.target
    if target.endswith(".toml"):
        base = _experiment(Path(target))
    else:
        base["suite"] = target
    for key in _TOML_KEYS - {"suite"}:
        v = getattr(args, key, None)
        if v is not None:
            base[key] = v
    if base.get("budget"):
        _each_cap_once(
            str(base["budget"]), "--budget" if getattr(args, "budget", None) is not None else target
        )
    if base.get("suite") == SMOKE and base.get("benchmark", "mle-bench") == "mle-bench":
        _smoke_defaults(base)
    if base.get("benchmark") == "naturebench":
        if base.get("tasks_dir") and not base.get("data"):
            base["data"] = base["tasks_dir"]
        base.setdefault("time_limit_s", 14_400.0)  # NatureBench's reference 4 hours
    _preset_defaults(base)
    defaults = {
        "model": "offline",
        "sandbox": "local",
        "seeds": 3,
        "budget": "steps=20",
        "workers": 1,
        "gpus": 0,
        "cpus": 1.0,
        "time_limit_s": 3600.0,
    }
    for k, v in defaults.items():
        base.setdefault(k, v)
    for key in ("suite", "data", "out"):
        if not base.get(key):
            raise InvalidArgument(
                f"Expected {key} (flag --{key} or the experiment file's {key} = ...)"
                if key != "suite"
                else "Expected a SUITE or an experiment .toml file"
            )
    return base


# ---------------------------------------------------------------- --preset (one group)


def _preset_defaults(base: dict[str, Any]) -> None:
    """With ``--preset NAME``: the preset's seeds, per-program limit and budget, where the
    user gave none; a ``--budget`` given is laid over the preset's (a key given wins).
    """
    if not base.get("preset"):
        return
    from openmle.search import Preset

    p = Preset.named(str(base["preset"]))
    base.setdefault("seeds", p.seeds)
    base.setdefault("time_limit_s", p.time_limit_s)
    base.setdefault("validation", p.validation)
    mine = f"steps={p.steps},sandbox_s={p.sandbox_s:g},wall_s={p.wall_s:g}"
    base["budget"] = mine + ("," + str(base["budget"]) if base.get("budget") else "")


def _seed_list(seeds: Any, origin: str) -> list[int]:
    """The search seeds ``seeds`` names: a count N (seeds 0..N-1, N >= 1) or a list of distinct
    integers >= 0; ``origin`` is ``--seeds`` (the flag) or the experiment file it came from.

    Raises:
        InvalidArgument: anything else (a string, a float, 0, an empty or repeated list), in
            one line naming ``--seeds`` or the file's ``seeds`` key and the fix.
    """

    def whole(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool)

    if whole(seeds) and seeds >= 1:
        return list(range(seeds))
    if (
        isinstance(seeds, list)
        and all(whole(x) and x >= 0 for x in seeds)
        and 0 < len(seeds) == len(set(seeds))
    ):
        return list(seeds)
    if origin == "--seeds":
        raise InvalidArgument(
            f"Expected --seeds N with N >= 1 (runs per competition, seeds 0..N-1) but got "
            f"--seeds {seeds}"
        )
    shown = json.dumps(seeds)
    raise InvalidArgument(
        f"{origin}: expected seeds = N with N >= 1 (runs per competition, seeds 0..N-1) or a "
        f"list of distinct seeds >= 0 such as seeds = [0, 1, 2], but got seeds = "
        f"{shown if len(shown) <= 60 else shown[:57] + '...'}"
    )


def _each_cap_once(spec: str, origin: str) -> None:
    """Refuse a budget the user gave that names a cap twice (``steps=1,steps=2`` ran with the
    last one, silently); ``origin`` is ``--budget`` or the experiment file.

    Raises:
        InvalidArgument: a repeated key, naming it and the fix.
    """
    seen: set[str] = set()
    for part in filter(None, (x.strip() for x in spec.split(","))):
        key = part.split("=", 1)[0].strip()
        if key in seen:
            where = "--budget" if origin == "--budget" else f"{origin}: budget"
            raise InvalidArgument(f"{where} names {key}= twice; give each cap once")
        seen.add(key)


def _budget_spec(spec: str) -> str:
    """A budget spec with repeated keys collapsed, the last one winning."""
    parts: dict[str, str] = {}
    for part in filter(None, (x.strip() for x in spec.split(","))):
        key = part.split("=", 1)[0].strip()
        parts[key] = part
    return ",".join(parts.values())


def _preset_fields(s: dict[str, Any]) -> dict[str, Any]:
    """``BenchConfig`` keyword arguments for ``--preset`` (empty without one): the preset's
    search settings and the preset itself (deviations are computed from the config).
    """
    if not s.get("preset"):
        return {}
    from openmle.bench import preset_search
    from openmle.search import Preset

    p = Preset.named(str(s["preset"]))
    return {"search": preset_search(p), "preset": p.to_dict()}


def _resources(s: dict[str, Any]) -> Any:
    """The ``Resources`` of one program run from the settings, its errors naming the flags
    (``--memory-mb``, not ``Resources.memory_mb``); ``--workers`` below 1 is refused here too.
    """
    from openmle import Resources

    if int(s["workers"]) < 1:
        raise InvalidArgument(f"Expected --workers N with N >= 1 but got --workers {s['workers']}")
    try:
        return Resources(cpus=float(s["cpus"]), gpus=int(s["gpus"]), memory_mb=s.get("memory_mb"))
    except InvalidArgument as exc:
        text = str(exc)
        for field in ("cpus", "gpus", "memory_mb"):
            text = text.replace(f"Resources.{field}=", f"--{field.replace('_', '-')} ")
        raise InvalidArgument(text) from None


def _run(args: argparse.Namespace) -> int:
    import attrs

    from openmle._cli._search import parse_budget
    from openmle.bench import BenchConfig, arun_bench, benchmark_kind, priors_ablation

    explicit_gpus = "gpus" in _settings_given(args)
    s = _settings(args)
    arms: tuple[Any, ...] = ()
    if s.get("arms") is not None:
        if s["arms"] != "2x2":
            raise InvalidArgument(f"Expected --arms 2x2 but got {s['arms']!r}")
        if int(s["workers"]) < 2:
            raise InvalidArgument(
                "--arms 2x2 compares 1 worker with N workers: pass --workers N with N >= 2"
            )
        arms = priors_ablation(int(s["workers"]))
    suite = s["suite"]
    benchmark = s.get("benchmark") or "mle-bench"
    # smoke: the miniature registry's own split file lists its competitions
    spec = "mle-bench-lite" if suite == SMOKE and benchmark == "mle-bench" else suite
    seed_list = _seed_list(s["seeds"], "--seeds" if args.seeds is not None else args.target)
    budget = parse_budget(_budget_spec(str(s["budget"])))
    preset = _preset_fields(s)
    config = BenchConfig(
        suite=suite if isinstance(suite, str) and not suite.count(",") else "custom",
        competitions=["the-suites-below"],  # a placeholder (a valid id), replaced below
        seeds=seed_list,
        model=s["model"],
        sandbox=s["sandbox"],
        budget=budget.to_dict(),
        data_dir=str(Path(s["data"]).resolve()),
        registry=None if s.get("registry") is None else str(Path(s["registry"]).resolve()),
        resources=_resources(s),
        time_limit_s=float(s["time_limit_s"]),
        concurrency=s.get("concurrency"),
        workers=int(s["workers"]),
        benchmark=benchmark,
        priors=None if s.get("priors") is None else str(Path(s["priors"]).resolve()),
        islands=int(s.get("islands") or 0),
        arms=arms,
        validation=str(s.get("validation") or "auto"),
        gpus_override=int(s["gpus"]) if explicit_gpus else None,
        **preset,
    )
    # the registered benchmark, opened as the bench will open it, names the suite's ids
    bench = benchmark_kind(benchmark).open(config, Path(s["out"]))
    config = attrs.evolve(
        config, competitions=bench.suite(spec if isinstance(spec, str) else list(spec))
    )
    if preset:
        from openmle.bench import preset_deviations
        from openmle.search import Preset

        config = preset_deviations(Preset.named(str(s["preset"])), config)
    config = attrs.evolve(config, summary_model=_summary_spec(s))
    model, summary = bench_models(config.model, config.summary_model)  # before --out is made
    if s.get("launcher"):
        from openmle._cli._bench_campaign import launch

        return launch(args, Path(s["out"]), config, str(s["launcher"]))
    tracker = open_track(args, Path(s["out"]).name, "openmle-bench")
    with _resumable(Path(s["out"])), closing_on_error(tracker):
        return _go(args, Path(s["out"]), lambda **kw: arun_bench(
            Path(s["out"]), config=config, model=model, summary_model=summary, **kw
        ), _emitter, lambda a, o, r, w: _done(a, o, r, w, tracker))  # fmt: skip
    return EXIT_INTERRUPTED  # only when interrupted (_resumable has said how to go on)


@contextlib.contextmanager
def _resumable(out: Path) -> Iterator[None]:
    """An interrupt (Ctrl-C, SIGTERM; alone or in an exception group) of the block says how to
    finish the bench: ``openmle: interrupted (Ctrl-C)`` and, once ``out`` holds its manifest,
    ``continue with: openmle bench resume OUT`` (the block is left; the caller returns
    :data:`EXIT_INTERRUPTED`).
    """
    try:
        yield
    except KeyboardInterrupt:
        interrupted(out, resume="openmle bench resume")
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        interrupted(out, resume="openmle bench resume")


def _emitter(args: argparse.Namespace) -> Any:
    stream = sys.stderr if args.json else sys.stdout
    if args.quiet:
        return None

    def emit(line: str) -> None:
        stream.write(line + "\n")
        stream.flush()

    return emit


def _done(
    args: argparse.Namespace, out: Path, reports: list[Any], write: Any, tracker: Any = None
) -> int:
    from openmle.bench import bench_report

    paths = write(out)
    track_bench_dir(tracker, out, paths)
    rep = bench_report(out)  # medals recomputed from the scores and the leaderboards
    reports = [r for rows in rep.arm_seeds.values() for row in rows for r in row]
    medals = sum(r.any_medal for r in reports)
    valid = sum(r.valid_submission for r in reports)
    if args.json:
        print(
            json.dumps(
                {
                    "bench_dir": str(out),
                    "runs": len(reports),
                    "valid": valid,
                    "medals": medals,
                    "reports": {k: str(v) for k, v in paths.items()},
                },
                sort_keys=True,
            )
        )
    else:
        print(f"{len(reports)} runs: {valid} valid submissions, {medals} medals")
        print(f"report: {paths['markdown']} and {paths['html']}")
    return 0


def _resume(args: argparse.Namespace) -> int:
    from openmle._cli._search import _checked_recorded
    from openmle.bench import BenchRun, arun_bench, bench_sandbox

    run = BenchRun.open(args.bench_dir)
    where = f"{args.bench_dir}/manifest.json"
    spec = args.model or _checked_recorded(run.config.model, "--model", where) or "offline"
    summary = args.summary_model or _checked_recorded(
        run.config.summary_model, "--summary-model", where
    )
    _record_model_change(run, args)
    # A sandbox that talks to a server is taken from the manifest only when named again.
    box = args.sandbox or _recorded_sandbox(run.config.sandbox, where)
    if getattr(args, "launcher", None):
        from openmle._cli._bench_campaign import submit

        return submit(args, run.path, args.launcher, spec, summary, box)
    model, summary_model = bench_models(spec, summary)
    factory = None if box == run.config.sandbox and not args.sandbox else bench_sandbox(box)
    tracker = open_track(args, run.path.name, "openmle-bench")
    with _resumable(run.path), closing_on_error(tracker):
        return _go(args, run.path, lambda **kw: arun_bench(
            run.path, model=model, summary_model=summary_model, sandbox=factory, **kw
        ), _emitter, lambda a, o, r, w: _done(a, o, r, w, tracker))  # fmt: skip
    return EXIT_INTERRUPTED  # only when interrupted (_resumable has said how to go on)


def _record_model_change(run: Any, args: argparse.Namespace) -> None:
    """A resume naming another ``--model`` / ``--summary-model`` than the manifest's, with runs
    left to do, is recorded as a deviation (the report's header printed only the model the
    bench began with, though the unfinished runs went on with the new one).
    """
    if all(st.state == "done" for st in run.status()):
        return
    for flag, given, recorded in (
        ("--model", args.model, run.config.model),
        ("--summary-model", args.summary_model, run.config.summary_model),
    ):
        if given and given != recorded:
            run.record_deviation(
                f"resumed with {flag} {given} (the bench began with {recorded or 'none'}): the "
                "runs unfinished at that resume went on with it"
            )


def _recorded_sandbox(spec: str, where: str) -> str:
    """The manifest's sandbox ``spec`` (read from ``where``) when resume may use it unnamed.

    Raises:
        InvalidArgument: it talks to a server (:func:`recorded_spec`), or it names no sandbox
            factory (a bench directory written before ``--sandbox`` was checked); the message
            names the recorded value and says to pass ``--sandbox``.
    """
    from openmle._cli._common import recorded_spec
    from openmle.backends import check_sandbox_spec

    spec = recorded_spec(spec, flag="--sandbox", where=where)
    try:
        check_sandbox_spec(spec)
    except InvalidArgument as exc:
        raise InvalidArgument(
            f"{where} records --sandbox {spec!r}, which cannot be used ({exc}); pass --sandbox "
            "SPEC to resume on another sandbox (e.g. --sandbox local)"
        ) from None
    return spec


_NATUREBENCH_FLAGS = (
    ("--judge", "judge"),
    ("--judge-model", "judge_model"),
    ("--model-name", "model_name"),
    ("--agent", "agent"),
    ("--organization", "organization"),
    ("--url", "url"),
    ("--contact", "contact"),
)


def _check_naturebench_flags(args: argparse.Namespace) -> None:
    """Refuse NatureBench-only ``bench report`` flags on another benchmark's bench (they were
    ignored silently), and a ``--judge`` file that does not exist.
    """
    from openmle.bench import BenchRun

    given = [flag for flag, dest in _NATUREBENCH_FLAGS if getattr(args, dest, None)]
    if not given:
        return
    kind = BenchRun.open(args.bench_dir).config.benchmark
    if kind != "naturebench":
        raise InvalidArgument(
            f"{', '.join(given)}: only a NatureBench bench takes them, and {args.bench_dir} is "
            f"a {kind} bench; drop them"
        )
    if args.judge and not Path(args.judge).is_file():
        raise InvalidArgument(
            f"--judge {args.judge}: no such file; give the judge verdicts JSON "
            "({case_id: {is_valid, reason}})"
        )


def _report(args: argparse.Namespace) -> int:
    from openmle.bench import bench_report, write_report

    _check_naturebench_flags(args)
    submission = {
        k: v
        for k, v in (
            ("model", args.model_name),
            ("agent", args.agent),
            ("organization", args.organization),
            ("url", args.url),
            ("contact", args.contact),
        )
        if v
    }
    naturebench = {
        "judge": args.judge,
        "submission": submission,
        "judge_model": args.judge_model or "",
    }
    paths = write_report(args.bench_dir, naturebench=naturebench)
    if args.json:
        print(json.dumps({k: str(v) for k, v in paths.items()}, sort_keys=True))
    else:
        print(bench_report(args.bench_dir).markdown(), end="")
        print(f"written: {', '.join(str(p) for p in paths.values())}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from openmle.bench import MLEBench, doctor

    registry, data, suite = args.registry, args.data, args.suite
    if suite == SMOKE and (not registry or not data):
        from openmle.bench import smoke_miniature

        # smoke: the shipped miniature, as `bench run smoke` uses it
        mini_registry, mini_data = smoke_miniature()
        registry, data = registry or str(mini_registry), data or str(mini_data)
        suite = "mle-bench-lite"
    if not data:
        raise InvalidArgument(
            "Expected --data (the data directory `mlebench prepare` wrote), or the suite smoke"
        )
    bench = MLEBench.locate(registry, data)
    ids = bench.suite(suite)
    problem = bench.data_problem(ids)
    if problem is not None:  # the folder itself is wrong: one line, not a line per competition
        raise InvalidArgument(problem)
    lines = doctor(bench, ids, checksums=args.checksums, views=args.validation != "self")
    if args.json:
        print(json.dumps([ln.to_dict() for ln in lines], indent=2))
    else:
        width = max(len(ln.competition_id) for ln in lines) if lines else 10
        print(f"{'competition':<{width}}  status  problem -> fix")
        for ln in lines:
            status = "ok" if ln.ok else "FAIL"
            if ln.ok:
                extra = "; ".join(ln.notes)
                print(f"{ln.competition_id:<{width}}  {status:<6}  {extra}".rstrip())
            for i, (p, f) in enumerate(zip(ln.problems, ln.fixes, strict=True)):
                name = ln.competition_id if i == 0 else ""
                print(f"{name:<{width}}  {status if i == 0 else '':<6}  {p} -> {f}")
            if not ln.ok:
                for n in ln.notes:
                    print(f"{'':<{width}}  {'':<6}  note: {n}")
        bad = sum(not ln.ok for ln in lines)
        print(
            f"{len(lines) - bad} of {len(lines)} competitions ready; registry "
            f"{bench.repo_root} (commit {bench.commit or 'unknown'}), data {bench.data_dir}"
        )
    return 0 if all(ln.ok for ln in lines) else 1


def register(subparsers: Any) -> None:
    """Add ``bench`` and its subcommands."""
    p = subparsers.add_parser(
        "bench",
        help="run MLE-bench competitions x seeds, resumably, and report the field's metrics",
        description="Run, resume, report and preflight MLE-bench benchmarks.",
    )
    sub = p.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")

    _add_run(sub)
    _add_resume(sub)
    _add_report(sub)
    _add_doctor(sub)
    _add_status(sub)

    def _help(args: argparse.Namespace) -> int:
        p.print_help()
        return 2

    p.set_defaults(handler=_help)


def _add_run(sub: Any) -> None:
    """Add ``bench run``: a suite or experiment file into a new bench directory."""
    run = sub.add_parser("run", help="run a suite's competitions x seeds into --out")
    run.add_argument(
        "target",
        metavar="SUITE|EXPERIMENT.toml",
        help="mle-bench-lite, -medium, -high, -all, comma-separated ids, a .txt of ids, an "
        "experiment file, or smoke (a miniature shipped with openmle: no Kaggle data needed)",
    )
    run.add_argument("--data", help="the data directory `mlebench prepare` wrote")
    run.add_argument(
        "--benchmark",
        choices=_Benchmarks(),
        help="mle-bench (default), naturebench (SUITE: all, cpu, gpu_low, gpu_high, lite, ids) "
        "or another registered benchmark",
    )
    run.add_argument(
        "--tasks-dir",
        dest="tasks_dir",
        help="naturebench: the downloaded data holding tasks/ (the harness's --data-dir); "
        "--registry is the harness checkout holding task-set/ (default: the same folder)",
    )
    run.add_argument("--registry", help="MLE-bench checkout (default: the installed mlebench)")
    run.add_argument(
        "--model",
        help="operator model (default: offline); per operator: draft=SPEC,improve=SPEC,"
        "default=SPEC (as openmle search)",
    )
    run.add_argument(
        "--summary-model",
        dest="summary_model",
        help="a (cheaper) model writing node summaries shown to every run's operators",
    )
    run.add_argument("--sandbox", help=SANDBOX_HELP)
    run.add_argument("--seeds", type=int, help="runs per competition, seeds 0..N-1 (default: 3)")
    run.add_argument("--budget", help="per run, e.g. steps=30,wall_s=43200 (default: steps=20)")
    run.add_argument("--out", metavar="BENCH_DIR", help="the bench directory to create")
    run.add_argument("--concurrency", type=int, help="runs at once (default: sandbox slots)")
    run.add_argument("--workers", type=int, help="expansions in flight per run (default: 1)")
    run.add_argument(
        "--gpus",
        type=int,
        help="GPUs per program run (default: 0 for MLE-bench, each NatureBench case's demand); "
        "given explicitly it overrides every task's demand, recorded as a deviation",
    )
    run.add_argument(
        "--validation",
        choices=("auto", "split", "self"),
        help="how search scores candidates: split (a held-out view of the public data graded "
        "by the competition's grader), self (the program holds out its own part as the "
        "competition's instruction says and prints 'Final Validation Score: <number>'), auto "
        "(default: split when a rule exists, else self)",
    )
    run.add_argument("--cpus", type=float, help="CPUs per program run (default: 1)")
    run.add_argument("--memory-mb", dest="memory_mb", type=int, help="memory per program run")
    run.add_argument(
        "--time-limit", dest="time_limit_s", type=float, help="seconds per program run"
    )
    run.add_argument(
        "--priors",
        metavar="FILE",
        help="a prior library shown to every run (or to the arms with priors); a competition "
        "named in its provenance is refused",
    )
    run.add_argument("--islands", type=int, help="island populations per run (default: none)")
    run.add_argument(
        "--preset",
        choices=("paper",),
        help="the paper's operating point (800 steps, 43200 sandbox s, 64800 s wall, 7200 s "
        "per program, 3 seeds, debug depth 10, ...); flags given override it and are "
        "recorded as deviations",
    )
    run.add_argument(
        "--arms",
        choices=("2x2",),
        help="run the ablation: priors off/on x 1 worker / --workers N at the same budget "
        "(needs --priors, --workers N >= 2 and a sandbox_s cap in --budget)",
    )
    _add_launch_flags(run)
    run.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    add_track_flag(run)
    run.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")
    run.set_defaults(handler=_run)


def _add_resume(sub: Any) -> None:
    """Add ``bench resume``: finish every run of a bench directory."""
    resume = sub.add_parser("resume", help="finish every run of a bench directory exactly once")
    resume.add_argument("bench_dir", metavar="BENCH_DIR")
    resume.add_argument("--model", help="override the model spec from the manifest")
    resume.add_argument(
        "--summary-model", dest="summary_model", help="override the summary model spec"
    )
    resume.add_argument(
        "--sandbox",
        help="the sandbox (default: the manifest's; one that talks to a server, service:URL, "
        "is used only when named here again)",
    )
    _add_launch_flags(resume)
    resume.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    resume.add_argument("--quiet", action="store_true", help="no progress lines")
    add_track_flag(resume)
    resume.add_argument(
        "--plain", action="store_true", help="plain progress lines even on a terminal"
    )
    resume.set_defaults(handler=_resume)


def _add_report(sub: Any) -> None:
    """Add ``bench report``: the report files and the leaderboard submission."""
    report = sub.add_parser("report", help="write report.{md,json,html} and submission.jsonl")
    report.add_argument("bench_dir", metavar="BENCH_DIR")
    report.add_argument(
        "--judge", help="naturebench: judge verdicts JSON {case_id: {is_valid, reason}}"
    )
    report.add_argument("--judge-model", dest="judge_model", help="naturebench: the judge")
    report.add_argument("--model-name", dest="model_name", help="naturebench: submission model")
    report.add_argument("--agent", help="naturebench: submission agent name")
    report.add_argument("--organization", help="naturebench: submitting organization")
    report.add_argument("--url", help="naturebench: public project link")
    report.add_argument("--contact", help="naturebench: contact for the submission")
    report.add_argument("--json", action="store_true", help="print the written paths as JSON")
    report.set_defaults(handler=_report)


def _add_doctor(sub: Any) -> None:
    """Add ``bench doctor``: the preflight of registry, leaderboards and data."""
    doc = sub.add_parser("doctor", help="preflight: registry, leaderboards, prepared data")
    doc.add_argument("suite", metavar="SUITE")
    doc.add_argument(
        "--data",
        help="the data directory `mlebench prepare` wrote (not needed for smoke: the shipped "
        "miniature)",
    )
    doc.add_argument("--registry", help="MLE-bench checkout (default: the installed mlebench)")
    doc.add_argument(
        "--checksums",
        action="store_true",
        help="compare files with checksums.yaml and leaderboard.csv with the checkout's commit",
    )
    doc.add_argument(
        "--validation",
        choices=("auto", "split", "self"),
        default="auto",
        help="the protocol the run will use: with self no validation view is built or needed "
        "(default auto: each view is built, a competition is ready only when it is)",
    )
    doc.add_argument("--json", action="store_true", help="print the lines as JSON")
    doc.set_defaults(handler=_doctor)
