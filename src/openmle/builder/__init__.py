"""The task builder: raw data in, a verified task package out.

:func:`build_task` runs the stages, each a typed step with a recorded result: intake (raw files
and provenance), decontamination (refuse evaluation data by hash and name), a deterministic
inventory, a task spec from the model (typed JSON, a metric from a vetted library, retried with
the validation error; when none fits, ``"custom"`` and the model's ``utils/metric.py``, checked
by :func:`check_metric_code` before anything uses it), ``prepare.py`` from the model run in a
:class:`~openmle.Sandbox` (retried with the error text, run twice for determinism), a
deterministic gate with named findings, solvability baselines through the sandbox (seeding a
synthetic leaderboard) and the emitted package with the builder's full record in
``builder/record.json``.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.builder._corpus import CorpusSummary, build_many
from openmle.builder._decontam import Blocklist, DecontamResult, check_contamination, load_blocklist
from openmle.builder._fingerprint import fingerprint_lines, table_fingerprint
from openmle.builder._gate import FINDINGS, Finding, GateResult
from openmle.builder._intake import Intake, RawFile, intake
from openmle.builder._inventory import ColumnStats, FileInfo, Inventory, inventory
from openmle.builder._judge import DIMENSIONS, PURPOSE_JUDGE, JudgeResult, JudgeThresholds
from openmle.builder._metric import MetricCheck, check_metric_code
from openmle.builder._pipeline import (
    STAGES,
    BuildOptions,
    BuildResult,
    SandboxFactory,
    build_task,
    sandbox_factory,
)
from openmle.builder._prepare import PrepareResult, PrepareRun
from openmle.builder._solvability import Baseline, Solvability
from openmle.builder._spec import (
    CUSTOM_METRIC,
    METRIC_LIBRARY,
    PURPOSE_KEY,
    PURPOSE_PREPARE,
    PURPOSE_SPEC,
    Inputs,
    Join,
    SpecError,
    SpecResult,
    SplitRule,
    TaskSpec,
)

__all__ = [
    "CUSTOM_METRIC",
    "DIMENSIONS",
    "FINDINGS",
    "METRIC_LIBRARY",
    "PURPOSE_JUDGE",
    "PURPOSE_KEY",
    "PURPOSE_PREPARE",
    "PURPOSE_SPEC",
    "STAGES",
    "Baseline",
    "Blocklist",
    "BuildOptions",
    "BuildResult",
    "ColumnStats",
    "CorpusSummary",
    "DecontamResult",
    "FileInfo",
    "Finding",
    "GateResult",
    "Inputs",
    "Intake",
    "Inventory",
    "Join",
    "JudgeResult",
    "JudgeThresholds",
    "MetricCheck",
    "PrepareResult",
    "PrepareRun",
    "RawFile",
    "SandboxFactory",
    "Solvability",
    "SpecError",
    "SpecResult",
    "SplitRule",
    "TaskSpec",
    "build_many",
    "build_task",
    "check_contamination",
    "check_metric_code",
    "fingerprint_lines",
    "intake",
    "inventory",
    "load_blocklist",
    "sandbox_factory",
    "table_fingerprint",
]

publish(globals())
