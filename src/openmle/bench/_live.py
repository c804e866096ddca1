"""Live progress of a bench on a terminal: a ``rich`` table of the runs in flight and totals.

:class:`LiveBoard` receives what the runner knows (a run started, committed a step, finished)
and renders one table: per run in flight its competition, seed, step, best validation score,
budget left and state; below, the totals (runs done of all, valid submissions, medals so far,
ETA). ``openmle bench run`` and ``bench resume`` show it when standard output is a terminal and
``rich`` is installed (the ``live`` extra); otherwise they print plain lines, as before.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, final

from attrs import define, field

from openmle._compat import require

if TYPE_CHECKING:
    from openmle.gym import GradeReport
    from openmle.search import Progress

__all__ = ["LiveBoard", "committed_fractions"]


def committed_fractions(p: Progress, steps: int | None) -> dict[str, float]:
    """The share of each capped budget quantity a run has used, from its
    :class:`openmle.search.Progress` ``p``, with ``steps`` counted as its line counts them:
    committed steps (``p.steps_done`` of ``steps``), not proposed ones, so ``step 1/2`` goes
    with ``steps 50% left``.
    """
    fr = dict(p.fractions)
    if "steps" in fr and steps:
        fr["steps"] = p.steps_done / steps
    return fr


_DONE_SHOWN = 5
"""Finished runs kept in the table below the ones in flight (the most recent)."""


@define(eq=False)
class _Row:
    competition: str
    seed: int
    arm: str = ""
    state: str = "queued"
    step: int = 0
    steps: int | None = None
    best: float | None = None
    left: float | None = None
    result: str = ""
    order: int = 0


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.5g}"


def _eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "-"
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{s:02d}s"


@final
@define(eq=False)
class LiveBoard:
    """The live table of a bench (needs ``rich``: ``pip install 'openmle[live]'``).

    Args:
        console: the ``rich.console.Console`` to draw on (default: a new one on standard
            output).
        refresh_per_second: redraws per second while live.
        clock: seconds, monotonic (tests pass their own).

    Use it as a context manager around the bench (``with board: ...``) and pass it to
    :func:`openmle.bench.arun_bench` as ``board=``; :meth:`renderable` is the table at any
    time (what the screen shows). Lines the runner prints go above the table (:meth:`log`).

    Raises:
        MissingDependency: ``rich`` is not installed.
    """

    console: Any = None
    refresh_per_second: float = 4.0
    clock: Callable[[], float] = field(default=time.monotonic)
    total: int = field(default=0, init=False)
    done: int = field(default=0, init=False)
    valid: int = field(default=0, init=False)
    medals: int = field(default=0, init=False)
    _rows: dict[tuple[str, str, int], _Row] = field(factory=dict, init=False)
    _t0: float = field(default=0.0, init=False)
    _finished_here: int = field(default=0, init=False)
    _live: Any = field(default=None, init=False)
    _n: int = field(default=0, init=False)

    def __attrs_post_init__(self) -> None:
        require("rich", "live")
        if self.console is None:
            from rich.console import Console

            self.console = Console()
        self._t0 = self.clock()

    # ------------------------------------------------------------------ what the runner says

    def start(self, *, total: int, done: int, valid: int, medals: int) -> None:
        """The bench: ``total`` runs, ``done`` of them already finished (with ``valid`` valid
        submissions and ``medals`` medals).
        """
        self.total, self.done, self.valid, self.medals = total, done, valid, medals
        self._t0 = self.clock()
        self._refresh()

    def _row(self, competition: str, seed: int, arm: str) -> _Row:
        key = (arm, competition, seed)
        row = self._rows.get(key)
        if row is None:
            self._n += 1
            row = self._rows[key] = _Row(competition=competition, seed=seed, arm=arm, order=self._n)
        return row

    def started(self, competition: str, seed: int, arm: str = "") -> None:
        """A run began (or resumed)."""
        self._row(competition, seed, arm).state = "running"
        self._refresh()

    def progress(
        self, competition: str, seed: int, p: Progress, steps: int | None, arm: str = ""
    ) -> None:
        """A run committed a step: ``p`` is the search's :class:`openmle.search.Progress`."""
        row = self._row(competition, seed, arm)
        row.state = "running"
        row.step = int(p.steps_done)
        row.steps = steps
        row.best = p.best_score
        fr = committed_fractions(p, steps)
        row.left = max(0.0, 1.0 - max(fr.values())) if fr else None
        self._refresh()

    def finished(self, report: GradeReport, arm: str = "") -> None:
        """A run ended with ``report`` (a :class:`openmle.gym.GradeReport`)."""
        row = self._row(report.competition_id, int(report.seed or 0), arm)
        row.state = "done"
        self._n += 1
        row.order = self._n
        row.left = None
        medal = report.medal or ("valid" if report.valid_submission else "no valid submission")
        row.result = f"test {_fmt(report.score)} ({medal})"
        self.done += 1
        self._finished_here += 1
        self.valid += int(bool(report.valid_submission))
        self.medals += int(bool(report.any_medal))
        self._refresh()

    def failed(self, competition: str, seed: int, why: str, arm: str = "") -> None:
        """A run stopped without a result (resume the bench to finish it)."""
        row = self._row(competition, seed, arm)
        row.state = "stopped"
        row.result = why[:80]
        self._refresh()

    def log(self, line: str) -> None:
        """Print ``line`` above the table."""
        self.console.print(line, highlight=False, markup=False)

    # ------------------------------------------------------------------------- rendering

    def eta_s(self) -> float:
        """Seconds until every run is done, at this session's pace (inf before one ends)."""
        if not self._finished_here:
            return math.inf
        return float((self.clock() - self._t0) / self._finished_here * (self.total - self.done))

    def renderable(self) -> Any:
        """The table as the screen shows it now (a ``rich`` renderable)."""
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        arms = any(r.arm for r in self._rows.values())
        table = Table(title="openmle bench: runs in flight", expand=False)
        table.add_column("competition", overflow="fold")
        if arms:
            table.add_column("arm")
        table.add_column("seed", justify="right")
        table.add_column("step", justify="right")
        table.add_column("best valid", justify="right")
        table.add_column("budget left", justify="right")
        table.add_column("state")
        live = sorted((r for r in self._rows.values() if r.state != "done"), key=lambda r: r.order)
        ended = sorted(
            (r for r in self._rows.values() if r.state == "done"), key=lambda r: -r.order
        )[:_DONE_SHOWN]
        for r in [*live, *ended]:
            step = f"{r.step}/{r.steps}" if r.steps else str(r.step)
            left = "-" if r.left is None else f"{r.left:.0%}"
            state = r.state if not r.result else f"{r.state}: {r.result}"
            style = {"running": "bold", "done": "dim", "stopped": "red"}.get(r.state, "")
            cells = [r.competition, *([r.arm or "-"] if arms else []), str(r.seed), step,
                     _fmt(r.best), left, state]  # fmt: skip
            table.add_row(*cells, style=style)
        totals = Text(
            f"runs done {self.done}/{self.total}  valid {self.valid}  medals {self.medals}  "
            f"in flight {sum(r.state == 'running' for r in self._rows.values())}  "
            f"ETA {_eta(self.eta_s())}"
        )
        return Group(table, totals)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.renderable())

    def __enter__(self) -> LiveBoard:
        from rich.live import Live

        self._live = Live(
            self.renderable(),
            console=self.console,
            refresh_per_second=self.refresh_per_second,
            transient=False,
        )
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.update(self.renderable())
            live.__exit__(None, None, None)
