"""Service settings, API-key loading and the SQLite store's single-owner lock."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from openmle import Job, Outcome, RunResult
from openmle.errors import InvalidArgument, SandboxError
from openmle.service import (
    KeyLimits,
    ServiceConfig,
    load_api_keys,
    load_key_limits,
    load_sandbox,
)
from openmle.service._core import cap_result
from openmle.service._store import LEGACY_OWNER, JobStore, QuotaExceeded


def test_keys_from_environment_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys come from the comma-separated variable and the file, deduplicated, comments skipped."""
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa, key-bbbbbbbb,")
    f = tmp_path / "keys"
    f.write_text("# ops keys\nkey-cccccccc\n\nkey-aaaaaaaa\n")
    assert load_api_keys(file=f) == ("key-aaaaaaaa", "key-bbbbbbbb", "key-cccccccc")
    with pytest.raises(InvalidArgument, match="API key file"):
        load_api_keys(file=tmp_path / "missing")


def test_config_refuses_no_keys_unless_told(tmp_path: Path) -> None:
    """Without keys the service refuses to start unless ``allow_no_auth`` says so."""
    with pytest.raises(InvalidArgument, match="no API keys"):
        ServiceConfig(db_path=tmp_path / "db")
    assert ServiceConfig(db_path=tmp_path / "db", allow_no_auth=True).allow_no_auth


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"api_keys": ("short",)}, "at least 8"),
        ({"cpu_slots": -1}, "cpu_slots"),
        ({"cpu_slots": 0, "gpu_slots": 0}, "cpu_slots or gpu_slots"),
        ({"max_queued": 0}, "max_queued"),
        ({"default_timeout_s": 10.0, "max_job_timeout_s": 5.0}, "default_timeout_s"),
        ({"task_roots": ("/nonexistent-root",)}, "not a directory"),
    ],
)
def test_bad_settings_name_the_field(tmp_path: Path, kw: dict[str, object], match: str) -> None:
    """Invalid settings raise ``InvalidArgument`` naming the field."""
    kw.setdefault("api_keys", ("k" * 10,))
    with pytest.raises(InvalidArgument, match=match):
        ServiceConfig(db_path=tmp_path / "db", **kw)  # type: ignore[arg-type]


def test_one_service_per_database(tmp_path: Path) -> None:
    """A second store on the same file refuses to open; after close it can."""
    first = JobStore(tmp_path / "jobs.db")
    with pytest.raises(SandboxError, match="another job service"):
        JobStore(tmp_path / "jobs.db")
    first.close()
    JobStore(tmp_path / "jobs.db").close()


def test_sandbox_spec_must_name_a_factory() -> None:
    """Bad ``module:callable`` specs, and factories returning non-sandboxes, are refused."""
    for spec in ("nope", "openmle:", "no_such_module_x:f", "openmle:no_such_attr"):
        with pytest.raises(InvalidArgument):
            load_sandbox(spec)
    with pytest.raises(InvalidArgument, match="not a Sandbox"):
        load_sandbox("builtins:dict")


