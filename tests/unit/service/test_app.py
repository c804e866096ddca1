"""The job service app over real HTTP on 127.0.0.1 (uvicorn in-process), on in-memory sandboxes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from tests import _serve

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
uvicorn = pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from openmle import Job, Outcome, RunResult, Sandbox, Split  # noqa: E402
from openmle.service import ServiceConfig, create_app  # noqa: E402
from openmle.service._config import key_id  # noqa: E402
from openmle.service._store import JobStore, Status  # noqa: E402
from openmle.testing import FunctionSandbox, ToyTask  # noqa: E402

KEY = "test-key-0123456789"
H = {"X-API-Key": KEY}


def serving(app: Any) -> contextlib.AbstractAsyncContextManager[str]:
    """Serve ``app`` (its lifespan on) on a free loopback port; yield its base URL."""
    return _serve.serving(app, lifespan="on")


class Gates:
    """A sandbox handler whose jobs wait for ``open(name)``; records the order jobs started."""

    def __init__(self) -> None:
        self.events: dict[str, anyio.Event] = {}
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.changed = anyio.Event()

    async def wait_started(self, n: int) -> None:
        with anyio.fail_after(10):
            while len(self.started) < n:
                await self.changed.wait()

    def gate(self, name: str) -> anyio.Event:
        return self.events.setdefault(name, anyio.Event())

    async def __call__(self, job: Job) -> RunResult:
        name = job.name or ""
        self.started.append(name)
        self.changed.set()
        self.changed = anyio.Event()
        if job.code.startswith("raise"):
            raise RuntimeError("sandbox broke")
        try:
            if name.startswith("gated"):
                await self.gate(name).wait()
            if job.code.startswith("hang"):
                await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(name)
            raise
        return RunResult(outcome=Outcome.SUCCESS, score=0.75, split=job.split, logs=f"ran {name}\n")


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    """A task root holding one toy task."""
    root = tmp_path / "tasks"
    ToyTask.create(root / "toy")
    return root


def _config(tmp_path: Path, roots: Path, **kw: Any) -> ServiceConfig:
    kw.setdefault("api_keys", (KEY,))
    kw.setdefault("cpu_slots", 2)
    return ServiceConfig(db_path=tmp_path / "jobs.db", task_roots=(roots,), **kw)


@contextlib.asynccontextmanager
async def service(
    tmp_path: Path, roots: Path, **kw: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Gates, FunctionSandbox]]:
    gates = Gates()
    sandbox = FunctionSandbox(gates)
    app = create_app(_config(tmp_path, roots, **kw), sandbox=sandbox)
    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        yield client, gates, sandbox


def _body(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": "print(1)", "task": "toy", "name": "j", "timeout": 60}
    body.update(kw)
    return body


async def _wait_done(client: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            r = await client.get(f"/api/v1/jobs/{job_id}", params={"wait": 10}, headers=H)
            assert r.status_code == 200
            if r.json()["status"] in Status.TERMINAL:
                return dict(r.json())


@pytest.mark.anyio
async def test_health_needs_no_key_and_everything_else_does(tmp_path: Path, roots: Path) -> None:
    """``/health`` answers without a key; every job endpoint answers 401 without a valid one."""
    async with service(tmp_path, roots) as (client, _, sandbox):
        r = await client.get("/health")
        assert r.status_code == 200 and r.json()["status"] == "ok"
        for headers in ({}, {"X-API-Key": "wrong-key-000000"}, {"X-API-Key": KEY[:-1]}):
            assert (
                await client.post("/api/v1/jobs", json=_body(), headers=headers)
            ).status_code == 401
            assert (await client.get("/api/v1/jobs/x", headers=headers)).status_code == 401
            assert (await client.delete("/api/v1/jobs/x", headers=headers)).status_code == 401
            r = await client.get("/api/v1/workers/status", headers=headers)
            assert r.status_code == 401 and r.json()["error"] == "unauthorized"
        assert sandbox.jobs == []


@pytest.mark.anyio
async def test_released_client_request_works_unchanged(tmp_path: Path, roots: Path) -> None:
    """A body with the released RL/Evo field names runs; the answer has the fields they read."""
    async with service(tmp_path, roots) as (client, _, sandbox):
        data_dir = str(roots / "toy")
        body = {
            "name": data_dir,
            "code": "print(1)",
            "data_dir": data_dir,
            "timeout": 3600,
            "resource_type": "cpu",
            "priority": 1,
            "idempotency_key": "0123abcd",
            "eval_split": "valid",
            "environment": {
                "EXECUTION_MODE": "shell",
                "DATA_DIR": data_dir,
                "SANDBOX_DATA_DIR": data_dir,
                "HF_ENDPOINT": "http://127.0.0.1:9",
                "EVAL_SPLIT": "valid",
            },
        }
        r = await client.post("/api/v1/jobs", json=body, headers={**H, "X-Trace-ID": "0123abcd"})
        assert r.status_code == 200, r.text
        job_id = r.json()["job_id"]
        assert r.json()["status"] in ("queued", "running", "completed")
        done = await _wait_done(client, job_id)
    assert done["status"] == "completed"
    res = done["result"]
    assert res["result"] == "success" and res["score"] == 0.75 and res["valid_score"] == 0.75
    assert res["test_score"] is None and res["run_log"] == f"ran {data_dir}\n"
    for key in ("created_at", "started_at", "completed_at"):
        assert done[key].endswith("Z")
    assert RunResult.from_dict(res["run_result"]).score == 0.75
    (job,) = sandbox.jobs
    assert job.task == str(await anyio.Path(data_dir).resolve()) and job.split is Split.VALID
    assert job.timeout_s == 3600 and dict(job.env) == {"HF_ENDPOINT": "http://127.0.0.1:9"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"code": ""}, "code"),
        ({"code": None}, "code"),
        ({"timeout": -1}, "timeout"),
        ({"timeout": "10"}, "timeout"),
        ({"timeout": 10**9}, "timeout"),
        ({"resource_type": "tpu"}, "resource_type"),
        ({"resource_type": "gpu"}, "resource_type"),
        ({"priority": 3}, "priority"),
        ({"priority": True}, "priority"),
        ({"environment": {"A": 1}}, "environment.A"),
        ({"environment": [1]}, "environment"),
        ({"eval_split": "train"}, "eval_split"),
        ({"resources": {"cpus": -1}}, "resources"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"task": None}, "data_dir"),
    ],
)
async def test_bad_payload_is_422_naming_the_field(
    tmp_path: Path, roots: Path, change: dict[str, Any], field: str
) -> None:
    """Each malformed field is refused with 422 and the field's name; nothing runs."""
    async with service(tmp_path, roots) as (client, _, sandbox):
        body = _body(**change)
        if change == {"task": None}:
            body.pop("task")
        r = await client.post("/api/v1/jobs", json=body, headers=H)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == field and r.json()["detail"]
        r = await client.post("/api/v1/jobs", content=b"{not json", headers=H)
        assert r.status_code == 422 and r.json()["field"] == "body"
    assert sandbox.jobs == []


