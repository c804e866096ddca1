"""Lazy imports of optional dependencies with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

from openmle.errors import MissingDependency

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import ``module`` or raise :class:`MissingDependency` with the install line."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(
            f"{module!r} is needed for this feature but is not installed. "
            f"Install it with: pip install 'openmle[{extra}]'"
        ) from exc
