"""Kaggle-shaped raw folders build, with the offline model through a LocalSandbox, into the
task their sample submission asks for, and the package validates."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests._kaggle_raw import (
    probabilities_like,
    regression_like,
    time_ordered_like,
    titanic_like,
)
from tests.integration.builder._steps import build, validate

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize(
    ("kind", "sample", "metric"),
    [
        ("titanic", "gender_submission.csv", "accuracy"),
        ("probabilities", "sampleSubmission.csv", "log_loss"),
        ("regression", "sample_submission.csv", "rmsle"),
    ],
)
def test_kaggle_shaped_folder_builds_the_sample_submissions_task(
    tmp_path: Path, kind: str, sample: str, metric: str
) -> None:
    raw = tmp_path / "raw"
    if kind == "titanic":
        titanic_like(raw)
    elif kind == "probabilities":
        probabilities_like(raw)
    else:
        regression_like(raw, "the root mean squared logarithmic error")
    out = tmp_path / "pkg"
    result = build(raw, out)
    assert result.status == "built", result.reason
    public = out / "data" / "public"
    assert (public / "sample_submission.csv").read_text().splitlines()[0] == (
        (raw / sample).read_text().splitlines()[0]
    )
    assert f'metric = "{metric}"' in (out / "task.toml").read_text()
    # Only the labelled file is split: the unlabeled test.csv rows are not in the package.
    labelled = len((raw / "train.csv").read_text().splitlines()) - 1
    rows = sum(len((public / f).read_text().splitlines()) - 1 for f in ("train.csv", "test.csv"))
    assert rows == labelled
    if kind == "regression":
        assert (public / "description.txt").read_text().startswith("# ")
        assert "Predict the sales price" in (public / "description.txt").read_text()
    validate(out)


def test_goal_and_metric_steer_thebuild(tmp_path: Path) -> None:
    raw = titanic_like(tmp_path / "raw")
    (raw / "gender_submission.csv").unlink()
    result = build(raw, tmp_path / "pkg", goal="predict Survived", metric="macro_f1")
    assert result.status == "built", result.reason
    spec = result.record["spec"]["spec"]
    assert (spec["target"], spec["metric"]) == ("Survived", "macro_f1")
    assert result.record["inventory"]["hints"]["goal"] == "predict Survived"


def test_task_build_warns_of_a_goal_naming_no_column_and_prints_target_and_metric(
    tmp_path: Path,
) -> None:
    """`openmle task build RAW --goal "predict species"` (iris: the label column is `target`)
    built with a target the goal did not name and said only `built X`."""
    raw = tmp_path / "iris"
    raw.mkdir()
    rows = [f"{i % 7}.{i % 10},{(i * 3) % 5}.{i % 4},{i % 3}" for i in range(150)]
    (raw / "data.csv").write_text("sepal length (cm),petal width (cm),target\n" + "\n".join(rows))
    out = tmp_path / "pkg"
    argv = ["task", "build", str(raw), "--out", str(out), "--no-solvability"]
    proc = subprocess.run(
        [sys.executable, "-m", "openmle", *argv, "--goal", "predict species"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith(f"built {out}: predict 'target' of 'data.csv', metric ")
    (warning,) = [line for line in proc.stderr.splitlines() if "warning" in line]
    assert warning.startswith("openmle: warning: the goal (--goal) 'predict species' names no")
    assert "sepal length (cm), petal width (cm), target" in warning
    record = json.loads((out / "builder" / "record.json").read_text())
    assert record["warnings"] == [warning.removeprefix("openmle: warning: ")]


def test_search_data_builds_into_the_run_directory_and_searches(tmp_path: Path) -> None:
    raw = titanic_like(tmp_path / "raw")
    (raw / "gender_submission.csv").unlink()
    run = tmp_path / "run"
    openmle = [sys.executable, "-m", "openmle", "search"]
    flags = ["--goal", "predict Survived", "--steps", "2", "--out", str(run), "--json"]
    proc = subprocess.run(
        [*openmle, "--data", str(raw), *flags],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "holds a run with no committed step" not in proc.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    data = manifest["extra"]["cli"]["data"]
    assert data["package"] == "task" and data["target"] == "Survived"
    assert data["goal"] == "predict Survived" and data["raw_dir"] == str(raw.absolute())
    assert manifest["task"]["name"] == str((run / "task").absolute())
    description = (run / "task" / "data" / "public" / "description.txt").read_text()
    assert "The user's goal: predict Survived" in description
    # Usage errors are named and write nothing.
    for flags in (["--steps", "1"], ["--task", "tabular-binary", "--goal", "x"]):
        bad = subprocess.run([*openmle, *flags], capture_output=True, text=True, check=False)
        assert bad.returncode == 2, bad.stderr
        assert "--data" in bad.stderr
    bad = subprocess.run(
        [*openmle, "--data", str(raw), "--metric", "bogus", "--out", str(tmp_path / "r2")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and "--metric" in bad.stderr
    assert not (tmp_path / "r2").exists()


def test_a_time_ordered_table_builds_split_by_time_and_validates(tmp_path: Path) -> None:
    raw = time_ordered_like(tmp_path / "raw")
    out = tmp_path / "pkg"
    result = build(raw, out)
    assert result.status == "built", result.reason
    record = result.record
    assert record["spec"]["spec"]["split"] == {"kind": "time", "column": "date"}
    assert record["gate"]["passed"] is True
    solv = record["solvability"]
    assert solv["solvable"] is True
    assert solv["model"]["score"] < solv["constant"]["score"]  # rmse: lower is better
    public = out / "data" / "public"

    def dates(name: str) -> list[str]:
        head, *rows = (public / name).read_text().splitlines()
        j = head.split(",").index("date")
        return [r.split(",")[j] for r in rows]

    train_dates, test_dates = dates("train.csv"), dates("test.csv")
    assert max(train_dates) <= min(test_dates)
    validate(out)
