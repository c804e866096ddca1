"""The tracking seam without extras: ``--track`` specs, parameter flattening, the JSONL
tracker, the guard (off the caller's thread, first failure logged once then off), and the
clear error when a tracker's extra is missing."""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import pytest

from openmle.errors import InvalidArgument, MissingDependency
from openmle.tracking import (
    JSONL_FILE,
    GuardedTracker,
    JsonlTracker,
    Tracker,
    TrackSpec,
    flatten_params,
    metric_values,
    mlflow_uri,
    open_tracker,
)


def lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_spec_parses_kind_and_dir_and_refuses_unknown_kinds() -> None:
    assert TrackSpec.parse("mlflow") == TrackSpec("mlflow", None)
    assert TrackSpec.parse("JSONL:/tmp/x") == TrackSpec("jsonl", Path("/tmp/x"))
    assert TrackSpec.parse("tensorboard").where == Path("runs")
    with pytest.raises(InvalidArgument, match=r"--track: unknown tracker 'neptune'.*jsonl"):
        TrackSpec.parse("neptune")
    with pytest.raises(InvalidArgument, match="nothing after ':'"):
        TrackSpec.parse("mlflow:")


def test_spec_maps_to_trl_report_to_and_a_local_environment(tmp_path: Path) -> None:
    assert TrackSpec("wandb", tmp_path).trl_args() == {"report_to": ["wandb"]}
    assert TrackSpec("wandb", tmp_path).trl_env()["WANDB_MODE"] == "offline"
    assert TrackSpec("mlflow", tmp_path).trl_env() == {"MLFLOW_TRACKING_URI": mlflow_uri(tmp_path)}
    assert TrackSpec("tensorboard", tmp_path).trl_args() == {
        "report_to": ["tensorboard"],
        "logging_dir": str(tmp_path),
    }
    assert TrackSpec("jsonl").trl_args() == {"report_to": []}


def test_flatten_params_joins_keys_and_cuts_long_values() -> None:
    flat = flatten_params(
        {
            "task": "toy",
            "budget": {"steps": 3, "prices": None},
            "ids": [1, 2],
            "bad key!": "x" * 900,
        }
    )
    assert flat["task"] == "toy"
    assert flat["budget.steps"] == "3" and flat["budget.prices"] == "null"
    assert flat["ids"] == "[1, 2]"
    assert len(flat["bad key_"]) == 500 and flat["bad key_"].endswith("...")


def test_metric_values_keeps_finite_numbers_only() -> None:
    got = metric_values({"a": 1, "b": True, "c": float("nan"), "d": None, "e": "x", "f": 2.5})
    assert got == {"a": 1.0, "b": 1.0, "f": 2.5}


def test_jsonl_tracker_writes_lines_and_copies_artifacts(tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    report.write_text("<html></html>")
    t = JsonlTracker(tmp_path / "track", run_name="run 1/x")
    assert isinstance(t, Tracker)
    t.log_params({"task": "toy"})
    t.log_metrics({"node/score": 0.5, "skip": float("inf")}, step=3)
    t.log_artifact(report)
    t.close()
    t.close()  # idempotent
    assert t.path == tmp_path / "track" / "run_1_x"
    recs = lines(t.path / JSONL_FILE)
    assert [r["kind"] for r in recs] == ["params", "metrics", "artifact", "close"]
    assert recs[1]["step"] == 3 and recs[1]["metrics"] == {"node/score": 0.5}
    assert (t.path / str(recs[2]["path"])).read_text() == "<html></html>"
    # a second run of the same name gets its own folder
    second = JsonlTracker(tmp_path / "track", run_name="run 1/x")
    second.close()
    assert second.path.name == "run_1_x-2"


def test_jsonl_tracker_refuses_a_link_as_artifact(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("key")
    link = tmp_path / "report.html"
    link.symlink_to(secret)
    t = JsonlTracker(tmp_path / "track")
    with pytest.raises(InvalidArgument, match="not a regular file"):
        t.log_artifact(link)
    t.close()
    assert not (t.path / "artifacts").exists()


class Recording:
    def __init__(self, fail_on: int | None = None) -> None:
        self.calls: list[tuple[str, object]] = []
        self.threads: set[str] = set()
        self.fail_on = fail_on
        self.closed = False

    def _call(self, name: str, arg: object) -> None:
        self.threads.add(threading.current_thread().name)
        if self.fail_on is not None and len(self.calls) == self.fail_on:
            raise OSError("disk full")
        self.calls.append((name, arg))

    def log_params(self, params: Mapping[str, str]) -> None:
        self._call("params", dict(params))

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        self._call("metrics", (dict(metrics), step))

    def log_artifact(self, path: object) -> None:
        self._call("artifact", path)

    def close(self) -> None:
        self.closed = True


def test_guard_calls_in_order_on_its_own_thread() -> None:
    inner = Recording()
    with GuardedTracker(inner) as g:
        g.log_params({"a": 1})  # type: ignore[dict-item]
        for i in range(5):
            g.log_metrics({"x": i}, step=i)
        g.log_metrics({"nothing": float("nan")})  # no finite value: no call
    assert inner.closed
    assert inner.calls[0] == ("params", {"a": "1"})
    assert [c[1] for c in inner.calls[1:]] == [({"x": float(i)}, i) for i in range(5)]
    assert threading.current_thread().name not in inner.threads


def test_guard_logs_the_first_failure_once_then_drops_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = Recording(fail_on=1)
    g = GuardedTracker(inner, owns=False, name="flaky")
    with caplog.at_level(logging.WARNING, logger="openmle.tracking"):
        for i in range(4):
            g.log_metrics({"x": i}, step=i)
        g.close()
    assert len(inner.calls) == 1  # the first call; the second failed; the rest dropped
    assert isinstance(g.failed, OSError)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1
    assert "tracking to flaky failed (OSError: disk full)" in warnings[0]
    assert not inner.closed  # owns=False: the caller closes it
    g.log_metrics({"x": 9})  # after close: dropped, no error


@pytest.mark.parametrize(("kind", "module"), [("mlflow", "mlflow"), ("wandb", "wandb"),
                                              ("tensorboard", "tensorboard")])  # fmt: skip
def test_a_missing_extra_names_it(
    kind: str, module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    with pytest.raises(MissingDependency, match=rf"pip install 'openmle\[{kind}\]'"):
        open_tracker(f"{kind}:{tmp_path}", run_name="r")
    assert list(tmp_path.iterdir()) == []


def test_open_tracker_makes_a_jsonl_tracker_by_default_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    t = open_tracker("jsonl", run_name="r")
    t.close()
    assert (tmp_path / "openmle-tracking" / "r" / JSONL_FILE).is_file()


def test_the_wandb_default_directory_is_said_as_it_is() -> None:
    """The doc's table and --track's help said the default DIR was ./wandb (so
    ./wandb/wandb/offline-run-*); W&B writes DIR/wandb/offline-run-* with DIR '.'."""
    from pathlib import Path

    from openmle._cli._track import TRACK_HELP
    from openmle.tracking import DEFAULT_DIRS

    assert DEFAULT_DIRS["wandb"] == "."
    assert "./wandb" not in TRACK_HELP and "DIR/wandb/offline-run-*" in TRACK_HELP
    doc = Path(__file__).resolve().parents[3] / "docs" / "how-to" / "track-experiments.md"
    row = next(line for line in doc.read_text().splitlines() if line.startswith("| `wandb"))
    assert "(`./wandb`)" not in row and "`./wandb/offline-run-*`" in row
