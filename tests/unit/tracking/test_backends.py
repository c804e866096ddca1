"""Each third-party tracker writes files its own tool reads back: a tracked search read with
MLflow's ``MlflowClient``, TensorBoard's ``EventAccumulator`` and W&B's own protobuf records
(``wandb.proto``) of its offline ``.wandb`` file. Each test skips, naming the
extra, when that extra is not installed. No network: MLflow uses a local SQLite store, W&B
runs offline."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from openmle import Job, ModelRequest, ModelResponse, Outcome, RunResult, Usage
from openmle.search import Budget, SearchConfig, SearchSpec, run_search
from openmle.testing import FunctionSandbox


def needs(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"needs the {module} extra: pip install 'openmle[{module}]'")


class Model:
    async def complete(self, request: ModelRequest) -> ModelResponse:
        step = int(request.metadata["step"])
        return ModelResponse(
            text=f"plan\n```python\nscore = {0.5 + 0.1 * step}\n```",
            usage=Usage(prompt_tokens=10, completion_tokens=2),
            model="m",
        )


def grade(job: Job) -> RunResult:
    score = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=score, split=job.split, runtime_s=0.5)


STEPS = 3


def tracked_search(tracker: Any, tmp_path: Path) -> Path:
    spec = SearchSpec(
        task="toy",
        higher_is_better=True,
        model=Model(),
        sandbox=FunctionSandbox(grade),
        budget=Budget(steps=STEPS),
        config=SearchConfig(initial_drafts=2, seed=1),
        workers=1,
        ordered=True,
    )
    run = tmp_path / "run"
    run_search(spec, run_dir=run, quiet=True, track=tracker)
    report = tmp_path / "report.html"
    report.write_text("<html>report</html>")
    tracker.log_artifact(report)
    tracker.close()
    return run


def test_mlflow_local_store_reads_back_with_mlflow_client(tmp_path: Path) -> None:
    needs("mlflow")
    from mlflow.tracking import MlflowClient

    from openmle.tracking import MlflowTracker, mlflow_uri, open_tracker

    store = tmp_path / "mlruns"
    tracker = open_tracker(f"mlflow:{store}", run_name="toy-run")
    assert isinstance(tracker, MlflowTracker)
    tracked_search(tracker, tmp_path)
    assert mlflow_uri(store) == f"sqlite:///{store.resolve()}/mlflow.db"
    assert (store / "mlflow.db").is_file()  # in DIR, not relative to the working directory
    client = MlflowClient(tracking_uri=mlflow_uri(store))
    run = client.get_run(tracker.run_id)
    assert run.info.run_name == "toy-run" and run.info.status == "FINISHED"
    assert run.data.params["task.name"] == "toy"
    assert run.data.params["budget.steps"] == str(STEPS)
    assert run.data.params["result.stop_reason"] == "steps"
    history = client.get_metric_history(tracker.run_id, "node/score")
    assert sorted(m.step for m in history) == list(range(STEPS))
    assert sorted(m.value for m in history) == pytest.approx([0.5, 0.6, 0.7])
    assert run.data.metrics["run/nodes"] == STEPS
    assert [a.path for a in client.list_artifacts(tracker.run_id)] == ["report.html"]
    assert list(store.glob("artifacts/*/*/artifacts/report.html"))


def test_tensorboard_event_files_read_back_with_event_accumulator(tmp_path: Path) -> None:
    needs("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from openmle.tracking import TensorBoardTracker, open_tracker

    tracker = open_tracker(f"tensorboard:{tmp_path / 'tb'}", run_name="toy-run")
    assert isinstance(tracker, TensorBoardTracker)
    tracked_search(tracker, tmp_path)
    acc = EventAccumulator(str(tmp_path / "tb" / "toy-run"))
    acc.Reload()
    assert {"node/score", "node/tokens", "best/score", "run/nodes"} <= set(acc.Tags()["scalars"])
    scores = acc.Scalars("node/score")
    assert [e.step for e in scores] == list(range(STEPS))
    assert [e.value for e in scores] == pytest.approx([0.5, 0.6, 0.7])
    assert [e.value for e in acc.Scalars("node/tokens")] == [12.0] * STEPS
    params = json.loads((tracker.path / "params.json").read_text())
    assert params["task.name"] == "toy"
    assert (tracker.path / "artifacts" / "report.html").read_text() == "<html>report</html>"


def wandb_records(file: Path) -> list[Any]:
    """The records of a ``.wandb`` file, decoded with W&B's own protobuf ``Record``.

    W&B 0.31 has no Python reader of its run files any more (its Go core writes them), so the
    framing is read here as W&B documents it: a 7-byte header (``:W&B``, magic, version), then
    LevelDB log records (4-byte checksum, 2-byte length, 1-byte type: full, first, middle,
    last) in 32 KiB blocks.
    """
    from wandb.proto import wandb_internal_pb2

    pb: Any = wandb_internal_pb2  # generated protobuf module
    data = file.read_bytes()
    assert data[:4] == b":W&B"
    block, pos, parts, out = 32768, 7, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # padding to the end of the block
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        parts = chunk if kind in (1, 2) else parts + chunk
        if kind in (1, 4):
            record = pb.Record()
            record.ParseFromString(parts)
            out.append(record)
    return out


def wandb_history(run_dir: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The history rows and the config of an offline run."""
    (file,) = run_dir.glob("*.wandb")
    rows, config = [], {}
    for record in wandb_records(file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            rows.append(
                {
                    (item.key or "/".join(item.nested_key)): json.loads(item.value_json)
                    for item in record.history.item
                }
            )
        elif kind == "config":
            for item in record.config.update:
                config[item.key or "/".join(item.nested_key)] = json.loads(item.value_json)
    return rows, config


def test_wandb_offline_run_holds_the_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    needs("wandb")
    from openmle.tracking import WandbTracker, open_tracker

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_API_KEY", "")
    tracker = open_tracker(f"wandb:{tmp_path / 'wb'}", run_name="toy-run")
    assert isinstance(tracker, WandbTracker)
    run_dir = tracker.path
    tracked_search(tracker, tmp_path)
    assert run_dir.parent == tmp_path / "wb" / "wandb"
    assert run_dir.name.startswith("offline-run-")
    rows, config = wandb_history(run_dir)
    scores = [(r["step"], r["node/score"]) for r in rows if "node/score" in r]
    assert [s for s, _ in scores] == list(range(STEPS))
    assert [v for _, v in scores] == pytest.approx([0.5, 0.6, 0.7])
    assert any(r.get("run/nodes") == STEPS for r in rows)
    assert (run_dir / "files" / "report.html").read_text() == "<html>report</html>"
    assert config["task.name"] == "toy" and config["result.stop_reason"] == "steps"


@pytest.mark.parametrize(
    "spec", ["jsonl:/proc/openmle-x", "jsonl:afile", "tensorboard:/dev/null", "mlflow:afile"]
)
def test_open_tracker_refuses_a_directory_it_cannot_use(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was a FileNotFoundError / FileExistsError from mkdir."""
    from openmle.errors import InvalidArgument
    from openmle.tracking import open_tracker

    kind = spec.partition(":")[0]
    if kind != "jsonl" and importlib.util.find_spec(kind) is None:
        pytest.skip(f"the {kind} extra is not installed")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InvalidArgument, match=r"tracking directory .*name a directory"):
        open_tracker(spec, run_name="r")
