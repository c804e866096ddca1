"""Task packages, validation, grading outside the sandbox, bundled tasks and MLE metrics.

- :func:`load_task` / :func:`bundled` / :func:`resolve_task` give a :class:`Task`: its public
  data per split (``public_dir``), grading in a separate process (``grade`` ->
  :class:`GradeReport`), package checks (``validate`` -> :class:`ValidationReport`) and
  ``prepare``.
- :func:`validate_path` checks a package even when it does not load.
- :func:`summarize` and the per-metric functions judge an agent over many runs: valid rate,
  medal rates, human rank and NatureBench's relative gap with Match-/Surpass-SOTA, each as
  mean, standard deviation and standard error over runs.
- The grading process as a kit for other packages: :func:`run_child` runs gym's grader or a
  program module (``module=``) in a fresh ``python -I`` process with a fixed environment,
  ``RLIMIT_AS``/``RLIMIT_CPU`` (:class:`GradeLimits`), a parent-death signal, its own session,
  killed at its deadline or on cancellation; the program calls :func:`confine_child` first;
  :class:`ChildRun` is how it ended. :func:`cache_root` is openmle's cache folder.
- The ``valid`` split is a deterministic hold-out of the public training data; ``test`` uses
  the private answers. Every score carries its split.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.gym._aggregation import AGGREGATION, Aggregate, aggregate
from openmle.gym._bundled import bundled_raw
from openmle.gym._cache import cache_root
from openmle.gym._grader import ChildRun, GradeLimits, confine_child, run_child
from openmle.gym._mle import (
    MLESummary,
    human_rank,
    match_sota_rate,
    mean_relative_gap,
    medal_rate,
    relative_gap,
    summarize,
    surpass_sota_rate,
    valid_rate,
)
from openmle.gym._package import Task, load_task, validate_path
from openmle.gym._preview import data_preview
from openmle.gym._reports import GradeReport, Problem, Severity, ValidationReport
from openmle.gym._resolve import bundled, bundled_names, resolve_task

__all__ = [
    "AGGREGATION",
    "Aggregate",
    "ChildRun",
    "GradeLimits",
    "GradeReport",
    "MLESummary",
    "Problem",
    "Severity",
    "Task",
    "ValidationReport",
    "aggregate",
    "bundled",
    "bundled_names",
    "bundled_raw",
    "cache_root",
    "confine_child",
    "data_preview",
    "human_rank",
    "load_task",
    "match_sota_rate",
    "mean_relative_gap",
    "medal_rate",
    "relative_gap",
    "resolve_task",
    "run_child",
    "summarize",
    "surpass_sota_rate",
    "valid_rate",
    "validate_path",
]

publish(globals())
