"""Fakes and conformance checks for backend authors and for tests.

- :class:`FunctionSandbox`, :class:`ScriptedModel`, :class:`FunctionSelector` and
  :class:`RecordingTrainer` are in-memory implementations of the four protocols, each driven by a
  plain function or list.
- :class:`ToyTask` is a tiny on-disk task (with ``TOY_SOLUTION``) for testing sandboxes.
- ``check_*`` functions verify that an implementation keeps its protocol's contract;
  :func:`check_sandbox` is the sandbox suite (any sandbox, any task; every rule it enforces is
  in :data:`SANDBOX_RULES`, and its ``trusted`` profile skips secrecy for a sandbox that says
  ``trusted = True``).
- :data:`HOSTILE_PROGRAMS` and :func:`run_hostile_battery` attack a sandbox and report what
  each attack left behind.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.testing._conformance import (
    check_operator_model,
    check_selector,
    check_trainer,
    sample_candidates,
)
from openmle.testing._fakes import (
    FunctionSandbox,
    FunctionSelector,
    RecordingTrainer,
    ScriptedModel,
)
from openmle.testing._hostile import (
    HOSTILE_PROGRAMS,
    HostileProgram,
    HostileReport,
    run_hostile_battery,
)
from openmle.testing._sandbox_conformance import (
    SANDBOX_PROFILES,
    SANDBOX_RULES,
    SandboxProfile,
    check_sandbox,
)
from openmle.testing._toytask import SOLUTION as TOY_SOLUTION
from openmle.testing._toytask import ToyGrade, ToyTask

__all__ = [
    "HOSTILE_PROGRAMS",
    "SANDBOX_PROFILES",
    "SANDBOX_RULES",
    "TOY_SOLUTION",
    "FunctionSandbox",
    "FunctionSelector",
    "HostileProgram",
    "HostileReport",
    "RecordingTrainer",
    "SandboxProfile",
    "ScriptedModel",
    "ToyGrade",
    "ToyTask",
    "check_operator_model",
    "check_sandbox",
    "check_selector",
    "check_trainer",
    "run_hostile_battery",
    "sample_candidates",
]

publish(globals())
