"""The bench's engines: the spec grammar, the picklable Ray resolver, the job service's task
directories (hostile ones refused) and the slots a bench fills."""

from __future__ import annotations

import http.server
import importlib.util
import json
import pickle
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.bench._client_bench import client_bench

from openmle.bench import BenchConfig, bench_sandbox, bench_task_sandbox
from openmle.bench._engines import (
    MARKER,
    BenchRefResolver,
    ServiceTasks,
    TaskDirResolver,
    engine_slots,
)
from openmle.bench._runner import _Resolver
from openmle.errors import InvalidArgument, MissingDependency


def test_specs_follow_the_one_registry() -> None:
    for spec in ("local", "service:http://127.0.0.1:9"):
        assert callable(bench_sandbox(spec))
    if importlib.util.find_spec("ray") is not None:
        assert callable(bench_sandbox("ray"))
    else:  # refused before any bench directory is made, with the install line
        with pytest.raises(MissingDependency, match=r"openmle\[ray\]"):
            bench_sandbox("ray")
    with pytest.raises(InvalidArgument, match="Expected --sandbox to be one of"):
        bench_sandbox("no-such-sandbox")
    with pytest.raises(InvalidArgument, match="needs an argument"):
        bench_sandbox("service")


def test_the_ray_resolver_ships_only_the_path(tmp_path: Path) -> None:
    r = BenchRefResolver(str(tmp_path), _Resolver.open)
    r._inner = object()  # what a worker caches is never shipped
    back = pickle.loads(pickle.dumps(r))
    assert back.bench_dir == str(tmp_path) and back._inner is None
    with pytest.raises(InvalidArgument, match="not a bench directory"):
        back("mini@seed-0")


def _task_dir(root: Path, ref: str, marker: Any) -> Path:
    d = root / "bench" / "tasks" / ref
    d.mkdir(parents=True)
    if marker is not None:
        (d / MARKER).write_text(json.dumps(marker))
    return d


def test_hostile_task_directories_are_refused(tmp_path: Path) -> None:
    resolve = TaskDirResolver(_Resolver.open)
    good = {"kind": "openmle-bench-task", "ref": "c@seed-0"}
    with pytest.raises(InvalidArgument, match="runs only `openmle bench` jobs"):
        resolve("toy")  # a bundled task name: not a bench's
    cases = [
        _task_dir(tmp_path / "a", "c@seed-0", None),  # no marker
        _task_dir(tmp_path / "b", "c@seed-0", {**good, "ref": "d@seed-0"}),  # another ref
        _task_dir(tmp_path / "c", "c@seed-0", {**good, "kind": "x"}),
        _task_dir(tmp_path / "d", "c@seed-0", [good]),
    ]
    big = _task_dir(tmp_path / "e", "c@seed-0", None)
    (big / MARKER).write_text(json.dumps({**good, "pad": "x" * 10_000}))  # over the cap
    linked = _task_dir(tmp_path / "f", "c@seed-0", None)
    (tmp_path / "elsewhere.json").write_text(json.dumps(good))
    (linked / MARKER).symlink_to(tmp_path / "elsewhere.json")  # never followed
    wrong_folder = tmp_path / "g" / "bench" / "other" / "c@seed-0"
    wrong_folder.mkdir(parents=True)
    (wrong_folder / MARKER).write_text(json.dumps(good))
    for d in [*cases, big, linked, wrong_folder]:
        with pytest.raises(InvalidArgument, match="not an `openmle bench` task directory"):
            resolve(str(d))
    ok = _task_dir(tmp_path / "h", "c@seed-0", good)
    with pytest.raises(InvalidArgument, match="not a bench directory"):
        resolve(str(ok))  # the marker is right, but no bench manifest two levels up


def test_service_task_directories_only_for_bench_refs(tmp_path: Path) -> None:
    box = ServiceTasks(inner=None, bench_dir=tmp_path)
    d = box._task_dir("mini-tabular@seed-3")
    assert d == tmp_path.resolve() / "tasks" / "mini-tabular@seed-3"
    assert json.loads((d / MARKER).read_text()) == {
        "kind": "openmle-bench-task",
        "ref": "mini-tabular@seed-3",
    }
    for bad in ("../x@seed-0", "x", "a/b@seed-0", "x@seed-", ".x@seed-0"):
        with pytest.raises(InvalidArgument, match="bench task reference"):
            box._task_dir(bad)


