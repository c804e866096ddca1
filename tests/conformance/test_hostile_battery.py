"""The hostile-program battery: LocalSandbox survives every attack; a naive sandbox does not."""

from __future__ import annotations

import pytest

from openmle import Outcome
from openmle.backends import LocalSandbox
from openmle.testing import HOSTILE_PROGRAMS, ToyTask, run_hostile_battery

from .test_sandbox_conformance import NaiveSandbox

pytestmark = [pytest.mark.conformance, pytest.mark.integration, pytest.mark.slow, pytest.mark.anyio]


async def test_local_sandbox_survives_battery(local_sandbox: LocalSandbox, toy: ToyTask) -> None:
    """Every hostile program ends classified, leaves no process and no trace on host or task."""
    reports = await run_hostile_battery(
        local_sandbox, task="toy", private_paths=toy.private_paths, task_root=toy.root
    )
    assert [r.name for r in reports] == [p.name for p in HOSTILE_PROGRAMS]
    failures = {r.name: r.problems for r in reports if not r.ok}
    assert not failures, failures
    by_name = {r.name: r for r in reports}
    # LocalSandbox is stricter than the battery requires.
    assert by_name["memory_bomb"].outcome is Outcome.OOM
    assert by_name["symlinked_submission"].outcome is Outcome.INVALID_SUBMISSION
    assert "File too large" in by_name["disk_filler"].result.logs
    assert by_name["stdout_flood"].result.logs_dropped_bytes > 100 * 1024 * 1024 - 200_000


async def test_battery_reports_a_leaking_sandbox(toy: ToyTask) -> None:
    """Against an unisolated sandbox the battery reports the leaks and the writes it made."""
    names = {"read_private", "write_outside", "network", "host_unix_socket", "metadata_outside"}
    safe = [p for p in HOSTILE_PROGRAMS if p.name in names]
    reports = await run_hostile_battery(
        NaiveSandbox(toy),
        task="toy",
        private_paths=toy.private_paths,
        task_root=toy.root,
        programs=safe,
    )
    problems = {r.name: " ".join(r.problems) for r in reports}
    assert "the attack worked" in problems["read_private"]
    assert "task package changed" in problems["write_outside"]
    assert "task package changed" in problems["metadata_outside"]
    assert "host service" in problems["network"]
    assert "host service" in problems["host_unix_socket"]
