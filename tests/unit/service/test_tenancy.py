"""Per-key task roots: one key cannot name (run, grade, overwrite) another key's tasks.

The service runs over real HTTP on 127.0.0.1 (uvicorn in-process) with an in-memory sandbox
that, like the bench's, keeps what it grades in the task's directory (``kept.csv``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from tests import _serve

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from openmle import Job, Outcome, RunResult
from openmle.errors import InvalidArgument
from openmle.service import (
    JobRoots,
    KeyLimits,
    ServiceConfig,
    create_app,
    current_job_roots,
    load_key_limits,
)
from openmle.service._config import key_id, shared_roots
from openmle.service._store import JobStore, Status
from openmle.testing import FunctionSandbox, ToyTask

KA = "team-a-key-0123456789"
KB = "team-b-key-9876543210"
KC = "shared-c-key-0123456789"
KD = "shared-d-key-0123456789"
TASK = "tasks/pizza@seed-0"


class Benches:
    """Two teams' bench directories and a service-wide root, as the bench lays them out."""

    def __init__(self, tmp: Path) -> None:
        self.a = tmp / "bench-a"
        self.b = tmp / "bench-b"
        self.shared = tmp / "shared"
        ToyTask.create(self.a / TASK)
        ToyTask.create(self.b / "tasks" / "own@seed-0")
        ToyTask.create(self.shared / "toy")
        self.kept = self.a / TASK / "kept.csv"  # A's kept test submission
        self.kept.write_text("id,pred\n1,0.5\n")
        # Placed by B in B's own root, pointing into A's root.
        (self.b / "tasks" / "pizza-link").symlink_to(self.a / TASK)

    def config(self, tmp: Path, **kw: Any) -> ServiceConfig:
        kw.setdefault(
            "key_limits",
            {KA: KeyLimits(task_roots=(self.a,)), KB: KeyLimits(task_roots=(self.b,))},
        )
        kw.setdefault("task_roots", (self.shared,))
        kw.setdefault("db_path", tmp / "jobs.db")
        return ServiceConfig(api_keys=(KA, KB, KC, KD), cpu_slots=1, **kw)


async def _keep(job: Job) -> RunResult:
    """Grade and keep the graded submission in the task's directory (as the bench does)."""
    (Path(job.task) / "kept.csv").write_text("id,pred\n1,0.999\n")
    return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)


