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
  program module (``module=``) in a process forked by a reused ``python -I`` grading server
  (one per program, which imports the module's ``PRELOAD`` once) with a fixed environment,
  ``RLIMIT_AS``/``RLIMIT_CPU`` (:class:`GradeLimits`), a parent-death signal, its own session,
  killed at its deadline or on cancellation; the program calls :func:`confine_child` first;
  :class:`ChildRun` is how it ended. :func:`cache_root` is openmle's cache folder.
  :func:`grade_in_thread` runs a task's grade off the event loop, bounded and cancellable (the
  sandboxes' grading step); :data:`MAX_CSV_BYTES`, :class:`CsvError` and
  :func:`positive_labels` are the grading process's CSV limit, error and label rule;
  :data:`MAX_MAP_K` the largest ``map@K``.
- Splits and decontamination for the packages built on gym (the builder, the priors, the
  bench): :data:`SPLIT_KINDS`, :func:`split_indices` (standard library only: child programs
  embed it) and :func:`check_split`; :class:`Exclusions`, :func:`load_exclusions`,
  :data:`SHIPPED` (the shipped list) and :func:`normalise_name`.
- The ``valid`` split is a deterministic hold-out of the public training data; ``test`` uses
  the private answers. Every score carries its split.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.gym._aggregation import AGGREGATION, Aggregate, aggregate
from openmle.gym._bundled import bundled_raw
from openmle.gym._cache import cache_root
from openmle.gym._decontam import SHIPPED, Exclusions, load_exclusions, normalise_name
from openmle.gym._gradeproc import MAX_CSV_BYTES, MAX_MAP_K, CsvError, positive_labels
from openmle.gym._grader import ChildRun, GradeLimits, confine_child, grade_in_thread, run_child
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
from openmle.gym._splitrules import SPLIT_KINDS, check_split, split_indices

__all__ = [
    "AGGREGATION",
    "MAX_CSV_BYTES",
    "MAX_MAP_K",
    "SHIPPED",
    "SPLIT_KINDS",
    "Aggregate",
    "ChildRun",
    "CsvError",
    "Exclusions",
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
    "check_split",
    "confine_child",
    "data_preview",
    "grade_in_thread",
    "human_rank",
    "load_exclusions",
    "load_task",
    "match_sota_rate",
    "mean_relative_gap",
    "medal_rate",
    "normalise_name",
    "positive_labels",
    "relative_gap",
    "resolve_task",
    "run_child",
    "split_indices",
    "summarize",
    "surpass_sota_rate",
    "valid_rate",
    "validate_path",
]

publish(globals())
