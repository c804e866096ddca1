"""Per-key task roots against a real ``openmle serve`` subprocess (``--api-key-file`` with
``task_root=``): one team's key cannot name another team's tasks."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from tests.integration.service._server import Server

from openmle.testing import TOY_SOLUTION, ToyTask

pytestmark = [pytest.mark.integration]

KA = "team-a-key-0123456789"
KB = "team-b-key-9876543210"
KC = "shared-c-key-0123456789"
KD = "shared-d-key-0123456789"
TASK = "tasks/pizza@seed-0"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.anyio
async def test_a_key_with_its_own_roots_reaches_only_them(tmp_path: Path) -> None:
    """B naming A's task (relative, absolute, a link in B's root) gets 400 ``bad_path`` and
    nothing runs; A and the keys on the service-wide root still work; the start warns that
    two keys share the service-wide root, naming no key."""
    a, b, shared = tmp_path / "bench-a", tmp_path / "bench-b", tmp_path / "shared"
    ToyTask.create(a / TASK)
    ToyTask.create(b / "tasks" / "own@seed-0")
    ToyTask.create(shared / "toy")
    kept = a / "submissions" / "pizza" / "seed-0" / "submission.csv"
    kept.parent.mkdir(parents=True)
    kept.write_text("id,pred\n1,0.5\n")
    (b / "tasks" / "pizza-link").symlink_to(a / TASK)
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KA} task_root={a}\n{KB} task_root={b}\n{KC}\n{KD} max_queued=5\n")
    before = _tree(a)
    srv = Server(tmp_path, shared, slots=1, args=["--api-key-file", str(keys)])
    srv.env.pop("OPENMLE_SERVICE_API_KEYS")
    srv.start()
    try:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as http:
            for ref in [TASK, str(a / TASK), "tasks/pizza-link", str(b / "tasks/pizza-link")]:
                body = {"code": TOY_SOLUTION, "task": ref, "split": "test", "timeout": 60}
                r = await http.post("/api/v1/jobs", json=body, headers={"X-API-Key": KB})
                assert r.status_code == 400 and r.json()["error"] == "bad_path", (ref, r.text)
            assert srv.ledger_lines() == [] and _tree(a) == before
            for key, ref in [(KA, TASK), (KB, "tasks/own@seed-0"), (KC, "toy")]:
                body = {"code": TOY_SOLUTION, "task": ref, "name": key[:6], "timeout": 60}
                r = await http.post("/api/v1/jobs", json=body, headers={"X-API-Key": key})
                assert r.status_code == 200, (key, ref, r.text)
                job = r.json()["job_id"]
                done = await http.get(
                    f"/api/v1/jobs/{job}", params={"wait": 30}, headers={"X-API-Key": key}
                )
                assert done.json()["result"]["outcome"] == "success", done.text
    finally:
        srv.stop()
    log = srv.log()
    assert f"2 API keys share task roots ({shared.resolve()})" in log, log
    assert not any(k in log for k in (KA, KB, KC, KD)), log
    assert kept.read_text() == "id,pred\n1,0.5\n"


def test_a_missing_key_root_stops_the_start_naming_the_line(tmp_path: Path) -> None:
    """A ``task_root=`` that is not a directory: exit 2, one line naming the file line and the
    fix, never the key; nothing written."""
    ToyTask.create(tmp_path / "tasks" / "toy")
    keys = tmp_path / "keys.txt"
    keys.write_text(f"# teams\n{KA} task_root={tmp_path / 'missing'}\n")
    srv = Server(tmp_path, tmp_path / "tasks", args=["--api-key-file", str(keys)])
    srv.env.pop("OPENMLE_SERVICE_API_KEYS")
    status, log = srv.refused()
    assert status == 2, log
    assert "line 2: task_root=" in log and "create it or fix the path" in log, log
    assert KA not in log and "Traceback" not in log, log
    assert not srv.db.exists()