@pytest.mark.anyio
async def test_paths_outside_the_task_roots_are_refused(tmp_path: Path, roots: Path) -> None:
    """Absolute paths outside, ``..`` and symlink escapes get 400 with a reason."""
    outside = tmp_path / "secret"
    outside.mkdir()
    (roots / "link").symlink_to(outside)
    (roots / "inner").symlink_to(roots / "toy")
    async with service(tmp_path, roots) as (client, _, sandbox):
        for ref, reason in [
            ("/etc", "outside the registered task roots"),
            (str(outside), "outside the registered task roots"),
            ("../secret", "contains '..'"),
            (f"{roots}/toy/../../secret", "contains '..'"),
            ("link", "symbolic link"),
            (str(roots / "link"), "symbolic link"),
            ("missing", "no task directory"),
        ]:
            r = await client.post("/api/v1/jobs", json=_body(data_dir=ref), headers=H)
            assert r.status_code == 400, (ref, r.text)
            assert r.json()["field"] == "data_dir" and reason in r.json()["detail"], ref
        r = await client.post("/api/v1/jobs", json=_body(task="../secret"), headers=H)
        assert r.status_code == 400 and r.json()["field"] == "task"
        assert sandbox.jobs == []
        ok = [str(roots / "toy"), "toy", "inner"]
        for ref in ok:
            r = await client.post("/api/v1/jobs", json=_body(data_dir=ref), headers=H)
            assert r.status_code == 200, (ref, r.text)
            await _wait_done(client, r.json()["job_id"])
    assert {j.task for j in sandbox.jobs} == {str(await anyio.Path(roots / "toy").resolve())}


