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
    metric = "rmse"           # built-in: accuracy, auc, log_loss, macro_f1, mae, map@K
                              # (e.g. map@5), rmse, rmsle; omit to use utils/metric.py
    higher_is_better = false  # default: the built-in's direction or the metric class's
    id_column = "id"          # default: the sample submission's first column if it looks
                              # like an id, else rows are matched by position
    theoretical_min = 0.0     # TaskMeta bounds (leaderboard_min/max default to the CSV's)
    theoretical_max = 1.0
    leaderboard_min = 0.1
    leaderboard_max = 0.9
    leaderboard = "leaderboard.csv"
    time_limit_s = 600        # per-run wall-clock limit (at most 7 days)
    valid_fraction = 0.2      # share of train.csv held out for the validation split
    grade_timeout_s = 600     # wall-clock limit on one grading process (at most 1 day)
    layout = "tabular"        # or "files": public data is whatever the task ships (image
                              # folders, JSON, audio...); no train.csv/test.csv required, and
                              # the validation split must be shipped in data/valid
    [resources]               # at most 256 cpus, 16 gpus, 2 TiB
    cpus = 2
    gpus = 0
    memory_mb = 4096
    [grader]                  # limits of the grading process (see GradeLimits)
    memory_mb = 4096          # RLIMIT_AS
    cpu_s = 600               # RLIMIT_CPU (default: grade_timeout_s)
    max_bytes = 536870912     # largest CSV
    max_rows = 10000000
    max_columns = 10000
    max_line_bytes = 8388608
    [environment]             # the task's own image (DockerSandbox builds it; others ignore it)
    dockerfile = "environment/Dockerfile"   # default: that file when it exists; its folder
                              # is the build context: inside the package, not data/ or utils/

Every path in ``task.toml`` (``leaderboard``) is relative and stays inside the package, also
after resolving symbolic links; values outside the ranges above are refused with the key
and the range named.

A package may ship its own validation split, ``data/valid/public`` (what a program sees
during search, with its ``sample_submission.csv``) and ``data/valid/private/test_answer.csv``;
it is then used instead of the hold-out of ``train.csv``. A ``files`` package must ship one.

Packages built for the released system (no ``task.toml``) load as they are: the direction
comes from the metric class's ``higher_is_better``, read in a child process on first use.

Departures from the released system: the leaderboard direction comes from the task, not from
the order of the CSV (bug B12); grading never imports the task's metric into the caller's
process.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, final

from attrs import define, field, frozen

from openmle._leaderboard import read_leaderboard
from openmle._readback import read_back_text
from openmle._types import Resources, Split, TaskMeta, check_split
from openmle.errors import InvalidArgument, InvalidArgumentType, TaskPackageError
from openmle.gym._gradeproc import BUILTIN_METRICS, MAX_REASON_CHARS, builtin_direction, clip
from openmle.gym._grader import GradeLimits, run_child
from openmle.gym._reports import GradeReport, Problem, Severity, ValidationReport
from openmle.gym._split import valid_view_dir, valid_view_key, valid_view_path
from openmle.gym._validate import validate_task

__all__ = ["Task", "load_task", "validate_path"]


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
    "grader": dict,
    "layout": str,
    "environment": dict,
}
LAYOUTS = ("tabular", "files")

_MAXIMA = {
    "time_limit_s": 7 * 86_400.0,
    "grade_timeout_s": 86_400.0,
    "cpus": 256.0,
    "gpus": 16.0,
    "memory_mb": 2_097_152.0,
}
"""Largest accepted value of each numeric key (``cpus``, ``gpus``, ``memory_mb`` are
``[resources]``'s)."""
_GRADER_KEYS = ("memory_mb", "cpu_s", "max_bytes", "max_rows", "max_columns", "max_line_bytes")


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
    grader: GradeLimits = field(factory=GradeLimits)
    layout: str = "tabular"
    dockerfile: str | None = None


def _bad(key: str, expected: str, value: object, hint: str) -> TaskPackageError:
    return TaskPackageError(f"task.toml: expected {key} to be {expected} but got {value!r}; {hint}")


def _check_types(data: dict[str, Any]) -> None:
    """Refuse unknown top-level keys and values of the wrong type (finite numbers only)."""
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


