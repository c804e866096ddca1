"""Package validation: each deterministic check reports the file and the fix, never a crash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from openmle.gym import Severity, bundled, load_task, validate_path

from .conftest import PackageBuilder, write_csv


def _problems(root: Path) -> list[str]:
    return [str(p) for p in validate_path(root).problems]


def test_good_package_passes(make_package: PackageBuilder) -> None:
    """A well-formed package has no errors, a finite sample score and every check run."""
    report = load_task(make_package()).validate()
    assert report.ok, report.problems
    assert report.sample_score is not None and report.sample_score > 0
    assert "valid_split" in report.checks and report.to_dict()["ok"] is True
    assert [p.file for p in report.warnings] == ["utils/prepare.py"]


@pytest.mark.parametrize("name", ["tabular-binary", "tabular-multiclass", "tabular-regression"])
def test_bundled_tasks_validate_cleanly(name: str) -> None:
    """Every bundled task passes validation without warnings."""
    report = bundled(name).validate()
    assert report.ok and not report.problems


@pytest.mark.needs("pandas")
@pytest.mark.parametrize("name", ["tabular-binary", "tabular-multiclass", "tabular-regression"])
def test_bundled_metric_py_agrees_with_builtin(name: str, tmp_path: Path) -> None:
    """A copy without task.toml loads as a released package and grades like the built-in."""
    task = bundled(name)
    copy = tmp_path / name
    shutil.copytree(task.root, copy)
    (copy / "task.toml").unlink()
    released = load_task(copy)
    assert released.metric_name == "utils/metric.py"
    assert released.higher_is_better == task.higher_is_better
    sample = task.public_dir("test") / "sample_submission.csv"
    a, b = task.grade(sample), released.grade(sample)
    assert a.valid and b.valid and a.score == pytest.approx(b.score, rel=1e-9)
    assert b.leaderboard_size == 120  # leaderboard.csv is picked up by name


def test_missing_files_are_named(make_package: PackageBuilder) -> None:
    """Each missing required file is an error naming it."""
    root = make_package()
    (root / "data/public/test.csv").unlink()
    (root / "data/private/test_answer.csv").unlink()
    problems = _problems(root)
    assert any("data/public/test.csv" in p and "missing" in p for p in problems)
    assert any("data/private/test_answer.csv" in p for p in problems)


def test_row_count_and_id_mismatches(make_package: PackageBuilder) -> None:
    """Row counts and id order/sets must agree across test, sample and answers."""
    root = make_package()
    write_csv(
        root / "data/public/sample_submission.csv", ["id", "y"], [[i, 0] for i in range(40, 49)]
    )
    write_csv(
        root / "data/private/test_answer.csv",
        ["id", "y"],
        [[i, 1.5] for i in reversed(range(40, 50))],
    )
    problems = _problems(root)
    assert any("sample_submission.csv" in p and "9 rows" in p for p in problems)
    assert any("test_answer.csv" in p and "different order" in p for p in problems)
    assert not any("1.5" in p for p in problems)


def test_target_leak_and_duplicate_ids(make_package: PackageBuilder) -> None:
    """A target column in test.csv and repeated ids are errors with a fix."""
    root = make_package()
    write_csv(
        root / "data/public/test.csv", ["id", "x", "y"], [[40 + i % 5, 0, 0] for i in range(10)]
    )
    report = validate_path(root)
    msgs = [str(p) for p in report.errors]
    assert any("target column(s) ['y']" in m for m in msgs)
    assert any("repeats 5 id(s)" in m for m in msgs)
    assert all(p.fix for p in report.problems)


def test_malformed_csv_and_empty_description(make_package: PackageBuilder) -> None:
    """A ragged CSV and an empty description are reported, not raised."""
    root = make_package()
    (root / "data/public/train.csv").write_text("id,x,k,y\n1,2\n")
    (root / "data/public/description.txt").write_text("  \n")
    problems = _problems(root)
    assert any("train.csv" in p and "line 2 has 2 fields" in p for p in problems)
    assert any("description.txt" in p and "empty" in p for p in problems)


def test_unloadable_package_becomes_a_problem(make_package: PackageBuilder, tmp_path: Path) -> None:
    """A broken task.toml or a missing directory is one error, not an exception."""
    report = validate_path(make_package(toml="metric = 3"))
    assert not report.ok and report.problems[0].file == "task.toml"
    missing = validate_path(tmp_path / "nowhere")
    assert not missing.ok and missing.problems[0].severity is Severity.ERROR


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        (
            "time_limit_s = -1",
            "error: task.toml: expected time_limit_s to be in (0, 604800] seconds but got -1 "
            "Fix: give a sane time limit",
        ),
        ("x = ", "error: task.toml cannot be parsed ("),
        ("colour = 1", "error: task.toml has unknown key(s) ['colour'] Fix: known keys are"),
    ],
)
def test_a_task_toml_error_names_the_file_and_the_fix_once(
    make_package: PackageBuilder, toml: str, line: str
) -> None:
    """`task validate` printed `error: task.toml: task.toml: ... give a sane time limit Fix: Fix
    the package so it loads.`: the file twice and a generic fix after the message's own (now
    the problem's ``fix``)."""
    (problem,) = validate_path(make_package(toml=toml)).problems
    assert str(problem).startswith(line), str(problem)
    assert problem.file == "task.toml" and problem.fix and "; " not in problem.fix
    assert "task.toml: task.toml" not in str(problem) and "Fix: Fix" not in str(problem)


