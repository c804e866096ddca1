"""Task packages on disk: loading, ``task.toml``, grading in a child process.

Layout of a package::

    task.toml                 # ours (optional): name, metric, direction, bounds, resources...
    leaderboard.csv           # optional: a column named "score" (any case)
    data/public/              # what a program sees: description.txt, train.csv, test.csv,
                              # sample_submission.csv, other media
    data/private/test_answer.csv   # the hidden answers (id and target columns)
    utils/prepare.py          # prepare(raw, public, private)
    utils/metric.py           # a class whose name ends in "Metrics" (released contract)
    raw/                      # optional: the labelled source data prepare.py splits

``task.toml`` keys (all optional)::

    name = "my-task"          # default: the directory name
    metric = "rmse"           # built-in: accuracy, auc, rmse, mae, log_loss; omit to use
                              # utils/metric.py
    higher_is_better = false  # default: the built-in's direction or the metric class's
    id_column = "id"          # default: the sample submission's first column if it looks
                              # like an id, else rows are matched by position
    theoretical_min = 0.0     # TaskMeta bounds (leaderboard_min/max default to the CSV's)
    theoretical_max = 1.0
    leaderboard_min = 0.1
    leaderboard_max = 0.9
    leaderboard = "leaderboard.csv"
    time_limit_s = 600        # per-run wall-clock limit
    valid_fraction = 0.2      # share of train.csv held out for the validation split
    grade_timeout_s = 600     # limit on one grading process
    [resources]
    cpus = 2
    gpus = 0
    memory_mb = 4096

Packages built for the released system (no ``task.toml``) load as they are: the direction
comes from the metric class's ``higher_is_better``, read in a child process on first use.

Departures from the released system: the leaderboard direction comes from the task, not from
the order of the CSV (bug B12); grading never imports the task's metric into the caller's
process.
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import math
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, final

from attrs import define, field, frozen

from openmle._types import Resources, Split, TaskMeta, check_split
from openmle.errors import InvalidArgument, InvalidArgumentType, TaskPackageError
from openmle.gym import _gradeproc
from openmle.gym._gradeproc import BUILTIN_METRICS, CsvError, read_csv
from openmle.gym._reports import GradeReport, ValidationReport
from openmle.gym._split import valid_view_dir, valid_view_key, valid_view_path

__all__ = ["Task", "load_task"]


@functools.cache
def _grader_source() -> str:
    """The grading module's source, run in the child with ``python -I -c``."""
    return Path(_gradeproc.__file__).read_text(encoding="utf-8")


_KEYS = {
    "name": str,
    "metric": str,
    "higher_is_better": bool,
    "id_column": str,
    "theoretical_min": float,
    "theoretical_max": float,
    "leaderboard_min": float,
    "leaderboard_max": float,
    "leaderboard": str,
    "time_limit_s": float,
    "valid_fraction": float,
    "grade_timeout_s": float,
    "resources": dict,
}


@frozen(kw_only=True)
class _Config:
    name: str
    metric: str | None = None
    higher_is_better: bool | None = None
    id_column: str | None = None
    bounds: Mapping[str, float | None] = field(factory=dict)
    leaderboard: str | None = None
    time_limit_s: float = 600.0
    valid_fraction: float = 0.2
    grade_timeout_s: float = 600.0
    resources: Resources = field(factory=Resources)


def _bad(key: str, expected: str, value: object, hint: str) -> TaskPackageError:
    return TaskPackageError(f"task.toml: expected {key} to be {expected} but got {value!r}; {hint}")


