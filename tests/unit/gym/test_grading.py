"""Grading: out of process, never raising for a bad submission, reasons without answers."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from openmle import Split
from openmle._task_protocol import GradeLike
from openmle.errors import InvalidArgument
from openmle.gym import GradeReport, load_task

from .conftest import PackageBuilder, write_csv


def _solution(root: Path, *, split: Split = Split.TEST) -> list[list[object]]:
    task = load_task(root)
    with (task.public_dir(split) / "test.csv").open() as f:
        rows = list(csv.DictReader(f))
    return [[r["id"], 2.0 * int(r["id"]) + 1.0] for r in rows]


def test_perfect_submission_scores_zero_rmse(make_package: PackageBuilder, tmp_path: Path) -> None:
    """A submission equal to the answers grades valid with RMSE 0 on both splits."""
    root = make_package()
    task = load_task(root)
    for split in Split:
        sub = tmp_path / f"sub-{split}.csv"
        write_csv(sub, ["id", "y"], _solution(root, split=split))
        report = task.grade(sub, split)
        assert isinstance(report, GradeLike)
        assert report.valid and report.score == pytest.approx(0.0, abs=1e-9), report.reason
        assert report.split is split and not report.higher_is_better


def test_row_and_column_order_do_not_matter(make_package: PackageBuilder, tmp_path: Path) -> None:
    """Rows are aligned by id and columns by name before scoring."""
    root = make_package()
    rows = _solution(root)
    sub = tmp_path / "sub.csv"
    write_csv(sub, ["y", "id"], [[r[1], r[0]] for r in reversed(rows)])
    report = load_task(root).grade(sub)
    assert report.valid and report.score == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize(
    ("header", "mutate", "needle"),
    [
        (["id", "target"], lambda rows: rows, "columns"),
        (["id", "y"], lambda rows: rows[:-1], "rows"),
        (["id", "y"], lambda rows: [*rows[:-1], [rows[0][0], 1.0]], "repeats"),
        (["id", "y"], lambda rows: [*rows[:-1], [99999, 1.0]], "lacks"),
        (["id", "y"], lambda rows: [[r[0], "nan"] for r in rows], "finite number"),
        (["id", "y"], lambda rows: [[r[0], "abc"] for r in rows], "not numbers"),
        (["id", "y"], lambda rows: [[r[0], ""] for r in rows], "empty"),
    ],
)
def test_bad_submissions_are_invalid_with_a_reason(
    make_package: PackageBuilder,
    tmp_path: Path,
    header: list[str],
    mutate: object,
    needle: str,
) -> None:
    """Wrong columns, rows, ids or values give valid=False and a reason naming the problem."""
    root = make_package()
    rows = _solution(root)
    sub = tmp_path / "bad.csv"
    assert callable(mutate)
    write_csv(sub, header, mutate(rows))
    report = load_task(root).grade(sub)
    assert not report.valid and report.score is None
    assert needle in report.reason, report.reason
    answers = {r[1] for r in _solution(root)}
    assert not any(str(a) in report.reason for a in answers if str(a) not in {"", "1.0"})


def test_missing_and_garbage_files(make_package: PackageBuilder, tmp_path: Path) -> None:
    """A missing file, binary junk or an empty file is invalid, never an exception."""
    task = load_task(make_package())
    missing = task.grade(tmp_path / "nope.csv")
    assert not missing.valid and not missing.submission_exists
    assert "submission.csv" in missing.reason
    junk = tmp_path / "junk.csv"
    junk.write_bytes(b"\xff\xfe\x00\x01garbage")
    assert "UTF-8" in task.grade(junk).reason
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    assert "empty" in task.grade(empty).reason
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("id,y\n1,2,3\n")
    assert "fields" in task.grade(ragged).reason


@pytest.mark.needs("pandas")
def test_metric_runs_in_another_process(tmp_path: Path) -> None:
    """A released-style metric class records its PID: it is never the caller's."""
    root = tmp_path / "released"
    pub, priv, utils = root / "data/public", root / "data/private", root / "utils"
    write_csv(
        pub / "train.csv", ["PassengerId", "a", "Survived"], [[i, i, i % 2] for i in range(30)]
    )
    write_csv(pub / "test.csv", ["PassengerId", "a"], [[i, i] for i in range(30, 40)])
    write_csv(
        pub / "sample_submission.csv", ["PassengerId", "Survived"], [[i, 0] for i in range(30, 40)]
    )
    write_csv(
        priv / "test_answer.csv", ["PassengerId", "Survived"], [[i, i % 2] for i in range(30, 40)]
    )
    (pub / "description.txt").write_text("Predict Survived.\n")
    utils.mkdir()
    pid_file = tmp_path / "pid.txt"
    (utils / "metric.py").write_text(
        "import os\n"
        "class AccuracyMetrics:\n"
        "    def __init__(self):\n"
        "        self.higher_is_better = True\n"
        "    def evaluate(self, y_true, y_pred):\n"
        f"        open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "        return float((y_true['Survived'].values == y_pred['Survived'].values).mean())\n"
    )
    task = load_task(root)
    assert task.name == "released" and task.higher_is_better and task.id_column == "PassengerId"
    report = task.grade(pub / "sample_submission.csv")
    assert report.valid and report.score == pytest.approx(0.5)
    assert int(pid_file.read_text()) != os.getpid()
    assert "_openmle_task_metric" not in __import__("sys").modules