def _check_resources(res: dict[str, Any]) -> None:
    """Refuse unknown ``[resources]`` keys and demands above the package maxima."""
    unknown_res = sorted(set(res) - {"cpus", "gpus", "memory_mb"})
    if unknown_res:
        raise TaskPackageError(
            f"task.toml [resources] has unknown key(s) {unknown_res}; use cpus, gpus, memory_mb"
        )
    for key in ("cpus", "gpus", "memory_mb"):
        v = res.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool) and v > _MAXIMA[key]:
            raise _bad(
                f"resources.{key}", f"at most {_MAXIMA[key]:g}", v, "ask for what one run needs"
            )


_TOML_MAX_BYTES = 1 << 20
"""A package's ``task.toml`` is read only as a regular file (no link followed) of at most this
many bytes (see :func:`openmle._readback.read_back`)."""


_DESCRIPTION_MAX_BYTES = 16 << 20


def _read_config(root: Path) -> _Config:
    path = root / "task.toml"
    if not path.exists() and not path.is_symlink():
        return _Config(name=root.name)
    try:  # a regular file of at most 1 MiB: not a link (-> /dev/zero), not a FIFO
        data = tomllib.loads(read_back_text(path, max_bytes=_TOML_MAX_BYTES))
    except OSError as exc:
        raise TaskPackageError(
            f"task.toml cannot be read ({exc.strerror or exc}); make it a regular file of "
            f"at most {_TOML_MAX_BYTES} bytes"
        ) from None
    except RecursionError:
        raise TaskPackageError("task.toml nests too deeply; fix its TOML syntax") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TaskPackageError(f"task.toml cannot be parsed ({exc}); fix its TOML syntax") from None
    _check_types(data)
    metric = data.get("metric")
    if metric is not None and builtin_direction(metric) is None:
        raise _bad(
            "metric",
            f"one of {sorted(BUILTIN_METRICS)} (map@k with k in 1..100, e.g. map@5)",
            metric,
            "or remove it to use utils/metric.py",
        )
    hib = data.get("higher_is_better")
    if hib is None and metric is not None:
        hib = builtin_direction(metric)
    frac = float(data.get("valid_fraction", 0.2))
    if not 0.0 < frac < 1.0:
        raise _bad("valid_fraction", "a number in (0, 1)", frac, "0.2 is usual")
    for key in ("time_limit_s", "grade_timeout_s"):
        if key in data and not 0 < data[key] <= _MAXIMA[key]:
            raise _bad(
                key, f"in (0, {_MAXIMA[key]:g}] seconds", data[key], "give a sane time limit"
            )
    res = data.get("resources", {})
    _check_resources(res)
    leaderboard = data.get("leaderboard")
    if leaderboard is not None:
        _check_relative(root, leaderboard)
    grader = _read_grader(data.get("grader", {}), float(data.get("grade_timeout_s", 600.0)))
    dockerfile = _read_environment(root, data.get("environment", {}))
    try:
        resources = Resources(**res)
        bounds = {
            k: data.get(k)
            for k in ("theoretical_min", "theoretical_max", "leaderboard_min", "leaderboard_max")
        }
        TaskMeta(higher_is_better=True, **bounds)
    except (InvalidArgument, TypeError) as exc:
        raise TaskPackageError(f"task.toml: {exc}") from None
    layout = data.get("layout", "tabular")
    if layout not in LAYOUTS:
        raise _bad("layout", f"one of {list(LAYOUTS)}", layout, "tabular is the default")
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
        grader=grader,
        layout=layout,
        dockerfile=dockerfile,
    )


def _read_environment(root: Path, table: Mapping[str, Any]) -> str | None:
    """``[environment] dockerfile``: a file in a folder of its own inside the package (the
    folder is the build context, so it must not be the package root, ``data/``, ``utils/`` or
    ``raw/``, which hold answers and graders).
    """
    unknown = sorted(set(table) - {"dockerfile"})
    if unknown:
        raise TaskPackageError(
            f"task.toml [environment] has unknown key(s) {unknown}; use dockerfile"
        )
    rel = table.get("dockerfile")
    if rel is None:
        return None
    if not isinstance(rel, str):
        raise _bad("environment.dockerfile", "a string", rel, "name the Dockerfile's path")
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts or not rel.strip() or len(p.parts) < 2:
        raise _bad(
            "environment.dockerfile",
            "a relative path inside a folder of the package, without '..'",
            rel,
            'for example "environment/Dockerfile" (its folder is the build context)',
        )
    if p.parts[0] in ("data", "utils", "raw", "valid"):
        raise _bad(
            "environment.dockerfile",
            "a file outside data/, utils/ and raw/",
            rel,
            "the Dockerfile's folder is sent to the image builder; keep answers out of it",
        )
    if not (root / p).resolve().is_relative_to(root.resolve()):
        raise _bad(
            "environment.dockerfile",
            "a file inside the package",
            rel,
            "it resolves (through a symbolic link) outside the package",
        )
    return rel


