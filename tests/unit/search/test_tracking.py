"""A tracked search: the manifest as parameters, every node's metrics at its step, the run's
summary; tracking runs off the event loop and a failing tracker never ends the search."""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
from collections.abc import Mapping
from pathlib import Path

import anyio
import pytest

from openmle import Job, ModelRequest, ModelResponse, Outcome, RunResult, Usage
from openmle._cli import main
from openmle.search import (
    Budget,
    ResumeSpec,
    SearchConfig,
    SearchSpec,
    arun_search,
    resume_search,
    run_search,
)
from openmle.testing import FunctionSandbox, FunctionSelector
from openmle.tracking import JSONL_FILE, JsonlTracker


class Model:
    async def complete(self, request: ModelRequest) -> ModelResponse:
        step = int(request.metadata["step"])
        body = "raise SystemExit(1)" if step == 1 else f"score = {0.1 + 0.01 * step}"
        return ModelResponse(
            text=f"plan {step}\n```python\n{body}\n```",
            usage=Usage(prompt_tokens=10, completion_tokens=5),
            model="m",
        )


def grade(job: Job) -> RunResult:
    if "score = " not in job.code:
        return RunResult(outcome=Outcome.RUNTIME_ERROR, error_signature="SystemExit: 1")
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


def spec(steps: int = 4) -> SearchSpec:
    return SearchSpec(
        task="toy",
        higher_is_better=True,
        model=Model(),
        sandbox=FunctionSandbox(grade),
        selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
        budget=Budget(steps=steps),
        config=SearchConfig(initial_drafts=2, seed=3),
        workers=1,
        ordered=True,
    )


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in (path / JSONL_FILE).read_text().splitlines()]


def test_a_tracked_search_logs_manifest_nodes_and_summary(tmp_path: Path) -> None:
    t = JsonlTracker(tmp_path / "track", run_name="run")
    result = run_search(spec(), run_dir=tmp_path / "run", quiet=True, track=t)
    t.close()
    recs = records(t.path)
    params = [r["params"] for r in recs if r["kind"] == "params"]
    assert isinstance(params[0], dict)
    assert params[0]["task.name"] == "toy" and params[0]["budget.steps"] == "4"
    assert params[-1] == {"result.stop_reason": "steps", "result.best_node": result.best.node_id}  # type: ignore[union-attr]
    metrics = [r for r in recs if r["kind"] == "metrics"]
    nodes = [r for r in metrics if "node/ok" in r["metrics"]]  # type: ignore[operator]
    assert [r["step"] for r in nodes] == [n.step for n in result.nodes]
    by_step = {r["step"]: r["metrics"] for r in nodes}
    failed = by_step[1]
    assert isinstance(failed, dict)
    assert failed["node/ok"] == 0.0 and "node/score" not in failed
    assert failed["outcome/runtime_error"] == 1.0
    assert failed["node/tokens"] == 15.0
    ok = by_step[0]
    assert isinstance(ok, dict)
    assert ok["node/score"] == pytest.approx(0.1) and ok["operator/draft"] == 1.0
    last = nodes[-1]["metrics"]
    assert isinstance(last, dict)
    assert last["best/score"] == pytest.approx(result.best_valid_score)
    assert sum(v for k, v in last.items() if k.startswith("outcome/")) == len(result.nodes)
    summary = next(r["metrics"] for r in metrics if "run/nodes" in r["metrics"])  # type: ignore[operator]
    assert isinstance(summary, dict)
    assert summary["run/nodes"] == len(result.nodes)
    assert summary["run/best_valid_score"] == pytest.approx(result.best_valid_score)
    assert summary["run/spent/steps"] == 4.0
    test = next(r["metrics"] for r in metrics if "test/ok" in r["metrics"])  # type: ignore[operator]
    assert test == {"test/ok": 1.0, "test/score": pytest.approx(result.test_score)}