@pytest.mark.anyio
async def test_idempotency_key_returns_the_same_job(tmp_path: Path, roots: Path) -> None:
    """A repeated key gives the same job (run once); reusing it for other code is 409."""
    async with service(tmp_path, roots) as (client, _, sandbox):
        ids = set()
        for _ in range(3):
            r = await client.post("/api/v1/jobs", json=_body(idempotency_key="k-1"), headers=H)
            ids.add(r.json()["job_id"])
        assert len(ids) == 1
        r = await client.post(
            "/api/v1/jobs", json=_body(code="print(2)", idempotency_key="k-1"), headers=H
        )
        assert r.status_code == 409 and r.json()["field"] == "idempotency_key"
        r = await client.post("/api/v1/jobs", json=_body(), headers={**H, "Idempotency-Key": "k-2"})
        r2 = await client.post(
            "/api/v1/jobs", json=_body(), headers={**H, "Idempotency-Key": "k-2"}
        )
        assert r.json()["job_id"] == r2.json()["job_id"]
        await _wait_done(client, ids.pop())
        await _wait_done(client, r.json()["job_id"])
    assert len(sandbox.jobs) == 2


@pytest.mark.anyio
async def test_long_poll_returns_when_the_job_ends(tmp_path: Path, roots: Path) -> None:
    """``?wait=`` holds the answer until the job ends, then returns it at once."""
    async with service(tmp_path, roots) as (client, gates, _):
        r = await client.post("/api/v1/jobs", json=_body(name="gated-1"), headers=H)
        job_id = r.json()["job_id"]
        r = await client.get(f"/api/v1/jobs/{job_id}", params={"wait": 0.2}, headers=H)
        assert r.json()["status"] in ("queued", "running") and "X-Long-Poll" in r.headers
        got: dict[str, Any] = {}

        async def poll() -> None:
            resp = await client.get(f"/api/v1/jobs/{job_id}", params={"wait": 50}, headers=H)
            got.update(resp.json())

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(poll)
                await anyio.sleep(0.2)
                assert not got
                gates.gate("gated-1").set()
        assert got["status"] == "completed"
        r = await client.get(f"/api/v1/jobs/{job_id}", params={"wait": "x"}, headers=H)
        assert r.status_code == 422 and r.json()["field"] == "wait"
        assert (await client.get("/api/v1/jobs/nope", headers=H)).status_code == 404


@pytest.mark.anyio
async def test_priority_then_fifo_within_a_pool(tmp_path: Path, roots: Path) -> None:
    """With one slot, queued jobs start by priority (1 first), first-in-first-out within one."""
    async with service(tmp_path, roots, cpu_slots=1) as (client, gates, _):
        r = await client.post("/api/v1/jobs", json=_body(name="gated-block"), headers=H)
        ids = [r.json()["job_id"]]
        await gates.wait_started(1)
        for name, prio in [("a", 2), ("b", 1), ("c", 2), ("d", 1)]:
            r = await client.post("/api/v1/jobs", json=_body(name=name, priority=prio), headers=H)
            ids.append(r.json()["job_id"])
        gates.gate("gated-block").set()
        for job_id in ids:
            await _wait_done(client, job_id)
    assert gates.started == ["gated-block", "b", "d", "a", "c"]


@pytest.mark.anyio
async def test_pools_have_their_own_slots(tmp_path: Path, roots: Path) -> None:
    """A GPU job starts while the CPU pool is full; the worker status shows idle and busy."""
    async with service(tmp_path, roots, cpu_slots=1, gpu_slots=1) as (client, gates, sandbox):
        await client.post("/api/v1/jobs", json=_body(name="gated-cpu"), headers=H)
        await client.post("/api/v1/jobs", json=_body(name="gated-cpu2"), headers=H)
        r = await client.post(
            "/api/v1/jobs", json=_body(name="gpu", resource_type="GPU"), headers=H
        )
        gpu_id = r.json()["job_id"]
        assert (await _wait_done(client, gpu_id))["status"] == "completed"
        # The job reads as completed once its row is written, a moment before its slot is
        # marked free: poll the workers' status until it settles, never a loop's luck.
        want = {"cpu-0": "busy", "gpu-0": "idle"}
        with anyio.fail_after(30):
            while True:
                w = (await client.get("/api/v1/workers/status", headers=H)).json()
                status = {x["worker_id"]: x["status"] for x in w["workers_show"]}
                if status.get("gpu-0") != "busy":
                    break
                await anyio.sleep(0.05)
        assert status == want
        assert w["pools"]["cpu"] == {"slots": 1, "running": 1, "queued": 1}
        gates.gate("gated-cpu").set()
        gates.gate("gated-cpu2").set()
    gpu_job = next(j for j in sandbox.jobs if j.name == "gpu")
    assert gpu_job.resources.gpus == 1


