"""The bench's benchmark protocol: what the runner and the report ask of any benchmark.

A benchmark is a folder under ``openmle/bench/`` (``mlebench/``, ``naturebench/``) that
registers one :class:`BenchmarkKind` when it is imported (``openmle.bench`` imports the
built-in ones). The runner (:func:`openmle.bench.arun_bench`) and the report
(:func:`openmle.bench.write_report`) only ever see these three things:

- :class:`BenchmarkKind`: the registered description (name, title, whether its tasks have
  leaderboards, how to open it from a :class:`~openmle.bench.BenchConfig`, its extra report);
- :class:`Benchmark`: an opened benchmark (its ids and suites, a task per id, what the bench
  manifest records about it);
- :class:`BenchTask`: one competition or case (description, direction, resources, time limit,
  leaderboard, public data, grading).

A new benchmark implements the two protocols in its own folder and calls
:func:`register_benchmark`; nothing else in the bench changes (the tests hold such an
adapter, a toy benchmark run end to end).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, final, runtime_checkable

from attrs import field, frozen

from openmle._task_protocol import GradeLike
from openmle._types import Resources, Split
from openmle.errors import InvalidArgument

if TYPE_CHECKING:
    from openmle.bench._medals import Leaderboard
    from openmle.bench._runner import BenchConfig

__all__ = [
    "BenchTask",
    "Benchmark",
    "BenchmarkKind",
    "benchmark_kind",
    "benchmark_names",
    "register_benchmark",
]


@runtime_checkable
class BenchTask(Protocol):
    """One competition (or case) of a benchmark, as the bench runs, grades and reports it.

    A task is also what the bench's sandbox resolves a job's task to (it may offer the
    sandbox's optional task attributes too: ``dockerfile``, ``outputs``, ``grade_limits``).
    """

    @property
    def name(self) -> str:
        """The competition id."""
        ...

    @property
    def description(self) -> str:
        """The task description the model reads."""
        ...

    @property
    def higher_is_better(self) -> bool:
        """The score's direction."""
        ...

    @property
    def resources(self) -> Resources:
        """What one program run may use."""
        ...

    @property
    def time_limit_s(self) -> float:
        """The wall-clock limit of one program run, in seconds."""
        ...

    @property
    def leaderboard(self) -> Leaderboard | None:
        """The human leaderboard medals and Human Rank are computed against; None when the
        benchmark has none (the score is then reported as is, without medals).

        Raises:
            OpenMLEError: the benchmark has leaderboards but this one cannot be read.
        """
        ...

    @property
    def known_names(self) -> tuple[str, ...]:
        """Other names of the task (a human name) the decontamination check matches."""
        ...

    @property
    def grades_kept_copy(self) -> bool:
        """Whether a test submission file is graded from the bench's kept copy (the grade
        writes a record beside it) rather than from the sandbox's copy.
        """
        ...

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """Paths a program must never read (answers, evaluators)."""
        ...

    def public_dir(self, split: Split) -> Path:
        """The data a program of ``split`` reads."""
        ...

    def grade(self, submission: Path, split: Split, *, timeout_s: float | None = None) -> GradeLike:
        """Grade ``submission`` (a grade report, see :data:`openmle._task_protocol.GradeLike`);
        never raises for a bad submission (an invalid report).
        """
        ...

    def preflight(self) -> str | None:
        """Why the task cannot run (one line with the fix), or None; may prepare what a run
        needs first (a validation view).

        Raises:
            OpenMLEError: the task cannot be prepared (the message says why).
        """
        ...


@runtime_checkable
class Benchmark(Protocol):
    """An opened benchmark: its ids and suites, a task per id, its manifest entries.

    Optional: a ``data_problem(ids) -> str | None`` method, asked by the bench's preflight
    before any task: why the benchmark's data folder serves none of ``ids`` (one line naming
    the flag and the fix), so a wrong folder is one error rather than one per task.
    """

    def ids(self) -> list[str]:
        """Every competition id (sorted)."""
        ...

    def suite(self, spec: str | Sequence[str]) -> list[str]:
        """The ids of a suite name, an id list file, comma-separated ids or a list of ids.

        Raises:
            InvalidArgument: an unknown suite or id, or an empty selection.
        """
        ...

    def task(self, cid: str) -> BenchTask:
        """The task of ``cid``.

        Raises:
            InvalidArgument: an unknown id.
        """
        ...

    def manifest_entries(self, competitions: Sequence[str]) -> dict[str, Any]:
        """The entries the bench manifest records about the benchmark (its checkout, commit,
        per-competition settings), by top-level key.
        """
        ...


ReportFn = Callable[[Path, Mapping[str, Any]], dict[str, Path]]
"""Writes a benchmark's own report files into a bench directory (``options``: the keyword
options of ``openmle bench report``); returns their paths by kind."""


def _name(inst: object, attribute: object, value: str) -> None:
    if not isinstance(value, str) or not value or not value.replace("-", "").isalnum():
        raise InvalidArgument(
            f"Expected a benchmark name of letters, digits and '-' but got {value!r}"
        )


@final
@frozen(kw_only=True)
class BenchmarkKind:
    """A registered benchmark.

    Args:
        name: ``BenchConfig.benchmark`` (``mle-bench``, ``naturebench``).
        title: how reports name it (``MLE-bench``).
        open: builds the :class:`Benchmark` a bench runs, from the bench's config and its
            directory (where it may keep derived data, such as validation views).
        leaderboards: its tasks have leaderboards (a report without one at hand says the
            medals are not verified).
        report: writes its own report files next to the bench's (None: none).
    """

    name: str = field(validator=_name)
    title: str
    open: Callable[[BenchConfig, Path], Benchmark]
    leaderboards: bool = False
    report: ReportFn | None = None


_KINDS: dict[str, BenchmarkKind] = {}


def register_benchmark(kind: BenchmarkKind, *, replace: bool = False) -> None:
    """Make ``kind`` known to ``BenchConfig.benchmark`` and the bench (its folder calls this
    when imported).

    Raises:
        InvalidArgument: another benchmark of that name is registered (``replace=False``).
    """
    if not isinstance(kind, BenchmarkKind):
        raise InvalidArgument(f"Expected a BenchmarkKind but got {type(kind).__name__}")
    old = _KINDS.get(kind.name)
    if old is not None and old != kind and not replace:
        raise InvalidArgument(
            f"A benchmark named {kind.name!r} is already registered; choose another name or "
            "pass replace=True"
        )
    _KINDS[kind.name] = kind


def benchmark_names() -> tuple[str, ...]:
    """The registered benchmarks, in registration order."""
    return tuple(_KINDS)


def benchmark_kind(name: str) -> BenchmarkKind:
    """The registered benchmark ``name``.

    Raises:
        InvalidArgument: no benchmark of that name.
    """
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise InvalidArgument(
            f"Expected benchmark in {benchmark_names()} but got {name!r}"
        ) from None
