"""Shared fixtures and the ``needs`` marker.

Async tests use ``@pytest.mark.anyio`` on the asyncio backend. A test that needs a module of an
optional extra says so with ``@pytest.mark.needs("pandas", ...)`` (or, for a whole file,
``pytest.importorskip(module, reason=...)``): on a core-only install (``pip install openmle``)
it is skipped with the extra to install, so the core suite runs there.
"""

from __future__ import annotations

import importlib.util

import pytest

#: The extra that installs each optional module the tests use (see pyproject.toml).
EXTRA_OF = {
    "datasets": "dev",
    "docker": "docker",
    "matplotlib": "data",
    "openai": "openai",
    "pandas": "data",
    "pyarrow": "data",
    "ray": "ray",
    "sklearn": "data",
    "starlette": "service",
    "tokenizers": "hf",
    "torch": "torch",
    "transformers": "hf",
    "trl": "dev",
    "uvicorn": "service",
}


def missing_reason(module: str) -> str | None:
    """Why a test needing ``module`` cannot run here (None when it imports)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    if found:
        return None
    extra = EXTRA_OF.get(module.partition(".")[0], "all")
    return f"needs {module}: pip install 'openmle[{extra}]'"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a test marked ``needs(...)`` whose modules are not installed, naming the extra."""
    for mark in item.iter_markers("needs"):
        for module in mark.args:
            reason = missing_reason(module)
            if reason is not None:
                pytest.skip(reason)


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio tests on asyncio (the backend every openmle deployment uses)."""
    return "asyncio"
