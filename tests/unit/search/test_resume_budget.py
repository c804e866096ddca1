"""Resuming with a budget: the caps named change, the others stay; each session's budget is
recorded, the report shows the budget in force, the export and report use the latest test grade.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest
from tests.unit.search._toy import toy_run

from openmle import Job, ModelRequest, Outcome, RunResult, Split
from openmle._cli._search import resumed_budget
from openmle.errors import InvalidArgument
from openmle.search import (
    Budget,
    PriceTable,
    ResumeSpec,
    RunDir,
    SearchConfig,
    export_run,
    resume_search,
    write_report,
)
from openmle.testing import FunctionSandbox, ScriptedModel


def _program(request: ModelRequest) -> str:
    step = int(request.metadata["step"])
    return f"I try {step}.\n```python\nscore = {0.5 + 0.01 * step}\n```"


def _grade(job: Job) -> RunResult:
    value = float(job.code.split("score = ")[1].split()[0])
    bonus = 0.25 if job.split is Split.TEST else 0.0
    return RunResult(outcome=Outcome.SUCCESS, score=value + bonus, split=job.split, runtime_s=1.0)


def _spec(budget: Budget | None) -> ResumeSpec:
    return ResumeSpec(model=ScriptedModel(_program), sandbox=FunctionSandbox(_grade), budget=budget)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished 4-step run capped at 4 steps and 1200 wall seconds."""
    config, budget = SearchConfig(initial_drafts=2), Budget(steps=4, wall_s=1200.0)
    return toy_run(tmp_path / "run", _program, _grade, budget=budget, config=config)


def test_cli_budget_changes_only_the_caps_it_names() -> None:
    """``--budget steps=60`` extends the step cap and keeps wall_s (it used to drop it)."""
    recorded = Budget(steps=40, wall_s=1200.0, on_exhaust="cancel")
    assert resumed_budget(recorded, "steps=60", None) == Budget(
        steps=60, wall_s=1200.0, on_exhaust="cancel"
    )
    # wall_s=12 on a finished 6-step run: the step cap stays, so nothing more runs
    assert resumed_budget(Budget(steps=6), "wall_s=12", None) == Budget(steps=6, wall_s=12.0)
    assert resumed_budget(recorded, None, None) == recorded
    priced = Budget(steps=4, usd=1.0, prices=PriceTable(prices={"m": (1.0, 2.0)}))
    assert resumed_budget(priced, "usd=5", None).usd == 5.0  # the recorded prices count money
    with pytest.raises(InvalidArgument, match="--budget"):
        resumed_budget(recorded, "walltime=3", None)


def test_resume_records_each_sessions_budget_and_the_report_shows_the_one_in_force(
    run_dir: Path,
) -> None:
    """The extended budget is recorded, used by the next resume and shown by the report."""
    rd = RunDir.open(run_dir)
    assert rd.budget() == Budget(steps=4, wall_s=1200.0)
    extended = attrs.evolve(rd.budget(), steps=6)
    result = resume_search(run_dir, _spec(extended), quiet=True)
    assert len(result.nodes) == 6
    sessions = RunDir.open(run_dir).sessions()
    assert [s["event"] for s in sessions] == ["start", "end", "resume", "end"]
    assert sessions[0]["budget"]["steps"] == 4 and sessions[2]["budget"]["steps"] == 6
    assert RunDir.open(run_dir).budget() == Budget(steps=6, wall_s=1200.0)
    # a resume without a budget keeps the one in force (not the manifest's steps=4)
    again = resume_search(run_dir, _spec(None), quiet=True)
    assert len(again.nodes) == 6 and again.stop_reason == "steps"
    assert json.loads((run_dir / "manifest.json").read_text())["budget"]["steps"] == 4
    html = write_report(run_dir).read_text()
    assert "6 of 6 (100%)" in html and "of 4" not in html
    assert "started with" in html


def test_an_extended_run_is_graded_again_and_the_latest_grade_counts(run_dir: Path) -> None:
    """Extending a finished run grades the test split again; report and export use it."""
    result = resume_search(run_dir, _spec(Budget(steps=6, wall_s=1200.0)), quiet=True)
    journal = (run_dir / "journal.jsonl").read_text().splitlines()
    finals = [r for r in map(json.loads, journal) if r["event"] == "final"]
    assert len(finals) == 2
    assert result.test_score is not None
    assert finals[-1]["result"]["score"] == pytest.approx(result.test_score)
    assert RunDir.open(run_dir).final_result()[1].score == pytest.approx(result.test_score)  # type: ignore[index]
    rows = [
        json.loads(x)
        for x in export_run(run_dir, format="jsonl").read_text().splitlines()
        if x.strip()
    ]
    graded = [r for r in rows if r.get("test_score") is not None]
    assert [r["test_score"] for r in graded] == [pytest.approx(result.test_score)]
