"""The search report's tree: its "gen N" labels stay clear of every node and its ring."""

from __future__ import annotations

import re
from pathlib import Path

from tests.unit.search._toy import four_step_run

from openmle import Job, ModelRequest, Outcome, RunResult
from openmle.search._runs.report import write_report

_FONT_PX = 10  # the report's .axis font size
_CHAR_W = 0.65 * _FONT_PX  # generous width of one character of the label


def _model(request: ModelRequest) -> str:
    return "```python\nscore = 0.5\n```"


def _grade(job: Job) -> RunResult:
    return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split, runtime_s=0.1)


def test_generation_labels_clear_the_nodes_and_rings(tmp_path: Path) -> None:
    """The first node (and its best-path ring) sat on top of "gen 0"; no label box meets any
    circle's box now."""
    four_step_run(tmp_path / "run", _model, _grade)
    html = write_report(tmp_path / "run").read_text()
    tree = html[html.index('class="tree"') :]
    tree = tree[: tree.index("</svg>")]
    labels = [
        (float(x), float(y), text)
        for x, y, text in re.findall(r'<text x="([\d.]+)" y="([\d.]+)" class="axis">([^<]*)<', tree)
    ]
    circles = [
        (float(cx), float(cy), float(r))
        for cx, cy, r in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)"', tree)
    ]
    assert any(t == "gen 0" for _, _, t in labels) and circles
    for x, y, text in labels:
        left, right, top, bottom = x, x + _CHAR_W * len(text), y - _FONT_PX, y + 2
        for cx, cy, r in circles:
            apart = cx + r < left or cx - r > right or cy + r < top or cy - r > bottom
            assert apart, f"{text!r} at ({x}, {y}) meets the circle at ({cx}, {cy}) r={r}"
