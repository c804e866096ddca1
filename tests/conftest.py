"""Shared fixtures and the ``needs`` marker.

Async tests use ``@pytest.mark.anyio`` on the asyncio backend. A test that needs a module of an
optional extra says so with ``@pytest.mark.needs("pandas", ...)`` (or, for a whole file,
``pytest.importorskip(module, reason=...)``): on a core-only install (``pip install openmle``)
it is skipped with the extra to install, so the core suite runs there.

``OPENMLE_HYPOTHESIS_MAX_EXAMPLES=N`` caps every property test at ``N`` examples (its own
count when lower): the core-only run of ``scripts/test.sh`` sets it, as the full run before it
has already tried every property at its own count with the same code.

Property tests have no per-example deadline and no "too slow" health check (the ``openmle``
hypothesis profile, loaded here): both measure the machine's speed (hypothesis's default
allows 200 ms per example), and a test never depends on wall-clock speed.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest

try:
    from hypothesis import HealthCheck, settings
except ImportError:  # pragma: no cover - an install without the test tools
    pass
else:
    settings.register_profile(
        "openmle", deadline=None, suppress_health_check=[HealthCheck.too_slow]
    )
    settings.load_profile("openmle")

#: The extra that installs each optional module the tests use (see pyproject.toml).
EXTRA_OF = {
    "datasets": "dev",
    "docker": "docker",
    "matplotlib": "data",
    "openai": "openai",
    "PIL": "data",
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Cap hypothesis tests at ``OPENMLE_HYPOTHESIS_MAX_EXAMPLES`` examples when it is set."""
    cap = os.environ.get("OPENMLE_HYPOTHESIS_MAX_EXAMPLES", "")
    if not cap:
        return
    if not cap.isdigit() or int(cap) < 1:
        raise pytest.UsageError(
            f"OPENMLE_HYPOTHESIS_MAX_EXAMPLES={cap!r}: expected a positive integer (or unset)"
        )
    from hypothesis import settings

    for item in items:
        test = getattr(item, "obj", None)
        test = getattr(test, "__func__", test)  # a method: its function holds the settings
        # Hypothesis reads this attribute of the @given wrapper when the test runs.
        current = getattr(test, "_hypothesis_internal_use_settings", None)
        if isinstance(current, settings) and current.max_examples > int(cap):
            test._hypothesis_internal_use_settings = settings(current, max_examples=int(cap))  # type: ignore[union-attr]


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """Run the test with one torch thread (restored after). For tiny models trained beside
    sandboxed programs: their matrices gain nothing from a second thread, and two threads
    spinning while the programs run cost many times the CPU (measured on a loaded 2-core
    machine: 20 warm-start steps of the GSPO quality test's model took 12.6 s of CPU with
    two threads, 0.6 s with one)."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio tests on asyncio (the backend every openmle deployment uses)."""
    return "asyncio"
