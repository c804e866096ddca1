"""``JobServiceSandbox`` over real HTTP on 127.0.0.1: against the real service app, and
against a scripted server for retries, long-poll fallback and released-router answers."""

from __future__ import annotations

import contextlib
import socket
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest
from tests._serve import serving

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
uvicorn = pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from starlette.applications import Starlette  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response, StreamingResponse  # noqa: E402
from starlette.routing import Route  # noqa: E402

from openmle import Job, Outcome, Resources, RunResult, Split, TaskMeta  # noqa: E402
from openmle.backends import JobServiceSandbox  # noqa: E402
from openmle.errors import InvalidArgument, JobServiceError, SandboxError  # noqa: E402
from openmle.service import ServiceConfig, create_app  # noqa: E402
from openmle.testing import FunctionSandbox, ToyTask  # noqa: E402

KEY = "client-key-0123456789"


def _handler(job: Job) -> RunResult:
    if "crash" in job.code:
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR, split=job.split, logs="ZeroDivisionError", exit_code=1
        )
    return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split, logs="ok")


@contextlib.asynccontextmanager
async def real_service(
    tmp_path: Path, handler: Any = _handler, delay_s: float = 0.0
) -> AsyncIterator[tuple[str, FunctionSandbox]]:
    root = tmp_path / "tasks"
    if not root.exists():
        ToyTask.create(root / "toy")
    sandbox = FunctionSandbox(handler, delay_s=delay_s)
    config = ServiceConfig(
        db_path=tmp_path / "jobs.db", task_roots=(root,), api_keys=(KEY,), cpu_slots=4, gpu_slots=1
    )
    async with serving(create_app(config, sandbox=sandbox)) as url:
        yield url, sandbox


class Scripted:
    """A fake job server answering from scripts; records every request."""

    def __init__(self) -> None:
        self.posts: deque[tuple[int, dict[str, str], Any]] = deque()
        self.gets: deque[tuple[int, dict[str, str], Any]] = deque()
        self.log: list[tuple[str, str, dict[str, Any]]] = []
        self.long_poll = True
        self.app = Starlette(
            routes=[
                Route("/api/v1/jobs", self.post, methods=["POST"]),
                Route("/api/v1/jobs/{job_id}", self.get, methods=["GET"]),
                Route("/api/v1/jobs/{job_id}", self.delete, methods=["DELETE"]),
            ]
        )

    async def post(self, request: Request) -> Response:
        body = await request.json()
        self.log.append(("POST", request.url.path, body))
        status, headers, data = self.posts.popleft()
        return _answer(status, headers, data)

    async def get(self, request: Request) -> Response:
        self.log.append(("GET", request.url.path, dict(request.query_params)))
        status, headers, data = self.gets.popleft()
        if self.long_poll:
            headers = {**headers, "X-Long-Poll": "60"}
        return _answer(status, headers, data)

    async def delete(self, request: Request) -> Response:
        self.log.append(("DELETE", request.url.path, {}))
        return JSONResponse({"job_id": "j1", "status": "cancelled"})


@dataclass(frozen=True)
class Trickle:
    """A body that never ends: ``chunk`` every ``every_s`` seconds (0: as fast as possible)."""

    chunk: bytes = b" "
    every_s: float = 0.5


def _answer(status: int, headers: dict[str, str], data: Any) -> Response:
    if isinstance(data, bytes):
        return Response(data, status, headers, media_type="application/json")
    if isinstance(data, Trickle):
        return StreamingResponse(_trickle(data), status, headers, media_type="application/json")
    return JSONResponse(data, status, headers)


async def _trickle(spec: Trickle) -> AsyncIterator[bytes]:
    yield b'{"status": "running", "detail": "'
    while True:
        yield spec.chunk
        if spec.every_s:
            await anyio.sleep(spec.every_s)
        else:
            await anyio.lowlevel.checkpoint()


