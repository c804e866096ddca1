"""Where each run of a launched bench stands, from the files its tasks wrote (read as
untrusted), without a scheduler."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import cast

import pytest

from openmle.bench import BenchConfig, Benchmark, BenchRun, launch_status
from openmle.bench._launchers import LOST_AFTER_S, _write


class _Bench:
    """Just what ``BenchRun.create`` asks of a benchmark (the launch states never open it)."""

    def manifest_entries(self, competitions: object) -> dict[str, str]:
        return {}


def _bench(tmp_path: Path) -> BenchRun:
    config = BenchConfig(
        suite="custom",
        competitions=("a", "b", "c", "d", "e", "f"),
        seeds=(0,),
        model="offline",
        data_dir=str(tmp_path),
        benchmark="naturebench",
    )
    return BenchRun.create(tmp_path / "bench", config, cast(Benchmark, _Bench()))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_states_from_heartbeats_results_and_the_launch_record(tmp_path: Path) -> None:
    run = _bench(tmp_path)
    here = socket.gethostname()
    now = 1_000_000.0
    # a: finished (its result is written)
    result = run.run_dir("a", 0) / "bench_result.json"
    result.parent.mkdir(parents=True)
    result.write_text(json.dumps({"report": {"competition_id": "a", "seed": 0}}))
    state = run.path / "launch" / "state"
    me = os.getpid()
    _write(state / "b@seed-0.json", {"state": "running", "beat": now - 5, "host": here, "pid": me})
    _write(state / "c@seed-0.json", {"state": "running", "beat": now - 5, "host": here,
                                     "pid": _dead_pid()})  # fmt: skip
    _write(state / "d@seed-0.json", {"state": "running", "beat": now - LOST_AFTER_S - 1,
                                     "host": "elsewhere", "pid": 7})  # fmt: skip
    _write(state / "e@seed-0.json", {"state": "failed", "beat": now, "host": here, "pid": me})
    _write(run.path / "launch" / "launch.json", {"launcher": "local", "host": here,
           "jobs": {"f@seed-0": str(me), "b@seed-0": "1"}})  # fmt: skip
    got = {r.competition_id: r.state for r in launch_status(run.path, now=now)}
    assert got == {
        "a": "finished",
        "b": "running",  # fresh heartbeat, its process alive
        "c": "lost",  # its process on this host is dead
        "d": "lost",  # another host, heartbeat too old
        "e": "failed",  # its task ended without a result
        "f": "queued",  # submitted, its (local) job process alive
    }
    _write(run.path / "launch" / "launch.json", {"launcher": "local", "host": here,
           "jobs": {"f@seed-0": str(_dead_pid())}})  # fmt: skip
    assert {r.competition_id: r.state for r in launch_status(run.path, now=now)}["f"] == "stopped"


def test_hostile_launch_files_count_as_absent(tmp_path: Path) -> None:
    run = _bench(tmp_path)
    state = run.path / "launch" / "state"
    state.mkdir(parents=True)
    (state / "a@seed-0.json").write_text("{" * 100_000)  # nested too deep / too big
    (tmp_path / "real.json").write_text(json.dumps({"state": "running", "beat": 1e18, "pid": 1}))
    (state / "b@seed-0.json").symlink_to(tmp_path / "real.json")  # never followed
    (state / "c@seed-0.json").write_text(json.dumps({"state": "running", "beat": "soon"}))
    (state / "d@seed-0.json").write_text(json.dumps(["running"]))
    (run.path / "launch" / "launch.json").write_text(json.dumps({"jobs": ["not", "a", "map"]}))
    rows = launch_status(run.path, now=0.0)
    assert {r.state for r in rows} == {"pending"}
    assert all(len(r.host) <= 128 and len(r.job_id) <= 64 for r in rows)


def test_not_a_bench_directory(tmp_path: Path) -> None:
    from openmle.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match="not a bench directory"):
        launch_status(tmp_path)