def _read_config(root: Path) -> _Config:
    path = root / "task.toml"
    if not path.exists():
        return _Config(name=root.name)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TaskPackageError(f"task.toml cannot be parsed ({exc}); fix its TOML syntax") from None
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise TaskPackageError(
            f"task.toml has unknown key(s) {unknown}; known keys are {sorted(_KEYS)}"
        )
    for key, kind in _KEYS.items():
        if key not in data:
            continue
        v = data[key]
        ok = (
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if kind is float
            else isinstance(v, kind)
        )
        if not ok:
            raise _bad(key, f"a {kind.__name__}", v, "fix the value's type")
    metric = data.get("metric")
    if metric is not None and metric not in BUILTIN_METRICS:
        raise _bad(
            "metric",
            f"one of {sorted(BUILTIN_METRICS)}",
            metric,
            "or remove it to use utils/metric.py",
        )
    hib = data.get("higher_is_better")
    if hib is None and metric is not None:
        hib = BUILTIN_METRICS[metric]
    frac = float(data.get("valid_fraction", 0.2))
    if not 0.0 < frac < 1.0:
        raise _bad("valid_fraction", "a number in (0, 1)", frac, "0.2 is usual")
    for key in ("time_limit_s", "grade_timeout_s"):
        if key in data and data[key] <= 0:
            raise _bad(key, "> 0", data[key], "give a positive number of seconds")
    res = data.get("resources", {})
    unknown_res = sorted(set(res) - {"cpus", "gpus", "memory_mb"})
    if unknown_res:
        raise TaskPackageError(
            f"task.toml [resources] has unknown key(s) {unknown_res}; use cpus, gpus, memory_mb"
        )
    try:
        resources = Resources(**res)
        bounds = {
            k: data.get(k)
            for k in ("theoretical_min", "theoretical_max", "leaderboard_min", "leaderboard_max")
        }
        TaskMeta(higher_is_better=True, **bounds)
    except (InvalidArgument, TypeError) as exc:
        raise TaskPackageError(f"task.toml: {exc}") from None
    name = data.get("name", root.name)
    if not name.strip():
        raise _bad("name", "a non-empty string", name, "name the task")
    return _Config(
        name=name,
        metric=metric,
        higher_is_better=hib,
        id_column=data.get("id_column"),
        bounds=bounds,
        leaderboard=data.get("leaderboard"),
        time_limit_s=float(data.get("time_limit_s", 600.0)),
        valid_fraction=frac,
        grade_timeout_s=float(data.get("grade_timeout_s", 600.0)),
        resources=resources,
    )


def _looks_like_id(column: str) -> bool:
    name = column.strip()
    low = name.lower()
    return (
        low in {"id", "ids"} or low.endswith(("_id", "-id", " id")) or name.endswith(("Id", "ID"))
    )


