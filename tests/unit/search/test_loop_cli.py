"""CLI pieces of the search: budget and model specs, export and report on a real run dir."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.unit.search._toy import toy_run

from openmle import Job, ModelRequest, Outcome, RunResult, Split
from openmle._cli import main
from openmle._cli._search import build_model, build_selector, parse_budget
from openmle.errors import InvalidArgument
from openmle.search import (
    Budget,
    GreedySelector,
    SearchConfig,
    ThreeFactorSelector,
)
from openmle.search._runs.export import COLUMNS, export_run, node_rows


def test_parse_budget() -> None:
    """Budget specs become Budgets; bad keys and values name the part."""
    b = parse_budget("steps=30, sandbox_s=600,tokens=2e6", on_exhaust="cancel")
    assert b == Budget(steps=30, sandbox_s=600.0, tokens=2_000_000, on_exhaust="cancel")
    with pytest.raises(InvalidArgument, match="'walltime=3'"):
        parse_budget("walltime=3")
    with pytest.raises(InvalidArgument, match="steps='many'"):
        parse_budget("steps=many")


def test_build_model_and_selector(tmp_path: Path) -> None:
    """Model and selector specs build the right objects or explain the choices."""
    assert type(build_model("offline")).__name__ == "OfflineModel"
    assert getattr(build_model("offline-numpy"), "sklearn", None) is False
    assert type(build_model("offline", record=str(tmp_path / "r.jsonl"))).__name__ == (
        "RecordingModel"
    )
    with pytest.raises(InvalidArgument, match="not found"):
        build_model(f"replay:{tmp_path / 'missing.jsonl'}")
    with pytest.raises(InvalidArgument, match="offline"):
        build_model("gpt-17")
    assert isinstance(build_selector("greedy", False), GreedySelector)
    sel = build_selector("three-factor-paper", True)
    assert isinstance(sel, ThreeFactorSelector) and sel.w_delta == 0.6


def _program(request: ModelRequest) -> str:
    step = int(request.metadata["step"])
    if step == 2:
        return "```python\nraise KeyError('price')\n```"
    return f"I try {step}.\n```python\nscore = {0.5 + 0.01 * step}\n```"


def _grade(job: Job) -> RunResult:
    if "score = " not in job.code:
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR, split=job.split, error_signature="KeyError: '<str>'"
        )
    value = float(job.code.split("score = ")[1].split()[0])
    bonus = 0.25 if job.split is Split.TEST else 0.0
    return RunResult(outcome=Outcome.SUCCESS, score=value + bonus, split=job.split, runtime_s=2.0)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished run written with the fakes."""
    return toy_run(
        tmp_path / "run",
        _program,
        _grade,
        budget=Budget(steps=8, sandbox_s=100.0),
        config=SearchConfig(initial_drafts=3),
        workers=2,
    )


def test_export_rows_keep_test_score_on_the_chosen_row_only(run_dir: Path) -> None:
    """The table has one row per node and the test score on the best row only."""
    rows = node_rows(run_dir)
    assert len(rows) == 8 and set(rows[0]) == set(COLUMNS)
    best = [r for r in rows if r["is_best"]]
    assert len(best) == 1 and best[0]["test_score"] == pytest.approx(best[0]["score"] + 0.25)
    assert all(r["test_score"] is None for r in rows if not r["is_best"])
    assert any(r["outcome"] == "runtime_error" for r in rows)


@pytest.mark.needs("pyarrow")
def test_export_parquet_and_jsonl(run_dir: Path) -> None:
    """Parquet and JSONL exports hold the same rows."""
    import pyarrow.parquet as pq

    pq_path = export_run(run_dir, format="parquet")
    table = pq.read_table(pq_path)
    assert table.num_rows == 8 and table.column_names == list(COLUMNS)
    js = export_run(run_dir, format="jsonl", out=run_dir / "x" / "nodes.jsonl")
    lines = [json.loads(x) for x in js.read_text().splitlines()]
    assert [r["node_id"] for r in lines] == table.column("node_id").to_pylist()


@pytest.mark.needs("matplotlib")
def test_report_is_self_contained_with_all_sections(run_dir: Path) -> None:
    """report.html inlines its SVGs and shows tree, curves, lineage, budget; plots exist."""
    assert main(["report", str(run_dir), "--json"]) == 0
    html = (run_dir / "report.html").read_text()
    for heading in ("Search tree", "Validation score", "Best lineage", "Budget", "Outcomes"):
        assert f"<h2>{heading}" in html
    assert html.count("<svg") == 3
    assert "http://" not in html and "https://" not in html and "<script" not in html
    assert "test score (chosen program)" in html
    assert (run_dir / "score.png").stat().st_size > 1000
    assert (run_dir / "score.svg").read_text().lstrip().startswith("<?xml")


def test_cli_export_and_errors(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``openmle export`` writes the file; a non-run directory exits 1 with a message."""
    assert main(["export", str(run_dir), "--format", "jsonl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "jsonl"
    assert main(["report", str(tmp_path)]) == 1
    assert "not a run directory" in capsys.readouterr().err


def test_search_preset_paper_records_the_preset_and_its_deviations(tmp_path: Path) -> None:
    """`openmle search --preset paper --budget steps=2`: the preset's sandbox and wall caps,
    7,200 s per program and Debug depth 10 hold; steps (and the one seed, the split
    protocol, no GPU cap) are the recorded deviations; Draft saw the data preview."""
    import gzip

    out = tmp_path / "run"
    rc = main(["search", "--task", "tabular-binary", "--preset", "paper", "--budget", "steps=2",
               "--out", str(out), "--quiet"])  # fmt: skip
    assert rc == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["max_debug_depth"] == 10 and m["config"]["timeout_s"] == 7200.0
    assert (m["budget"]["steps"], m["budget"]["sandbox_s"], m["budget"]["wall_s"]) == (
        2,
        43_200.0,
        64_800.0,
    )
    devs = m["extra"]["preset"]["deviations"]
    assert set(devs) == {"steps", "seeds", "validation", "gpu_memory_gb"}
    assert devs["steps"] == {"preset": 800, "used": 2}
    page = (out / "report.html").read_text()
    assert "preset <code>paper</code>" in page and "steps: preset 800 -&gt; used 2" in page
    first = json.loads(gzip.decompress(next((out / "requests").glob("*.json.gz")).read_bytes()))
    assert "Files (under the data directory)" in first["messages"][-1]["content"]