@contextlib.asynccontextmanager
async def _service(config: ServiceConfig) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    sandbox = FunctionSandbox(_keep)
    app = create_app(config, sandbox=sandbox)
    async with (
        _serve.serving(app, lifespan="on") as url,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        yield client, sandbox


def _body(**kw: Any) -> dict[str, Any]:
    return {"code": "print(1)", "timeout": 60, "split": "test", **kw}


async def _done(client: httpx.AsyncClient, job_id: str, key: str) -> dict[str, Any]:
    with anyio.fail_after(30):
        while True:
            r = await client.get(
                f"/api/v1/jobs/{job_id}", params={"wait": 10}, headers={"X-API-Key": key}
            )
            if r.json()["status"] in Status.TERMINAL:
                return dict(r.json())


@pytest.fixture
def benches(tmp_path: Path) -> Benches:
    return Benches(tmp_path)


@pytest.mark.anyio
async def test_a_key_cannot_name_another_keys_tasks(tmp_path: Path, benches: Benches) -> None:
    """Key B naming key A's task (relative, absolute, through a link in B's root, ``..``) gets
    400 ``bad_path`` and nothing runs: A's kept submission is untouched."""
    attacks = [
        ("task", TASK),
        ("data_dir", TASK),
        ("task", str(benches.a / TASK)),
        ("data_dir", str(benches.a / TASK)),
        ("task", "tasks/pizza-link"),
        ("data_dir", str(benches.b / "tasks" / "pizza-link")),
        ("data_dir", f"{benches.b}/../bench-a/{TASK}"),
    ]
    async with _service(benches.config(tmp_path)) as (client, sandbox):
        for field, ref in attacks:
            r = await client.post(
                "/api/v1/jobs", json=_body(**{field: ref}), headers={"X-API-Key": KB}
            )
            assert r.status_code == 400, (field, ref, r.text)
            assert r.json()["error"] == "bad_path" and r.json()["field"] == field, ref
        assert sandbox.jobs == []
        assert benches.kept.read_text() == "id,pred\n1,0.5\n"
        # B's own task, through its own root, still runs.
        r = await client.post(
            "/api/v1/jobs", json=_body(task="tasks/own@seed-0"), headers={"X-API-Key": KB}
        )
        assert r.status_code == 200, r.text
        assert (await _done(client, r.json()["job_id"], KB))["status"] == "completed"
    assert benches.kept.read_text() == "id,pred\n1,0.5\n"


@pytest.mark.anyio
async def test_own_roots_and_shared_roots_both_work(tmp_path: Path, benches: Benches) -> None:
    """Key A reaches its tasks (relative and absolute); keys without roots of their own reach
    the service-wide roots but not A's; bundled tasks stay open to every key."""
    async with _service(benches.config(tmp_path)) as (client, sandbox):
        for key, ref in [(KA, TASK), (KA, str(benches.a / TASK)), (KC, "toy"), (KD, "toy")]:
            r = await client.post("/api/v1/jobs", json=_body(task=ref), headers={"X-API-Key": key})
            assert r.status_code == 200, (key, ref, r.text)
            assert (await _done(client, r.json()["job_id"], key))["status"] == "completed"
        for key, ref in [(KC, TASK), (KC, str(benches.a / TASK)), (KA, "toy")]:
            r = await client.post("/api/v1/jobs", json=_body(task=ref), headers={"X-API-Key": key})
            assert r.status_code == 400 and r.json()["error"] == "bad_path", (key, ref, r.text)
        r = await client.post(
            "/api/v1/jobs",
            json=_body(task="tabular-binary", split="valid"),
            headers={"X-API-Key": KB},
        )
        assert r.status_code == 200, r.text
    real = {str((benches.a / TASK).resolve()), str((benches.shared / "toy").resolve())}
    assert {j.task for j in sandbox.jobs} == real | {"tabular-binary"}
    assert benches.kept.read_text() == "id,pred\n1,0.999\n"  # A's own job kept its result


@pytest.mark.anyio
async def test_keys_sharing_roots_are_warned_at_start(
    tmp_path: Path, benches: Benches, caplog: pytest.LogCaptureFixture
) -> None:
    """The start logs how many keys share which roots (never a key); keys that share a root
    (here all four, one service-wide root holding both benches) reach each other's tasks."""
    config = benches.config(
        tmp_path, key_limits={}, task_roots=(tmp_path,), db_path=tmp_path / "db"
    )
    with caplog.at_level(logging.WARNING, logger="openmle.service"):
        async with _service(config) as (client, _):
            r = await client.post(
                "/api/v1/jobs", json=_body(task=f"bench-a/{TASK}"), headers={"X-API-Key": KB}
            )
            assert r.status_code == 200, r.text
    warned = [r.getMessage() for r in caplog.records if "share task roots" in r.getMessage()]
    assert warned == [
        f"job service: 4 API keys share task roots ({tmp_path}): each can run jobs on the "
        "others' tasks there; give each team's key its own task_root=DIR in --api-key-file "
        "to separate them"
    ]
    assert not any(k in caplog.text for k in (KA, KB, KC, KD))


def test_shared_roots_groups_keys_whose_roots_meet(tmp_path: Path, benches: Benches) -> None:
    """Own roots apart: only the keys on the service-wide root share; a root holding another
    key's root (or a link to it) joins that key's group."""
    config = benches.config(tmp_path)
    assert shared_roots(config) == [
        f"2 API keys share task roots ({benches.shared.resolve()}): each can run jobs on the "
        "others' tasks there; give each team's key its own task_root=DIR in --api-key-file "
        "to separate them"
    ]
    (tmp_path / "link-to-a").symlink_to(benches.a)
    limits = {
        KA: KeyLimits(task_roots=(benches.a,)),
        KB: KeyLimits(task_roots=(tmp_path / "link-to-a" / "tasks",)),
        KC: KeyLimits(task_roots=()),
        KD: KeyLimits(task_roots=(benches.shared,)),
    }
    lines = shared_roots(benches.config(tmp_path, key_limits=limits))
    assert len(lines) == 1 and lines[0].startswith("2 API keys share task roots")
    assert str(benches.a.resolve()) in lines[0] and str(benches.shared) not in lines[0]


def test_key_file_task_roots(tmp_path: Path, benches: Benches) -> None:
    """``task_root=`` (repeatable) gives a key its own roots; a relative or missing one is
    refused naming the file line and the fix, never the key."""
    f = tmp_path / "keys"
    f.write_text(f"# teams\n{KA} task_root={benches.a} max_queued=5 task_root={benches.shared}\n")
    assert load_key_limits(f) == {
        KA: KeyLimits(max_queued=5, task_roots=(benches.a, benches.shared))
    }
    for bad, why in [
        ("bench-a", "is not an absolute path"),
        (str(tmp_path / "missing"), "is not an existing directory; create it"),
        (str(benches.a / TASK / "bench-task.json"), "is not an existing directory"),
    ]:
        f.write_text(f"{KB}\n\n{KA} task_root={bad}\n")
        with pytest.raises(InvalidArgument, match="line 3: task_root=") as info:
            load_key_limits(f)
        assert why in str(info.value) and KA not in str(info.value)
    with pytest.raises(InvalidArgument, match=r"api_keys\[1\] hold") as err:
        benches.config(tmp_path, key_limits={KB: KeyLimits(task_roots=(tmp_path / "gone",))})
    assert KB not in str(err.value)
    config = benches.config(tmp_path)
    assert config.limits_for(KA).task_roots == (benches.a,)
    assert config.limits_for(KC).task_roots == config.limits_for(None).task_roots


@pytest.mark.anyio
async def test_a_queued_job_outside_its_keys_roots_now_fails(
    tmp_path: Path, benches: Benches
) -> None:
    """A job queued before the key file gave its key roots of its own (a restart) that names
    a task outside them fails with INFRA_ERROR instead of running."""
    store = JobStore(tmp_path / "jobs.db")
    task = str((benches.a / TASK).resolve())
    spec = {"job": Job(code="print(1)", task=task, split="test").to_dict(), "task_ref": TASK}
    row, _ = store.insert(
        owner=key_id(KB),
        idempotency_key=None,
        request_hash="h",
        name="queued-before",
        pool="cpu",
        priority=1,
        spec=spec,
        max_queued=10,
    )
    assert row is not None
    store.close()
    async with _service(benches.config(tmp_path)) as (client, sandbox):
        done = await _done(client, row.id, KB)
    assert done["status"] == "failed" and done["result"]["outcome"] == "infra_error"
    assert "not under its API key's task roots now" in done["result"]["detail"]
    assert sandbox.jobs == [] and benches.kept.read_text() == "id,pred\n1,0.5\n"


def test_cli_serve_says_key_file_errors_in_the_files_syntax(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad key-file line is one line (exit 2) in the file's own words (``max_queued=N``,
    ``task_root=``, not ``--max-queued=N``), never showing the key."""
    from openmle._cli import main

    monkeypatch.delenv("OPENMLE_SERVICE_API_KEYS", raising=False)
    f = tmp_path / "keys"
    for line, said in [
        (f"{KA} max_queued=x", "expected max_queued=N, top_priority=1|2 or task_root=/abs/dir"),
        (f"{KA} task_root=relative/dir", "line 1: task_root='relative/dir' is not an absolute"),
    ]:
        f.write_text(line + "\n")
        assert main(["serve", "--db", str(tmp_path / "jobs.db"), "--api-key-file", str(f)]) == 2
        err = capsys.readouterr().err
        assert said in err and "--max-queued" not in err and KA not in err, err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.anyio
async def test_a_sandbox_sees_the_task_roots_of_the_jobs_key(
    tmp_path: Path, benches: Benches
) -> None:
    """While it runs a job, a sandbox reads the job's key's roots and every root of the
    service (:func:`current_job_roots`), so a received directory can be confined per key;
    outside a job there are none."""
    seen: list[tuple[str, JobRoots | None]] = []

    async def record(job: Job) -> RunResult:
        seen.append((job.name or "", current_job_roots()))
        return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)

    app = create_app(benches.config(tmp_path), sandbox=FunctionSandbox(record))
    async with (
        _serve.serving(app, lifespan="on") as url,
        httpx.AsyncClient(base_url=url, timeout=30) as client,
    ):
        for key, task in [(KA, TASK), (KB, "tasks/own@seed-0"), (KC, "toy")]:
            body = _body(task=task, name=key[:6])
            r = await client.post("/api/v1/jobs", json=body, headers={"X-API-Key": key})
            assert r.status_code == 200, r.text
            await _done(client, r.json()["job_id"], key)
    every = tuple(sorted(p.resolve() for p in (benches.a, benches.b, benches.shared)))
    assert dict(seen) == {
        KA[:6]: JobRoots(own=(benches.a.resolve(),), every=every),
        KB[:6]: JobRoots(own=(benches.b.resolve(),), every=every),
        KC[:6]: JobRoots(own=(benches.shared.resolve(),), every=every),
    }
    assert current_job_roots() is None
    roots = JobRoots(own=(benches.a.resolve(),), every=every)
    assert roots.reaches(benches.a / TASK) and roots.reaches(tmp_path / "elsewhere")
    assert not roots.reaches(benches.b / "tasks") and not roots.reaches(benches.shared)
    of_b = JobRoots(own=(benches.b.resolve(),), every=every)  # B's link into A: followed
    assert of_b.reaches(benches.b / "tasks") and not of_b.reaches(benches.b / "tasks/pizza-link")


def test_sandbox_options_are_keywords_for_the_factory(
    tmp_path: Path, benches: Benches, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--sandbox-option NAME=VALUE`` (a name given again: a tuple) reaches the factory; a
    name that is no keyword, ``workdir`` (the service's own) or one the factory does not take
    is refused, naming it."""
    from openmle._cli._serve import _sandbox_options
    from openmle.service import load_sandbox

    assert _sandbox_options(["a=1", "b=x=y", "a=2", "a=3"]) == {"a": ("1", "2", "3"), "b": "x=y"}
    for bad in ["noequals", "=v"]:
        with pytest.raises(InvalidArgument, match="expected NAME=VALUE"):
            _sandbox_options([bad])
    assert benches.config(tmp_path, sandbox_options={"k": "v"}).sandbox_options == {"k": "v"}
    for options, said in [({"no name": "1"}, "keyword names"), ({"workdir": "/x"}, "--work-dir")]:
        with pytest.raises(InvalidArgument, match=said):
            benches.config(tmp_path, sandbox_options=options)
    with pytest.raises(InvalidArgument, match="nope"):
        load_sandbox("local", options={"nope": "1"})
    import openmle.service
    from openmle._cli import main

    seen: list[ServiceConfig] = []
    monkeypatch.setattr(openmle.service, "serve", lambda config, **_: seen.append(config))
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", KA)
    args = ["serve", "--db", str(tmp_path / "jobs.db"), "--task-root", str(benches.shared)]
    opts = ["--sandbox-option", "data_roots=/d1", "--sandbox-option", "data_roots=/d2"]
    assert main([*args, *opts, "--sandbox-option", "registries=/r"]) == 0
    assert seen[0].sandbox_options == {"data_roots": ("/d1", "/d2"), "registries": "/r"}
