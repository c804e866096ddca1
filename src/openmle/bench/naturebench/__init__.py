"""NatureBench, laid out like its own harness: the case registry, the case rules, the scoring
rule, the evaluator runner (a local process or a container), the leaderboard metrics and the
report.

- :class:`NatureBench` / :class:`NatureBenchTask` (``_registry``): a NatureBench checkout; each
  case is a task (the program sees ``problem/data``, the evaluator runs out of process);
  :data:`LITE_CASES` are the paper's ten cases.
- The case rules (``_cases``): the harness's task lists (:data:`SUITES`, :func:`read_suite`),
  each case's GPUs (:func:`case_resources`) and domain (:func:`case_domain`).
- The scoring rule (``_grade``): primary metrics and SOTA points (:func:`primary_metrics`,
  :func:`parse_sota`) and the gap ``g`` (:func:`case_gap`).
- The evaluator runner: :mod:`openmle.bench.naturebench.child`, run by
  :func:`openmle.gym.run_child` in the local grading process, or in a container of the case's
  image by :class:`ContainerGrader` (``_container``; optional, Docker Engine API).
- The leaderboard (``_leaderboard``): the specification's metrics over ``results.csv`` rows
  (:class:`CaseResult`, :func:`leaderboard_metrics`, :func:`metrics_by_domain`) and its files
  (:func:`write_results_csv`, :func:`check_results`, :func:`write_submission_yaml`).
- The report (``_report``): :func:`write_naturebench_report` from a bench directory.
- :data:`KIND`: the adapter as the bench's runner and report see it (registered on import).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openmle._exports import publish
from openmle.bench._benchmarks import BenchmarkKind, register_benchmark
from openmle.bench.naturebench._cases import (
    REFERENCE_TIMEOUT_S,
    SUITES,
    case_domain,
    case_resources,
    read_suite,
)
from openmle.bench.naturebench._container import ContainerGrader
from openmle.bench.naturebench._grade import (
    FAILED_INSTANCE_G,
    PrimaryMetric,
    case_gap,
    parse_sota,
    primary_metrics,
)
from openmle.bench.naturebench._leaderboard import (
    RESULTS_COLUMNS,
    CaseResult,
    NatureBenchMetrics,
    check_results,
    leaderboard_metrics,
    metrics_by_domain,
    write_results_csv,
    write_submission_yaml,
)
from openmle.bench.naturebench._registry import (
    CHILD,
    GRADE_RECORD,
    LITE_CASES,
    NatureBench,
    NatureBenchTask,
    open_for_bench,
)
from openmle.bench.naturebench._report import case_rows, read_judge, write_naturebench_report

__all__ = [
    "CHILD",
    "FAILED_INSTANCE_G",
    "GRADE_RECORD",
    "KIND",
    "LITE_CASES",
    "REFERENCE_TIMEOUT_S",
    "RESULTS_COLUMNS",
    "SUITES",
    "CaseResult",
    "ContainerGrader",
    "NatureBench",
    "NatureBenchMetrics",
    "NatureBenchTask",
    "PrimaryMetric",
    "case_domain",
    "case_gap",
    "case_resources",
    "case_rows",
    "check_results",
    "leaderboard_metrics",
    "metrics_by_domain",
    "parse_sota",
    "primary_metrics",
    "read_judge",
    "read_suite",
    "write_naturebench_report",
    "write_results_csv",
    "write_submission_yaml",
]


def _report(bench_dir: Path, options: Mapping[str, Any]) -> dict[str, Path]:
    return write_naturebench_report(bench_dir, **dict(options))


KIND = BenchmarkKind(
    name="naturebench", title="NatureBench", open=open_for_bench, leaderboards=False, report=_report
)
"""NatureBench as the bench sees it (registered when this package is imported)."""
register_benchmark(KIND)

publish(globals())
