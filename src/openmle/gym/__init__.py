"""Task packages, validation, grading outside the sandbox, bundled tasks and MLE metrics.

- :func:`load_task` / :func:`bundled` / :func:`resolve_task` give a :class:`Task`: its public
  data per split (``public_dir``), grading in a separate process (``grade`` ->
  :class:`GradeReport`), package checks (``validate`` -> :class:`ValidationReport`) and
  ``prepare``.
- The ``valid`` split is a deterministic hold-out of the public training data; ``test`` uses
  the private answers. Every score carries its split.
"""

from __future__ import annotations

from openmle.gym._package import Task, load_task
from openmle.gym._reports import GradeReport, Problem, Severity, ValidationReport
from openmle.gym._resolve import bundled, bundled_names, resolve_task

__all__ = [
    "GradeReport",
    "Problem",
    "Severity",
    "Task",
    "ValidationReport",
    "bundled",
    "bundled_names",
    "load_task",
    "resolve_task",
]

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("openmle.gym."):
        _obj.__module__ = __name__
del _name, _obj
