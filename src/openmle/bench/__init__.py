"""Benchmarks: MLE-bench's medal rules and metrics, its competitions as tasks, a resumable runner.

- :func:`competition_report` / :func:`rank_score` / :class:`Leaderboard`: MLE-bench's medal
  rule, above-median rule and grading-report fields, exactly as MLE-bench computes them
  (the report is gym's :class:`openmle.gym.GradeReport`, the one report value;
  ``CompetitionReport`` is its deprecated alias, removed in openmle 0.2.0).
- :func:`build_seeds` / :func:`aggregate_seeds`: suite metrics over seeds by MLE-bench's
  aggregation rules (mean, SEM with ddof 1) plus the population sd the paper reports.
- :class:`MLEBench`: an MLE-bench registry and prepared data; each competition is an
  :class:`MLEBenchTask` graded by its own grader in gym's confined grading process;
  :func:`doctor` preflights (and builds each validation view). The adapter lives in
  :mod:`openmle.bench.mlebench` (laid out like MLE-bench: registry, grading, validation rules,
  the child program).
- :func:`arun_bench`: the competitions x seeds matrix (:class:`BenchConfig`) in a resumable
  bench directory (:class:`BenchRun`); :func:`write_report` / :func:`bench_report` give
  Markdown, JSON, HTML, ``submission.jsonl`` and MLE-bench's grading report.
- :class:`NatureBench`: a NatureBench checkout; each case is a :class:`NatureBenchTask` (the
  program sees ``problem/data``, the case's evaluator runs out of process and its result is
  scored as the gap ``g``; :class:`ContainerGrader` runs it in a container of the case's
  image instead); :func:`write_naturebench_report` writes NatureBench's leaderboard
  metrics, ``results.csv`` and ``submission.yaml`` from a bench directory. The adapter lives
  in :mod:`openmle.bench.naturebench` (registry, case rules, scoring, the evaluator runner,
  the container grader, leaderboard metrics, report).
- :class:`Benchmark` / :class:`BenchTask`: what the runner and the report ask of a benchmark;
  each benchmark folder registers a :class:`BenchmarkKind` (:func:`register_benchmark`), named
  by ``BenchConfig.benchmark`` (:func:`benchmark_kind`, :func:`benchmark_names`).
  metrics, ``results.csv`` and ``submission.yaml`` from a bench directory.
- Campaigns: ``--sandbox ray|service:URL|...`` through the one sandbox registry (a job
  service runs a bench's jobs on :func:`bench_task_sandbox`); :func:`array_executor` /
  :func:`submit_array` launch the runs as a job array (Slurm through submitit) and
  :func:`launch_status` / :class:`LaunchStatus` say where each stands; :class:`LiveBoard` is
  the live table of runs in flight on a terminal.
- :func:`build_miniature` / :func:`smoke_miniature`: MLE-bench's 22 Lite competitions in
  miniature (MLE-bench's registry and prepared-data layout, tiny synthetic data, openmle's own
  graders), for tests and ``openmle bench run smoke`` (:data:`SMOKE_IDS`).
"""

from __future__ import annotations

from openmle._exports import deprecated_aliases, publish
from openmle.bench._aggregate import (
    METRICS,
    Metric,
    SeedMetrics,
    SuiteMetrics,
    aggregate_seeds,
    build_seeds,
)
from openmle.bench._benchmarks import (
    Benchmark,
    BenchmarkKind,
    BenchTask,
    benchmark_kind,
    benchmark_names,
    register_benchmark,
)
from openmle.bench._launchers import LaunchStatus, array_executor, launch_status, submit_array
from openmle.bench._live import LiveBoard
from openmle.bench._medals import (
    MLEBENCH_REPORT_FIELDS,
    Leaderboard,
    RankInfo,
    competition_report,
    rank_score,
    round_score,
)
from openmle.bench._mlebench import Competition, DoctorLine, MLEBench, MLEBenchTask, doctor
from openmle.bench._report import BenchReport, bench_report, write_report
from openmle.bench._runner import (
    SEARCH_KEYS,
    Arm,
    BenchConfig,
    BenchRun,
    RunStatus,
    SandboxFactory,
    arun_bench,
    bench_sandbox,
    bench_status,
    check_priors_clean,
    competition_exclusions,
    preset_deviations,
    preset_lines,
    preset_search,
    priors_ablation,
    read_result,
    validation_protocol,
)
from openmle.bench._served import bench_task_sandbox
from openmle.bench._suites import (
    KNOWN_ISSUES,
    LITE_IDS,
    MODALITIES,
    MODALITY_LABELS,
    SUITES,
    modality_of,
)
from openmle.bench._tracking import track_bench
from openmle.bench.mlebench._miniature import SMOKE_IDS, build_miniature, smoke_miniature
from openmle.bench.naturebench import (
    ContainerGrader,
    NatureBench,
    NatureBenchTask,
    PrimaryMetric,
    case_gap,
    case_rows,
    parse_sota,
    primary_metrics,
    read_judge,
    write_naturebench_report,
)

__all__ = [
    "KNOWN_ISSUES",
    "LITE_IDS",
    "METRICS",
    "MLEBENCH_REPORT_FIELDS",
    "MODALITIES",
    "MODALITY_LABELS",
    "SEARCH_KEYS",
    "SMOKE_IDS",
    "SUITES",
    "Arm",
    "BenchConfig",
    "BenchReport",
    "BenchRun",
    "BenchTask",
    "Benchmark",
    "BenchmarkKind",
    "Competition",
    "ContainerGrader",
    "DoctorLine",
    "LaunchStatus",
    "Leaderboard",
    "LiveBoard",
    "MLEBench",
    "MLEBenchTask",
    "Metric",
    "NatureBench",
    "NatureBenchTask",
    "PrimaryMetric",
    "RankInfo",
    "RunStatus",
    "SandboxFactory",
    "SeedMetrics",
    "SuiteMetrics",
    "aggregate_seeds",
    "array_executor",
    "arun_bench",
    "bench_report",
    "bench_sandbox",
    "bench_status",
    "bench_task_sandbox",
    "benchmark_kind",
    "benchmark_names",
    "build_miniature",
    "build_seeds",
    "case_gap",
    "case_rows",
    "check_priors_clean",
    "competition_exclusions",
    "competition_report",
    "doctor",
    "launch_status",
    "modality_of",
    "parse_sota",
    "preset_deviations",
    "preset_lines",
    "preset_search",
    "primary_metrics",
    "priors_ablation",
    "rank_score",
    "read_judge",
    "read_result",
    "register_benchmark",
    "round_score",
    "smoke_miniature",
    "submit_array",
    "track_bench",
    "validation_protocol",
    "write_naturebench_report",
    "write_report",
]

publish(globals(), private=("openmle.bench.mlebench._miniature",))

# Renamed in this release (CHANGELOG): served for one release, with a DeprecationWarning.
__getattr__ = deprecated_aliases(
    __name__,
    {"CompetitionReport": ("openmle.gym", "GradeReport")},
    reason=(
        "it is {module}.{attr}, the one report value (MLE-bench's names: "
        "task=competition_id, valid=valid_submission, higher_is_better=not is_lower_better; "
        ".to_mlebench() exports them)"
    ),
)