def _check_relative(root: Path, rel: str) -> Path:
    """``root / rel`` when it is a relative path that stays inside ``root`` (symbolic links
    resolved); never reads the file, so an error cannot echo its content.
    """
    p = Path(rel)
    if p.is_absolute() or ".." in p.parts or not rel.strip():
        raise _bad(
            "leaderboard",
            "a path relative to the package, without '..'",
            rel,
            "put the file inside the package and name it relative to task.toml",
        )
    path = root / p
    if not path.resolve().is_relative_to(root.resolve()):
        raise _bad(
            "leaderboard",
            "a file inside the package",
            rel,
            "it resolves (through a symbolic link) outside the package; copy the file in",
        )
    return path


def _read_grader(table: Mapping[str, Any], timeout_s: float) -> GradeLimits:
    unknown = sorted(set(table) - set(_GRADER_KEYS))
    if unknown:
        raise TaskPackageError(
            f"task.toml [grader] has unknown key(s) {unknown}; use {', '.join(_GRADER_KEYS)}"
        )
    values: dict[str, Any] = {}
    for key, v in table.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _bad(f"grader.{key}", "a number", v, "fix the value's type")
        if key != "cpu_s" and not (isinstance(v, int) or float(v).is_integer()):
            raise _bad(f"grader.{key}", "a whole number", v, "drop the fraction")
        values[key] = v if key == "cpu_s" else int(v)
    try:
        return GradeLimits(timeout_s=timeout_s, **values)
    except InvalidArgument as exc:
        raise TaskPackageError(f"task.toml [grader]: {exc}") from None


