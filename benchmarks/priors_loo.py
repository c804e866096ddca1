"""Leave one task out: do priors from our own runs help the offline model on a new task?

For every held-out task, a prior library is built (:func:`openmle.priors.priors_from_runs`)
from offline-model searches on the *other* tasks (one source run each, validation evidence
only), checked clean of the held-out task (:func:`openmle.priors.check_task_not_in_priors`),
and the held-out task is searched with and without it: same seeds, same budget, the real local
sandbox. The effect is the paired difference (with minus without) in the chosen program's
test score and in the best validation score, signed so that higher is better, per seed; the
script prints them and ends with one JSON line, whatever the sign.

    python benchmarks/priors_loo.py             # hold out tabular-binary: 5 seeds, 6 steps
    python benchmarks/priors_loo.py --heldout tabular-binary tabular-regression --steps 8
    python benchmarks/priors_loo.py --sklearn   # also scikit-learn's iris, wine,
                                                # breast_cancer and diabetes as tasks

With ``--sklearn`` four more tasks are made by the task builder (:func:`openmle.builder.build_task`
with the offline model, the shipped blocklist on) from scikit-learn's bundled datasets; they
join the source pool and may be held out by name (``--heldout wine``). A dataset the builder
rejects is reported and left out.

The offline model follows a prior that names one of its models (see
:class:`openmle.backends.OfflineModel`); an LLM's gain from priors is a different question and
must be measured with ``openmle bench run --arms 2x2``, not assumed from this figure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from benchmarks._common import emit  # noqa: E402

from openmle.backends import LocalSandbox, OfflineModel  # noqa: E402
from openmle.gym import resolve_task  # noqa: E402
from openmle.priors import (  # noqa: E402
    PriorLibrary,
    check_task_not_in_priors,
    priors_from_runs,
    save_library,
)
from openmle.search import Budget, SearchConfig, SearchSpec, run_search  # noqa: E402

TASKS = ("tabular-binary", "tabular-multiclass", "tabular-regression")
SKLEARN = ("iris", "wine", "breast_cancer", "diabetes")
SOURCE_SEED = 1000


def _build_sklearn(work: Path) -> dict[str, str]:
    """Task packages built from scikit-learn's bundled datasets: name -> package path."""
    import anyio
    from sklearn import datasets

    from openmle.builder import BuildOptions, build_task

    built: dict[str, str] = {}
    for name in SKLEARN:
        raw = work / "raw" / name
        raw.mkdir(parents=True)
        frame = getattr(datasets, f"load_{name}")(as_frame=True).frame
        frame.to_csv(raw / f"{name}.csv", index=False)
        pkg = work / "tasks" / name.replace("_", "-")
        opts = BuildOptions(source=f"sklearn.datasets.load_{name}", licence="BSD-3-Clause")

        async def build(raw: Path = raw, pkg: Path = pkg, opts: BuildOptions = opts) -> Any:
            return await build_task(raw, pkg, OfflineModel(), options=opts)

        result = anyio.run(build)
        if result.status == "built":
            built[name] = str(pkg)
        else:
            shutil.rmtree(pkg, ignore_errors=True)
        print(f"built {name}: {result.status} {result.stage} {result.reason}", file=sys.stderr)
    return built


def _search(task: str, seed: int, steps: int, out: Path | None, priors: Any = None) -> Any:
    return run_search(
        SearchSpec(
            task=task,
            model=OfflineModel(),
            sandbox=LocalSandbox(max_concurrency=2),
            budget=Budget(steps=steps),
            config=SearchConfig(seed=seed, initial_drafts=3, timeout_s=120),
            workers=2,
            ordered=True,
            priors=priors,
        ),
        run_dir=out,
        quiet=True,
    )


def _signed(task: str, value: float | None) -> float | None:
    if value is None:
        return None
    return value if resolve_task(task).meta.higher_is_better else -value


