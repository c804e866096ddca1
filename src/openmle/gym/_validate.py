"""The deterministic checks of a task package (the released Gym's, plus the validation view).

Checks, in order: required files; every CSV parses (header, no blank or duplicate column
names, one value per column in every row); the description is not empty; the sample
submission and the answers have one row per row of ``test.csv``; ids (when the task has an id
column) are present, unique and identically ordered in ``test.csv``, the sample submission and
the answers; no target column leaks into ``test.csv``; ``train.csv`` holds the target columns;
the leaderboard parses; the metric's direction can be read; the sample submission grades to a
finite number on the test split; the validation view builds and its sample submission grades;
no symbolic link lies under ``data/public`` (a program would follow it out of the package).

The task's code (``utils/metric.py``) runs only in grading processes, under the grader's limits
and a fixed environment; all grading of one validation shares one ``grade_timeout_s`` budget,
so a metric that never returns costs that limit once.

Every problem is reported once, in the order of the checks; a check whose prerequisite failed
(a missing file, a missing metric) is skipped rather than reporting a consequence of it.
Every problem names the file and the fix, and never quotes a cell of the answers file. A check
that hits something unexpected reports it as a problem instead of raising: ``validate`` never
raises for a broken package.

A ``files``-layout package (``layout = "files"`` in ``task.toml``) ships whatever public data
its task needs: ``train.csv`` and ``test.csv`` are not required, the row and id checks compare
the sample submission with the answers, and its validation split must be shipped in
``data/valid`` (checked like the test split). A tabular package may ship one too.

The released Gym then asked an LLM judge to score the task; that is out of scope here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openmle.errors import TaskPackageError
from openmle.gym._gradeproc import CsvError, Table, read_csv
from openmle.gym._reports import Problem, Severity, ValidationReport

if TYPE_CHECKING:
    from openmle.gym._package import Task

__all__ = ["validate_task"]

_PUBLIC = "data/public"
_MAX_WALK = 1_000_000
"""Most entries the symbolic-link check looks at."""
_ANSWERS = "data/private/test_answer.csv"
_FILES = {
    "train": f"{_PUBLIC}/train.csv",
    "test": f"{_PUBLIC}/test.csv",
    "sample": f"{_PUBLIC}/sample_submission.csv",
    "answers": _ANSWERS,
}


class _Checker:
    def __init__(self, task: Task) -> None:
        self.task = task
        self.root = task.root
        self.problems: list[Problem] = []
        self.checks: list[str] = []
        self.tables: dict[str, Table] = {}
        self.sample_score: float | None = None
        self.deadline = time.monotonic() + task.grade_limits.timeout_s

    def budget(self) -> float | None:
        """Seconds left of the grading budget, or None when it is spent."""
        left = self.deadline - time.monotonic()
        return left if left >= 1.0 else None

    def error(self, file: str, message: str, fix: str) -> None:
        self.problems.append(Problem(severity=Severity.ERROR, file=file, message=message, fix=fix))

    def warn(self, file: str, message: str, fix: str) -> None:
        self.problems.append(
            Problem(severity=Severity.WARNING, file=file, message=message, fix=fix)
        )

    def run(self, name: str, check: Callable[[], None]) -> None:
        self.checks.append(name)
        try:
            check()
        except Exception as exc:  # a check must never crash validation
            self.error(
                ".",
                f"the {name} check could not finish ({type(exc).__name__})",
                "fix the problems reported before it and validate again",
            )

    # ------------------------------------------------------------------ checks

    @property
    def files_layout(self) -> bool:
        return self.task.layout == "files"

    def files(self) -> None:
        required = {
            f"{_PUBLIC}/description.txt": "describe the task, the data and the submission format",
            _FILES["train"]: "add the labelled training data",
            _FILES["test"]: "add the test inputs (without targets)",
            _FILES["sample"]: "add a sample submission with the expected columns and ids",
            _ANSWERS: "add the hidden answers (id and target columns)",
        }
        if self.files_layout:
            del required[_FILES["train"]], required[_FILES["test"]]
            for rel, fix in {
                "data/valid/public/sample_submission.csv": "ship the validation split's "
                "public data with its sample submission",
                "data/valid/private/test_answer.csv": "ship the validation split's answers",
            }.items():
                if not (self.root / rel).is_file():
                    self.error(
                        rel,
                        "is missing (a files-layout task ships its validation split).",
                        fix.capitalize() + ".",
                    )
        for rel, fix in required.items():
            if not (self.root / rel).is_file():
                self.error(rel, "is missing.", fix.capitalize() + ".")
        if self.task._config.metric is None and not (self.root / "utils/metric.py").is_file():
            self.error(
                "utils/metric.py",
                "is missing and task.toml names no built-in metric.",
                "Add a class whose name ends in 'Metrics', or set metric = \"...\" in task.toml.",
            )
        if not (self.root / "utils/prepare.py").is_file():
            self.warn(
                "utils/prepare.py",
                "is missing, so the data cannot be rebuilt from raw/.",
                "Add prepare(raw, public, private).",
            )

    def csvs(self) -> None:
        for key, rel in _FILES.items():
            path = self.root / rel
            if not path.is_file():
                continue
            try:
                table = read_csv(path, label=rel)
            except CsvError as exc:
                self.error(rel, f"cannot be used: {exc}.", "Rewrite it as a well-formed CSV.")
                continue
            if not table.rows:
                self.error(rel, "has a header but no rows.", "Add the data rows.")
            self.tables[key] = table

    def description(self) -> None:
        rel = f"{_PUBLIC}/description.txt"
        path = self.root / rel
        if not path.is_file():
            return
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            self.error(rel, "is not readable UTF-8 text.", "Save it as UTF-8.")
            return
        if not text.strip():
            self.error(rel, "is empty.", "Describe the task, the metric and the submission.")

    def _reference(self) -> str:
        """The table the others must line up with: test.csv, else (files layout) the sample."""
        return "sample" if self.files_layout and "test" not in self.tables else "test"

    def rows(self) -> None:
        ref = self._reference()
        test = self.tables.get(ref)
        if test is None:
            return
        name = Path(_FILES[ref]).name
        for key in ("sample", "answers"):
            t = self.tables.get(key)
            if key != ref and t is not None and len(t.rows) != len(test.rows):
                self.error(
                    _FILES[key],
                    f"has {len(t.rows)} rows but {name} has {len(test.rows)}.",
                    f"Give it exactly one row per row of {name}.",
                )

    def ids(self) -> None:
        col = self.task.id_column
        if col is None:
            if "sample" not in self.tables:
                return  # no (readable) sample submission: its missing id column says nothing
            self.warn(
                _FILES["sample"],
                "has no id column (its first column does not look like an id), so rows are "
                "matched by position.",
                "Put an id column first, or set id_column in task.toml.",
            )
            return
        orders: dict[str, list[str]] = {}
        ref = self._reference()
        name = Path(_FILES[ref]).name
        for key in ("test", "sample", "answers"):
            t = self.tables.get(key)
            if t is None:
                continue
            if col not in t.header:
                self.error(
                    _FILES[key],
                    f"lacks the id column {col!r}.",
                    f"Add the column {col!r} with the test ids.",
                )
                continue
            ids = [v.strip() for v in t.column(col)]
            dupes = len(ids) - len(set(ids))
            if dupes:
                self.error(
                    _FILES[key],
                    f"repeats {dupes} id(s) in column {col!r}.",
                    "Give every row a unique id.",
                )
            orders[key] = ids
        test_ids = orders.get(ref)
        for key in ("sample", "answers"):
            other = orders.get(key)
            if key == ref or test_ids is None or other is None or len(other) != len(test_ids):
                continue
            if other != test_ids:
                same_set = sorted(other) == sorted(test_ids)
                self.error(
                    _FILES[key],
                    f"lists the test ids in a different order than {name}."
                    if same_set
                    else f"holds ids that {name} does not have (or lacks some of its ids).",
                    f"Write the ids of {name}, in the same order.",
                )
        train = self.tables.get("train")
        if train is not None and col not in train.header:
            self.error(
                _FILES["train"],
                f"lacks the id column {col!r}, so the validation split cannot be built.",
                f"Keep the column {col!r} in train.csv.",
            )

    def targets(self) -> None:
        test = self.tables.get("test")
        col = self.task.id_column
        for key in ("sample", "answers"):
            t = self.tables.get(key)
            if t is None or test is None:
                continue
            leaked = [c for c in t.header if c != col and c in test.header]
            if leaked:
                self.error(
                    _FILES["test"],
                    f"contains the target column(s) {leaked} (from {Path(_FILES[key]).name}).",
                    "Remove the target columns from test.csv.",
                )
        answers, train = self.tables.get("answers"), self.tables.get("train")
        if answers is not None and train is not None:
            missing = [c for c in answers.header if c != col and c not in train.header]
            if missing:
                self.error(
                    _FILES["train"],
                    f"lacks the target column(s) {missing} that the answers file has.",
                    "Keep the target columns in train.csv (the validation split needs them).",
                )

    def leaderboard(self) -> None:
        path = self.task.leaderboard_path
        if path is None:
            return
        rel = str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)
        if not path.is_file():
            self.error(rel, "is named in task.toml but missing.", "Add it or remove the key.")
            return
        try:
            board = self.task.leaderboard
        except TaskPackageError as exc:
            self.error(rel, str(exc) + ".", "Write a CSV with a 'score' column.")
            return
        if not board:
            self.error(rel, "has no finite score.", "Write one finite score per entry.")

    def links(self) -> None:
        """Flag symbolic links under data/public (bounded, iterative walk)."""
        top = self.root / _PUBLIC
        if not top.is_dir() or top.is_symlink():
            if top.is_symlink():
                self.error(_PUBLIC, "is a symbolic link.", "Make it a real directory.")
            return
        found: list[str] = []
        stack, seen = [top], 0
        while stack and seen < _MAX_WALK:
            d = stack.pop()
            try:
                entries = list(os.scandir(d))
            except OSError:
                continue
            for e in entries:
                seen += 1
                if e.is_symlink():
                    found.append(str(Path(e.path).relative_to(self.root)))
                elif e.is_dir(follow_symlinks=False):
                    stack.append(Path(e.path))
        for rel in sorted(found)[:20]:
            self.error(
                rel,
                "is a symbolic link; a program reading data/public would follow it out of the "
                "package.",
                "Replace the link with a copy of the file.",
            )
        if len(found) > 20:
            self.error(_PUBLIC, f"holds {len(found) - 20} more symbolic links.", "Replace them.")

    def metric(self, smoke_test: bool) -> None:
        if any(p.file == "utils/metric.py" for p in self.problems):
            return  # the files check already said the metric is missing
        try:
            _ = self.task.higher_is_better
        except TaskPackageError as exc:
            self.error("utils/metric.py", f"{exc}.", "Fix the metric class.")
            return
        if not smoke_test or not {"sample", "answers"} <= set(self.tables):
            return
        report = self.task.grade(self.root / _FILES["sample"], "test", timeout_s=self.budget())
        if not report.valid:
            self.error(
                _FILES["sample"],
                f"does not grade on the test split: {report.reason}.",
                "Make the sample submission, the answers and the metric agree.",
            )
        else:
            self.sample_score = report.score

    def valid_split(self, smoke_test: bool) -> None:
        if self.task.shipped_valid:
            self.shipped_valid_split(smoke_test)
            return
        if not {"train", "sample", "answers"} <= set(self.tables):
            return
        try:
            public = self.task.public_dir("valid")
        except TaskPackageError as exc:
            self.error(_FILES["train"], f"{exc}.", "Fix train.csv so it can be split.")
            return
        left = self.budget()
        if smoke_test and self.sample_score is not None and left is None:
            self.error(
                _FILES["train"],
                "the validation split's sample submission was not graded: the test split's "
                "grading used up grade_timeout_s.",
                "Make the metric faster or raise grade_timeout_s in task.toml.",
            )
        elif smoke_test and self.sample_score is not None:
            report = self.task.grade(public / "sample_submission.csv", "valid", timeout_s=left)
            if not report.valid:
                self.error(
                    _FILES["train"],
                    f"the validation split's sample submission does not grade: {report.reason}.",
                    "Make train.csv's target columns match the answers file's.",
                )

    def shipped_valid_split(self, smoke_test: bool) -> None:
        sample = "data/valid/public/sample_submission.csv"
        answers = "data/valid/private/test_answer.csv"
        for rel in (sample, answers):
            if not (self.root / rel).is_file():
                self.error(rel, "is missing from the shipped validation split.", "Add it.")
                return
        left = self.budget()
        if smoke_test and self.sample_score is not None and left is None:
            self.error(
                sample,
                "was not graded: the test split's grading used up grade_timeout_s.",
                "Make the metric faster or raise grade_timeout_s in task.toml.",
            )
        elif smoke_test and self.sample_score is not None:
            report = self.task.grade(self.root / sample, "valid", timeout_s=left)
            if not report.valid:
                self.error(
                    sample,
                    f"does not grade on the validation split: {report.reason}.",
                    "Make the validation split's sample submission and answers agree.",
                )


def validate_task(task: Task, *, smoke_test: bool = True) -> ValidationReport:
    """Run every check on ``task``; never raises for a broken package.

    Args:
        task: the loaded package.
        smoke_test: also grade the sample submissions (spawns grading processes).
    """
    c = _Checker(task)
    c.run("files", c.files)
    c.run("csv", c.csvs)
    c.run("description", c.description)
    c.run("rows", c.rows)
    c.run("ids", c.ids)
    c.run("targets", c.targets)
    c.run("leaderboard", c.leaderboard)
    c.run("links", c.links)
    c.run("metric", lambda: c.metric(smoke_test))
    if not c.problems or all(p.severity is Severity.WARNING for p in c.problems):
        c.run("valid_split", lambda: c.valid_split(smoke_test))
    unique = list(dict.fromkeys(c.problems))  # each finding once, in the checks' order
    problems = sorted(unique, key=lambda p: p.severity is not Severity.ERROR)
    return ValidationReport(
        task=task.name,
        path=str(task.root),
        problems=tuple(problems),
        sample_score=c.sample_score,
        checks=tuple(c.checks),
    )