class Failing:
    def __init__(self) -> None:
        self.threads: set[str] = set()
        self.calls = 0

    def log_params(self, params: Mapping[str, str]) -> None:
        self.threads.add(threading.current_thread().name)

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        self.threads.add(threading.current_thread().name)
        self.calls += 1
        raise OSError("tracker server gone")

    def log_artifact(self, path: object) -> None:
        raise AssertionError("not called")

    def close(self) -> None:
        pass


def test_a_failing_tracker_never_ends_the_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t = Failing()
    loop_thread: list[str] = []

    async def go() -> object:
        loop_thread.append(threading.current_thread().name)
        return await arun_search(spec(), quiet=True, track=t)

    with caplog.at_level(logging.WARNING, logger="openmle.tracking"):
        result = anyio.run(go)
    assert len(result.nodes) == 4  # type: ignore[attr-defined]
    assert t.calls == 1  # the first failure turned tracking off
    assert loop_thread[0] not in t.threads  # called off the event loop
    assert sum("tracking to Failing failed" in r.getMessage() for r in caplog.records) == 1


def test_search_cli_track_jsonl_logs_the_report_as_artifact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    rc = main(["search", "--task", "tabular-binary", "--budget", "steps=2", "--out", str(out),
               "--quiet", "--json", "--track", f"jsonl:{tmp_path / 'track'}"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    recs = records(tmp_path / "track" / "run")
    assert recs[0]["kind"] == "params"
    assert [r["name"] for r in recs if r["kind"] == "artifact"] == ["report.html"]
    assert (tmp_path / "track" / "run" / "artifacts" / "report.html").is_file()
    assert recs[-1]["kind"] == "close"


def test_search_cli_refuses_an_unknown_tracker(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["search", "--task", "tabular-binary", "--track", "neptune"])
    assert exc.value.code == 2
    assert "unknown tracker 'neptune'" in capsys.readouterr().err


def test_a_tracked_resume_logs_the_manifest_and_the_new_nodes(tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = run_search(spec(steps=2), run_dir=run, quiet=True)
    t = JsonlTracker(tmp_path / "track", run_name="resumed")
    more = ResumeSpec(
        model=Model(),
        sandbox=FunctionSandbox(grade),
        selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
        budget=Budget(steps=4),
    )
    result = resume_search(run, more, quiet=True, track=t)
    t.close()
    recs = records(t.path)
    assert recs[0]["params"]["task.name"] == "toy"  # type: ignore[index]
    steps = [r["step"] for r in recs if r["kind"] == "metrics" and "node/ok" in r["metrics"]]  # type: ignore[operator]
    assert steps == [n.step for n in result.nodes[len(first.nodes) :]] == [2, 3]


def test_search_cli_names_a_missing_tracker_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a)
    )
    monkeypatch.chdir(tmp_path)
    # a missing extra is the machine's fault: MissingDependency, exit 1 (errors.md), no header
    assert main(["search", "--task", "tabular-binary", "--track", "mlflow:./mlruns"]) == 1
    out, err = capsys.readouterr()
    assert "pip install 'openmle[mlflow]'" in err
    assert "openmle search" not in out


@pytest.mark.parametrize("where", ["/proc/openmle-x", "afile", "afile/sub"])
def test_search_cli_refuses_a_track_directory_it_cannot_use(
    where: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was a FileNotFoundError / FileExistsError traceback after the run header."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    with pytest.raises(SystemExit) as exc:
        main(["search", "--task", "tabular-binary", "--budget", "steps=1", "--track",
              f"jsonl:{where}"])  # fmt: skip
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert "--track" in err and "name a directory you can write to" in err
    assert "Traceback" not in err and out == ""


def test_a_command_that_fails_before_tracking_leaves_no_track_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--track`` made its directory when the flags were parsed, so a command refused later
    (here an unknown --task) left an empty ``trk/a``; now the tracker makes it when it opens.
    """
    monkeypatch.chdir(tmp_path)
    assert main(["search", "--task", "nosuch", "--track", "jsonl:trk/a"]) == 2
    assert main(["search", "--task", "tabular-binary", "--sandbox", "nosuch", "--track",
                 "jsonl"]) == 2  # fmt: skip
    assert "--task" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
