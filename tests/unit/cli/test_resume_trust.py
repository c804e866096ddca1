"""``openmle resume`` and ``openmle bench resume`` never take a server from an edited manifest.

A received run (or bench) directory whose manifest names another URL must not make resume
send ``Authorization: Bearer $OPENAI_API_KEY`` (or the task prompt) there: a recorded model that
talks to a server is used only when the user names it again with ``--model``. The server here
is a real HTTP listener on loopback, started by the test, that records every request and
whether an ``Authorization`` header arrived.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from attrs import frozen

from openmle._cli import main

SECRET = "sk-test-resume-must-not-send-this"


class _Recorder:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self.authorization: list[str] = []


@pytest.fixture
def listener() -> Iterator[tuple[str, _Recorder]]:
    seen = _Recorder()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

        def _any(self) -> None:
            seen.paths.append(self.path)
            auth = self.headers.get("Authorization")
            if auth is not None:
                seen.authorization.append(auth)
            body = json.dumps({"object": "list", "data": [{"id": "m"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _any
        do_POST = _any

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def _edit_cli(out: Path, key: str, value: str) -> None:
    """Set the recorded command-line ``key`` of the run ``out`` (as a received directory's
    manifest could be edited)."""
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["extra"]["cli"][key] = value
    (out / "manifest.json").write_text(json.dumps(manifest))


@frozen
class _Guard:
    """The test's listener (``url``, and ``seen``: what reached it) and the refusal check."""

    url: str
    seen: _Recorder
    monkeypatch: pytest.MonkeyPatch
    capsys: pytest.CaptureFixture[str]

    def refused(self, argv: list[str]) -> str:
        """``openmle ARGV --quiet`` with an API key set exits 2 without a request reaching
        the listener; returns its stderr."""
        self.monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        self.capsys.readouterr()
        code = main([*argv, "--quiet"])
        err = self.capsys.readouterr().err
        seen = self.seen
        assert seen.authorization == [] and seen.paths == [], seen.authorization  # nothing sent
        assert code == 2, err
        return err


@pytest.fixture
def guard(
    listener: tuple[str, _Recorder],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> _Guard:
    """The listener of this test with its refusal check."""
    return _Guard(*listener, monkeypatch, capsys)


def test_resume_refuses_a_server_model_from_an_edited_manifest(
    tmp_path: Path,
    guard: _Guard,
) -> None:
    url, seen = guard.url, guard.seen
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-regression", "--model", "offline-numpy"]
    argv += ["--steps", "1", "--workers", "1", "--out", str(out), "--quiet", "--no-report"]
    assert main(argv) == 0
    _edit_cli(out, "model", f"openai:{url}#m")  # the received directory's edit
    err = guard.refused(["resume", str(out), "--budget", "steps=2", "--no-report"])
    assert url in err and "--model" in err
    # Named again on the command line, the same server is the user's choice.
    again = ["resume", str(out), "--model", f"openai:{url}#m", "--budget", "steps=1"]
    main([*again, "--quiet", "--no-report"])
    assert seen.authorization and seen.authorization[0] == f"Bearer {SECRET}"


@pytest.mark.parametrize("key", ["model", "summary_model"])
def test_resume_refuses_a_server_inside_a_recorded_routing(
    tmp_path: Path,
    guard: _Guard,
    key: str,
) -> None:
    """A server hidden in one route of ``--model draft=...,default=...`` (or in the recorded
    ``--summary-model``) is refused like a plain one: each part is checked."""
    url = guard.url
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-regression", "--model", "draft=offline,default=offline"]
    argv += ["--summaries", "--steps", "1", "--workers", "1", "--out", str(out), "--quiet"]
    assert main([*argv, "--no-report"]) == 0
    _edit_cli(
        out, key, f"draft=offline,default=openai:{url}#m" if key == "model" else f"openai:{url}#m"
    )
    err = guard.refused(["resume", str(out), "--budget", "steps=2", "--no-report"])
    flag = "--model" if key == "model" else "--summary-model"
    assert url in err and flag in err


def test_bench_resume_refuses_a_server_model_from_an_edited_manifest(
    tmp_path: Path,
    guard: _Guard,
) -> None:
    from tests.unit.bench._mininb import build

    from openmle.bench import BenchConfig, BenchRun, NatureBench

    url = guard.url
    root = build(tmp_path / "nb")
    config = BenchConfig(
        suite="x",
        competitions=("nb-cpu-bio",),
        seeds=(0,),
        model=f"openai:{url}#m",  # the received directory's edit
        budget={"steps": 1},
        data_dir=str(root),
        benchmark="naturebench",
    )
    bench = tmp_path / "bench"
    BenchRun.create(bench, config, NatureBench(root))
    err = guard.refused(["bench", "resume", str(bench)])
    assert url in err and "--model" in err
