"""Compatibility: MLE-bench's adapter moved to :mod:`openmle.bench.mlebench`."""

from __future__ import annotations

from openmle.bench.mlebench._doctor import DoctorLine, doctor
from openmle.bench.mlebench._registry import (
    INSTALL_HINT,
    Competition,
    MLEBench,
    MLEBenchTask,
    _git_commit,
)

__all__ = [
    "INSTALL_HINT",
    "Competition",
    "DoctorLine",
    "MLEBench",
    "MLEBenchTask",
    "_git_commit",
    "doctor",
]