def test_cli_refuses_to_serve_without_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``openmle serve`` without keys is a usage error (exit 2) and says how to give one."""
    from openmle._cli import main

    monkeypatch.delenv("OPENMLE_SERVICE_API_KEYS", raising=False)
    assert main(["serve", "--db", str(tmp_path / "jobs.db")]) == 2
    assert "OPENMLE_SERVICE_API_KEYS" in capsys.readouterr().err


_STARTUP_REFUSALS = [
    (["--sandbox", "nosuch"], 2, "--sandbox"),
    (["--port", "99999"], 2, "--port must be a TCP port 1-65535"),
    (["--host", "0.0.0.0.0"], 1, "--host '0.0.0.0.0' does not resolve"),
    (["--cpu-slots", "0"], 2, "--cpu-slots or --gpu-slots >= 1"),
    (["--gpu-slots", "-1"], 2, "--gpu-slots=-1"),
    (["--task-root", "/nonexistent-openmle"], 2, "--task-root holds '/nonexistent-openmle'"),
    # said in days, the flag's unit (was "--retain-days (in seconds)=inf")
    (["--retain-days", "inf"], 2, "--retain-days must be a finite number of days >= 0"),
    (["--retain-days", "1e305"], 2, "got '1e305'"),
]


@pytest.mark.parametrize(("flags", "code", "said"), _STARTUP_REFUSALS)
def test_cli_serve_refuses_a_bad_start_in_one_line(
    flags: list[str],
    code: int,
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A start uvicorn would fail (traceback, its own ERROR lines, exit 3) or a bad flag is one
    ``error:`` line naming the flag, exit 2 (usage) or 1 (the host), before uvicorn runs.
    """
    from openmle._cli import main

    if "--sandbox" in flags or "--host" in flags:  # checked where the server is made
        pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa")
    try:
        got = main(["serve", "--db", str(tmp_path / "jobs.db"), *flags])
    except SystemExit as exc:  # argparse's usage error
        got = int(exc.code or 0)
    assert got == code
    err = capsys.readouterr().err
    assert said in err and "ServiceConfig" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_cli_serve_refuses_an_address_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A port something already listens on is one line naming --port, exit 1."""

    pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

    from openmle._cli import main

    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        assert main(["serve", "--db", str(tmp_path / "jobs.db"), "--port", port]) == 1
    assert "the address is in use" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["docker", "failing_factory_x:make"])
def test_cli_serve_refuses_a_sandbox_that_cannot_be_built_before_uvicorn(
    spec: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A sandbox whose factory raises, or whose engine does not answer (``DOCKER_HOST`` at a
    socket that does not exist), is one line naming ``--sandbox`` (exit 1) before uvicorn runs
    (it was a traceback in uvicorn's start-up hook, exit 3, or a service failing every job),
    and neither the database nor its work directory is made.
    """
    uvicorn = pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")
    if spec == "docker":
        pytest.importorskip("docker", reason="needs docker: pip install 'openmle[docker]'")
    from openmle._cli import main

    (tmp_path / "failing_factory_x.py").write_text(
        "from openmle.errors import SandboxError\n"
        "def make(**options):\n"
        "    raise SandboxError('the engine is down; start it')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")

    async def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("uvicorn started")

    monkeypatch.setattr(uvicorn.Server, "serve", started)
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa")
    with socket.socket() as probe:  # a free port: the listen check passes
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    db = tmp_path / "jobs.db"
    assert main(["serve", "--db", str(db), "--port", port, "--sandbox", spec]) == 1
    err = capsys.readouterr().err
    assert f"--sandbox {spec}: " in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jobs.db")]


def test_cli_serve_refuses_a_db_in_a_missing_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--db`` in a folder that does not exist is refused (exit 2), not silently made."""
    from openmle._cli import main

    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa")
    assert main(["serve", "--db", str(tmp_path / "no" / "jobs.db")]) == 2
    assert "--db" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_no_auth_only_on_loopback(tmp_path: Path) -> None:
    """Serving without keys is refused on a non-loopback address."""
    from openmle.service import serve

    config = ServiceConfig(db_path=tmp_path / "db", allow_no_auth=True)
    with pytest.raises(InvalidArgument, match="without API keys"):
        serve(config, host="0.0.0.0")


def test_key_file_limits(tmp_path: Path) -> None:
    """A key line may carry that key's limits; malformed ones name the line; config merges."""
    f = tmp_path / "keys"
    f.write_text("# ops\nkey-aaaaaaaa max_queued=5 top_priority=1\nkey-bbbbbbbb\n")
    assert load_api_keys(env=None, file=f) == ("key-aaaaaaaa", "key-bbbbbbbb")
    limits = load_key_limits(f)
    assert limits == {"key-aaaaaaaa": KeyLimits(max_queued=5, top_priority=1)}
    config = ServiceConfig(
        db_path=tmp_path / "db",
        api_keys=load_api_keys(env=None, file=f),
        key_limits=limits,
        top_priority=2,
        max_queued_per_key=7,
    )
    assert config.limits_for("key-aaaaaaaa") == KeyLimits(
        max_queued=5, top_priority=1, task_roots=()
    )
    assert config.limits_for("key-bbbbbbbb") == KeyLimits(
        max_queued=7, top_priority=2, task_roots=()
    )
    for bad in ("key-cccccccc priority=1", "key-cccccccc top_priority=3", "key-c max_queued=x"):
        f.write_text(bad + "\n")
        with pytest.raises(InvalidArgument, match=r"top_priority|key line 1"):
            load_key_limits(f)
    with pytest.raises(InvalidArgument, match="key_limits"):
        ServiceConfig(db_path=tmp_path / "db", api_keys=("k" * 10,), key_limits=limits)


