"""The grading child's entry points (``grade_files``, ``inspect_metric``) called in-process.

In a run they execute in the confined grading process (``_gradeproc --serve``), which coverage
does not measure; here the same functions grade files this test writes, with a built-in metric
and with a task's metric class.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from openmle.gym._gradeproc import grade_files, inspect_metric

METRIC_PY = """
class MeanAbsMetrics:
    higher_is_better = False

    def validate_submission(self, y_pred, y_true):
        if len(y_pred) != len(y_true):
            raise ValueError(f"expected {len(y_true)} rows, got {len(y_pred)}")

    def evaluate(self, y_true, y_pred):
        return float((y_true["y"] - y_pred["y"]).abs().mean())
"""


def _files(tmp_path: Path, submission: str) -> dict[str, Any]:
    (tmp_path / "answers.csv").write_text("id,y\n1,1.0\n2,3.0\n")
    (tmp_path / "sample.csv").write_text("id,y\n1,0\n2,0\n")
    (tmp_path / "sub.csv").write_text(submission)
    return {
        "answers": str(tmp_path / "answers.csv"),
        "sample": str(tmp_path / "sample.csv"),
        "submission": str(tmp_path / "sub.csv"),
        "id_column": "id",
        "metric": "rmse",
        "metric_py": None,
    }


def test_a_builtin_metric_grades_rows_aligned_by_id(tmp_path: Path) -> None:
    got = grade_files(_files(tmp_path, "id,y\n2,3.0\n1,2.0\n"))
    assert got["valid"] and got["reason"] == ""
    assert got["score"] == pytest.approx((0.5) ** 0.5)


def test_an_id_column_the_files_lack_grades_by_row_order(tmp_path: Path) -> None:
    config = _files(tmp_path, "y\n1.0\n2.0\n")
    Path(config["answers"]).write_text("y\n1.0\n3.0\n")
    Path(config["sample"]).write_text("y\n0\n0\n")
    assert grade_files(config) == {"score": pytest.approx(0.5**0.5), "valid": True, "reason": ""}


def test_bad_submissions_and_broken_tasks_are_outcomes(tmp_path: Path) -> None:
    missing = grade_files(_files(tmp_path, "id\n1\n2\n"))
    assert not missing["valid"] and missing["score"] is None and missing["reason"]
    config = _files(tmp_path, "id,y\n1,1\n2,3\n")
    Path(config["answers"]).write_bytes(b"")
    broken = grade_files(config)
    assert not broken["valid"] and broken["reason"].startswith("the task is broken")
    nan = grade_files({**_files(tmp_path, "id,y\n1,nan\n2,3\n"), "metric": "mae"})
    assert not nan["valid"] and nan["reason"]


@pytest.mark.needs("pandas")
def test_a_task_metric_class_grades_and_validates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_metric_class prepends its folder
    metric = tmp_path / "metric.py"
    metric.write_text(METRIC_PY)
    config = {**_files(tmp_path, "id,y\n1,2.0\n2,3.0\n"), "metric": None, "metric_py": str(metric)}
    assert grade_files(config) == {"score": 0.5, "valid": True, "reason": ""}
    assert inspect_metric(metric) == {"name": "MeanAbsMetrics", "higher_is_better": False}
    metric.write_text(METRIC_PY.replace("return float(", "return str("))
    assert "not a number" in grade_files(config)["reason"]


@pytest.mark.needs("pandas")
def test_a_metric_class_that_rejects_masks_the_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """validate_submission's message reaches the reason with its numbers masked."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    metric = tmp_path / "metric.py"
    metric.write_text(METRIC_PY.replace("len(y_pred) != len(y_true)", "True"))
    config = {**_files(tmp_path, "id,y\n1,2.0\n2,3.0\n"), "metric": None, "metric_py": str(metric)}
    got = grade_files(config)
    assert not got["valid"] and "validate_submission rejected" in got["reason"]
    assert "expected <n> rows, got <n>" in got["reason"]


def test_inspect_metric_says_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))
    two = tmp_path / "two.py"
    two.write_text("class AMetrics: pass\nclass BMetrics: pass\n")
    assert "exactly one class" in inspect_metric(two)["error"]
    raising = tmp_path / "raising.py"
    raising.write_text("class AMetrics:\n    def __init__(self):\n        raise OSError('x')\n")
    assert "construct with no arguments" in inspect_metric(raising)["error"]
    plain = tmp_path / "plain.py"
    plain.write_text("class AMetrics:\n    higher_is_better = 'yes'\n")
    assert inspect_metric(plain) == {"name": "AMetrics", "higher_is_better": None}
