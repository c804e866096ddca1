"""The kit gym offers the packages built on it: grading helpers and limits, split rules, the
cache directory and decontamination.

For the task builder, the bench, the sandboxes and the priors (layers above gym; see
``docs/explanation/architecture.md``). Everything here is public and documented; the modules
behind it stay gym's own, so a package above imports from this module, never from
``openmle.gym._something``.

- **Grading**: :func:`grade_in_thread` (a task's grade, bounded and cancellable, off the event
  loop), :func:`run_child` / :class:`ChildRun` (a grading-style child process under
  :class:`GradeLimits`), :data:`MAX_CSV_BYTES` (the largest CSV a grade reads),
  :class:`CsvError`, :func:`positive_labels`, :data:`MAX_MAP_K`.
- **Splits**: :data:`SPLIT_KINDS`, :func:`split_indices` (standard library only: child programs
  embed it), :func:`check_split`.
- **Cache**: :func:`cache_root`, where prepared data is kept.
- **Decontamination**: :class:`Exclusions`, :func:`load_exclusions`, :data:`SHIPPED` (the shipped
  list), :func:`normalise_name`.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.gym._cache import cache_root
from openmle.gym._decontam import SHIPPED, Exclusions, load_exclusions, normalise_name
from openmle.gym._gradeproc import MAX_CSV_BYTES, MAX_MAP_K, CsvError, positive_labels
from openmle.gym._grader import ChildRun, GradeLimits, grade_in_thread, run_child
from openmle.gym._splitrules import SPLIT_KINDS, check_split, split_indices

__all__ = [
    "MAX_CSV_BYTES",
    "MAX_MAP_K",
    "SHIPPED",
    "SPLIT_KINDS",
    "ChildRun",
    "CsvError",
    "Exclusions",
    "GradeLimits",
    "cache_root",
    "check_split",
    "grade_in_thread",
    "load_exclusions",
    "normalise_name",
    "positive_labels",
    "run_child",
    "split_indices",
]

publish(globals(), private=("openmle.gym._",))