def _insert(store: JobStore, owner: str, key: str | None, priority: int = 1) -> str:
    spec = {"job": Job(code="print(1)", task="toy").to_dict(), "task_ref": "toy"}
    row, _ = store.insert(
        owner=owner,
        idempotency_key=key,
        request_hash=f"h-{priority}",
        name=key,
        pool="cpu",
        priority=priority,
        spec=spec,
        max_queued=100,
        max_queued_per_owner=2,
    )
    assert row is not None
    return row.id


def test_store_scopes_jobs_by_owner(tmp_path: Path) -> None:
    """Reads, cancels, idempotency keys and quotas are per owner."""
    store = JobStore(tmp_path / "jobs.db")
    a = _insert(store, "A", "k")
    assert _insert(store, "A", "k") == a  # the same key, the same owner: the same job
    b = _insert(store, "B", "k")  # the same key, another owner: another job
    assert b != a
    assert store.get(a, "B") is None and store.get(a, "A") is not None
    assert not store.cancel_queued(a, "B") and store.cancel_queued(a, "A")
    _insert(store, "A", "k2")
    _insert(store, "A", "k3")
    with pytest.raises(QuotaExceeded):
        _insert(store, "A", "k4")
    _insert(store, "B", "k5")  # B has its own quota
    store.close()


def test_low_priorities_age(tmp_path: Path) -> None:
    """A priority-2 job that waited ``age_s`` runs before a fresh priority-1 job."""
    store = JobStore(tmp_path / "jobs.db")
    old = _insert(store, "A", "old", priority=2)
    store._db.execute("UPDATE jobs SET created_at = created_at - 100 WHERE id = ?", (old,))
    new = _insert(store, "B", "new", priority=1)
    first = store.claim_next("cpu", age_s=1000.0)
    assert first is not None and first.id == new  # not waited long enough: priority wins
    store._db.execute("UPDATE jobs SET status = 'queued' WHERE id = ?", (new,))
    first = store.claim_next("cpu", age_s=50.0)
    assert first is not None and first.id == old  # waited two levels' worth: runs first
    store.close()


def test_a_store_from_before_owners_is_migrated(tmp_path: Path) -> None:
    """An old database opens; its jobs belong to no key, and keys are per owner after."""
    import sqlite3

    db = sqlite3.connect(tmp_path / "jobs.db")
    db.executescript(
        "CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
        " idempotency_key TEXT UNIQUE, request_hash TEXT NOT NULL, name TEXT, pool TEXT NOT NULL,"
        " priority INTEGER NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL,"
        " attempts INTEGER NOT NULL DEFAULT 0, created_at REAL NOT NULL, started_at REAL,"
        " completed_at REAL, result TEXT, detail TEXT NOT NULL DEFAULT '');"
        "INSERT INTO jobs (id, idempotency_key, request_hash, pool, priority, spec, status,"
        " created_at) VALUES ('old', 'k', 'h', 'cpu', 1, '{}', 'completed', 1.0);"
    )
    db.commit()
    db.close()
    store = JobStore(tmp_path / "jobs.db")
    row = store.get("old")
    assert row is not None and row.owner == LEGACY_OWNER and row.idempotency_key == "k"
    assert store.get("old", "A") is None
    assert _insert(store, "A", "k") != "old"
    store.close()


