"""The task-package contract, validation, grading outside the sandbox and MLE metrics."""

from __future__ import annotations

__all__: list[str] = []
