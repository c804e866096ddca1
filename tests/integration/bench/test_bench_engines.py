"""`openmle bench` on the engines the search has: a local Ray cluster and `openmle serve`.

The same miniature (2 competitions x 1 seed, 2 steps, the offline model: deterministic for a
seed) is benched on the local sandbox, on Ray and on a job service started here on loopback;
the three reports are the same. The bench over the service is killed (SIGKILL) once a run has
finished and ``bench resume`` completes it, every step exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from tests.integration.bench.conftest import IDS, STEPS, bench_here, comparable
from tests.integration.service._server import KEY, Server

from openmle.search import read_journal

pytest.importorskip("yaml")
pytest.importorskip("pandas")

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_bench_on_ray_equals_local(
    campaign_mini: tuple[Path, Path],
    tmp_path: Path,
    campaign_local: Any,
    ray_cluster: Any,
) -> None:
    out = tmp_path / "ray"
    got = bench_here(campaign_mini, out, "ray")
    outcomes = {
        rd.parent.name: [(r["node"]["outcome"], r["node"].get("score")) for r in read_journal(rd)
                         if r["event"] == "node"]
        for rd in out.glob("runs/*/seed-0")
    }  # fmt: skip
    assert got == campaign_local, outcomes
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["sandbox"] == "ray"
    # every graded test submission was kept in the bench directory by the workers
    kept = sorted(out.glob("submissions/*/seed-0/submission.csv"))
    assert [p.parts[-3] for p in kept] == sorted(
        r["competition_id"] for r in campaign_local["runs"] if r["submission_exists"]
    )


def _env(url: str) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["OPENMLE_SERVICE_API_KEY"] = KEY
    return env


def _has_node(journal: Path) -> bool:
    """Whether ``journal`` (written by a live run) holds a node record yet."""
    try:
        return b'"event":"node"' in journal.read_bytes()
    except OSError:
        return False


def test_bench_on_the_job_service_killed_and_resumed_equals_local(
    campaign_mini: tuple[Path, Path], tmp_path: Path, campaign_local: Any
) -> None:
    pytest.importorskip("uvicorn", reason="the 'service' extra is not installed")
    registry, data = campaign_mini
    roots = tmp_path / "benches"
    roots.mkdir()
    server = Server(
        tmp_path,
        roots,
        slots=2,
        sandbox="openmle.bench:bench_task_sandbox",
        args=[
            *("--sandbox-option", f"registries={registry}"),
            *("--sandbox-option", f"data_roots={data}"),
        ],
    )
    server.start()
    try:
        out = roots / "svc"
        url = f"service:{server.url}"
        cmd = [
            sys.executable, "-m", "openmle", "bench", "run", ",".join(IDS), "--data", str(data),
            "--registry", str(registry), "--model", "offline", "--seeds", "1",
            "--budget", f"steps={STEPS}", "--out", str(out), "--time-limit", "600",
            "--sandbox", url, "--quiet",
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd, env=_env(server.url), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        killed = False
        while proc.poll() is None and time.monotonic() < deadline:
            # killed mid-search, once a run has journaled its first node (killing at the first
            # bench_result.json raced the other run, which runs beside it on the service's
            # second slot and could finish within the same poll)
            if any(_has_node(j) for j in out.glob("runs/*/seed-0/journal.jsonl")):
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.05)
        proc.wait(30)
        assert killed, "the bench finished before it could be killed"
        assert len(list(out.glob("runs/*/seed-0/bench_result.json"))) < len(IDS)
        # a recorded service URL is used only when named again
        refused = subprocess.run(
            [sys.executable, "-m", "openmle", "bench", "resume", str(out), "--quiet"],
            env=_env(server.url), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert refused.returncode == 2 and "--sandbox" in refused.stderr
        done = subprocess.run(
            [sys.executable, "-m", "openmle", "bench", "resume", str(out), "--sandbox", url,
             "--json"],
            env=_env(server.url), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:] + server.log()[-3000:]
        assert json.loads(done.stdout)["runs"] == len(IDS)
        for rd in out.glob("runs/*/seed-0"):
            steps = [r["node"]["step"] for r in read_journal(rd) if r["event"] == "node"]
            assert sorted(steps) == list(range(STEPS)), (rd, steps)  # each step once
        assert comparable(out) == campaign_local
        markers = sorted(p.parent.name for p in out.glob("tasks/*/bench-task.json"))
        assert markers == sorted(f"{c}@seed-0" for c in IDS)
        assert server.rows(), "no job went through the service"
    finally:
        server.stop()
