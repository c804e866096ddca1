"""A tracked bench (``openmle bench run --track``, offline model, the miniature MLE-bench): the
bench manifest as parameters, each run's summary, each competition's rates, the suite metrics
and the reports as artifacts, read back from JSONL and with each tracker's own reader."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from tests.unit.bench._minibench import build

from openmle._cli import main
from openmle.bench import track_bench
from openmle.tracking import JSONL_FILE, mlflow_uri, open_tracker

pytest.importorskip("yaml")
pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A finished two-competition, one-seed bench run with ``--track jsonl:TRACK``."""
    root = tmp_path_factory.mktemp("tracked-bench")
    registry, data = build(root / "mini")
    out, track = root / "bench", root / "track"
    rc = main(["bench", "run", "mini-tabular,mini-jsonl", "--data", str(data), "--registry",
               str(registry), "--budget", "steps=2", "--seeds", "1", "--time-limit", "120",
               "--out", str(out), "--quiet", "--track", f"jsonl:{track}"])  # fmt: skip
    assert rc == 0
    return out, track


def test_bench_run_track_jsonl_logs_runs_competitions_suite_and_reports(
    bench: tuple[Path, Path],
) -> None:
    out, track = bench
    recs = [json.loads(x) for x in (track / "bench" / JSONL_FILE).read_text().splitlines()]
    params = recs[0]["params"]
    assert recs[0]["kind"] == "params"
    assert json.loads(params["config.competitions"]) == ["mini-tabular", "mini-jsonl"]
    metrics: dict[str, float] = {}
    for r in recs:
        if r["kind"] == "metrics":
            metrics.update(r["metrics"])
    result = json.loads((out / "runs/mini-tabular/seed-0/bench_result.json").read_text())
    assert metrics["run/mini-tabular/nodes"] == result["nodes"] == 2
    assert metrics["run/mini-tabular/valid_submission"] == float(
        result["report"]["valid_submission"]
    )
    for cid in ("mini-tabular", "mini-jsonl"):
        assert metrics[f"competition/{cid}/runs"] == 1.0
        assert 0.0 <= metrics[f"competition/{cid}/valid_rate"] <= 1.0
    report = json.loads((out / "report.json").read_text())
    want = report["metrics"]["metrics"]["valid_submissions_percentage"]["mean"]
    assert metrics["suite/valid_submissions_percentage"] == pytest.approx(want)
    arts = sorted(r["name"] for r in recs if r["kind"] == "artifact")
    assert arts == ["report.html", "report.json", "report.md"]
    assert recs[-1]["kind"] == "close"


def test_a_bench_reads_back_with_mlflow_client(bench: tuple[Path, Path], tmp_path: Path) -> None:
    if importlib.util.find_spec("mlflow") is None:
        pytest.skip("needs the mlflow extra: pip install 'openmle[mlflow]'")
    from mlflow.tracking import MlflowClient

    out, _ = bench
    tracker = open_tracker(f"mlflow:{tmp_path / 'mlruns'}", run_name="bench")
    track_bench(tracker, out, artifacts=[out / "report.md"])
    tracker.close()
    client = MlflowClient(tracking_uri=mlflow_uri(tmp_path / "mlruns"))
    run = client.get_run(tracker.run_id)  # type: ignore[attr-defined]
    assert json.loads(run.data.params["config.seeds"]) == [0]
    assert run.data.metrics["run/mini-tabular/nodes"] == 2
    assert "suite/any_medal_percentage" in run.data.metrics
    assert [a.path for a in client.list_artifacts(run.info.run_id)] == ["report.md"]


def test_a_bench_reads_back_with_event_accumulator(
    bench: tuple[Path, Path], tmp_path: Path
) -> None:
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("needs the tensorboard extra: pip install 'openmle[tensorboard]'")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, _ = bench
    tracker = open_tracker(f"tensorboard:{tmp_path / 'tb'}", run_name="bench")
    track_bench(tracker, out)
    tracker.close()
    acc = EventAccumulator(str(tmp_path / "tb" / "bench"))
    acc.Reload()
    (event,) = acc.Scalars("run/mini-tabular/nodes")
    assert (event.step, event.value) == (0, 2.0)
    assert "competition/mini-jsonl/valid_rate" in acc.Tags()["scalars"]