def _job(**kw: Any) -> Job:
    kw.setdefault("code", "print(1)")
    kw.setdefault("task", "toy")
    kw.setdefault("timeout_s", 60)
    return Job(**kw)


def _client(url: str, **kw: Any) -> JobServiceSandbox:
    kw.setdefault("api_key", KEY)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("poll_interval_s", 0.05)
    return JobServiceSandbox(url, **kw)


@pytest.mark.anyio
async def test_results_come_back_whole(tmp_path: Path) -> None:
    """Successes and program failures come back as the sandbox classified them."""
    async with real_service(tmp_path) as (url, sandbox):
        client = _client(url)
        ok = await client.run(_job(name="a"))
        bad = await client.run(_job(code="crash()", split="test"))
        gpu = await client.run(_job(resources=Resources(gpus=1)))
        await client.aclose()
    assert ok.outcome is Outcome.SUCCESS and ok.score == 0.5 and ok.logs == "ok"
    assert bad.outcome is Outcome.RUNTIME_ERROR and bad.score is None and bad.split is Split.TEST
    assert gpu.outcome is Outcome.SUCCESS
    assert sandbox.jobs[0].name == "a"
    assert sandbox.jobs[2].resources.gpus == 1


@pytest.mark.anyio
async def test_more_runs_than_connections(tmp_path: Path) -> None:
    """Runs beyond ``max_connections`` wait for a connection instead of failing."""
    async with real_service(tmp_path, delay_s=4.0) as (url, sandbox):
        # Any wait for a connection longer than request_timeout_s would be fatal here: two
        # runs long-poll their 4 s jobs on both connections while four wait for one. The
        # 3 s request timeout leaves a loaded machine room to answer each request.
        client = _client(
            url,
            max_connections=2,
            long_poll_s=10,
            request_timeout_s=3.0,
            max_submit_attempts=1,
            max_poll_failures=0,
        )
        results: list[RunResult] = []

        async def one(i: int) -> None:
            results.append(await client.run(_job(name=f"r{i}")))

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(one, i)
        await client.aclose()
    assert [r.outcome for r in results] == [Outcome.SUCCESS] * 6 and len(sandbox.jobs) == 6


@pytest.mark.anyio
async def test_4xx_raises_job_service_error(tmp_path: Path) -> None:
    """A bad key (401) or a path outside the task roots (400) raises, naming the fix."""
    async with real_service(tmp_path) as (url, _):
        client = _client(url, api_key="wrong-key-12345678")
        with pytest.raises(JobServiceError, match=r"api_key=\.\.\.") as info:
            await client.run(_job())
        assert info.value.status == 401
        await client.aclose()
        client = _client(url)
        with pytest.raises(JobServiceError, match="outside the registered task roots") as info:
            await client.run(_job(task="/etc"))
        assert info.value.status == 400
        await client.aclose()


@pytest.mark.anyio
async def test_submit_retries_honour_retry_after_and_keep_the_key() -> None:
    """429/503 answers are retried after ``Retry-After`` with the same idempotency key."""
    fake = Scripted()
    fake.posts.extend(
        [
            (429, {"Retry-After": "0.3"}, {"error": "queue_full"}),
            (503, {}, {"error": "busy"}),
            (200, {}, {"job_id": "j1", "status": "queued"}),
        ]
    )
    done = {"status": "completed", "result": {"run_result": _handler(_job()).to_dict()}}
    fake.gets.append((200, {}, done))
    async with serving(fake.app) as url:
        client = _client(url, backoff_s=100.0, max_backoff_s=0.5)
        t0 = time.monotonic()
        with anyio.fail_after(30):
            result = await client.run(_job())
        await client.aclose()
    assert result.outcome is Outcome.SUCCESS
    posts = [body for method, _, body in fake.log if method == "POST"]
    assert len(posts) == 3 and len({p["idempotency_key"] for p in posts}) == 1
    assert time.monotonic() - t0 >= 0.3 + 0.5  # Retry-After, then the capped backoff


