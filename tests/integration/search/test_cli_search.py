"""The CLI end to end: real programs on a bundled task in the local sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import openmle
from openmle.search import RunDir, read_journal

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def cli(*args: str) -> dict[str, object]:
    """Run ``python -m openmle ARGS --json`` and return its JSON summary."""
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    proc = subprocess.run(
        [sys.executable, "-m", "openmle", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_search_resume_export_report_on_a_bundled_task(tmp_path: Path) -> None:
    """search runs real programs, resume extends the run, export and report read it."""
    out = tmp_path / "run"
    s = cli(
        "search",
        "--task",
        "tabular-regression",
        "--model",
        "offline-numpy",
        "--budget",
        "steps=4",
        "--workers",
        "2",
        "--timeout",
        "120",
        "--out",
        str(out),
    )
    assert s["nodes"] == 4 and s["stop_reason"] == "steps"
    assert s["best_valid_score"] is not None and s["test_score"] is not None
    assert (out / "report.html").exists()
    m = RunDir.open(out).manifest
    assert m["task"]["higher_is_better"] is False
    assert m["extra"]["cli"]["model"] == "offline-numpy"
    r = cli("resume", str(out), "--budget", "steps=6")
    assert r["nodes"] == 6
    finals = [x for x in read_journal(out) if x["event"] == "final"]
    assert len(finals) == 2  # the extended run chose and graded again
    e = cli("export", str(out), "--format", "parquet")
    assert Path(str(e["path"])).exists()


def test_demo_writes_a_report_and_summaries_that_resume_reuses(tmp_path: Path) -> None:
    """One demo run: it searches a bundled task with the offline model and writes its report;
    --summaries: the offline model writes node summaries on demand into the run directory;
    resume (which reads the flag from the manifest) extends the run and keeps them."""
    out = tmp_path / "run"
    s = cli("demo", "--steps", "4", "--summaries", "--out", str(out))
    assert s["nodes"] == 4
    assert Path(str(s["report"])).exists()
    files = sorted((out / "summaries").glob("*.json"))
    assert files, "no summary was written"
    first = {p.name: p.read_text() for p in files}
    for text in first.values():
        record = json.loads(text)
        assert record["summary"].startswith("Fits ") and "Validation" in record["summary"]
    assert RunDir.open(out).manifest["extra"]["cli"]["summaries"] is True
    r = cli("resume", str(out), "--budget", "steps=6", "--no-report", "--quiet")
    assert r["nodes"] == 6
    after = {p.name: p.read_text() for p in (out / "summaries").glob("*.json")}
    assert all(after[name] == text for name, text in first.items())
