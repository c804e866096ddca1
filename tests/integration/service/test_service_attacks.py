"""Hostile clients and hostile conditions against a real ``openmle serve`` subprocess.

Each test is an attack from the security review (issue 12): it failed on the service before
the fix and passes after. The servers run on loopback ports, with real programs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from tests.integration.service._server import KEY, Server
from tests.unit.bench._client_bench import client_bench

from openmle import Job
from openmle.service._store import JobStore
from openmle.testing import TOY_SOLUTION, ToyTask

pytestmark = [pytest.mark.integration]

KEY_A = "tenant-a-key-0123456789"
KEY_B = "tenant-b-key-9876543210"
HA = {"X-API-Key": KEY_A}
HB = {"X-API-Key": KEY_B}
SLEEP = "import time\ntime.sleep(120)\n"
# A program that outlives what it can: ignores hang-ups, TERM and broken pipes, and forks a
# child into a session of its own.
STUBBORN = """
import os, signal, time
for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
while True:
    time.sleep(0.1)
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the task root, the key file and the server's working directory."""
    tmp = tmp_path_factory.mktemp("attacks")
    ToyTask.create(tmp / "tasks" / "toy")
    # A task directory beside the server (its working directory), outside every root.
    ToyTask.create(tmp / "outside_task")
    (tmp / "keys.txt").write_text(f"{KEY_A} top_priority=1\n{KEY_B}\n")
    return tmp


@pytest.fixture(scope="module")
def server(base: Path) -> Iterator[Server]:
    """One slot, key B limited to priority 2, three queued jobs per key."""
    srv = Server(
        base,
        base / "tasks",
        slots=1,
        keys=[],
        args=[
            "--api-key-file",
            str(base / "keys.txt"),
            "--max-queued-per-key",
            "3",
            "--top-priority",
            "2",
        ],
    )
    srv.env.pop("OPENMLE_SERVICE_API_KEYS")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def _body(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"code": TOY_SOLUTION, "task": "toy", "timeout": 60, "priority": 2}
    body.update(kw)
    return body


async def _until_running(http: httpx.AsyncClient, job_id: str, headers: dict[str, str]) -> None:
    with anyio.fail_after(60):
        while (await http.get(f"/api/v1/jobs/{job_id}", headers=headers)).json()[  # noqa: ASYNC110 - polling the HTTP API is the point
            "status"
        ] != "running":
            await anyio.sleep(0.05)


def _entries(workdir: Path) -> list[str]:
    return sorted(p.name for p in workdir.iterdir() if p.name.startswith("openmle-"))


async def _cancel_all(http: httpx.AsyncClient, jobs: list[tuple[str, dict[str, str]]]) -> None:
    for job_id, headers in jobs:
        await http.delete(f"/api/v1/jobs/{job_id}", headers=headers)


@pytest.mark.anyio
async def test_task_names_resolve_only_inside_the_roots(server: Server) -> None:
    """A name matching no root is never looked up beside the server; no existence oracle."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        body = _body(name="oracle")
        found = await http.post("/api/v1/jobs", json={**body, "task": "outside_task"}, headers=HA)
        missing = await http.post("/api/v1/jobs", json={**body, "task": "absent_task"}, headers=HA)
    assert found.status_code == missing.status_code == 400, found.text
    assert found.json()["field"] == missing.json()["field"] == "task"
    # The same answer whether or not a directory of that name exists outside the roots.
    assert found.json()["detail"].replace("outside_task", "X") == missing.json()["detail"].replace(
        "absent_task", "X"
    )
    assert server.ledger_lines() == []


@pytest.mark.anyio
async def test_jobs_belong_to_the_key_that_made_them(server: Server) -> None:
    """Key B cannot read, wait on, cancel, list or replay key A's job; it sees 404 as missing."""
    made: list[tuple[str, dict[str, str]]] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        try:
            r = await http.post(
                "/api/v1/jobs",
                json=_body(code=SLEEP, name="a-job", idempotency_key="shared-key"),
                headers=HA,
            )
            assert r.status_code == 200, r.text
            a_id = r.json()["job_id"]
            made.append((a_id, HA))
            await _until_running(http, a_id, HA)
            missing = await http.get("/api/v1/jobs/0123456789abcdef", headers=HB)
            for method, params in (("GET", {}), ("GET", {"wait": "0.2"}), ("DELETE", {})):
                r = await http.request(method, f"/api/v1/jobs/{a_id}", params=params, headers=HB)
                assert r.status_code == 404 and r.json() == missing.json(), (method, r.text)
            r = await http.get(f"/api/v1/jobs/{a_id}", headers=HA)
            assert r.json()["status"] == "running"  # B's DELETE did nothing
            # /workers/status names A's job to A only.
            shown_b = (await http.get("/api/v1/workers/status", headers=HB)).json()
            shown_a = (await http.get("/api/v1/workers/status", headers=HA)).json()
            assert [w["job_id"] for w in shown_b["workers_show"]] == [None]
            assert [w["status"] for w in shown_b["workers_show"]] == ["busy"]
            assert [w["job_id"] for w in shown_a["workers_show"]] == [a_id]
            # Idempotency keys are per API key: B's replay of A's body is B's own new job, and
            # a conflicting body under A's key is not a 409 quoting A's job id.
            same = _body(code=SLEEP, name="a-job", idempotency_key="shared-key")
            r = await http.post("/api/v1/jobs", json=same, headers=HB)
            assert r.status_code == 200 and r.json()["job_id"] != a_id
            made.append((r.json()["job_id"], HB))
            other = _body(code="print(2)", idempotency_key="shared-key")
            r = await http.post("/api/v1/jobs", json=other, headers=HB)
            assert r.status_code == 409 and a_id not in r.text
        finally:
            await _cancel_all(http, made)


