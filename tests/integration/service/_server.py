"""``openmle serve`` in a child process on a loopback port, for the integration tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

__all__ = ["HERE", "KEY", "SRC", "Server"]

KEY = "integration-key-0123456789"
HERE = Path(__file__).parent
SRC = Path(__file__).parents[3] / "src"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``python -m openmle serve`` in a child process, restartable on the same database."""

    def __init__(
        self,
        tmp: Path,
        roots: Path,
        *,
        slots: int = 8,
        sandbox: str = "service_sandbox:make",
        args: Sequence[str] = (),
        keys: Sequence[str] = (),
    ) -> None:
        self.tmp = tmp
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db = tmp / "jobs.db"
        self.ledger = tmp / "ledger.txt"
        self.cmd = [
            sys.executable,
            "-m",
            "openmle",
            "serve",
            "--db",
            str(self.db),
            "--task-root",
            str(roots),
            "--sandbox",
            sandbox,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--cpu-slots",
            str(slots),
            "--log-level",
            "warning",
            *args,
        ]
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
            "OPENMLE_SERVICE_API_KEYS": ",".join(keys or [KEY]),
            "OPENMLE_TEST_LEDGER": str(self.ledger),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def log(self) -> str:
        """The output of the latest start."""
        return (self.tmp / f"server-{self.starts}.log").read_text()

    def launch(self) -> subprocess.Popen[bytes]:
        """Start the server process (working directory: ``tmp``) without waiting for it."""
        self.starts += 1
        with (self.tmp / f"server-{self.starts}.log").open("wb") as log:
            self.proc = subprocess.Popen(
                self.cmd,
                env=self.env,
                cwd=self.tmp,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self.proc

    def start(self) -> None:
        """Start the server and wait until ``/health`` answers."""
        self.launch()
        assert self.proc is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, (self.tmp / f"server-{self.starts}.log").read_text()
            try:
                if httpx.get(f"{self.url}/health", timeout=1).json()["status"] == "ok":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        raise AssertionError("the job service did not start within 60 s")

    def refused(self) -> tuple[int, str]:
        """Start the server expecting it to stop by itself within 60 s: its exit status and
        output (fails, stopping it, if it starts and stays)."""
        proc = self.launch()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            self.stop()
            raise AssertionError(f"the service started:\n{self.log()}") from None
        return proc.returncode, self.log()

    def kill9(self) -> None:
        """``kill -9`` the server process (its program children are left to finish alone)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """Stop gracefully (SIGTERM), then make sure the whole process group is gone."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc = None

    def ledger_lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def rows(self) -> list[dict[str, Any]]:
        db = sqlite3.connect(self.db)
        db.row_factory = sqlite3.Row
        try:
            return [dict(r) for r in db.execute("SELECT * FROM jobs")]
        finally:
            db.close()
