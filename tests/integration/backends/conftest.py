"""Fixtures for the local-sandbox integration tests: a toy task and a sandbox per isolation mode."""

from __future__ import annotations

import shutil
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from openmle.backends import LocalSandbox
from openmle.backends._isolation import bwrap_problem, landlock_abi
from openmle.testing import ToyTask


def mode_available(mode: str) -> str | None:
    """Why ``mode`` cannot run here, or None."""
    if mode == "bwrap":
        import sys

        return bwrap_problem(shutil.which("bwrap"), sys.executable)
    return None if landlock_abi() > 0 else "Landlock is not supported by this kernel"


@pytest.fixture
def toy(tmp_path: Path) -> ToyTask:
    """A fresh toy task under the test's temp dir."""
    return ToyTask.create(tmp_path / "toy")


@pytest.fixture(params=["bwrap", "landlock"])
async def sandbox(request: pytest.FixtureRequest, toy: ToyTask) -> AsyncIterator[LocalSandbox]:
    """A LocalSandbox in each isolation mode (skipped where the mode is unavailable)."""
    mode = request.param
    why = mode_available(mode)
    if why is not None:
        pytest.skip(f"{mode} unavailable: {why}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb = LocalSandbox(
            ToyTask.resolver({"toy": toy}),
            isolation=mode,
            max_file_mb=64,
            memory_mb=1024,
            kill_grace_s=1.0,
        )
        assert await sb.prepare() == mode
    try:
        yield sb
    finally:
        await sb.aclose()
