"""Serve an ASGI app with uvicorn on a free 127.0.0.1 port, for tests (loopback only).

Needs the ``service`` extra (uvicorn), imported when a server starts: a test module importing
this one skips on ``pytest.importorskip("uvicorn", ...)`` first.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio

__all__ = ["served_in_thread", "serving"]


def _bound() -> tuple[socket.socket, str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


def _server(app: Any, config: dict[str, Any]) -> Any:
    import uvicorn

    options = {"log_level": "critical", "access_log": False, **config}
    return uvicorn.Server(uvicorn.Config(app, **options))


@contextlib.asynccontextmanager
async def serving(app: Any, **config: Any) -> AsyncIterator[str]:
    """Serve ``app`` in this event loop; yield its base URL (``http://127.0.0.1:PORT``).

    ``config``: more ``uvicorn.Config`` options (e.g. ``lifespan="on"``). Fails after 30 s
    without the server started."""
    sock, url = _bound()
    server = _server(app, config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        with anyio.fail_after(30):
            while not server.started:  # noqa: ASYNC110 - uvicorn exposes a flag, not an event
                await anyio.sleep(0.01)
        try:
            yield url
        finally:
            server.should_exit = True
    sock.close()


@contextlib.contextmanager
def served_in_thread(app: Any, **config: Any) -> Iterator[str]:
    """Serve ``app`` from a daemon thread (for sync tests and module fixtures); yield its base
    URL (``http://127.0.0.1:PORT``). Fails after 30 s without the server started."""
    sock, url = _bound()
    server = _server(app, config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "test server did not start"
        time.sleep(0.01)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()