def test_results_are_capped_before_they_are_stored() -> None:
    """Artifacts, logs, detail: bounded, with what was cut said in the result."""
    big = RunResult(
        outcome=Outcome.SUCCESS,
        score=0.5,
        logs="a" * 100_000 + "b" * 100_000,
        logs_dropped_bytes=10,
        detail="d" * 20_000,
        artifacts=tuple(f"{i:05d}" + "p" * 4000 for i in range(2000)),
    )
    capped = cap_result(big, max_artifacts=100, max_log_bytes=10_000)
    assert len(capped.artifacts) == 100 and all(len(a) == 1024 for a in capped.artifacts)
    assert capped.logs.startswith("a") and capped.logs.endswith("b")
    assert len(capped.logs.encode()) <= 10_000
    kept = 2 * ((10_000 - 80) // 2)  # head and tail, room left for the note
    assert capped.logs_dropped_bytes == 10 + 200_000 - kept
    assert f"[... {200_000 - kept} bytes cut by the job service ...]" in capped.logs
    assert "1900 of 2000 artifact paths dropped" in capped.detail
    assert len(capped.detail) < 9_000 and capped.score == 0.5
    small = RunResult(outcome=Outcome.SUCCESS, score=0.5, logs="ok")
    assert cap_result(small, max_artifacts=100, max_log_bytes=10_000) is small


def test_cli_serve_gives_every_flag_to_its_config_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``openmle serve`` flag reaches the :class:`ServiceConfig` field it names (the
    fields are filled from the flag table its errors are said with)."""
    import openmle.service
    from openmle._cli import main

    seen: list[ServiceConfig] = []
    monkeypatch.setattr(openmle.service, "serve", lambda config, **_: seen.append(config))
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa")
    root = tmp_path / "tasks"
    root.mkdir()
    flags = {
        "--task-root": str(root), "--cpu-slots": "3", "--gpu-slots": "1", "--max-queued": "7",
        "--max-queued-per-key": "5", "--default-timeout": "11", "--max-job-timeout": "12",
        "--grace": "2", "--max-wait": "13", "--max-attempts": "4", "--retain-days": "0.5",
        "--top-priority": "1", "--priority-age": "9", "--max-cpus": "6", "--max-memory-mb": "99",
        "--max-gpus": "2", "--max-result-artifacts": "8", "--max-result-log-bytes": "1024",
        "--work-dir": str(tmp_path / "work"),
    }  # fmt: skip
    args = ["serve", "--db", str(tmp_path / "jobs.db"), "--durable"]
    assert main([*args, *(x for kv in flags.items() for x in kv)]) == 0
    (c,) = seen
    got = (c.cpu_slots, c.gpu_slots, c.max_queued, c.max_queued_per_key, c.default_timeout_s,
           c.max_job_timeout_s, c.grace_s, c.max_wait_s, c.max_attempts, c.retain_s,
           c.top_priority, c.priority_age_s, c.max_cpus, c.max_memory_mb, c.max_gpus,
           c.max_result_artifacts, c.max_result_log_bytes)  # fmt: skip
    assert got == (3, 1, 7, 5, 11, 12, 2, 13, 4, 43_200, 1, 9, 6, 99, 2, 8, 1024)
    assert c.durable is True and c.api_keys == ("key-aaaaaaaa",)
    assert [Path(r) for r in c.task_roots] == [root]
    assert Path(c.db_path) == tmp_path / "jobs.db" and Path(str(c.work_dir)) == tmp_path / "work"