@pytest.mark.anyio
async def test_one_key_cannot_fill_the_queue_or_jump_it(server: Server) -> None:
    """Per-key queue quota (429 for that key only) and per-key priority limit (422)."""
    made: list[tuple[str, dict[str, str]]] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        try:
            r = await http.post("/api/v1/jobs", json=_body(code=SLEEP), headers=HA)
            made.append((r.json()["job_id"], HA))
            await _until_running(http, made[0][0], HA)
            for _ in range(3):
                r = await http.post("/api/v1/jobs", json=_body(code=SLEEP), headers=HA)
                assert r.status_code == 200, r.text
                made.append((r.json()["job_id"], HA))
            r = await http.post("/api/v1/jobs", json=_body(code=SLEEP), headers=HA)
            assert r.status_code == 429 and r.json()["error"] == "key_quota"
            assert "Retry-After" in r.headers
            r = await http.post("/api/v1/jobs", json=_body(code=SLEEP), headers=HB)
            assert r.status_code == 200, r.text  # B is not starved by A
            made.append((r.json()["job_id"], HB))
            # Only A's key may use priority 1 on this server.
            r = await http.post("/api/v1/jobs", json=_body(code=SLEEP, priority=1), headers=HB)
            assert r.status_code == 422 and r.json()["field"] == "priority"
        finally:
            await _cancel_all(http, made)


@pytest.mark.anyio
async def test_a_chunked_body_is_cut_at_the_limit(server: Server) -> None:
    """A chunked upload gets 413 once it passes 8 MiB, not after the server buffered it all."""

    def attack() -> tuple[bytes, int]:
        sent = 0
        chunk = b"x" * (1 << 20)
        frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
            s.sendall(
                b"POST /api/v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                + f"X-API-Key: {KEY_A}\r\n".encode()
                + b"Transfer-Encoding: chunked\r\n\r\n"
            )
            s.settimeout(0.05)
            answer = b""
            while sent < 256 << 20:  # the attack meant 1 GB; 256 MiB proves the point
                try:
                    answer = s.recv(65536)
                    break
                except TimeoutError:
                    pass
                try:
                    s.sendall(frame)
                except OSError:  # the server closed the connection after answering
                    s.settimeout(5)
                    answer = s.recv(65536)
                    break
                sent += len(chunk)
            return answer, sent

    answer, sent = await anyio.to_thread.run_sync(attack)
    assert answer.startswith(b"HTTP/1.1 413"), (answer[:200], sent)
    assert sent <= 64 << 20, f"the server read {sent} bytes before refusing"
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        assert (await http.get("/health")).status_code == 200


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"memory_mb": 10**9}, "resources.memory_mb"),
        ({"cpus": 1e6}, "resources.cpus"),
        ({"gpus": 64}, "resources.gpus"),
    ],
)
async def test_resources_above_the_maxima_are_refused(
    server: Server, resources: dict[str, Any], field: str
) -> None:
    """``resources`` cannot lift the sandbox's limits: 422 naming the field."""
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
        r = await http.post("/api/v1/jobs", json=_body(resources=resources), headers=HA)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    assert "maximum" in r.json()["detail"]