def test_bench_task_sandbox_needs_an_inner_taking_a_resolver() -> None:
    with pytest.raises(InvalidArgument, match="takes no resolver"):
        bench_task_sandbox("service:http://127.0.0.1:9")


def test_slots_of_a_sandbox() -> None:
    class Box:
        max_concurrency = 3

    assert anyio.run(engine_slots, Box()) == 3
    assert anyio.run(engine_slots, object()) == 1


class _Hostile(http.server.BaseHTTPRequestHandler):
    """A job service on loopback whose ``/workers/status`` answer is ``server.mode``:
    ``inf`` (``Infinity`` slots), ``types`` (slots as text), ``huge`` (64 MiB without
    Content-Length), ``trickle`` (a byte every 0.2 s), ``good`` (2 + 1 slots); ``401`` refuses
    every request. ``server.sent`` counts the bytes of the body it got out.
    """

    def log_message(self, *_args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        if body is not None:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def do_GET(self) -> None:
        server: Any = self.server
        mode = server.mode
        bodies = {
            "inf": b'{"pools": {"cpu": {"slots": Infinity}}}',
            "types": b'{"pools": {"cpu": {"slots": "2"}, "gpu": []}}',
            "good": b'{"workers_show": [], "pools": {"cpu": {"slots": 2}, "gpu": {"slots": 1}}}',
        }
        if mode == "401":
            self._send(401, b'{"detail": "missing or unknown X-API-Key header"}')
        elif mode in bodies:
            self._send(200, bodies[mode])
        else:
            self._send(200)
            step, pause = (b"a" * (1 << 16), 0.0) if mode == "huge" else (b"a", 0.2)
            try:
                self.wfile.write(b'{"pools": {"cpu": {"slots": 2}}, "x": "')
                for _ in range(1024 if mode == "huge" else 100):
                    self.wfile.write(step)
                    self.wfile.flush()
                    server.sent += len(step)
                    time.sleep(pause)
            except OSError:  # the client hung up
                pass

    do_POST = do_DELETE = do_GET


@pytest.fixture
def hostile() -> Iterator[Any]:
    server: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    server.mode, server.sent = "good", 0
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_a_hostile_service_cannot_crash_stall_or_flood_the_slots_query(
    hostile: Any, tmp_path: Path
) -> None:
    """`bench run --sandbox service:URL` asked the service's slots with a plain GET of its own:
    ``Infinity`` slots crashed the bench (OverflowError), a body of gigabytes was read whole
    into memory and a trickling answer stalled it forever, before its first step. The slots
    are now asked through the job-service client, whose answers are bounded in bytes and
    time and checked field by field: a bad answer is "the service does not say" (one run at
    once).
    """
    pytest.importorskip("httpx")
    from openmle.backends import JobServiceSandbox

    inner = JobServiceSandbox(
        hostile.url, api_key="k", request_timeout_s=2.0, max_response_bytes=1 << 20
    )
    box = ServiceTasks(inner=inner, bench_dir=tmp_path)
    got: dict[str, Any] = {}

    async def ask() -> tuple[int | None, int]:
        return await box.slots(), await engine_slots(box)

    for mode in ("good", "inf", "types", "huge", "trickle"):
        hostile.mode = mode
        t0 = time.monotonic()
        got[mode] = anyio.run(ask)
        assert time.monotonic() - t0 < 10, mode  # the trickle lasts 20 s
    assert got == {
        "good": (3, 3), "inf": (None, 1), "types": (None, 1), "huge": (None, 1),
        "trickle": (None, 1),
    }  # fmt: skip
    assert hostile.sent < 16 << 20  # reading stopped near the cap, not at 64 MiB


def test_a_bench_on_a_service_that_refuses_its_key_stops_before_any_step(
    hostile: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bench's job-service sandbox hid the client's preflight: with a wrong key (or
    address) every step of every run was an infrastructure error and every run ended
    "finished" with no valid submission, the model's calls spent. The bench now checks the
    service once before any step and stops with the client's message.
    """
    pytest.importorskip("httpx")
    from tests.unit.bench._toy_sandbox import number_sandbox  # noqa: F401 (registers toy)
    from tests.unit.bench.toy_benchmark import ToyBench, make_toy

    from openmle.bench import arun_bench
    from openmle.errors import JobServiceError
    from openmle.testing import ScriptedModel

    monkeypatch.setenv("OPENMLE_SERVICE_API_KEY", "wrong-key")
    root = make_toy(tmp_path / "toy", {"toy-a": 0.75})
    config = BenchConfig(
        suite="custom",
        competitions=ToyBench(root).suite("toy-all")[:1],
        seeds=(0,),
        model="scripted",
        budget={"steps": 2},
        data_dir=str(root),
        benchmark="toy",
        time_limit_s=30.0,
        sandbox=f"service:{hostile.url}",
    )
    hostile.mode = "401"
    asked: list[Any] = []

    def answer(req: Any) -> str:
        asked.append(req)
        return "```python\nprint(1)\n```"

    model = ScriptedModel(answer)
    out = tmp_path / "bench"
    with pytest.raises(JobServiceError, match="HTTP 401"):
        anyio.run(lambda: arun_bench(out, config=config, model=model))
    assert asked == []
    assert not list(out.glob("runs/*/seed-*/bench_result.json"))


def test_a_job_service_opens_only_the_benchmarks_its_operator_names(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """A bench directory is the client's: its registry (whose grade.py runs on the service
    host) and its data (the private answers) are refused unless they lie, links followed and
    ``..`` resolved, in what the operator named; the error names the field and the option."""
    registry, data = mini
    rogue = tmp_path / "rogue-registry"
    shutil.copytree(registry, rogue)
    shutil.copytree(data, tmp_path / "allowed" / "data")
    (tmp_path / "allowed" / "linked").symlink_to(data)  # a link inside the root, leading out
    box = bench_task_sandbox(registries=[registry], data_roots=str(tmp_path / "allowed"))
    resolve = box.resolver  # type: ignore[attr-defined]
    refused = {
        "rogue registry": (
            client_bench(tmp_path / "b1", rogue, data),
            "registry",
            "registries=DIR",
        ),
        "data elsewhere": (
            client_bench(tmp_path / "b2", registry, data),
            "data_dir",
            "data_roots=DIR",
        ),
        "a link out": (
            client_bench(tmp_path / "b3", registry, tmp_path / "allowed" / "linked"),
            "data_dir",
            "data_roots=DIR",
        ),
        "a .. out": (
            client_bench(tmp_path / "b4", registry, f"{tmp_path}/allowed/../rogue-registry"),
            "data_dir",
            "data_roots=DIR",
        ),
        "relative": (client_bench(tmp_path / "b5", registry, "data"), "data_dir", "absolute path"),
    }
    for name, (task, field, fix) in refused.items():
        with pytest.raises(InvalidArgument, match=f"the bench's {field} ") as err:
            resolve(task)
        assert fix in str(err.value), (name, str(err.value))
    ok = resolve(client_bench(tmp_path / "b6", registry, tmp_path / "allowed" / "data"))
    assert ok.name == "mini-tabular@seed-0"
    assert ok.inner.bench.data_dir == (tmp_path / "allowed" / "data").resolve()
    assert ok.inner.bench.repo_root == registry.resolve()
    # the default names no data: every bench job is refused, saying what the operator passes
    with pytest.raises(InvalidArgument, match=r"its data_roots: none.*data_roots=DIR"):
        bench_task_sandbox().resolver(client_bench(tmp_path / "b7", None, data))  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument, match=r"data_roots=.*is not a directory"):
        bench_task_sandbox(data_roots=[tmp_path / "missing"])


def test_a_bench_cannot_use_data_inside_another_keys_task_roots(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """Under a job service (:func:`openmle.service.current_job_roots`), benchmark data the
    operator allows is refused when it lies in another key's task roots; the key's own roots
    and data outside every root stay usable; outside a service nothing more is checked."""
    from openmle.service import JobRoots
    from openmle.service._core import _JOB_ROOTS

    registry, data = mini
    team_a, team_b = tmp_path / "a", tmp_path / "b"
    for team in (team_a, team_b):
        shutil.copytree(data, team / "data")
    box = bench_task_sandbox(registries=registry, data_roots=[tmp_path, data])
    resolve = box.resolver  # type: ignore[attr-defined]
    mine = client_bench(team_a / "b1", registry, team_a / "data")
    theirs = client_bench(team_a / "b2", registry, team_b / "data")
    shared = client_bench(team_a / "b3", registry, data)
    token = _JOB_ROOTS.set(JobRoots(own=(team_a,), every=(team_a, team_b)))
    try:
        with pytest.raises(InvalidArgument, match="inside another API key's task roots"):
            resolve(theirs)
        assert resolve(mine).name == resolve(shared).name == "mini-tabular@seed-0"
    finally:
        _JOB_ROOTS.reset(token)
    assert resolve(theirs).name == "mini-tabular@seed-0"  # no service job: the allow list only


def test_the_service_forwards_sandbox_options_to_the_bench_sandbox(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    from openmle.service import load_sandbox

    registry, data = mini
    box = load_sandbox(
        "openmle.bench:bench_task_sandbox",
        workdir=tmp_path / "work",
        options={"registries": str(registry), "data_roots": (str(data), str(tmp_path))},
    )
    assert box.resolver(client_bench(tmp_path / "b", registry, data)).name == "mini-tabular@seed-0"  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument, match="nope"):
        load_sandbox("openmle.bench:bench_task_sandbox", options={"nope": "1"})


def test_a_link_in_the_bench_directorys_valid_folder_shows_a_program_nothing(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """The validation views a job service's program reads (valid split) and is graded on are
    the service's own (built under its work directory), not the client's ``BENCH_DIR/valid``:
    a view placed there whose ``public`` is a link to another team's folder was mounted as the
    program's ``DATA_DIR``."""
    from openmle import Job

    registry, data = mini
    secret = tmp_path / "team-two"
    secret.mkdir()
    (secret / "answers.csv").write_text("TEAM TWO PRIVATE ANSWERS\n")
    (tmp_path / "work").mkdir()  # the service's work directory, made before any job
    box = bench_task_sandbox(registries=registry, data_roots=data, workdir=tmp_path / "work")
    task = client_bench(tmp_path / "bench", registry, data)
    key = box.resolver(task).inner._valid_key()  # type: ignore[attr-defined]
    planted = tmp_path / "bench" / "valid" / "mini-tabular" / key
    planted.mkdir(parents=True)
    (planted / "public").symlink_to(secret)
    (planted / "private").mkdir()
    code = (
        "import os\n"
        "d = os.environ['DATA_DIR']\n"
        "print(sorted(os.listdir(d)))\n"
        "print(open(os.path.join(d, 'answers.csv')).read() if 'answers.csv' in os.listdir(d) "
        "else 'no answers')\n"
    )

    async def run() -> Any:
        try:
            return await box.run(Job(code=code, task=task, split="valid", timeout_s=120))
        finally:
            await box.aclose()

    result = anyio.run(run)
    assert "TEAM TWO" not in result.logs and "no answers" in result.logs, result.logs
    assert (tmp_path / "work" / "bench" / "valid" / "mini-tabular" / key / "public").is_dir()


def test_the_installed_mlebench_is_allowed_itself_and_nothing_below_it(
    mini: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bench without --registry, or naming the ``mlebench`` installed beside the service
    (its folder or the package), needs no ``registries``; a folder below it does."""
    from openmle.bench import _served

    registry, data = mini
    monkeypatch.setattr(_served, "_installed_mlebench", lambda: registry.resolve())
    resolve = bench_task_sandbox(data_roots=data).resolver  # type: ignore[attr-defined]
    for i, named in enumerate([registry, registry / "mlebench"]):
        assert resolve(client_bench(tmp_path / f"b{i}", named, data)).name == "mini-tabular@seed-0"
    below = registry / "mlebench" / "competitions"
    with pytest.raises(InvalidArgument, match="its registries: none"):
        resolve(client_bench(tmp_path / "below", below, data))
