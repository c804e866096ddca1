"""The MLE-bench grading child's modes called in-process (``grade``, ``check_format``).

In a bench they run in the confined child (``python -I -m openmle.bench.mlebench.child``),
which coverage does not measure; here they grade files this test writes with a grader module
it writes (``repo_root`` + ``grade_fn`` as a registry names them).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from openmle.bench import competition_report
from openmle.bench.mlebench.child import check_format, grade

#: The child reads submissions as MLE-bench does (``float_precision="round_trip"``), which
#: pandas 3 deprecates; the child runs without warnings as errors.
PANDAS_DEPRECATION = "ignore:The 'float_precision' argument is deprecated"

GRADER = """
class InvalidSubmissionError(Exception):
    pass


def grade(submission, answers):
    if "y" not in submission.columns:
        raise InvalidSubmissionError("no column y")
    if len(submission) == 1:
        raise RuntimeError("a bug of the grader")
    return float((submission["y"] == answers["y"]).mean())


def nan(submission, answers):
    return float("nan")


def text(submission, answers):
    return "high"


def numpy_halfway(submission, answers):
    import numpy

    return numpy.mean([numpy.float64(0.5), numpy.float64(0.50001)])  # numpy.float64(0.500005)
"""


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(sys, "path", list(sys.path))  # grade() prepends repo_root
    module = f"grader_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(GRADER)
    (tmp_path / "answers.csv").write_text("id,y\n1,a\n2,b\n")
    (tmp_path / "sample.csv").write_text("id,y\n1,a\n2,a\n")
    return {
        "repo_root": str(tmp_path),
        "grade_fn": f"{module}:grade",
        "answers": str(tmp_path / "answers.csv"),
        "sample": str(tmp_path / "sample.csv"),
        "submission": str(tmp_path / "sub.csv"),
    }


def _with(config: dict[str, Any], submission: str, **changes: Any) -> dict[str, Any]:
    Path(config["submission"]).write_text(submission)
    return {**config, **changes}


@pytest.mark.needs("pandas")
@pytest.mark.filterwarnings(PANDAS_DEPRECATION)
def test_grade_scores_and_turns_grader_failures_into_reasons(config: dict[str, Any]) -> None:
    assert grade(_with(config, "id,y\n1,a\n2,a\n")) == {"score": 0.5, "reason": ""}
    invalid = grade(_with(config, "id,z\n1,a\n2,a\n"))
    assert invalid == {"score": None, "reason": "invalid submission: no column y"}
    bug = grade(_with(config, "id,y\n1,a\n"))
    assert bug == {"score": None, "reason": "the grader raised RuntimeError on this submission"}
    assert grade(_with(config, "")) == {  # an empty file is an empty table
        "score": None,
        "reason": "invalid submission: no column y",
    }
    module = config["grade_fn"].partition(":")[0]
    nan = grade(_with(config, "id,y\n1,a\n2,a\n", grade_fn=f"{module}:nan"))
    assert nan == {"score": None, "reason": "the grader returned a non-finite score"}
    text = grade(_with(config, "id,y\n1,a\n2,a\n", grade_fn=f"{module}:text"))
    assert text == {"score": None, "reason": "the grader returned no number"}


@pytest.mark.needs("pandas")
@pytest.mark.filterwarnings(PANDAS_DEPRECATION)
def test_grade_refuses_big_submissions_and_reports_broken_tasks(config: dict[str, Any]) -> None:
    big = grade(_with(config, "id,y\n1,a\n2,a\n", max_bytes=4))
    assert big["limit"] == "size" and big["score"] is None and "max_bytes" in big["reason"]
    missing = grade(_with(config, "id,y\n1,a\n2,a\n", grade_fn="no_such_module_xyz:grade"))
    assert missing["error"].startswith("cannot import the grader no_such_module_xyz:grade")
    odd = grade(_with(config, "id,y\n1,a\n2,a\n", answers=config["answers"] + ".parquet"))
    assert odd == {"error": "unsupported answers format: answers.csv.parquet"}


@pytest.mark.filterwarnings(PANDAS_DEPRECATION)
def test_grade_rounds_the_graders_own_value_as_mlebench_does(config: dict[str, Any]) -> None:
    """MLE-bench rounds what ``grade_fn`` returned, ``round(score, 5)``: a NumPy scalar rounds
    by NumPy's rule, so ``np.float64(0.500005)`` is 0.5 (Python's ``round`` of the float gives
    0.50001). On a lower-is-better board whose bronze threshold is 0.5 that is a medal.
    """
    module = config["grade_fn"].partition(":")[0]
    got = grade(_with(config, "id,y\n1,a\n2,a\n", grade_fn=f"{module}:numpy_halfway"))
    assert got == {"score": 0.5, "reason": ""}
    board = [0.49, 0.5, 0.6, 0.7, 0.8]  # N=5: gold and silver at row 1, bronze at row 2
    report = competition_report("c", got["score"], board, submission_exists=True)
    assert report.score == 0.5 and report.bronze_medal
    valid = grade({**config, "grade_fn": f"{module}:numpy_halfway", "mlebench_round": False})
    assert valid == {"score": 0.500005, "reason": ""}  # a validation grade: as returned


def test_check_format_compares_columns_rows_and_ids(config: dict[str, Any]) -> None:
    assert check_format(_with(config, "y,id\n2,x\n1,x\n")) == {"format_ok": True}
    columns = check_format(_with(config, "id\n1\n2\n"))
    assert columns["score"] is None and "columns differ" in columns["reason"]
    rows = check_format(_with(config, "id,y\n1,a\n3,a\n"))
    assert rows["score"] is None and "rows differ" in rows["reason"]
    big = check_format(_with(config, "id,y\n1,a\n2,a\n", max_bytes=4))
    assert big["score"] is None and "max_bytes" in big["reason"]
    no_sample = check_format({**config, "sample": config["sample"] + ".gone"})
    assert no_sample == {"error": "cannot read the sample submission (FileNotFoundError)"}