def _raw(body: dict[str, Any]) -> bytes:
    body.setdefault("name", "refused")
    return json.dumps(body).encode()  # ensure_ascii: lone surrogates travel as \\udXXX escapes


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("content", "field"),
    [
        (_raw(_body(environment={"A\x00B": "1"})), "environment.A\\x00B"),
        (_raw(_body(environment={"A=B": "1"})), "environment.A=B"),
        (_raw(_body(environment={"": "1"})), "environment."),
        (_raw(_body(environment={"OK": "a\x00b"})), "environment.OK"),
        (_raw(_body(environment={"LD_PRELOAD": "/dev/shm/x.so"})), "environment.LD_PRELOAD"),
        (_raw(_body(environment={"LD_AUDIT": "/dev/shm/x.so"})), "environment.LD_AUDIT"),
        (_raw(_body(environment={"PYTHONPATH": "/dev/shm"})), "environment.PYTHONPATH"),
        (_raw(_body(environment={"PYTHONSTARTUP": "/x.py"})), "environment.PYTHONSTARTUP"),
        (_raw(_body(code="print('\ud800')")), "code"),
        (_raw(_body(name="n\udfff")), "name"),
        (b'{"code": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "body"),
    ],
    ids=[
        "nul-in-key",
        "equals-in-key",
        "empty-key",
        "nul-in-value",
        "LD_PRELOAD",
        "LD_AUDIT",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "surrogate-in-code",
        "surrogate-in-name",
        "nested-100000-deep",
    ],
)
async def test_input_that_would_fail_later_is_refused_now(
    server: Server, content: bytes, field: str
) -> None:
    """Environment keys with NUL/'='/loader prefixes, lone surrogates, 100,000-deep JSON: 422."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        r = await http.post(
            "/api/v1/jobs", content=content, headers={**HA, "Content-Type": "application/json"}
        )
    assert r.status_code == 422, r.text[:300]
    assert r.json()["field"] == field
    assert not [ln for ln in server.ledger_lines() if "refused" in ln or "\udfff" in ln]


BIG = """
import os
d = os.path.join(*["d" * 200] * 4)
os.makedirs(d)
for i in range(3000):
    open(os.path.join(d, f"{i:05d}" + "f" * 150), "w").close()
print("y" * 5_000_000)
"""


@pytest.mark.anyio
async def test_huge_results_are_capped_before_they_are_stored(server: Server) -> None:
    """3,000 artifacts with ~1 KB paths and 5 MB of output: the stored result stays small."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        r = await http.post("/api/v1/jobs", json=_body(code=BIG, timeout=120), headers=HA)
        job_id = r.json()["job_id"]
        with anyio.fail_after(120):
            while True:
                r = await http.get(f"/api/v1/jobs/{job_id}", params={"wait": 30}, headers=HA)
                if r.json()["status"] not in ("queued", "running"):
                    break
    assert r.json()["status"] == "completed", r.text[:500]
    assert len(r.content) < 1_500_000, len(r.content)
    run = r.json()["result"]["run_result"]
    assert len(run["artifacts"]) == 1000 and "2000 of 3000 artifact paths" in run["detail"]
    assert run["logs_dropped_bytes"] >= 4_000_000
    db = sqlite3.connect(server.db)
    try:
        (size,) = db.execute("SELECT LENGTH(result) FROM jobs WHERE id = ?", (job_id,)).fetchone()
    finally:
        db.close()
    assert size < 1_500_000


def test_a_garbage_database_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    """A file that is not SQLite: a one-line refusal, no traceback."""
    ToyTask.create(tmp_path / "tasks" / "toy")
    srv = Server(tmp_path, tmp_path / "tasks")
    srv.db.write_bytes(os.urandom(64 * 1024))
    status, log = srv.refused()
    assert status != 0 and "is not usable" in log and "fresh --db" in log, log
    assert "Traceback" not in log, log