@pytest.mark.anyio
async def test_full_queue_answers_429_with_retry_after(tmp_path: Path, roots: Path) -> None:
    """Past ``max_queued`` waiting jobs a submission gets 429 and ``Retry-After``."""
    async with service(tmp_path, roots, cpu_slots=1, max_queued=2, retry_after_s=7) as (
        client,
        gates,
        _,
    ):
        await client.post("/api/v1/jobs", json=_body(name="gated-0"), headers=H)
        await gates.wait_started(1)
        for i in (1, 2):
            r = await client.post("/api/v1/jobs", json=_body(name=f"q{i}"), headers=H)
            assert r.status_code == 200
        r = await client.post("/api/v1/jobs", json=_body(name="q3"), headers=H)
        assert r.status_code == 429 and r.headers["Retry-After"] == "7"
        gates.gate("gated-0").set()


@pytest.mark.anyio
async def test_cancel_queued_running_and_finished(tmp_path: Path, roots: Path) -> None:
    """DELETE cancels queued and running jobs (the run is cancelled); finished ones stay."""
    async with service(tmp_path, roots, cpu_slots=1) as (client, gates, _):
        run_id = (await client.post("/api/v1/jobs", json=_body(name="gated-r"), headers=H)).json()[
            "job_id"
        ]
        q_id = (await client.post("/api/v1/jobs", json=_body(name="queued"), headers=H)).json()[
            "job_id"
        ]
        await gates.wait_started(1)
        r = await client.delete(f"/api/v1/jobs/{q_id}", headers=H)
        assert r.json()["status"] == "cancelled"
        r = await client.delete(f"/api/v1/jobs/{run_id}", headers=H)
        assert r.json()["status"] == "cancelled" and gates.cancelled == ["gated-r"]
        done_id = (await client.post("/api/v1/jobs", json=_body(name="fine"), headers=H)).json()[
            "job_id"
        ]
        assert (await _wait_done(client, done_id))["status"] == "completed"
        r = await client.delete(f"/api/v1/jobs/{done_id}", headers=H)
        assert r.json()["status"] == "completed"
        assert (await client.delete("/api/v1/jobs/nope", headers=H)).status_code == 404
    assert "queued" not in gates.started


@pytest.mark.anyio
async def test_sandbox_failures_are_infra_errors(tmp_path: Path, roots: Path) -> None:
    """A sandbox that raises, or hangs past timeout + grace, fails the job as INFRA_ERROR."""
    async with service(tmp_path, roots, grace_s=0.2) as (client, _, _sb):
        a = (await client.post("/api/v1/jobs", json=_body(code="raise"), headers=H)).json()
        b = (
            await client.post("/api/v1/jobs", json=_body(code="hang", timeout=0.3), headers=H)
        ).json()
        for job_id, why in [(a["job_id"], "sandbox raised"), (b["job_id"], "did not return")]:
            done = await _wait_done(client, job_id)
            assert done["status"] == "failed"
            assert done["result"]["outcome"] == "infra_error" and done["result"]["score"] is None
            assert why in done["result"]["detail"]


@pytest.mark.anyio
async def test_restart_rule_for_jobs_left_running(tmp_path: Path, roots: Path) -> None:
    """Jobs a crash left running are re-queued once, then failed as INFRA_ERROR."""
    store = JobStore(tmp_path / "jobs.db")
    spec = {"job": Job(code="print(1)", task="toy", name="again").to_dict(), "task_ref": "toy"}
    ids = []
    for key in ("first", "second"):
        row, _ = store.insert(
            owner=key_id(KEY),
            idempotency_key=key,
            request_hash="h",
            name=key,
            pool="cpu",
            priority=1,
            spec=spec,
            max_queued=10,
        )
        assert row is not None
        ids.append(row.id)
    assert store.claim_next("cpu") is not None  # first: started once
    assert store.claim_next("cpu") is not None  # second: started once ...
    store._db.execute("UPDATE jobs SET attempts = 2 WHERE id = ?", (ids[1],))  # ... and again
    store.close()
    async with service(tmp_path, roots) as (client, _, sandbox):
        health = (await client.get("/health")).json()
        assert health["recovered"] == {"requeued": 1, "failed": 1}
        first = await _wait_done(client, ids[0])
        second = await _wait_done(client, ids[1])
    assert first["status"] == "completed" and first["attempts"] == 2
    assert second["status"] == "failed" and second["result"]["outcome"] == "infra_error"
    assert "max_attempts=2" in second["result"]["detail"]
    assert len(sandbox.jobs) == 1


