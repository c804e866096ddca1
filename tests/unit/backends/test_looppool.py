"""HTTP connection pools per event loop (``backends._looppool``), over real loopback HTTP.

``OpenAIModel`` and ``JobServiceSandbox`` cache their ``httpx`` pool; used from several event
loops (one ``anyio.run`` per call, as the sync entry points do), each loop's pool is closed by
that loop: no socket stays open once the loops are done, and no ``ResourceWarning``.
(Before: a pool opened under a finished loop was dropped unclosed, its sockets left to the
garbage collector, whose ``ResourceWarning`` failed whichever later test it landed in.)
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import anyio
import pytest
from tests._serve import served_in_thread
from tests._sockets import tcp_sockets_to

pytest.importorskip("starlette", reason="needs starlette: pip install 'openmle[service]'")
pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openmle import Job, Message, ModelRequest, Operator, Outcome, RunResult
from openmle.backends import JobServiceSandbox, OpenAIModel
from openmle.backends._looppool import LoopPool


async def _chat(request: Request) -> JSONResponse:
    await request.body()
    message = {"role": "assistant", "content": "ok"}
    return JSONResponse({"id": "c1", "model": "m", "choices": [{"index": 0, "message": message}]})


async def _submit(request: Request) -> JSONResponse:
    await request.body()
    return JSONResponse({"job_id": "j1", "status": "queued"})


async def _poll(request: Request) -> JSONResponse:
    result = RunResult(outcome=Outcome.SUCCESS, score=0.5, logs="ok").to_dict()
    return JSONResponse({"job_id": "j1", "status": "completed", "result": {"run_result": result}})


APP = Starlette(
    routes=[
        Route("/v1/chat/completions", _chat, methods=["POST"]),
        Route("/api/v1/jobs", _submit, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}", _poll, methods=["GET"]),
    ]
)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with served_in_thread(APP, lifespan="off") as base:
        yield base


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _model(url: str) -> OpenAIModel:
    return OpenAIModel(model="m", base_url=f"{url}/v1", api_key="k", max_retries=0)


def _sandbox(url: str) -> JobServiceSandbox:
    return JobServiceSandbox(url, api_key="k", poll_interval_s=0.05, long_poll_s=0)


def _request() -> ModelRequest:
    return ModelRequest(messages=(Message(role="user", content="hi"),), operator=Operator.DRAFT)


def _job() -> Job:
    return Job(code="print(1)", task="toy", timeout_s=60)


def _user(url: str, client: OpenAIModel | JobServiceSandbox) -> Callable[[], Awaitable[None]]:
    """One use of ``client`` that leaves a keep-alive connection open in its loop."""

    async def use() -> None:
        if isinstance(client, OpenAIModel):
            assert (await client.complete(_request())).text == "ok"
        else:
            assert (await client.run(_job())).outcome is Outcome.SUCCESS
        assert tcp_sockets_to(_port(url)), "the pool keeps its connection while the loop runs"

    return use


def _no_resource_warning(caught: list[warnings.WarningMessage]) -> None:
    gc.collect()  # a dropped, unclosed pool would warn here
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []


@pytest.mark.parametrize("make", [_model, _sandbox], ids=["OpenAIModel", "JobServiceSandbox"])
def test_each_loop_closes_its_own_pool(url: str, make: Any) -> None:
    """Used from two ``anyio.run`` calls and closed from a third: every socket is closed as
    the loop that opened it ends, and nothing is left to the garbage collector."""
    client = make(url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        anyio.run(_user(url, client))
        assert tcp_sockets_to(_port(url)) == []
        anyio.run(_user(url, client))
        assert tcp_sockets_to(_port(url)) == []
        anyio.run(client.aclose)
        _no_resource_warning(caught)
    assert tcp_sockets_to(_port(url)) == []


def test_aclose_in_the_loop_then_reuse(url: str) -> None:
    """``aclose`` closes the current loop's pool at once; a later call in that loop opens a
    new one."""
    model = _model(url)

    async def main() -> None:
        await _user(url, model)()
        await model.aclose()
        await model.aclose()  # idempotent
        assert tcp_sockets_to(_port(url)) == []
        await _user(url, model)()
        await model.aclose()
        assert tcp_sockets_to(_port(url)) == []

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        anyio.run(main)
        _no_resource_warning(caught)


def test_loops_in_two_threads_at_once(url: str) -> None:
    """Two threads' loops using one model side by side each get, and close, their own pool."""
    model = _model(url)
    both = threading.Barrier(2, timeout=30)
    errors: list[BaseException] = []

    def thread() -> None:
        async def main() -> None:
            await _user(url, model)()
            await anyio.to_thread.run_sync(both.wait)  # both pools open now
            await _user(url, model)()

        try:
            anyio.run(main)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=thread) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == [] and tcp_sockets_to(_port(url)) == []


async def _in_a_task(get: Callable[[], object]) -> object:
    return get()


def test_pool_makes_one_resource_per_loop_and_forgets_closed_loops() -> None:
    """One resource per loop; a loop closed without finalizing its async generators (a bare
    ``loop.close()``) is forgotten at the pool's next use, its resource left unclosed."""
    made: list[object] = []
    closed: list[object] = []

    def make() -> object:
        made.append(object())
        return made[-1]

    async def close(resource: object) -> None:
        closed.append(resource)

    pool = LoopPool(make, close)

    async def twice() -> object:
        first = pool.get()
        assert pool.get() is first
        return first

    first = anyio.run(twice)
    assert closed == [first]  # closed as its loop ended
    loop = asyncio.new_event_loop()
    bare = loop.run_until_complete(_in_a_task(pool.get))
    loop.close()
    assert anyio.run(twice) is not bare and len(made) == 3
    assert closed == [first, made[2]] and bare not in closed
    del loop, bare
    gc.collect()
