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
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

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


@pytest.fixture
def refused(
    listener: tuple[str, _Recorder],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Callable[[list[str]], str]:
    """``refused(argv)``: ``openmle ARGV --quiet`` with an API key set exits 2 without a
    request reaching the listener; returns its stderr."""
    _, seen = listener

    def run(argv: list[str]) -> str:
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        capsys.readouterr()
        code = main([*argv, "--quiet"])
        err = capsys.readouterr().err
        assert seen.authorization == [] and seen.paths == [], seen.authorization  # nothing sent
        assert code == 2, err
        return err

    return run


def test_resume_refuses_a_server_model_from_an_edited_manifest(
    tmp_path: Path,
    listener: tuple[str, _Recorder],
    refused: Callable[[list[str]], str],
) -> None:
    url, seen = listener
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-regression", "--model", "offline-numpy"]
    argv += ["--steps", "1", "--workers", "1", "--out", str(out), "--quiet", "--no-report"]
    assert main(argv) == 0
    _edit_cli(out, "model", f"openai:{url}#m")  # the received directory's edit
    err = refused(["resume", str(out), "--budget", "steps=2", "--no-report"])
    assert url in err and "--model" in err
    # Named again on the command line, the same server is the user's choice.
    again = ["resume", str(out), "--model", f"openai:{url}#m", "--budget", "steps=1"]
    main([*again, "--quiet", "--no-report"])
    assert seen.authorization and seen.authorization[0] == f"Bearer {SECRET}"


@pytest.mark.parametrize("key", ["model", "summary_model"])
def test_resume_refuses_a_server_inside_a_recorded_routing(
    tmp_path: Path,
    listener: tuple[str, _Recorder],
    refused: Callable[[list[str]], str],
    key: str,
) -> None:
    """A server hidden in one route of ``--model draft=...,default=...`` (or in the recorded
    ``--summary-model``) is refused like a plain one: each part is checked."""
    url, _ = listener
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-regression", "--model", "draft=offline,default=offline"]
    argv += ["--summaries", "--steps", "1", "--workers", "1", "--out", str(out), "--quiet"]
    assert main([*argv, "--no-report"]) == 0
    _edit_cli(
        out, key, f"draft=offline,default=openai:{url}#m" if key == "model" else f"openai:{url}#m"
    )
    err = refused(["resume", str(out), "--budget", "steps=2", "--no-report"])
    flag = "--model" if key == "model" else "--summary-model"
    assert url in err and flag in err


def test_bench_resume_refuses_a_server_model_from_an_edited_manifest(
    tmp_path: Path,
    listener: tuple[str, _Recorder],
    refused: Callable[[list[str]], str],
) -> None:
    from tests.unit.bench._mininb import build

    from openmle.bench import BenchConfig, BenchRun, NatureBench

    url, _ = listener
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
    err = refused(["bench", "resume", str(bench)])
    assert url in err and "--model" in err