def _summarise(
    rows: list[dict[str, Any]], heldout: list[str], refs: dict[str, str], figures: dict[str, Any]
) -> None:
    """Per held-out task the paired differences (printed), into ``figures``."""
    all_test: list[float] = []
    all_valid: list[float] = []
    for held in heldout:
        mine = [r for r in rows if r["task"] == held]
        dt = [
            r["test_on"] - r["test_off"]
            for r in mine
            if r["test_on"] is not None and r["test_off"] is not None
        ]
        dv = [
            r["valid_on"] - r["valid_off"]
            for r in mine
            if r["valid_on"] is not None and r["valid_off"] is not None
        ]
        all_test += dt
        all_valid += dv
        figures["tasks"][held] = {
            "test_delta_mean": statistics.fmean(dt) if dt else None,
            "test_delta_sd": statistics.pstdev(dt) if dt else None,
            "test_wins": sum(d > 0 for d in dt),
            "test_losses": sum(d < 0 for d in dt),
            "valid_delta_mean": statistics.fmean(dv) if dv else None,
            "pairs": len(dt),
            "library_from": sorted(t for t in refs if t != held),
            "priors_shown": sorted({p for r in mine for p in r["priors_shown"]}),
        }
        f = figures["tasks"][held]
        if not f["pairs"]:
            print(f"{held}: no seed gave a test score both with and without priors")
            continue
        print(
            f"{held}: test score with - without priors {f['test_delta_mean']:+.4g} "
            f"(sd {f['test_delta_sd']:.3g}; {f['test_wins']} better, {f['test_losses']} worse "
            f"of {f['pairs']} seeds); best validation {f['valid_delta_mean'] or 0:+.4g}"
        )
    figures["test_delta_mean"] = statistics.fmean(all_test) if all_test else None
    figures["valid_delta_mean"] = statistics.fmean(all_valid) if all_valid else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--heldout", nargs="*", default=["tabular-binary"], help="tasks to hold out")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--source-steps", type=int, default=8)
    p.add_argument(
        "--sklearn",
        action="store_true",
        help="also build tasks from scikit-learn's iris, wine, breast_cancer and diabetes",
    )
    args = p.parse_args(argv)
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="openmle-priors-loo-"))
    refs = {t: t for t in TASKS}  # task name -> what run_search takes
    built: list[str] = []
    if args.sklearn:
        made = _build_sklearn(work)
        refs |= made
        built = sorted(made)
    unknown = [h for h in args.heldout if h not in refs]
    if unknown:
        p.error(f"--heldout {unknown}: not a task of this run ({', '.join(refs)})")
    sources: dict[str, Path] = {}
    needed = [t for t in refs if any(t != h for h in args.heldout)]
    for task in needed:
        sources[task] = work / "sources" / task
        _search(refs[task], SOURCE_SEED, args.source_steps, sources[task])
        print(f"source run on {task}: {sources[task]}", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    for held in args.heldout:
        library: PriorLibrary = priors_from_runs([sources[t] for t in refs if t != held])
        ref = refs[held]
        # refuses a leak (never reached here): by name, and by package name for a built task
        check_task_not_in_priors(library, task_id=held, names=[Path(ref).name])
        lib_path = work / f"library-without-{held}.jsonl"
        save_library(library, lib_path)
        for seed in range(args.seeds):
            off = _search(ref, seed, args.steps, None)
            on = _search(ref, seed, args.steps, work / f"{held}-on-{seed}", lib_path)
            manifest = json.loads((work / f"{held}-on-{seed}" / "manifest.json").read_text())
            row = {
                "task": held,
                "seed": seed,
                "test_off": _signed(ref, off.test_score),
                "test_on": _signed(ref, on.test_score),
                "valid_off": _signed(ref, off.best_valid_score),
                "valid_on": _signed(ref, on.best_valid_score),
                "priors_shown": manifest["extra"]["priors"]["shown"],
            }
            rows.append(row)
            print(json.dumps(row, sort_keys=True), file=sys.stderr)
    figures: dict[str, Any] = {
        "seeds": args.seeds,
        "steps": args.steps,
        "source_steps": args.source_steps,
        "sklearn_built": built,
        "tasks": {},
    }
    _summarise(rows, args.heldout, refs, figures)
    figures["wall_s"] = round(time.monotonic() - t0, 1)
    emit("priors_loo", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
