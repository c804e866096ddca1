"""`openmle bench run --launcher slurm|local`: each competition x seed run one task of a job
array (through submitit) on the shared bench directory.

- A real single-node Slurm (Debian's slurmctld/slurmd, started here; see ``_slurm.py``): the
  runs are submitted, `bench status` shows them queued/running/finished; one task's process is
  killed (SIGKILL) in the middle of its run, `bench status` says it is lost,
  `bench resume --launcher slurm` submits it again and the bench ends with the report of the
  local sandbox, every step of every run exactly once.
- submitit's local executor (no Slurm): the same report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.integration.bench._slurm import missing, slurm_cluster
from tests.integration.bench.conftest import IDS, STEPS, comparable

from openmle.search import read_journal

pytest.importorskip("yaml")
pytest.importorskip("pandas")
pytest.importorskip("submitit", reason="the 'slurm' extra is not installed")

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, **(extra or {})}
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openmle", "bench", *args],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def _status(env: dict[str, str], out: Path) -> dict[str, str]:
    done = _cli(env, "status", str(out), "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    return {r["competition_id"]: r["state"] for r in json.loads(done.stdout)}


def _wait(
    env: dict[str, str], out: Path, until: Callable[[dict[str, str]], bool], seen: set[str]
) -> dict[str, str]:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        st = _status(env, out)
        seen.update(st.values())
        if until(st):
            return st
        time.sleep(0.5)
    raise AssertionError(f"the runs never got there: {st}")


def _submit(mini: tuple[Path, Path], out: Path, launcher: str, *opts: str) -> list[str]:
    registry, data = mini
    return [
        "run", ",".join(IDS), "--data", str(data), "--registry", str(registry),
        "--model", "offline", "--seeds", "1", "--budget", f"steps={STEPS}", "--out", str(out),
        "--time-limit", "600", "--launcher", launcher, "--json", *opts,
    ]  # fmt: skip


def _nodes(rd: Path) -> list[int]:
    return sorted(r["node"]["step"] for r in read_journal(rd) if r["event"] == "node")


def test_slurm_array_killed_task_resumed_equals_local(
    campaign_mini: tuple[Path, Path], campaign_local: Any, tmp_path: Path
) -> None:
    why = missing()
    if why is not None:
        pytest.skip(f"no single-node Slurm here: {why}")
    out = tmp_path / "bench"
    with slurm_cluster(tmp_path / "slurm") as extra:
        env = _env(extra)
        opts = (
            "--launcher-option",
            "slurm_partition=debug",
            "--launcher-option",
            "cpus_per_task=1",
        )
        done = _cli(env, *_submit(campaign_mini, out, "slurm", *opts))
        assert done.returncode == 0, done.stderr[-3000:]
        jobs = json.loads(done.stdout)["jobs"]
        assert sorted(jobs) == sorted(f"{c}@seed-0" for c in IDS)
        seen: set[str] = set()
        victim = IDS[0]
        rd = out / "runs" / victim / "seed-0"

        def mid_run(st: dict[str, str]) -> bool:
            return st[victim] == "running" and len(_nodes(rd)) >= 1 if rd.is_dir() else False

        _wait(env, out, mid_run, seen)
        assert not (rd / "bench_result.json").exists(), "the victim finished before the kill"
        # kill -9 the task's process in the middle of its run (same host: its state says)
        state = json.loads((out / "launch" / "state" / f"{victim}@seed-0.json").read_text())
        os.kill(int(state["pid"]), signal.SIGKILL)
        st = _wait(env, out, lambda s: s[victim] == "lost" and s[IDS[1]] == "finished", seen)
        assert st[victim] == "lost"
        assert "queued" in seen or "running" in seen
        again = _cli(env, "resume", str(out), "--launcher", "slurm", "--json", *opts)
        assert again.returncode == 0, again.stderr[-3000:]
        assert list(json.loads(again.stdout)["jobs"]) == [f"{victim}@seed-0"]  # only the lost
        _wait(env, out, lambda s: all(v == "finished" for v in s.values()), seen)
    for c in IDS:
        assert _nodes(out / "runs" / c / "seed-0") == list(range(STEPS))  # each step once
    assert comparable(out) == campaign_local


def test_local_executor_array_equals_local(
    campaign_mini: tuple[Path, Path], campaign_local: Any, tmp_path: Path
) -> None:
    out = tmp_path / "bench"
    env = _env()
    done = _cli(env, *_submit(campaign_mini, out, "local"))
    assert done.returncode == 0, done.stderr[-3000:]
    seen: set[str] = set()
    _wait(env, out, lambda s: all(v == "finished" for v in s.values()), seen)
    assert comparable(out) == campaign_local
    launch = json.loads((out / "launch" / "launch.json").read_text())
    assert launch["launcher"] == "local" and len(launch["jobs"]) == len(IDS)
