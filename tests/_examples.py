"""The repository's examples (``examples/*.py``) loaded as modules, for the tests that run them
or share their definitions (one definition: the digit task of ``meta_evolution.py``)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

__all__ = ["EXAMPLES", "load_example"]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@functools.cache
def load_example(name: str) -> ModuleType:
    """``examples/<name>.py`` executed as the module ``name`` (once per process; its main
    guard does not run)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
