"""Shared by the campaign tests (engines, launchers): the miniature every one benches and
the local sandbox's report of it
(2 competitions x 1 seed, 2 steps, the offline model: deterministic for a seed)."""

from __future__ import annotations

import json
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


@pytest.fixture(scope="module")
def campaign_mini(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build(tmp_path_factory.mktemp("minibench"))


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


@pytest.fixture(scope="module")
def campaign_local(
    campaign_mini: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Any:
    out = tmp_path_factory.mktemp("local") / "bench"
    rep = bench_here(campaign_mini, out, "local")
    assert len(rep["runs"]) == len(IDS)
    assert any(r["valid_submission"] for r in rep["runs"])
    return rep
