"""Shared by the campaign tests (engines, launchers): the miniature every one benches and
the local sandbox's report of it
(2 competitions x 1 seed, 2 steps, the offline model: deterministic for a seed)."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.integration.backends.conftest import ray_cluster  # noqa: F401 - a fixture here too
from tests.unit.bench._minibench import build, mini, mini_config

from openmle.backends import make_model
from openmle.bench import BenchConfig, arun_bench, write_report

__all__ = ["IDS", "STEPS", "bench_here", "comparable", "mini"]

IDS = ("mini-tabular", "mini-jsonl")
STEPS = 2


def _shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's folder every xdist worker sees (the base temporary folder when there
    are no workers)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "bench-campaign"


@pytest.fixture(scope="session")
def _campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The campaign's miniature and the local sandbox's report of it (``local.json``), made
    once per session by the first worker that asks (under a file lock) and read by the
    others: the tests only read both (module fixtures made them once per module before)."""
    root = _shared_dir(tmp_path_factory)
    root.mkdir(parents=True, exist_ok=True)
    report = root / "local.json"
    with (root / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not report.is_file():
            mini = build(root / "minibench")
            rep = bench_here(mini, root / "local" / "bench", "local")
            assert len(rep["runs"]) == len(IDS)
            assert any(r["valid_submission"] for r in rep["runs"])
            tmp = root / "local.json.tmp"
            tmp.write_text(json.dumps(rep))
            tmp.replace(report)
    return root / "minibench", report


@pytest.fixture
def campaign_mini(_campaign: tuple[Path, Path]) -> tuple[Path, Path]:
    """The miniature (registry, data) every campaign test benches (read only)."""
    root = _campaign[0]
    return root / "mle-bench", root / "data"


def _config(mini: tuple[Path, Path], sandbox: str) -> BenchConfig:
    return mini_config(
        mini, competitions=IDS, sandbox=sandbox, budget={"steps": STEPS}, time_limit_s=600.0
    )


def comparable(out: Path) -> dict[str, Any]:
    write_report(out)
    rep = json.loads((out / "report.json").read_text())
    runs = [{k: v for k, v in r.items() if k != "created_at"} for r in rep["runs"]]
    return {"runs": runs, "metrics": rep["metrics"]}


def bench_here(mini: tuple[Path, Path], out: Path, sandbox: str) -> dict[str, Any]:
    cfg = _config(mini, sandbox)
    anyio.run(lambda: arun_bench(out, config=cfg, model=make_model("offline")))
    return comparable(out)


@pytest.fixture
def campaign_local(_campaign: tuple[Path, Path]) -> Any:
    """The local sandbox's report of the miniature (see :func:`comparable`)."""
    return json.loads(_campaign[1].read_text())
