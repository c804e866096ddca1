"""Render the docs' screenshots of a campaign: the live table of a real bench and a node of
the report's Replay section.

Benches a miniature MLE-bench (``tests/unit/bench/_minibench.py``: 3 competitions x 2 seeds,
3 steps, the offline model, the local sandbox) with a :class:`openmle.bench.LiveBoard` drawing
on a recording ``rich`` console; the table is captured the first time a run has finished while
others are in flight, and saved as ``docs/img/bench-live.svg`` (``Console.save_svg``). Then
the HTML report of one run is written (:func:`openmle.search.write_report`) and the first node
of its Replay section (its request's messages and its answer) is rendered as text into
``docs/img/report-replay.svg`` (no headless browser on the build machines).

Needs the ``live`` extra (rich) and PyYAML. Run: ``python scripts/render_campaign_screens.py``.
"""

from __future__ import annotations

import html
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "docs" / "img"


def _live(mini: tuple[Path, Path], out: Path) -> Any:
    import anyio
    from rich.console import Console
    from tests.unit.bench._minibench import mini_config

    from openmle.backends import make_model
    from openmle.bench import LiveBoard, arun_bench

    config = mini_config(
        mini,
        competitions=("mini-tabular", "mini-jsonl", "mini-images"),
        seeds=(0, 1),
        budget={"steps": 3},
        time_limit_s=120.0,
        concurrency=3,
    )
    board = LiveBoard(console=Console(file=open("/dev/null", "w"), width=110))  # noqa: SIM115
    shot: list[Any] = []

    class Capture:
        """The board, plus a capture when a run finishes while others are in flight."""

        def __getattr__(self, name: str) -> Any:
            return getattr(board, name)

        def finished(self, report: Any, arm: str = "") -> None:
            board.finished(report, arm)
            text = Console(width=110, file=open("/dev/null", "w"))  # noqa: SIM115
            with text.capture() as cap:
                text.print(board.renderable())
            if not shot and " running " in cap.get():
                console = Console(record=True, width=110, force_terminal=True, file=sys.stderr)
                console.print(board.renderable())
                shot.append(console)

    anyio.run(lambda: arun_bench(out, config=config, model=make_model("offline"), board=Capture()))
    assert shot, "no moment with a finished run and runs in flight"
    shot[0].save_svg(str(OUT / "bench-live.svg"), title="openmle bench run (live table)")


def _text(fragment: str) -> str:
    fragment = re.sub(r"<(br|/p|/summary|/pre|/div|/details)[^>]*>", "\n", fragment)
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def _replay(run_dir: Path) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    from openmle.search import write_report

    page = write_report(run_dir).read_text()
    section = page[page.index("<h2>Replay") :]
    first = section.index('<details class="node">')
    node = section[first : section.index('<details class="node">', first + 1)]
    lines = [ln.rstrip() for ln in _text(node).splitlines() if ln.strip()]
    shown = [ln if len(ln) <= 104 else ln[:101] + "..." for ln in lines[:42]]
    console = Console(record=True, width=110, force_terminal=True, file=sys.stderr)
    console.print(
        Panel(
            Text("\n".join(shown)),
            title="report.html: Replay, first node expanded (text capture)",
        )
    )
    console.save_svg(str(OUT / "report-replay.svg"), title="openmle report: node replay")


def main() -> int:
    sys.path.insert(0, str(REPO))
    from tests.unit.bench._minibench import build

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mini = build(Path(tmp) / "mini")
        out = Path(tmp) / "bench"
        _live(mini, out)
        _replay(out / "runs" / "mini-tabular" / "seed-0")
    for name in ("bench-live.svg", "report-replay.svg"):
        sys.stdout.write(f"wrote {OUT / name} ({(OUT / name).stat().st_size:,} bytes)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
