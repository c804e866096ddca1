"""Trainer steps reach a tracker: ``StepTracker`` as ``on_step`` (SFT metrics and rollout
steps), and ``openmle train sft --track`` logs every optimiser step's loss, gradient norm and
learning rate."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from tests.unit.cli.test_train_cli import _losses, _toml

from openmle._cli import main
from openmle.tracking import JSONL_FILE
from openmle.train import StepTracker

pytestmark = pytest.mark.torch


class Recording:
    def __init__(self) -> None:
        self.rows: list[tuple[dict[str, float], int | None]] = []

    def log_params(self, params: Mapping[str, str]) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        self.rows.append((dict(metrics), step))

    def log_artifact(self, path: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_step_tracker_logs_trainer_metrics_and_rollout_steps() -> None:
    t = Recording()
    on_step = StepTracker(t)
    on_step({"loss": 1.5, "grad_norm": 0.25, "lr": 1e-3, "step": 4.0, "tokens": 10})
    rollout = SimpleNamespace(
        step=7, metrics={"loss": 0.5, "step": 8.0}, mean_reward=0.75, staleness=(0, 2)
    )
    on_step(rollout)
    on_step(SimpleNamespace(step=8, metrics={}, mean_reward=float("nan"), staleness=()))
    assert t.rows == [
        ({"train/loss": 1.5, "train/grad_norm": 0.25, "train/lr": 1e-3, "train/tokens": 10.0}, 4),
        ({"train/loss": 0.5, "train/reward": 0.75, "train/staleness": 2.0}, 7),
    ]  # the third step had no finite value: nothing logged


def test_train_sft_track_jsonl_logs_every_step(tmp_path: Path) -> None:
    config = _toml(tmp_path, out="run", max_steps=3)
    track = tmp_path / "track"
    assert main(["train", "sft", str(config), "--track", f"jsonl:{track}"]) == 0
    recs = [json.loads(x) for x in (track / "run" / JSONL_FILE).read_text().splitlines()]
    steps = [r for r in recs if r["kind"] == "metrics"]
    assert [r["step"] for r in steps] == [1, 2, 3]
    assert [r["metrics"]["train/loss"] for r in steps] == pytest.approx(_losses(tmp_path / "run"))
    assert all({"train/grad_norm", "train/lr"} <= set(r["metrics"]) for r in steps)
    assert recs[-1]["kind"] == "close"
