"""NatureBench's leaderboard metrics and submission package from a bench directory.

Reads the per-case evaluator records a NatureBench bench run keeps
(:data:`openmle.bench.naturebench.GRADE_RECORD`), turns them into ``results.csv`` rows
(:class:`openmle.bench.naturebench.CaseResult`) and computes the specification's metrics with
:mod:`openmle.bench.naturebench._leaderboard`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openmle._readback import read_back_json
from openmle._validation import finite_or_none
from openmle.bench._runner import BENCH_FILE_MAX_BYTES, BenchRun
from openmle.bench.naturebench._cases import read_json_object
from openmle.bench.naturebench._leaderboard import (
    CaseResult,
    check_results,
    leaderboard_metrics,
    metrics_by_domain,
    write_results_csv,
    write_submission_yaml,
)
from openmle.bench.naturebench._registry import GRADE_RECORD, NatureBench
from openmle.errors import InvalidArgument

__all__ = ["case_rows", "read_judge", "write_naturebench_report"]

_NO_JUDGE_REASON = "no validity judge was run"


def read_judge(path: str | Path) -> dict[str, tuple[str, str]]:
    """Judge verdicts from a JSON file ``{case_id: {"is_valid": bool, "reason": str}}`` (the
    shape of the harness's per-case ``judge_verdict.json``), as ``{case_id: (verdict, reason)}``.

    Raises:
        InvalidArgument: unreadable, or an entry without a Boolean ``is_valid`` and a non-empty
            ``reason``.
    """
    data = read_json_object(Path(path)) if Path(path).is_file() else None
    if data is None:
        raise InvalidArgument(f"Cannot read the judge verdicts {path}; give a JSON object")
    out: dict[str, tuple[str, str]] = {}
    for cid, entry in data.items():
        ok = isinstance(entry, dict) and isinstance(entry.get("is_valid"), bool)
        reason = entry.get("reason") if isinstance(entry, dict) else None
        if not ok or not isinstance(reason, str) or not reason.strip():
            raise InvalidArgument(
                f"Judge entry {cid!r} in {path} needs a Boolean is_valid and a non-empty reason"
            )
        out[str(cid)] = ("valid" if entry["is_valid"] else "invalid", reason.strip())
    return out


def case_rows(
    bench_dir: str | Path, seed: int, *, judge: Mapping[str, tuple[str, str]] | None = None
) -> list[CaseResult]:
    """One :class:`~openmle.bench.naturebench.CaseResult` per case of a bench run (``seed``).

    ``best_score`` is the ``g`` of the chosen program's test evaluation (raw, unrounded);
    ``final_status`` is ``success`` when the evaluator scored it, else why not: the test
    evaluation's status (``no_submission``, ``evaluator_error``, ...), ``no_valid_attempt``
    (the run ended without any program the evaluator scored, so nothing was test-graded) or
    ``not_run`` (the run did not finish). Without a judge verdict a scored case is
    ``valid`` (the specification's rule when no judge was run).
    """
    run = BenchRun.open(bench_dir)
    if run.config.benchmark != "naturebench":
        raise InvalidArgument(
            f"{bench_dir} is not a NatureBench bench (its benchmark is {run.config.benchmark!r})"
        )
    if seed not in run.config.seeds:
        raise InvalidArgument(f"Expected a seed of {list(run.config.seeds)} but got {seed}")
    bench = NatureBench(run.config.data_dir, harness=run.config.registry)
    judge = judge or {}
    rows = []
    for cid in run.config.competitions:
        record_path = run.submission_path(cid, seed).with_name(GRADE_RECORD)
        record: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):  # a bench-dir file: read back checked
            found = read_back_json(record_path, max_bytes=BENCH_FILE_MAX_BYTES)
            record = found if isinstance(found, dict) else {}
        g = finite_or_none(record.get("g"))
        status = record.get("status")
        final = "success" if g is not None else (status if isinstance(status, str) else "")
        if not final:  # never test-graded: no program scored on validation, or not finished
            finished = (run.run_dir(cid, seed) / "bench_result.json").is_file()
            final = "no_valid_attempt" if finished else "not_run"
        verdict, reason = judge.get(
            cid,
            ("valid", _NO_JUDGE_REASON) if g is not None else ("not_applicable", "not_applicable"),
        )
        rows.append(
            CaseResult(
                case_id=cid,
                domain=bench.domain(cid),
                final_status=final,
                best_score=g,
                judge_verdict=verdict,
                judge_reason=reason,
            )
        )
    return rows


def _metrics_dict(m: Any) -> dict[str, Any]:
    return {a.name: getattr(m, a.name) for a in type(m).__attrs_attrs__}


def write_naturebench_report(
    bench_dir: str | Path,
    *,
    judge: str | Path | None = None,
    submission: Mapping[str, str] | None = None,
    judge_model: str = "",
) -> dict[str, Path]:
    """Write, for each seed, ``naturebench/seed-<k>/{results.csv,submission.yaml}`` and the
    metrics of every seed (overall and per domain) in ``naturebench/metrics.json``.

    ``submission`` fills ``submission.yaml``'s first section (``model`` defaults to the
    manifest's model spec, ``agent`` to openmle's version, the rest to ``n/a``: fill them in
    before submitting). Each ``results.csv`` is checked by the specification's rules before
    this returns.

    Raises:
        InvalidArgument: not a NatureBench bench, a bad judge file.
        OpenMLEError: a written ``results.csv`` breaks the specification (a bug).
    """
    import datetime as _dt

    from openmle._version import __version__
    from openmle.errors import OpenMLEError

    run = BenchRun.open(bench_dir)
    verdicts = read_judge(judge) if judge is not None else None
    out_dir = run.path / "naturebench"
    given = dict(submission or {})
    sub = {
        "model": given.pop("model", "") or run.config.model,
        "agent": given.pop("agent", "") or f"openmle {__version__} search",
        "organization": given.pop("organization", "") or "n/a",
        "url": given.pop("url", "") or "n/a",
        "submission_date": given.pop("submission_date", "") or _dt.date.today().isoformat(),
        "contact": given.pop("contact", "") or "n/a",
        **given,
    }
    budget = dict(run.config.budget)
    timeout = budget.get("wall_s") or run.config.time_limit_s
    hw = run.manifest.get("hardware") or {}
    evaluation = {
        "timeout_seconds": int(float(timeout)),
        "web_search": False,
        "compute": f"{hw.get('cpus')} CPUs, GPUs: {', '.join(hw.get('gpus') or []) or 'none'}",
        "judge_model": judge_model,
        "human_intervention": "none",
        "deviations_from_reference": (
            "openmle search (model "
            f"{run.config.model}, budget {json.dumps(budget, sort_keys=True)}) instead of the "
            "harness's agent loop; the evaluator's g selects programs, the chosen program's "
            "test evaluation is reported; single-file output (submission.csv)"
        ),
    }
    paths: dict[str, Path] = {}
    metrics: dict[str, Any] = {"cases": list(run.config.competitions), "seeds": {}}
    for seed in run.config.seeds:
        rows = case_rows(run.path, seed, judge=verdicts)
        folder = out_dir / f"seed-{seed}"
        csv_path = write_results_csv(folder / "results.csv", rows)
        problems = check_results(csv_path, run.config.competitions)
        if problems:
            raise OpenMLEError(f"{csv_path} breaks the NatureBench specification: {problems}")
        paths[f"results_csv_seed_{seed}"] = csv_path
        paths[f"submission_yaml_seed_{seed}"] = write_submission_yaml(
            folder / "submission.yaml", sub, evaluation
        )
        metrics["seeds"][str(seed)] = {
            "overall": _metrics_dict(leaderboard_metrics(rows)),
            "by_domain": {d: _metrics_dict(m) for d, m in metrics_by_domain(rows).items()},
            "rows": [
                {
                    "case_id": r.case_id,
                    "domain": r.domain,
                    "final_status": r.final_status,
                    "best_score": r.best_score,
                    "judge_verdict": r.judge_verdict,
                }
                for r in rows
            ],
        }
    paths["naturebench_metrics"] = out_dir / "metrics.json"
    out_dir.mkdir(parents=True, exist_ok=True)
    paths["naturebench_metrics"].write_text(
        json.dumps(metrics, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return paths