def run_child(
    config: dict[str, Any], *, timeout_s: float, cwd: Path | None = None
) -> dict[str, Any]:
    """Run the grading module in a fresh ``python -I`` process and return its JSON result.

    Raises:
        subprocess.TimeoutExpired: the child ran past ``timeout_s`` (it is killed).
        TaskPackageError: the child died without writing a result.
    """
    with tempfile.TemporaryDirectory(prefix="openmle-grade-") as tmp:
        cfg = Path(tmp) / "config.json"
        result = Path(tmp) / "result.json"
        cfg.write_text(json.dumps({**config, "result": str(result)}))
        proc = subprocess.run(
            [sys.executable, "-I", "-c", _grader_source(), str(cfg)],
            cwd=cwd or tmp,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
        if not result.exists():
            raise TaskPackageError(
                f"the grading process exited with code {proc.returncode} without a result; "
                "run the task's metric by hand to find the crash"
            )
        out: dict[str, Any] = json.loads(result.read_text())
        return out


@final
@define(eq=False)
class Task:
    """A task package on disk; implements :class:`openmle._task_protocol.TaskHandle`.

    Create one with :func:`load_task` or :func:`openmle.gym.bundled`. Attributes are read
    lazily where they need files, so a broken package still loads far enough to be validated.
    """

    root: Path
    _config: _Config = field(alias="config")
    _meta: TaskMeta | None = field(default=None, init=False)
    _view_key: str | None = field(default=None, init=False)
    _leaderboard: tuple[float, ...] | None = field(default=None, init=False)
    _leaderboard_read: bool = field(default=False, init=False)

    # ---------------------------------------------------------------- metadata

    @property
    def name(self) -> str:
        """The task name (``task.toml``'s, else the directory name)."""
        return self._config.name

    @property
    def metric_name(self) -> str:
        """The built-in metric's name, or ``"utils/metric.py"`` for a metric class."""
        return self._config.metric or "utils/metric.py"

    @property
    def higher_is_better(self) -> bool:
        """The metric's direction.

        Raises:
            TaskPackageError: no ``task.toml`` direction and the metric class cannot be read.
        """
        if self._config.higher_is_better is not None:
            return self._config.higher_is_better
        return self.meta.higher_is_better

    @property
    def meta(self) -> TaskMeta:
        """Direction and bounds (leaderboard bounds default to the leaderboard's range).

        Raises:
            TaskPackageError: the direction must come from ``utils/metric.py`` and it cannot be
                imported or has no boolean ``higher_is_better``.
        """
        if self._meta is None:
            hib = self._config.higher_is_better
            if hib is None:
                hib = self._inspect_metric_class()
            bounds = dict(self._config.bounds)
            board = self._read_leaderboard()
            if board:
                if bounds.get("leaderboard_min") is None:
                    bounds["leaderboard_min"] = min(board)
                if bounds.get("leaderboard_max") is None:
                    bounds["leaderboard_max"] = max(board)
            self._meta = TaskMeta(higher_is_better=hib, name=self.name, **bounds)
        return self._meta

    @property
    def resources(self) -> Resources:
        """What one run of a program for this task may use."""
        return self._config.resources

    @property
    def time_limit_s(self) -> float:
        """Wall-clock limit of one run, in seconds."""
        return self._config.time_limit_s

    @property
    def description(self) -> str:
        """``data/public/description.txt`` (public; safe for prompts)."""
        try:
            return (self.root / "data" / "public" / "description.txt").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    @property
    def leaderboard(self) -> tuple[float, ...] | None:
        """Leaderboard scores, best first by the task's direction, or None without one."""
        board = self._read_leaderboard()
        if not board:
            return None
        return tuple(sorted(board, reverse=self.higher_is_better))

    @property
    def id_column(self) -> str | None:
        """The id column, or None when rows are matched by position."""
        if self._config.id_column is not None:
            return self._config.id_column
        header = _header_of(self.root / "data" / "public" / "sample_submission.csv")
        return header[0] if header and _looks_like_id(header[0]) else None

    # ---------------------------------------------------------------- TaskHandle

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """``data/private`` and the validation view's answers directory.

        The view's directory is listed whether or not it has been built yet (listing it does
        not build it), so a sandbox can hide it either way.
        """
        return (self.root / "data" / "private", valid_view_path(self.name, self._key()) / "private")

    def public_dir(self, split: Split | str) -> Path:
        """The directory a program reads through ``$DATA_DIR``.

        ``test``: ``data/public``. ``valid``: the hold-out view (built on first use).

        Raises:
            TaskPackageError: the validation view cannot be built (the message says why).
        """
        if check_split(split) is Split.TEST:
            return self.root / "data" / "public"
        return self._view_root() / "public"

    def answers_path(self, split: Split | str) -> Path:
        """The hidden answers of ``split`` (for graders only; never give it to a program)."""
        if check_split(split) is Split.TEST:
            return self.root / "data" / "private" / "test_answer.csv"
        return self._view_root() / "private" / "test_answer.csv"

    def grade(
        self,
        submission: Path | str,
        split: Split | str = Split.TEST,
        *,
        timeout_s: float | None = None,
    ) -> GradeReport:
        """Grade ``submission`` against ``split``'s answers in a separate process.

        Never raises for a bad submission: the report is ``valid=False`` with a reason naming
        the problem and the fix. For the ``test`` split of a task with a leaderboard the report
        also carries medals, thresholds and the human rank.

        Args:
            submission: path of the CSV to grade.
            split: ``"valid"`` or ``"test"``.
            timeout_s: limit on the grading process (default: the task's ``grade_timeout_s``).

        Raises:
            InvalidArgument: ``split`` is not a split.
        """
        s = check_split(split)
        path = Path(submission)
        try:
            hib = self.higher_is_better
        except TaskPackageError as exc:
            return self._invalid(s, path, True, f"the task is broken: {exc}")
        if not path.is_file():
            return self._invalid(
                s,
                path,
                hib,
                f"no submission file at {path.name}; the program must write ./submission.csv",
                exists=False,
            )
        if path.is_symlink():
            return self._invalid(
                s,
                path,
                hib,
                "the submission is a symbolic link; write submission.csv as a regular file",
            )
        try:
            answers = self.answers_path(s)
            sample = self.public_dir(s) / "sample_submission.csv"
        except TaskPackageError as exc:
            return self._invalid(s, path, hib, f"the task is broken: {exc}")
        real = path.resolve()
        if any(real.is_relative_to(p.resolve()) for p in self.private_paths) or _same_file(
            real, answers
        ):
            return self._invalid(
                s, path, hib, "the submission lies among the hidden answers; write your own file"
            )
        config = {
            "mode": "grade",
            "answers": str(answers),
            "sample": str(sample),
            "submission": str(real),
            "id_column": self.id_column,
            "metric": self._config.metric,
            "metric_py": str(self.root / "utils" / "metric.py"),
        }
        limit = timeout_s if timeout_s is not None else self._config.grade_timeout_s
        try:
            out = run_child(config, timeout_s=limit)
        except subprocess.TimeoutExpired:
            return self._invalid(
                s, path, hib, f"grading took longer than {limit:g} s; shrink the submission"
            )
        except TaskPackageError as exc:
            return self._invalid(s, path, hib, str(exc))
        report = GradeReport(
            task=self.name,
            split=s,
            score=out.get("score"),
            valid=bool(out.get("valid")),
            reason=str(out.get("reason", "")),
            higher_is_better=hib,
            submission_path=str(path),
        )
        board = None
        if s is Split.TEST:
            # A broken leaderboard is the task's problem (validate reports it), not the
            # submission's: the score stands, without leaderboard fields.
            with contextlib.suppress(TaskPackageError):
                board = self.leaderboard
        return report.with_leaderboard(board) if board else report

    # ---------------------------------------------------------------- package tools

    def validate(self, *, smoke_test: bool = True) -> ValidationReport:
        """Run the deterministic package checks; see :mod:`openmle.gym._validate`."""
        from openmle.gym._validate import validate_task

        return validate_task(self, smoke_test=smoke_test)

    def prepare(self, *, timeout_s: float = 600.0) -> None:
        """Run ``utils/prepare.py`` in a child process to rebuild ``data/public``/``private``.

        See :func:`openmle.gym._prepare.run_prepare`.
        """
        from openmle.gym._prepare import run_prepare

        run_prepare(self.root, timeout_s=timeout_s)
        self._meta = None
        self._view_key = None
        self._leaderboard_read = False

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (no answer values)."""
        return {
            "name": self.name,
            "root": str(self.root),
            "metric": self.metric_name,
            "higher_is_better": self._config.higher_is_better,
            "resources": self.resources.to_dict(),
            "time_limit_s": self.time_limit_s,
            "has_leaderboard": bool(self._read_leaderboard()),
        }

    # ---------------------------------------------------------------- internals

    def _invalid(
        self, split: Split, path: Path, hib: bool, reason: str, *, exists: bool = True
    ) -> GradeReport:
        return GradeReport(
            task=self.name,
            split=split,
            valid=False,
            reason=reason,
            higher_is_better=hib,
            submission_path=str(path),
            submission_exists=exists,
        )

    def _key(self) -> str:
        if self._view_key is None:
            self._view_key = valid_view_key(
                self.root, id_column=self.id_column, fraction=self._config.valid_fraction
            )
        return self._view_key

    def _view_root(self) -> Path:
        return valid_view_dir(
            self.root,
            name=self.name,
            id_column=self.id_column,
            fraction=self._config.valid_fraction,
            key=self._key(),
        )

    def _read_leaderboard(self) -> tuple[float, ...]:
        if not self._leaderboard_read:
            self._leaderboard = (
                read_leaderboard(self.leaderboard_path) if self.leaderboard_path else None
            )
            self._leaderboard_read = True
        return self._leaderboard or ()

    @property
    def leaderboard_path(self) -> Path | None:
        """The leaderboard CSV, if the task has one."""
        if self._config.leaderboard is not None:
            return self.root / self._config.leaderboard
        default = self.root / "leaderboard.csv"
        return default if default.is_file() else None

    def _inspect_metric_class(self) -> bool:
        metric_py = self.root / "utils" / "metric.py"
        if not metric_py.is_file():
            raise TaskPackageError(
                "utils/metric.py is missing and task.toml names no built-in metric; add a "
                'metric class or set metric = "rmse" (etc.) in task.toml'
            )
        try:
            out = run_child({"mode": "inspect", "metric_py": str(metric_py)}, timeout_s=120.0)
        except subprocess.TimeoutExpired:
            raise TaskPackageError(
                "utils/metric.py took over 120 s to import; simplify it"
            ) from None
        if "error" in out:
            raise TaskPackageError(f"utils/metric.py: {out['error']}")
        hib = out.get("higher_is_better")
        if not isinstance(hib, bool):
            raise TaskPackageError(
                "utils/metric.py: the metric class's higher_is_better is not a bool; set it to "
                "True or False in its constructor"
            )
        return hib


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (a hard link to the answers, say)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _header_of(path: Path) -> list[str]:
    try:
        return read_csv(path, label=path.name, max_bytes=1 << 40).header
    except CsvError:
        return []


def read_leaderboard(path: Path) -> tuple[float, ...] | None:
    """Finite scores of a leaderboard CSV (see :func:`openmle.rewards.read_leaderboard`).

    Raises:
        TaskPackageError: the file is unreadable or has no ``score`` column.
    """
    from openmle.rewards import read_leaderboard as read_board

    try:
        return tuple(read_board(path))
    except (InvalidArgument, OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TaskPackageError(f"leaderboard {path.name}: {exc}") from None


def load_task(path: Path | str) -> Task:
    """Load the task package at ``path``.

    Loading reads only ``task.toml``; files are checked by :meth:`Task.validate` and used
    lazily, so a package with missing data still loads far enough to report its problems.

    Raises:
        InvalidArgumentType: ``path`` is not a path.
        TaskPackageError: ``path`` is not a directory, or ``task.toml`` is malformed (the
            message names the key and the fix).
    """
    if not isinstance(path, str | os.PathLike):
        raise InvalidArgumentType(
            f"Expected a path but got path={path!r} (type={type(path).__name__})"
        )
    root = Path(path).expanduser()
    if not root.is_dir():
        raise TaskPackageError(
            f"No task package at {str(root)!r}: not a directory; give the package root (the "
            "folder holding data/public and data/private) or a bundled task name"
        )
    root = root.resolve()
    return Task(root, config=_read_config(root))