def _looks_like_id(column: str) -> bool:
    name = column.strip()
    low = name.lower()
    return (
        low in {"id", "ids"} or low.endswith(("_id", "-id", " id")) or name.endswith(("Id", "ID"))
    )


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
    def grade_limits(self) -> GradeLimits:
        """The limits of one grading process (``grade_timeout_s`` and ``[grader]``)."""
        return self._config.grader

    @property
    def dockerfile(self) -> Path | None:
        """The task's Dockerfile (``[environment] dockerfile``, else ``environment/Dockerfile``
        when it exists), or None; its folder is the build context.
        """
        if self._config.dockerfile is not None:
            return self.root / self._config.dockerfile
        default = self.root / "environment" / "Dockerfile"
        return default if default.is_file() else None

    @property
    def time_limit_s(self) -> float:
        """Wall-clock limit of one run, in seconds."""
        return self._config.time_limit_s

    @property
    def description(self) -> str:
        """``data/public/description.txt`` (public; safe for prompts): "" when it is missing,
        not UTF-8, a link (``-> ~/.ssh/id_rsa`` would reach the model's prompt), not a regular
        file, or over 16 MiB (:meth:`validate` names the problem).
        """
        try:
            return read_back_text(
                self.root / "data" / "public" / "description.txt", max_bytes=_DESCRIPTION_MAX_BYTES
            )
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
    def layout(self) -> str:
        """``"tabular"`` (train.csv/test.csv) or ``"files"`` (any public data)."""
        return self._config.layout

    @property
    def shipped_valid(self) -> bool:
        """Whether the package ships its validation split in ``data/valid``."""
        v = self.root / "data" / "valid"
        return (v / "public").is_dir() and (v / "private").is_dir()

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """``data/private``, the validation view's answers directory and a shipped
        ``data/valid/private`` (files layout: no view).

        The view's directory is listed whether or not it has been built yet (listing it does
        not build it), so a sandbox can hide it either way.
        """
        shipped = self.root / "data" / "valid" / "private"
        if self.layout == "files":
            return (self.root / "data" / "private", shipped)
        return (
            self.root / "data" / "private",
            valid_view_path(self.name, self._key()) / "private",
            shipped,
        )

    def public_dir(self, split: Split | str) -> Path:
        """The directory a program reads through ``$DATA_DIR``.

        ``test``: ``data/public``. ``valid``: the shipped ``data/valid/public``, else the
        hold-out view of ``train.csv`` (built on first use).

        Raises:
            TaskPackageError: the validation view cannot be built (the message says why).
        """
        if check_split(split) is Split.TEST:
            return self.root / "data" / "public"
        return self._valid_root() / "public"

    def answers_path(self, split: Split | str) -> Path:
        """The hidden answers of ``split`` (for graders only; never give it to a program)."""
        if check_split(split) is Split.TEST:
            return self.root / "data" / "private" / "test_answer.csv"
        return self._valid_root() / "private" / "test_answer.csv"

    def _valid_root(self) -> Path:
        if self.shipped_valid:
            return self.root / "data" / "valid"
        if self.layout == "files":
            raise TaskPackageError(
                "a files-layout task needs its validation split in data/valid: public/ (with "
                "sample_submission.csv) and private/test_answer.csv"
            )
        return self._view_root()

    def grade(
        self,
        submission: Path | str,
        split: Split | str = Split.TEST,
        *,
        timeout_s: float | None = None,
        limits: GradeLimits | None = None,
    ) -> GradeReport:
        """Grade ``submission`` against ``split``'s answers in a separate, confined process.

        Never raises for a bad submission: the report is ``valid=False`` with a reason naming
        the problem and the fix. For the ``test`` split of a task with a leaderboard the report
        also carries medals, thresholds and the human rank. The report's ``grade_s`` is the
        grading process's wall-clock time; the process runs under :attr:`grade_limits` (or
        ``limits``) and a limit it reaches makes the submission invalid with a reason.

        Args:
            submission: path of the CSV to grade.
            split: ``"valid"`` or ``"test"``.
            timeout_s: wall-clock limit on the grading process (default: the limits').
            limits: the grading process's limits (default: :attr:`grade_limits`).

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
        lim = limits if limits is not None else self.grade_limits
        if timeout_s is not None:
            lim = lim.with_timeout(timeout_s)
        child = run_child(config, limits=lim)
        out = child.result
        if out is None or child.limit in ("time", "cpu", "killed"):
            return self._invalid(
                s,
                path,
                hib,
                _limit_reason(child.limit, child.returncode, lim),
                grade_s=child.elapsed_s,
            )
        report = GradeReport(
            task=self.name,
            split=s,
            score=out.get("score"),
            valid=bool(out.get("valid")),
            reason=str(out.get("reason", "")),
            higher_is_better=hib,
            submission_path=str(path),
            grade_s=child.elapsed_s,
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
        return validate_task(self, smoke_test=smoke_test)

    def prepare(self, *, timeout_s: float = 600.0, memory_mb: int = 16384) -> None:
        """Run ``utils/prepare.py`` in a confined child process (fixed environment, own process
        group killed at the end, address-space limit ``memory_mb`` MiB, CPU and wall-clock limit
        ``timeout_s`` s) to rebuild ``data/public`` and ``data/private``.

        See :func:`openmle.gym._prepare.run_prepare`.
        """
        from openmle.gym._prepare import run_prepare

        run_prepare(self.root, timeout_s=timeout_s, memory_mb=memory_mb)
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
            "layout": self.layout,
            "has_leaderboard": bool(self._read_leaderboard()),
        }

    # ---------------------------------------------------------------- internals

    def _invalid(
        self,
        split: Split,
        path: Path,
        hib: bool,
        reason: str,
        *,
        exists: bool = True,
        grade_s: float | None = None,
    ) -> GradeReport:
        return GradeReport(
            task=self.name,
            split=split,
            valid=False,
            reason=clip(reason, MAX_REASON_CHARS),
            higher_is_better=hib,
            submission_path=str(path),
            submission_exists=exists,
            grade_s=grade_s,
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
                _read_package_leaderboard(self.leaderboard_path, root=self.root)
                if self.leaderboard_path
                else None
            )
            self._leaderboard_read = True
        return self._leaderboard or ()

    @property
    def leaderboard_path(self) -> Path | None:
        """The leaderboard CSV, if the task has one."""
        if self._config.leaderboard is not None:
            return _check_relative(self.root, self._config.leaderboard)
        default = self.root / "leaderboard.csv"
        return default if default.is_file() else None

    def _inspect_metric_class(self) -> bool:
        metric_py = self.root / "utils" / "metric.py"
        if not metric_py.is_file():
            raise TaskPackageError(
                "utils/metric.py is missing and task.toml names no built-in metric; add a "
                'metric class or set metric = "rmse" (etc.) in task.toml'
            )
        limits = self.grade_limits.with_timeout(min(120.0, self.grade_limits.timeout_s))
        child = run_child({"mode": "inspect", "metric_py": str(metric_py)}, limits=limits)
        out = child.result
        if out is None:
            raise TaskPackageError(
                "utils/metric.py could not be imported within the grader's limits ("
                + _limit_reason(child.limit, child.returncode, limits)
                + ")"
            )
        if "error" in out:
            raise TaskPackageError(f"utils/metric.py: {out['error']}")
        hib = out.get("higher_is_better")
        if not isinstance(hib, bool):
            raise TaskPackageError(
                "utils/metric.py: the metric class's higher_is_better is not a bool; set it to "
                "True or False in its constructor"
            )
        return hib


def _limit_reason(limit: str | None, returncode: int | None, limits: GradeLimits) -> str:
    """Why a grading process gave no result, naming the limit and the fix."""
    if limit == "time":
        return (
            f"grading took longer than {limits.timeout_s:g} s (the grader's wall-clock limit); "
            "shrink the submission"
        )
    if limit == "cpu":
        cpu = limits.cpu_s if limits.cpu_s is not None else limits.timeout_s
        return f"grading used more than {cpu:g} s of CPU time; shrink the submission"
    if limit == "killed":
        return (
            "the grading process was killed (SIGKILL: its CPU hard limit, the kernel's "
            f"out-of-memory killer at {limits.memory_mb} MB, or a cancellation); shrink the "
            "submission"
        )
    return (
        f"the grading process exited with code {returncode} without a result; run the "
        "task's metric by hand to find the crash"
    )


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (a hard link to the answers, say)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _header_of(path: Path) -> list[str]:
    """The header of a CSV, reading its first line only (at most 1 MiB)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            first = fh.readline(1 << 20)
        return [h.strip() for h in next(csv.reader([first]), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _read_package_leaderboard(path: Path, *, root: Path | None = None) -> tuple[float, ...] | None:
    """A task package's leaderboard, read with the one CSV reader
    (:func:`openmle.rewards.read_leaderboard`) under the package's rules: the file stays inside
    the package, and errors are :class:`TaskPackageError` that never echo its content.

    Raises:
        TaskPackageError: the file is outside the package, unreadable or has no ``score`` column.
    """
    if root is not None and not path.resolve().is_relative_to(root.resolve()):
        raise TaskPackageError(
            f"leaderboard {path.name} resolves outside the package (a symbolic link); copy "
            "the file into the package"
        )
    try:
        return tuple(read_leaderboard(path))
    except InvalidArgument:  # its message quotes the file's header: never echo content
        raise TaskPackageError(
            f"leaderboard {path.name} has no 'score' column; write a CSV with a 'score' column"
        ) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise TaskPackageError(
            f"leaderboard {path.name} cannot be read as a CSV ({type(exc).__name__}); "
            "write a UTF-8 CSV with a 'score' column"
        ) from None


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


def validate_path(path: Path | str, *, smoke_test: bool = True) -> ValidationReport:
    """Load the package at ``path`` and validate it; a load failure becomes an error problem.

    Here, not in :mod:`openmle.gym._validate`, so that the validator never imports the package
    module (one direction: ``_package`` -> ``_validate``).
    """
    try:
        task = load_task(path)
    except TaskPackageError as exc:
        p = Path(path)
        return ValidationReport(
            task=p.name, path=str(p), problems=(_load_problem(str(exc)),), checks=("load",)
        )
    return validate_task(task, smoke_test=smoke_test)


def _load_problem(message: str) -> Problem:
    """The problem a package that does not load reports: ``message`` names its file (a
    leading ``task.toml: `` becomes the problem's file, not a repeat of it) and, after its
    last ``; ``, its fix (the problem's ``fix``); a message without one gets the generic fix.
    """
    file = "task.toml" if message.startswith("task.toml") else "."
    message = message.removeprefix("task.toml: ")
    what, sep, fix = message.rpartition("; ")
    if not sep or not what.strip() or not fix.strip():
        what, fix = message, "Fix the package so it loads."
    return Problem(severity=Severity.ERROR, file=file, message=what, fix=fix)
