"""A small OpenAI-compatible HTTP server on 127.0.0.1 for the CLI's subprocess tests.

Serves ``{prefix}/models`` and ``{prefix}/chat/completions`` from a thread (the ``openmle``
process under test talks to it over real HTTP). Configurable: the accepted key, the models it
serves, the prefix (``/v1``), the answer's text, a delay and a reported cost.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeServer:
    """What the server accepts and answers; ``requests`` records (method, path, body)."""

    key: str | None = None
    models: list[str] = field(default_factory=lambda: ["served/model-a"])
    prefix: str = "/v1"
    text: str = "I have no program for you."
    delay_s: float = 0.0
    cost: float | None = None
    requests: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    base_url: str = ""
    #: Set when the server stops: a request waiting out ``delay_s`` ends unanswered.
    stopping: threading.Event = field(default_factory=threading.Event)


def _handler(server: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = 30  # a client that stops sending cannot hold the server's close forever

        def log_message(self, format: str, *args: object) -> None:  # quiet
            return

        def _send(self, status: int, body: dict[str, Any]) -> None:
            raw = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def _authorised(self) -> bool:
            if server.key is None:
                return True
            if self.headers.get("Authorization") == f"Bearer {server.key}":
                return True
            self._send(401, {"error": {"message": "Incorrect API key provided: sk-wr***"}})
            return False

        def do_GET(self) -> None:
            server.requests.append(("GET", self.path, {}))
            if self.path != f"{server.prefix}/models":
                self._send(404, {"detail": "Not Found"})
                return
            if self._authorised():
                data = [{"id": m, "object": "model"} for m in server.models]
                self._send(200, {"object": "list", "data": data})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            server.requests.append(("POST", self.path, body))
            if self.path != f"{server.prefix}/chat/completions":
                self._send(404, {"detail": "Not Found"})
                return
            if not self._authorised():
                return
            if body.get("model") not in server.models:
                self._send(
                    404,
                    {"error": {"message": f"The model `{body.get('model')}` does not exist."}},
                )
                return
            if server.stopping.wait(server.delay_s):
                return
            usage: dict[str, Any] = {"prompt_tokens": 5, "completion_tokens": 3}
            if server.cost is not None:
                usage["cost"] = server.cost
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": server.text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage,
                },
            )

    return Handler


@contextmanager
def fake_openai(**settings: Any) -> Iterator[FakeServer]:
    """Start the server; yields its settings with ``base_url`` (no prefix) filled in."""
    state = FakeServer(**settings)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    # Handler threads are joined on close (after a delay is cut short), so no connection
    # outlives the server: a delayed answer to a killed client would otherwise hold its
    # socket open past the test.
    httpd.daemon_threads = False
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
