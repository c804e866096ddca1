"""Shared fixtures. Async tests use ``@pytest.mark.anyio`` on the asyncio backend."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Run anyio tests on asyncio (the backend every openmle deployment uses)."""
    return "asyncio"