_BROKEN_METRIC = (
    "class BadMetrics:\n"
    "    higher_is_better = False\n"
    "    def __init__(self):\n"
    "        self.higher_is_better = False\n"
    "    def evaluate(self, y_true, y_pred):\n"
    "        raise KeyError('secret')\n"
)
_LEAKY_METRIC = (
    "class LeakyMetrics:\n"
    "    def __init__(self):\n"
    "        self.higher_is_better = False\n"
    "    def validate_submission(self, submission, ground_truth):\n"
    "        raise ValueError(f'expected {ground_truth.y.tolist()[:3]} here')\n"
    "    def evaluate(self, y_true, y_pred):\n"
    "        return 0.0\n"
)


@pytest.mark.needs("pandas")
@pytest.mark.parametrize(
    ("source", "named", "hidden"),
    [(_BROKEN_METRIC, ("KeyError",), "secret"), (_LEAKY_METRIC, ("ValueError", "<n>"), "81")],
    ids=["broken", "leaky"],
)
def test_a_raising_metric_is_reported_masked_not_raised(
    make_package: PackageBuilder, source: str, named: tuple[str, ...], hidden: str
) -> None:
    """A task's metric class that raises (in evaluate, or in validate_submission with data in
    its message) gives an invalid report naming the exception type, its message's numbers
    masked (``<n>``) and nothing of the data in it."""
    root = make_package(toml="")
    (root / "utils").mkdir()
    (root / "utils/metric.py").write_text(source)
    report = load_task(root).grade(root / "data/public/sample_submission.csv")
    assert not report.valid and all(n in report.reason for n in named), report.reason
    assert hidden not in report.reason


def test_grade_rejects_a_bad_split(make_package: PackageBuilder) -> None:
    """An unknown split is a usage error (InvalidArgument), not a report."""
    task = load_task(make_package())
    with pytest.raises(InvalidArgument, match="split"):
        task.grade(task.public_dir("test") / "sample_submission.csv", "train")


def test_report_round_trips() -> None:
    """GradeReport.to_dict/from_dict round-trip, and a valid report needs a finite score."""
    r = GradeReport(task="t", split="valid", score=0.5, valid=True)
    assert GradeReport.from_dict(r.to_dict()) == r
    bad = GradeReport(task="t", split="test", score=float("nan"), valid=True)
    assert not bad.valid and bad.score is None and bad.reason


def test_symlink_to_answers_is_refused(make_package: PackageBuilder, tmp_path: Path) -> None:
    """A submission that is, or links (soft or hard) to, the hidden answers never grades."""
    root = make_package()
    task = load_task(root)
    for split in Split:
        link = tmp_path / f"submission-{split}.csv"
        link.symlink_to(task.answers_path(split))
        report = task.grade(link, split)
        assert not report.valid and "symbolic link" in report.reason
        direct = task.grade(task.answers_path(split), split)
        assert not direct.valid and "hidden answers" in direct.reason
        hard = tmp_path / f"hard-{split}.csv"
        try:
            hard.hardlink_to(task.answers_path(split))
        except OSError:  # another filesystem: no hard link possible, nothing to check
            continue
        linked = task.grade(hard, split)
        assert not linked.valid and "hidden answers" in linked.reason


def test_task_satisfies_the_sandbox_protocol(make_package: PackageBuilder) -> None:
    """A Task is a TaskHandle (checked statically by mypy and at runtime)."""
    from openmle._task_protocol import TaskHandle, TaskResolver
    from openmle.gym import resolve_task

    handle: TaskHandle = load_task(make_package())
    resolver: TaskResolver = resolve_task
    assert isinstance(handle, TaskHandle) and resolver(str(handle.private_paths[0].parents[1]))


def test_float_formatted_ids_match(make_package: PackageBuilder, tmp_path: Path) -> None:
    """Integer ids written as floats ("41.0") match the answers' ids ("41")."""
    root = make_package()
    sub = tmp_path / "sub.csv"
    write_csv(sub, ["id", "y"], [[f"{r[0]}.0", r[1]] for r in _solution(root)])
    report = load_task(root).grade(sub)
    assert report.valid and report.score == pytest.approx(0.0, abs=1e-9), report.reason


def test_broken_leaderboard_keeps_the_score(make_package: PackageBuilder) -> None:
    """A leaderboard without a score column does not stop grading; fields stay empty."""
    root = make_package(toml='metric = "rmse"\nleaderboard = "lb.csv"\n')
    write_csv(root / "lb.csv", ["team"], [["a"]])
    report = load_task(root).grade(root / "data/public/sample_submission.csv")
    assert report.valid and report.leaderboard_size == 0