@pytest.mark.anyio
async def test_graceful_stop_requeues_running_jobs_without_counting(
    tmp_path: Path, roots: Path
) -> None:
    """A job running at a graceful stop runs again after the restart, its start not counted."""
    async with service(tmp_path, roots) as (client, gates, _):
        job_id = (await client.post("/api/v1/jobs", json=_body(name="gated-x"), headers=H)).json()[
            "job_id"
        ]
        await gates.wait_started(1)
    assert gates.cancelled == ["gated-x"]
    async with service(tmp_path, roots) as (client, gates, sandbox):
        gates.gate("gated-x").set()
        done = await _wait_done(client, job_id)
    assert done["status"] == "completed" and done["attempts"] == 1
    assert [j.name for j in sandbox.jobs] == ["gated-x"]


@pytest.mark.anyio
async def test_finished_jobs_are_deleted_after_retention(tmp_path: Path, roots: Path) -> None:
    """Finished jobs disappear ``retain_s`` after they end; running ones stay."""
    async with service(tmp_path, roots, retain_s=0.3) as (client, gates, _):
        done_id = (await client.post("/api/v1/jobs", json=_body(), headers=H)).json()["job_id"]
        await _wait_done(client, done_id)
        run_id = (await client.post("/api/v1/jobs", json=_body(name="gated-r"), headers=H)).json()[
            "job_id"
        ]
        with anyio.fail_after(10):
            while (await client.get(f"/api/v1/jobs/{done_id}", headers=H)).status_code != 404:  # noqa: ASYNC110 - polling the HTTP API is the point
                await anyio.sleep(0.05)
        assert (await client.get(f"/api/v1/jobs/{run_id}", headers=H)).status_code == 200
        gates.gate("gated-r").set()


class _Closes(Sandbox):
    """A sandbox that only counts its ``aclose()`` calls."""

    def __init__(self) -> None:
        self.closes = 0

    async def run(self, job: Job) -> RunResult:
        raise AssertionError("no job runs here")

    async def aclose(self) -> None:
        self.closes += 1


@pytest.mark.anyio
async def test_a_failing_stop_still_closes_the_sandbox_and_the_store(
    tmp_path: Path, roots: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Releasing the running jobs at a stop fails (a disk error): the sandbox the app built
    is closed once all the same, and so is the store (both were skipped).
    """
    from openmle.service import _app

    built: list[_Closes] = []

    def load(spec: str, *, workdir: Path | None = None, options: Any = None) -> _Closes:
        built.append(_Closes())
        return built[-1]

    def release_running(self: JobStore) -> int:
        raise OSError("disk I/O error")

    monkeypatch.setattr(_app, "load_sandbox", load)
    monkeypatch.setattr(JobStore, "release_running", release_running)
    app = create_app(_config(tmp_path, roots))
    with pytest.raises(OSError, match="disk I/O error"):
        async with app.router.lifespan_context(app):
            pass
    assert [sb.closes for sb in built] == [1]
    JobStore(tmp_path / "jobs.db").close()  # the store let its lock go


@pytest.mark.anyio
async def test_an_owned_sandbox_is_closed_once_whoever_closes_it(
    tmp_path: Path, roots: Path
) -> None:
    """The app ``serve`` runs owns the sandbox it is given: its shutdown closes it, and the
    owner's close after that (or twice, when the app never started) closes it no more.
    """
    from openmle.service._app import owning_app

    config = _config(tmp_path, roots)
    ran, never = _Closes(), _Closes()
    app, close = owning_app(config, ran)
    async with app.router.lifespan_context(app):
        assert ran.closes == 0
    assert ran.closes == 1
    await close()
    _, close_never = owning_app(config, never)
    await close_never()
    await close_never()
    assert (ran.closes, never.closes) == (1, 1)
