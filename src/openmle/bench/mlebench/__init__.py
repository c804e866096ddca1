"""MLE-bench, laid out like its own repository: the registry, grading, validation views.

- :class:`MLEBench` / :class:`Competition` (``_registry``): a registry checkout (or the
  installed ``mlebench``) plus the data ``mlebench prepare`` wrote; each competition is an
  :class:`MLEBenchTask`. :func:`doctor` (``_doctor``) preflights, building each validation view.
- Grading (``_grade``): the competition's own ``grade_fn`` in the one confined grading process
  (:func:`openmle.gym.run_child` running :mod:`openmle.bench.mlebench.child`), reasons masked
  (:func:`mask_reason`).
- Validation views: a rule per competition (``_rules``: :data:`LITE_RULES`, :class:`SplitRule`;
  a generic rule for others, :func:`rule_for`) applied by :func:`build_validation_view`
  (``_views``, the counterpart of MLE-bench's ``data.py``), which writes
  ``public/`` (the training part, the unlabeled held-out part and the sample submission, with
  ``prepared/public``'s file names and formats) and ``private/`` (the held-out answers in the
  format the competition's ``grade.py`` reads).
- Miniatures (``_miniature``): the 22 Lite competitions in ``mlebench prepare``'s layout with
  tiny synthetic data and a registry of openmle's own graders; published by
  :mod:`openmle.bench` as ``build_miniature``, ``smoke_miniature`` and ``SMOKE_IDS``.
- :data:`KIND`: the adapter as the bench's runner and report see it (registered on import,
  :func:`openmle.bench.register_benchmark`).
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.bench._benchmarks import BenchmarkKind, register_benchmark
from openmle.bench.mlebench._doctor import DoctorLine, doctor
from openmle.bench.mlebench._grade import mask_reason
from openmle.bench.mlebench._registry import (
    VALIDATION_PROTOCOLS,
    Competition,
    MLEBench,
    MLEBenchTask,
    SelfScored,
    open_for_bench,
)
from openmle.bench.mlebench._rules import LITE_RULES, Media, SplitRule, lite_rule
from openmle.bench.mlebench._views import build_validation_view, generic_rule, rule_for

__all__ = [
    "KIND",
    "LITE_RULES",
    "VALIDATION_PROTOCOLS",
    "Competition",
    "DoctorLine",
    "MLEBench",
    "MLEBenchTask",
    "Media",
    "SelfScored",
    "SplitRule",
    "build_validation_view",
    "doctor",
    "generic_rule",
    "lite_rule",
    "mask_reason",
    "rule_for",
]

KIND = BenchmarkKind(name="mle-bench", title="MLE-bench", open=open_for_bench, leaderboards=True)
"""MLE-bench as the bench sees it (registered when this package is imported)."""
register_benchmark(KIND)

publish(globals())
