"""openmle: a typed SDK for machine-learning-engineering agents.

Agents write ML programs with four operators (Draft, Improve, Debug, Crossover); programs run in
a :class:`Sandbox` and are graded outside it; search selects parents with a :class:`Selector`;
an :class:`OperatorModel` writes the programs; a :class:`Trainer` improves the model from the
rewards. Subpackages: :mod:`openmle.rewards`, :mod:`openmle.search`, :mod:`openmle.operators`,
:mod:`openmle.gym`, :mod:`openmle.backends`, :mod:`openmle.testing`, :mod:`openmle.errors`.

``import openmle`` stays light: torch, Ray, Docker, OpenAI and the service stack are imported
only by the backends that need them.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle._protocols import OperatorModel, Sandbox, Selector, Trainer
from openmle._signature import error_signature
from openmle._types import (
    Candidate,
    Job,
    Message,
    ModelRequest,
    ModelResponse,
    Operator,
    Outcome,
    Resources,
    RunResult,
    Selection,
    Split,
    TaskMeta,
    Usage,
)
from openmle._version import __version__
from openmle.errors import OpenMLEError

__all__ = [
    "Candidate",
    "Job",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "OpenMLEError",
    "Operator",
    "OperatorModel",
    "Outcome",
    "Resources",
    "RunResult",
    "Sandbox",
    "Selection",
    "Selector",
    "Split",
    "TaskMeta",
    "Trainer",
    "Usage",
    "__version__",
    "error_signature",
]

publish(globals())
