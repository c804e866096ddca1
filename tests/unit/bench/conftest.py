"""Fixtures for the bench tests: the miniature MLE-bench (``_minibench.py``), one per module."""

from __future__ import annotations

from tests.unit.bench._minibench import mini

__all__ = ["mini"]
