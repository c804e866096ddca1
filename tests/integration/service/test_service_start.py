"""``openmle serve``'s own start and stop, through the real CLI in a subprocess: the sandbox
it runs jobs on is built once and closed once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from tests.integration.service._server import KEY, Server

from openmle import Job, Outcome
from openmle.backends import JobServiceSandbox
from openmle.testing import TOY_SOLUTION, ToyTask

pytestmark = [pytest.mark.integration]


@pytest.mark.anyio
async def test_serve_builds_its_sandbox_once_and_closes_it_once(tmp_path: Path) -> None:
    """The sandbox the start-up check builds and preflights is the one jobs run on, and a
    graceful stop closes it once (it was built twice, by the check and by the app, and
    closed twice).
    """
    ToyTask.create(tmp_path / "tasks" / "toy")
    srv = Server(tmp_path, tmp_path / "tasks", slots=1, sandbox="service_sandbox:make_counted")
    await anyio.to_thread.run_sync(srv.start)
    try:
        client = JobServiceSandbox(srv.url, api_key=KEY, poll_interval_s=0.1)
        try:
            with anyio.fail_after(120):
                job = Job(code=TOY_SOLUTION, task=str(tmp_path / "tasks" / "toy"), name="one")
                result = await client.run(job)
        finally:
            await client.aclose()
        assert result.outcome is Outcome.SUCCESS
    finally:
        await anyio.to_thread.run_sync(srv.stop)
    said = [line for line in srv.ledger_lines() if line.startswith("sandbox ")]
    assert said == ["sandbox built 1", "sandbox preflight 1", "sandbox closed 1"], srv.log()
    assert srv.ledger_lines().count("start one") == 1


def test_a_start_refused_after_the_build_closes_the_sandbox_once(tmp_path: Path) -> None:
    """A work directory that is not the service's own is refused in one line (exit 2) after
    the sandbox was built and preflighted; the sandbox is closed once all the same."""
    ToyTask.create(tmp_path / "tasks" / "toy")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "precious.txt").write_text("not the service's")
    srv = Server(
        tmp_path,
        tmp_path / "tasks",
        sandbox="service_sandbox:make_counted",
        args=["--work-dir", str(foreign)],
    )
    assert srv.launch().wait(60) == 2
    said = srv.log().strip().splitlines()
    assert len(said) == 1 and "--work-dir" in said[0], said
    assert srv.ledger_lines() == ["sandbox built 1", "sandbox preflight 1", "sandbox closed 1"]