@pytest.mark.anyio
async def test_unreachable_service_is_an_infra_error() -> None:
    """Nothing listening: submission attempts run out and the result is INFRA_ERROR."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}", max_submit_attempts=3)
    result = await client.run(_job())
    await client.aclose()
    assert result.outcome is Outcome.INFRA_ERROR and result.score is None
    assert "after 3 attempts" in result.detail and "ConnectError" in result.detail


@pytest.mark.anyio
async def test_poll_survives_transient_errors_and_gives_up_after_too_many() -> None:
    """502/503 polls are retried; more than ``max_poll_failures`` in a row is INFRA_ERROR."""
    fake = Scripted()
    done = {"status": "completed", "result": {"run_result": _handler(_job()).to_dict()}}
    fake.posts.append((200, {}, {"job_id": "j1", "status": "queued"}))
    fake.gets.extend(
        [(502, {}, {}), (503, {}, {}), (200, {}, {"status": "running"}), (200, {}, done)]
    )
    fake.posts.append((200, {}, {"job_id": "j2", "status": "queued"}))
    fake.gets.extend([(503, {}, {})] * 3)
    async with serving(fake.app) as url:
        client = _client(url, max_poll_failures=2)
        first = await client.run(_job())
        second = await client.run(_job())
        await client.aclose()
    assert first.outcome is Outcome.SUCCESS
    assert second.outcome is Outcome.INFRA_ERROR and "3 failed polls" in second.detail


@pytest.mark.anyio
async def test_long_poll_used_when_advertised_else_interval_polling() -> None:
    """Polls carry ``wait`` while the service advertises long-poll, and not after it stops."""
    fake = Scripted()
    done = {"status": "completed", "result": {"run_result": _handler(_job()).to_dict()}}
    fake.posts.append((200, {}, {"job_id": "j1", "status": "queued"}))
    fake.gets.extend([(200, {}, {"status": "running"}), (200, {}, done)])
    async with serving(fake.app) as url:
        client = _client(url, long_poll_s=20)
        assert (await client.run(_job())).outcome is Outcome.SUCCESS
        waits = [float(q["wait"]) for m, _, q in fake.log if m == "GET"]
        assert len(waits) == 2 and all(w > 10 for w in waits)
        fake.log.clear()
        fake.long_poll = False
        fake.posts.append((200, {}, {"job_id": "j2", "status": "queued"}))
        fake.gets.extend([(200, {}, {"status": "running"})] * 2 + [(200, {}, done)])
        t0 = time.monotonic()
        assert (await client.run(_job())).outcome is Outcome.SUCCESS
        await client.aclose()
    gets = [q for m, _, q in fake.log if m == "GET"]
    assert len(gets) == 3 and "wait" in gets[0] and "wait" in gets[1]
    assert time.monotonic() - t0 >= 2 * 0.05  # slept the poll interval between plain polls


@pytest.mark.anyio
async def test_wait_timeout_cancels_the_job(tmp_path: Path) -> None:
    """Past ``wait_timeout_s`` the job is cancelled on the service and the result is INFRA_ERROR."""

    async def forever(job: Job) -> RunResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async with real_service(tmp_path, forever) as (url, _):
        client = _client(url, wait_timeout_s=0.5, long_poll_s=0.2)
        with anyio.fail_after(30):
            result = await client.run(_job())
        assert result.outcome is Outcome.INFRA_ERROR and "wait_timeout_s=0.5" in result.detail

        async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": KEY}) as http:
            status = (await http.get("/api/v1/workers/status")).json()
        assert status["pools"]["cpu"]["running"] == 0
        await client.aclose()


@pytest.mark.anyio
async def test_cancelling_run_cancels_the_job(tmp_path: Path) -> None:
    """Cancelling ``run`` sends DELETE: the job ends ``cancelled`` on the service."""
    seen: list[str] = []
    started = anyio.Event()

    async def forever(job: Job) -> RunResult:
        seen.append("started")
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            seen.append("stopped")
        raise AssertionError("unreachable")

    async with real_service(tmp_path, forever) as (url, _):
        client = _client(url)
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.run, _job())
            with anyio.fail_after(60):  # cancelled once running, however slowly it starts
                await started.wait()
            tg.cancel_scope.cancel()
        await client.aclose()
    assert seen == ["started", "stopped"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("view", "outcome", "score"),
    [
        (
            {"status": "completed", "result": {"result": "success", "valid_score": "0.8"}},
            "success",
            0.8,
        ),
        ({"status": "completed", "result": {"result": "ok", "score": 0.3}}, "success", 0.3),
        ({"status": "completed", "result": {"result": "timeout"}}, "timeout", None),
        (
            {"status": "completed", "result": {"result": "success", "score": "nan"}},
            "invalid_submission",
            None,
        ),
        (
            {"status": "completed", "result": {"result": "submission_missing"}},
            "missing_submission",
            None,
        ),
        ({"status": "completed", "result": {"result": "mystery"}}, "infra_error", None),
        ({"status": "failed", "result": None, "detail": "worker died"}, "infra_error", None),
        ({"status": "cancelled", "result": None}, "infra_error", None),
    ],
)
async def test_released_router_answers_are_mapped(
    view: dict[str, Any], outcome: str, score: float | None
) -> None:
    """Results from released-protocol routers map to outcomes; infra failures never score."""
    fake = Scripted()
    fake.posts.append((200, {}, {"job_id": "j1", **view}))
    async with serving(fake.app) as url:
        client = _client(url)
        result = await client.run(_job())
        await client.aclose()
    assert result.outcome.value == outcome and result.score == score


@pytest.mark.anyio
async def test_closed_sandbox_and_bad_settings() -> None:
    """``run`` after ``aclose`` raises ``SandboxError``; bad settings name the field."""
    client = _client("http://127.0.0.1:9")
    await client.aclose()
    with pytest.raises(SandboxError, match="aclose"):
        await client.run(_job())
    for kw in ({"priority": 3}, {"resource_type": "tpu"}, {"poll_interval_s": 0}):
        with pytest.raises(InvalidArgument, match="JobServiceSandbox"):
            _client("http://127.0.0.1:9", **kw)
    with pytest.raises(InvalidArgument, match="base_url"):
        JobServiceSandbox("127.0.0.1:9")


# ---------------------------------------------------------------------------------------------
# A hostile or broken job service (second security review): every bad answer is an INFRA_ERROR
# result, never a crash, never a score, never a wait past wait_timeout_s.


def _done(**run_result: Any) -> dict[str, Any]:
    rr = _handler(_job()).to_dict()
    rr.update(run_result)
    return {"job_id": "j1", "status": "completed", "result": {"run_result": rr}}


async def _run_against(
    gets: list[tuple[int, dict[str, str], Any]], job: Job | None = None, **kw: Any
) -> tuple[RunResult, Scripted]:
    fake = Scripted()
    fake.posts.append((200, {}, {"job_id": "j1", "status": "queued"}))
    fake.gets.extend(gets)
    async with serving(fake.app) as url:
        client = _client(url, **kw)
        with anyio.fail_after(60):
            result = await client.run(job or _job())
        await client.aclose()
    return result, fake


@pytest.mark.anyio
async def test_trickling_long_poll_cannot_stretch_the_wait() -> None:
    """A poll answer sending one byte every 0.5 s (under the read timeout) ends at
    ``wait_timeout_s``, and the job is cancelled (before: 15 s asked, 160 s taken).

    The trickle never ends, so a client it could stretch would wait forever: the bound on
    the run (not on the test server's start) is generous, 15 times the 2 s wait, so only a
    stretched wait fails it, never a loaded machine."""
    fake = Scripted()
    fake.posts.append((200, {}, {"job_id": "j1", "status": "queued"}))
    fake.gets.extend([(200, {}, Trickle(every_s=0.5))] * 3)
    async with serving(fake.app) as url:
        client = _client(url, wait_timeout_s=2.0, long_poll_s=1.0, request_timeout_s=5.0)
        t0 = time.monotonic()
        with anyio.fail_after(120):
            result = await client.run(_job())
        run_s = time.monotonic() - t0
        await client.aclose()
    assert result.outcome is Outcome.INFRA_ERROR and "wait_timeout_s=2.0" in result.detail
    assert run_s < 30, run_s
    assert ("DELETE", "/api/v1/jobs/j1", {}) in fake.log


@pytest.mark.anyio
async def test_endless_poll_answer_is_cut_at_the_byte_cap() -> None:
    """An answer that never ends stops at ``max_response_bytes`` (8 MiB): INFRA_ERROR (before:
    23 GB of memory in 300 s)."""
    result, _ = await _run_against([(200, {}, Trickle(chunk=b"x" * 2**20, every_s=0))])
    assert result.outcome is Outcome.INFRA_ERROR
    assert "max_response_bytes=8388608" in result.detail


@pytest.mark.anyio
async def test_oversized_submission_answer_is_an_infra_error() -> None:
    """A declared body over the cap (the cap is settable) is refused unread."""
    fake = Scripted()
    fake.posts.append((200, {}, {"job_id": "j1", "status": "queued", "detail": "x" * 5000}))
    async with serving(fake.app) as url:
        client = _client(url, max_response_bytes=2048)
        result = await client.run(_job())
        await client.aclose()
    assert result.outcome is Outcome.INFRA_ERROR and "Content-Length" in result.detail


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 409, 422])
async def test_4xx_while_polling_is_an_infra_error(status: int) -> None:
    """A 4xx on a poll is an INFRA_ERROR for this run, not an exception that ends the search."""
    result, _ = await _run_against([(status, {}, {"detail": "nope"})])
    assert result.outcome is Outcome.INFRA_ERROR and f"HTTP {status}" in result.detail


BIG = b'{"job_id": "j1", "status": "completed", "result": {"run_result": {"outcome": "success", '


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (_done(split="test"), "split"),
        (BIG + b'"score": 1' + b"0" * 400 + b', "split": "valid"}}}', "too large"),
        (_done(score=1.7e308), "beyond any metric"),
        (_done(logs=17), "logs is a int"),
        (_done(error_signature={"a": 1}), "error_signature is a dict"),
        (_done(outcome="winner"), "outcome"),
        (_done(runtime_s=-1.0), "runtime_s"),
        (_done(score="0.5"), "score is a str"),
        (_done(artifacts="a.csv"), "artifacts"),
        (_done(outcome="runtime_error"), "has a score"),
        ({**_done(), "job_id": "j2"}, "job 'j2', not job 'j1'"),
        ({**_done(), "eval_split": "test"}, "eval_split"),
        ({**_done(), "result": ["x"]}, "result is a list"),
        ({**_done(), "status": 7}, "status is a int"),
        (b"<html>200 OK</html>", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (
            {"status": "completed", "result": {"result": "success", "score": 10**400}},
            "too large",
        ),
        ({"status": "completed", "result": {"result": "success", "run_log": 5}}, "run_log"),
        ({"status": "completed", "result": {"result": {"x": 1}}}, "result.result"),
    ],
)
async def test_malformed_results_are_infra_errors(answer: Any, said: str) -> None:
    """Bad fields, another job's or split's result, scores that overflow or are absurd: each an
    INFRA_ERROR naming the fault (before: OverflowError, TypeError, or a wrong score taken)."""
    result, fake = await _run_against([(200, {}, answer)])
    assert result.outcome is Outcome.INFRA_ERROR and result.score is None
    assert said in result.detail
    assert ("DELETE", "/api/v1/jobs/j1", {}) in fake.log


@pytest.mark.anyio
async def test_a_valid_result_is_not_the_test_result() -> None:
    """The final test job refuses a result computed on ``valid``."""
    result, _ = await _run_against([(200, {}, _done(split="valid"))], job=_job(split="test"))
    assert result.outcome is Outcome.INFRA_ERROR and result.split is Split.TEST


@pytest.mark.anyio
@pytest.mark.parametrize(("score", "ok"), [(0.9, True), (1.7, False), (-0.2, False)])
async def test_scores_outside_the_task_metric_range_are_refused(score: float, ok: bool) -> None:
    """With ``task_meta``, an AUC outside [0, 1] is INFRA_ERROR, never recorded as best."""
    meta = {"toy": TaskMeta(theoretical_min=0.0, theoretical_max=1.0)}
    result, _ = await _run_against([(200, {}, _done(score=score))], task_meta=meta)
    if ok:
        assert result.outcome is Outcome.SUCCESS and result.score == score
    else:
        assert result.outcome is Outcome.INFRA_ERROR and "metric range [0.0, 1.0]" in result.detail


@pytest.mark.anyio
@pytest.mark.parametrize("job_id", ["../../admin", "", "a b", {"id": 1}, "x" * 200])
async def test_unsafe_job_ids_are_refused(job_id: Any) -> None:
    """A job id that is not a plain token never reaches a URL path."""
    fake = Scripted()
    fake.posts.append((200, {}, {"job_id": job_id, "status": "queued"}))
    async with serving(fake.app) as url:
        client = _client(url)
        result = await client.run(_job())
        await client.aclose()
    assert result.outcome is Outcome.INFRA_ERROR and "job_id" in result.detail
    assert [m for m, _, _ in fake.log] == ["POST"]


@pytest.mark.anyio
async def test_lone_surrogate_in_the_program_is_sent() -> None:
    """A program holding a lone surrogate is sent (escaped), not a UnicodeEncodeError."""
    result, fake = await _run_against([(200, {}, _done())], job=_job(code="print('\ud800')"))
    assert result.outcome is Outcome.SUCCESS
    assert fake.log[0][2]["code"] == "print('\ud800')"


# --------------------------------------------------------------------------- preflight


@pytest.mark.anyio
async def test_preflight_accepts_a_service_that_takes_the_key(tmp_path: Path) -> None:
    """The real service with the client's key: preflight passes and no job is made."""
    async with real_service(tmp_path) as (url, sandbox):
        client = _client(url)
        await client.preflight()
        await client.aclose()
    assert sandbox.jobs == []


@pytest.mark.anyio
async def test_preflight_refuses_a_wrong_key_before_any_job(tmp_path: Path) -> None:
    """A wrong key failed every step of a search (each a 401 on submission); preflight says
    so once, with the fix."""
    async with real_service(tmp_path) as (url, sandbox):
        client = _client(url, api_key="wrong-key-12345678")
        with pytest.raises(JobServiceError, match=r"HTTP 401.*api_key=\.\.\.") as info:
            await client.preflight()
        await client.aclose()
    assert info.value.status == 401 and sandbox.jobs == []


@pytest.mark.anyio
async def test_preflight_names_an_address_where_nothing_answers() -> None:
    """Nothing listening: one SandboxError naming the address, at once (a search retried
    every submission with backoff, step after step)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}")
    with anyio.fail_after(20), pytest.raises(SandboxError, match=f"127.0.0.1:{port}.*serve"):
        await client.preflight()
    await client.aclose()


@pytest.mark.anyio
async def test_preflight_refuses_a_server_that_is_no_job_service() -> None:
    """An HTTP server answering HTML (a wrong port, another program) is not taken for one."""
    app = Starlette(
        routes=[Route("/{path:path}", lambda r: Response("<html>hi</html>", 200), methods=["GET"])]
    )
    async with serving(app) as url:
        client = _client(url)
        with pytest.raises(SandboxError, match=r"no usable answer.*openmle serve"):
            await client.preflight()
        await client.aclose()