def test_a_load_error_without_a_fix_keeps_the_generic_one(tmp_path: Path) -> None:
    """A message that gives no fix still gets one."""
    from openmle.gym._package import _load_problem

    problem = _load_problem("utils/metric.py could not be imported (timeout)")
    assert str(problem).endswith("Fix: Fix the package so it loads.")


def test_sample_that_does_not_grade(make_package: PackageBuilder) -> None:
    """A sample submission the metric cannot score is reported with the grader's reason."""
    root = make_package()
    write_csv(
        root / "data/public/sample_submission.csv", ["id", "y"], [[i, "?"] for i in range(40, 50)]
    )
    problems = _problems(root)
    assert any("does not grade" in p and "not numbers" in p for p in problems)


def test_bad_leaderboard(make_package: PackageBuilder) -> None:
    """A leaderboard without a score column is an error naming the file."""
    root = make_package(toml='metric = "rmse"\nleaderboard = "lb.csv"\n')
    write_csv(root / "lb.csv", ["team", "points"], [["a", 1]])
    problems = _problems(root)
    assert any(p.startswith("error: lb.csv") and "'score'" in p for p in problems)


def test_released_metric_without_direction(make_package: PackageBuilder) -> None:
    """A metric class whose higher_is_better is not a bool is reported against metric.py."""
    root = make_package(toml="")
    (root / "utils").mkdir()
    (root / "utils/metric.py").write_text(
        "class XMetrics:\n    def evaluate(self, y_true, y_pred):\n        return 0.0\n"
    )
    problems = _problems(root)
    assert any(p.startswith("error: utils/metric.py") and "higher_is_better" in p for p in problems)


def test_reports_never_quote_answers(make_package: PackageBuilder) -> None:
    """With distinctive answer values and several breakages, no report mentions them."""
    root = make_package()
    secret = [f"98765{i}.4321" for i in range(10)]
    write_csv(
        root / "data/private/test_answer.csv",
        ["id", "y"],
        [[40 + i, s] for i, s in enumerate(secret)],
    )
    write_csv(
        root / "data/public/sample_submission.csv", ["id", "y"], [[40 + i, "x"] for i in range(10)]
    )
    write_csv(root / "data/public/test.csv", ["id", "x", "y"], [[40 + i, 0, 0] for i in range(9)])
    text = str(validate_path(root).to_dict())
    graded = str(load_task(root).grade(root / "data/public/sample_submission.csv").to_dict())
    for s in secret:
        assert s not in text and s not in graded and s[:6] not in text
