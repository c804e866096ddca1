"""Fixtures for the sandbox conformance suites: a toy task and a LocalSandbox per isolation mode."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests._sandboxes import prepared_local

from openmle.backends import LocalSandbox
from openmle.testing import ToyTask


@pytest.fixture
def toy(tmp_path: Path) -> ToyTask:
    """A fresh toy task under the test's temp dir."""
    return ToyTask.create(tmp_path / "toy")


@pytest.fixture(params=["bwrap", "landlock"])
async def local_sandbox(
    request: pytest.FixtureRequest, toy: ToyTask
) -> AsyncIterator[LocalSandbox]:
    """A LocalSandbox in each isolation mode (skipped where the mode is unavailable here)."""
    async with prepared_local(
        toy,
        request.param,
        max_file_mb=64,
        max_workspace_mb=512,
        max_workspace_files=20_000,
        memory_mb=1024,
        max_processes=128,
        kill_grace_s=1.0,
    ) as sb:
        yield sb
