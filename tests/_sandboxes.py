"""LocalSandbox set-up the sandbox tests share: whether an isolation mode runs here, and a
prepared LocalSandbox of a toy task in one mode (skipped where the mode is unavailable)."""

from __future__ import annotations

import contextlib
import shutil
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Literal

import pytest

from openmle import backends
from openmle.backends import LocalSandbox
from openmle.backends._isolation import bwrap_problem, landlock_abi
from openmle.testing import ToyTask

__all__ = [
    "assert_builds_shipped_sandboxes",
    "local_in_each_mode",
    "mode_available",
    "prepared_local",
]


def mode_available(mode: str) -> str | None:
    """Why isolation ``mode`` (``bwrap`` or ``landlock``) cannot run here, or None."""
    if mode == "bwrap":
        return bwrap_problem(shutil.which("bwrap"), sys.executable)
    return None if landlock_abi() > 0 else "Landlock is not supported by this kernel"


def assert_builds_shipped_sandboxes(build: Callable[[str], object]) -> None:
    """``build`` (a spec string to a sandbox) makes every shipped sandbox from its name:
    local, docker, ray and service:URL (its URL kept)."""
    assert isinstance(build("local"), backends.LocalSandbox)
    assert isinstance(build("docker"), backends.DockerSandbox)
    assert isinstance(build("ray"), backends.RaySandbox)
    service = build("service:http://127.0.0.1:8765")
    assert isinstance(service, backends.JobServiceSandbox)
    assert service.base_url == "http://127.0.0.1:8765"


def local_in_each_mode(toy: ToyTask, **options: Any) -> Iterator[tuple[str, LocalSandbox]]:
    """A LocalSandbox of ``toy`` (task name ``toy``) with ``options``, and its mode, for each
    isolation mode that runs here (bwrap, then landlock; none where neither runs). Each is
    made when reached; the caller closes it."""
    for mode in ("bwrap", "landlock"):
        if mode_available(mode) is None:
            yield mode, LocalSandbox(ToyTask.resolver({"toy": toy}), isolation=mode, **options)


@contextlib.asynccontextmanager
async def prepared_local(
    toy: ToyTask,
    mode: Literal["bwrap", "landlock"],
    *,
    warnings_are_errors: bool = False,
    **options: Any,
) -> AsyncIterator[LocalSandbox]:
    """A LocalSandbox of ``toy`` (task name ``toy``) in isolation ``mode`` with ``options``,
    prepared (its mode checked) and closed on exit; the test is skipped where ``mode`` cannot
    run. ``warnings_are_errors``: a warning while making or preparing it fails the test."""
    why = mode_available(mode)
    if why is not None:
        pytest.skip(f"{mode} unavailable: {why}")
    with warnings.catch_warnings():
        if warnings_are_errors:
            warnings.simplefilter("error")
        sb = LocalSandbox(ToyTask.resolver({"toy": toy}), isolation=mode, **options)
        assert await sb.prepare() == mode
    try:
        yield sb
    finally:
        await sb.aclose()
