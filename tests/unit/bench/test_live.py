"""The live table of a bench, drawn on a recording rich console forced to be a terminal."""

from __future__ import annotations

import io

import pytest
from tests.unit.bench._progress import progress

from openmle.gym import GradeReport

rich_console = pytest.importorskip("rich.console", reason="the 'live' extra is not installed")

from openmle.bench import LiveBoard  # noqa: E402 - after the skip naming the extra


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _report(cid: str, seed: int, score: float, medal: bool) -> GradeReport:
    return GradeReport(
        task=cid,
        score=score,
        seed=seed,
        submission_exists=True,
        valid=True,
        gold_medal=medal,
        any_medal=medal,
    )


def test_the_table_shows_runs_in_flight_and_totals() -> None:
    console = rich_console.Console(
        record=True, force_terminal=True, width=120, file=io.StringIO(), color_system="truecolor"
    )
    clock = Clock()
    board = LiveBoard(console=console, clock=clock)
    with board:
        board.start(total=4, done=1, valid=1, medals=0)
        board.started("spooky-author-identification", 0)
        board.started("aerial-cactus-identification", 1)
        board.progress("spooky-author-identification", 0, progress(3, 0.41234, 0.15), 20)
        board.progress("aerial-cactus-identification", 1, progress(7, None, 0.35), 20)
        clock.t = 60.0
        board.finished(_report("aerial-cactus-identification", 1, 0.99991, True))
        board.failed("random-acts-of-pizza", 2, "the registry has no grader")
        board.log("a line above the table")
    text = console.export_text(clear=False)
    table = text[text.index("runs in flight") :]
    assert "a line above the table" in text
    row = next(ln for ln in table.splitlines() if "spooky-author-identification" in ln)
    for cell in ("3/20", "0.41234", "85%", "running"):
        assert cell in row, row
    done = next(ln for ln in table.splitlines() if "aerial-cactus" in ln)
    assert "done: test 0.99991 (gold)" in done
    assert "stopped: the registry has no grader" in table
    # 2 done of 4 (one before this session); 1 finished here in 60 s: 2 left -> 2 minutes
    assert "runs done 2/4  valid 2  medals 1  in flight 1  ETA 2m00s" in table
    assert "\x1b[" in console.file.getvalue()  # drawn as a terminal (ANSI), not plain text
    svg = console.export_svg(title="openmle bench")
    assert svg.startswith("<svg") and "spooky" in svg


def test_eta_is_unknown_before_a_run_ends() -> None:
    board = LiveBoard(console=rich_console.Console(file=io.StringIO()), clock=Clock())
    board.start(total=2, done=0, valid=0, medals=0)
    assert board.eta_s() == float("inf")
    console = rich_console.Console(record=True, width=100, file=io.StringIO())
    console.print(board.renderable())
    assert "ETA -" in console.export_text()
