"""What a bench reports to a :class:`~openmle.tracking.Tracker` (``openmle bench run --track``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from openmle.bench._report import bench_report
from openmle.bench._runner import RESULT, read_result
from openmle.errors import InvalidArgument
from openmle.gym import GradeReport
from openmle.tracking import Tracker, flatten_params

__all__ = ["track_bench"]


def _report_metrics(r: GradeReport) -> dict[str, float]:
    m = {
        "valid_submission": float(r.valid_submission),
        "any_medal": float(r.any_medal),
        "gold_medal": float(r.gold_medal),
        "silver_medal": float(r.silver_medal),
        "bronze_medal": float(r.bronze_medal),
        "above_median": float(r.above_median),
        "human_rank": float(r.human_rank or 0.0),
    }
    if r.score is not None:
        m["score"] = float(r.score)
    return m


def _run_metrics(path: Path) -> dict[str, float]:
    """The search summary a run's ``bench_result.json`` holds (read bounded and checked)."""
    try:
        data = read_result(path)
    except InvalidArgument:
        return {}
    if data is None:
        return {}
    m: dict[str, float] = {}
    for key in ("best_valid_score", "nodes"):
        v = data.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            m[key] = float(v)
    for key, v in (data.get("spent") or {}).items():
        m[f"spent/{key}"] = float(v)
    return m


def track_bench(
    tracker: Tracker,
    path: str | os.PathLike[str],
    *,
    artifacts: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Report the bench directory at ``path`` to ``tracker`` (the caller closes it).

    - parameters: the bench manifest, flattened (``config.*``, ``hardware.*``, ...);
    - per run, at step = its seed: ``run/[ARM/]CID/*``: ``score`` (when graded),
      ``valid_submission``, ``any_medal``, ``gold_medal``, ``silver_medal``, ``bronze_medal``,
      ``above_median``, ``human_rank`` (recomputed by :func:`bench_report`, as in the report),
      and the search's ``best_valid_score``, ``nodes``, ``spent/*``;
    - per competition, at step 0: ``competition/[ARM/]CID/*``: ``runs``, ``valid_rate``,
      ``medal_rate``, ``mean_score`` (over the graded runs);
    - the suite, at step 0: ``suite/[ARM/]METRIC`` (the mean over seeds of every MLE-bench
      metric of :func:`aggregate_seeds`);
    - ``artifacts``: files to attach (the report's Markdown, HTML and JSON).

    Raises:
        InvalidArgument: ``path`` is not a bench directory.
    """
    rep = bench_report(path)
    run = rep.run
    tracker.log_params(flatten_params(run.manifest))
    for arm, rows in rep.arm_seeds.items():
        pre = f"{arm}/" if arm else ""
        by_cid: dict[str, list[GradeReport]] = {}
        for row in rows:
            for r in row:
                seed = 0 if r.seed is None else r.seed
                by_cid.setdefault(r.competition_id, []).append(r)
                m = _report_metrics(r) | _run_metrics(
                    run.run_dir(r.competition_id, seed, arm) / RESULT
                )
                tracker.log_metrics(
                    {f"run/{pre}{r.competition_id}/{k}": v for k, v in m.items()}, step=seed
                )
        for cid, reps in by_cid.items():
            scores = [r.score for r in reps if r.score is not None]
            c: dict[str, Any] = {
                "runs": len(reps),
                "valid_rate": sum(r.valid_submission for r in reps) / len(reps),
                "medal_rate": sum(r.any_medal for r in reps) / len(reps),
            }
            if scores:
                c["mean_score"] = sum(scores) / len(scores)
            tracker.log_metrics({f"competition/{pre}{cid}/{k}": v for k, v in c.items()}, step=0)
        metrics = rep.arm_metrics.get(arm, rep.metrics) if arm else rep.metrics
        tracker.log_metrics(
            {f"suite/{pre}{name}": _mean(m) for name, m in metrics.metrics.items()}, step=0
        )
    for file in artifacts:
        tracker.log_artifact(file)


def _mean(metric: Any) -> float:
    return float(metric.mean)