def test_a_database_with_damaged_pages_is_refused(tmp_path: Path) -> None:
    """Damaged pages are found at start (integrity check), not by failing every submission."""
    ToyTask.create(tmp_path / "tasks" / "toy")
    srv = Server(tmp_path, tmp_path / "tasks")
    store = JobStore(srv.db)
    spec = {"job": Job(code="print(1)" * 200, task="toy").to_dict(), "task_ref": "toy"}
    for i in range(300):
        store.insert(
            idempotency_key=f"k{i}",
            request_hash="h",
            name=f"n{i}",
            pool="cpu",
            priority=1,
            spec=spec,
            max_queued=10_000,
        )
    store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    with srv.db.open("r+b") as f:  # keep page 1 (the header), damage pages in the middle
        size = f.seek(0, 2)
        f.seek(size // 2)
        f.write(os.urandom(3 * 4096))
    status, log = srv.refused()
    assert status != 0 and "is not usable" in log and "fresh --db" in log, log
    assert "Traceback" not in log, log


def _program_pids(owner: int) -> set[int]:
    """Live processes of the runs of the sandbox in process ``owner``: their run marker
    (``OPENMLE_RUN_ID=PID.START.token``) names it. That covers the launch chains made ahead
    (whose working directory is the service's, not the run's) and the programs themselves."""
    out = set()
    needle = f"\0OPENMLE_RUN_ID={owner}.".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            env = b"\0" + Path(f"/proc/{entry.name}/environ").read_bytes()
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in env and state != "Z":
            out.add(int(entry.name))
    return out


def _running(workdir: Path) -> bool:
    """Whether a run directory of the service exists (its job has been handed a run)."""
    return any(n.startswith("openmle-run-") for n in _entries(workdir))


def _cgroups_of(pid: int) -> list[Path]:
    out = []
    for mount in Path("/sys/fs/cgroup").iterdir():
        out += [p for p in mount.rglob(f"openmle-{pid}-*") if p.is_dir()]
    return out


@pytest.mark.anyio
@pytest.mark.parametrize("sandbox", ["service_sandbox:make_local", "service_sandbox:make_landlock"])
async def test_kill_9_leaves_nothing_behind_after_the_restart(tmp_path: Path, sandbox: str) -> None:
    """After ``kill -9`` and a restart: the run directories, data views and cgroups of the
    killed service are gone and its programs are dead before the job runs again."""
    import openmle.backends

    if "LocalSandbox" not in openmle.backends.__all__:
        pytest.skip("openmle.backends.LocalSandbox is not in this tree")
    ToyTask.create(tmp_path / "tasks" / "toy")
    srv = Server(tmp_path, tmp_path / "tasks", slots=1, sandbox=sandbox)
    workdir = Path(f"{srv.db}.work")
    programs: set[int] = set()
    await anyio.to_thread.run_sync(srv.start)
    try:
        async with httpx.AsyncClient(base_url=srv.url, timeout=30) as http:
            h = {"X-API-Key": KEY}
            r = await http.post("/api/v1/jobs", json=_body(code=STUBBORN, timeout=300), headers=h)
            job_id = r.json()["job_id"]
            assert srv.proc is not None
            old_pid = srv.proc.pid
            with anyio.fail_after(60):
                while not (_running(workdir) and _program_pids(old_pid)):  # noqa: ASYNC110
                    await anyio.sleep(0.1)
            await _until_running(http, job_id, h)
            left = _entries(workdir)
            assert any(n.startswith("openmle-run-") for n in left), left
            programs = _program_pids(old_pid)
            cgroups = _cgroups_of(old_pid)
            srv.kill9()
            await anyio.sleep(1.0)
            assert all((workdir / n).exists() for n in left)  # what a kill -9 leaves
            still = programs & _program_pids(old_pid)
            print(
                f"after kill -9: {len(still)} of {len(programs)} program processes alive, "
                f"{len(cgroups)} cgroups, {len(left)} entries: {left}"
            )
            await anyio.to_thread.run_sync(srv.start)
            swept = (await http.get("/health")).json()["swept"]
            assert programs & _program_pids(old_pid) == set(), "a killed service's program runs"
            assert [n for n in left if (workdir / n).exists()] == []
            assert [c for c in cgroups if c.exists()] == []
            assert swept["dirs"] >= 1 and swept["cgroups"] == len({c.name for c in cgroups})
            # The job was re-queued and runs again, alone.
            await _until_running(http, job_id, h)
            await http.delete(f"/api/v1/jobs/{job_id}", headers=h)
    finally:
        srv.stop()
        for p in programs & (_program_pids(old_pid) if programs else set()):  # sweep failed
            os.kill(p, signal.SIGKILL)


# ------------------------------------------------------------ a bench directory names a benchmark

KEY_T1 = "team-one-key-0123456789"
KEY_T2 = "team-two-key-9876543210"
# Predicts label 1 for every test id of mini-tabular (its sample submission's ids).
ALL_ONES = """
import csv, os
rows = list(csv.DictReader(open(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"))))
with open("submission.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "label"])
    for r in rows:
        w.writerow([r["id"], 1])
"""


@pytest.mark.anyio
async def test_a_bench_directory_cannot_name_its_own_grader_or_another_teams_answers(
    tmp_path: Path,
) -> None:
    """The bench's job service runs a received bench directory's grader on the host and grades
    against the data it names. A client writing its own bench directory named (1) a registry
    of its own whose ``grade.py`` wrote a file outside every root (code run on the host, as the
    service user) and (2) another team's prepared data (its program scored against that team's
    private answers). Both are refused now, naming the field and the operator's option; nothing
    runs. The operator's benchmarks still grade, for the team they belong to."""
    pytest.importorskip("pandas")
    pytest.importorskip("yaml")
    from tests.unit.bench._minibench import build

    registry, data = build(tmp_path / "operator")
    one, two = tmp_path / "team-one", tmp_path / "team-two"
    evil = one / "evil-registry"
    shutil.copytree(registry, evil)
    pwned = tmp_path / "pwned-by-grader"
    grader = evil / "mlebench" / "competitions" / "mini-tabular" / "grade.py"
    grader.write_text(grader.read_text() + f"\nopen({str(pwned)!r}, 'w').write('ran')\n")
    theirs = two / "data"  # team two's own prepared data: every answer is 1
    shutil.copytree(data, theirs)
    answers = theirs / "mini-tabular" / "prepared" / "private" / "test.csv"
    ids = [ln.split(",")[0] for ln in answers.read_text().splitlines()[1:]]
    answers.write_text("id,label\n" + "".join(f"{i},1\n" for i in ids))
    jobs = {
        "own grader": (KEY_T1, client_bench(one / "b-evil", evil, data)),
        "their answers": (KEY_T1, client_bench(one / "b-steal", registry, theirs)),
        "their own": (KEY_T2, client_bench(two / "b-own", registry, theirs)),
        "shared data": (KEY_T1, client_bench(one / "b-ok", registry, data)),
    }
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY_T1} task_root={one}\n{KEY_T2} task_root={two}\n")
    (tmp_path / "tasks").mkdir()
    allowed = [f"registries={registry}", f"data_roots={data}", f"data_roots={theirs}"]
    srv = Server(
        tmp_path,
        tmp_path / "tasks",
        slots=1,
        sandbox="openmle.bench:bench_task_sandbox",
        args=["--api-key-file", str(keys), *(a for o in allowed for a in ("--sandbox-option", o))],
    )
    srv.env.pop("OPENMLE_SERVICE_API_KEYS")
    srv.start()
    got: dict[str, dict[str, Any]] = {}
    try:
        async with httpx.AsyncClient(base_url=srv.url, timeout=120) as http:
            for name, (key, task) in jobs.items():
                body = {"code": ALL_ONES, "task": task, "split": "test", "timeout": 120}
                r = await http.post("/api/v1/jobs", json=body, headers={"X-API-Key": key})
                assert r.status_code == 200, (name, r.text)
                done = await http.get(
                    f"/api/v1/jobs/{r.json()['job_id']}",
                    params={"wait": 110},
                    headers={"X-API-Key": key},
                )
                got[name] = done.json()
    finally:
        srv.stop()
    assert not pwned.exists(), "the bench directory's own grade.py ran on the service host"
    evil_job, steal_job = got["own grader"], got["their answers"]
    assert evil_job["status"] == "failed", evil_job
    detail = evil_job["result"]["detail"]
    assert "registry" in detail and "--sandbox-option registries=DIR" in detail, detail
    assert steal_job["status"] == "failed", steal_job
    assert steal_job["result"].get("score") is None, steal_job
    assert "another API key's task roots" in steal_job["result"]["detail"], steal_job
    for name in ("their own", "shared data"):
        assert got[name]["status"] == "completed", got[name]
        assert got[name]["result"]["outcome"] == "success", got[name]
    assert got["their own"]["result"]["score"] == 1.0, got["their own"]  # team two's answers
    assert got["shared data"]["result"]["score"] < 1.0, got["shared data"]
