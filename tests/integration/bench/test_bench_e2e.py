"""`openmle bench` end to end on a miniature MLE-bench, on the local sandbox.

- The offline model runs 3 competitions x 2 seeds through the CLI; the same bench killed with
  SIGKILL at two points (inside a run, between finished runs) and resumed each time finishes
  every run exactly once and gives the same report as the uninterrupted one.
- A sample-submission agent (library API) gets a valid, kept, graded submission on every
  competition (tabular, image folder, JSONL answers).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.bench._minibench import IDS, sample_agent_config

from openmle.bench import MLEBench, arun_bench, bench_report, write_report
from openmle.search import read_journal
from openmle.testing import ScriptedModel

pytest.importorskip("yaml")
pytest.importorskip("pandas")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEPS = 2


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "openmle", "bench", *args]


def _run_args(mini: tuple[Path, Path], out: Path) -> list[str]:
    registry, data = mini
    return _cmd(
        "run", "mle-bench-lite", "--data", str(data), "--registry", str(registry),
        "--model", "offline", "--seeds", "2", "--budget", f"steps={STEPS}",
        "--out", str(out), "--concurrency", "2", "--time-limit", "120",
    )  # fmt: skip


def _results(out: Path) -> list[Path]:
    return sorted(out.glob("runs/*/seed-*/bench_result.json"))


def _journal_nodes(out: Path) -> int:
    n = 0
    for j in out.glob("runs/*/seed-*/journal.jsonl"):
        text = j.read_text(errors="replace")
        n += text.count('"event": "node"') + text.count('"event":"node"')
    return n


def _kill_when(cmd: list[str], ready: Callable[[], bool], timeout_s: float = 240.0) -> bool:
    """Start ``cmd`` in its own process group; SIGKILL the group once ``ready()``. Returns
    whether it was killed (False: it finished first)."""
    proc = subprocess.Popen(
        cmd, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            if ready():
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return True
            time.sleep(0.05)
        assert proc.poll() is not None, "the bench did not finish in time"
        return False
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _comparable(out: Path) -> dict[str, Any]:
    rep = json.loads((out / "report.json").read_text())
    return {"runs": rep["runs"], "metrics": rep["metrics"]}


def test_offline_bench_killed_twice_equals_uninterrupted(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    base = tmp_path / "base"
    done = subprocess.run(
        _run_args(mini, base), env=_env(), capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "6 runs:" in done.stdout and "[6/6 runs" in done.stdout
    assert len(_results(base)) == 6
    for name in ("report.md", "report.html", "report.json", "submission.jsonl"):
        assert (base / name).is_file()
    manifest = json.loads((base / "manifest.json").read_text())
    assert manifest["config"]["seeds"] == [0, 1] and manifest["config"]["model"] == "offline"
    assert manifest["hardware"]["cpus"] and "mlebench_commit" in manifest["mlebench"]
    assert manifest["validation"] == {c: "split" for c in IDS}  # the protocol of each
    assert "- validation: search selected on split" in (base / "report.md").read_text()
    report = json.loads((base / "report.json").read_text())
    assert report["metrics"]["num_seeds"] == 2 and len(report["runs"]) == 6
    tabular = [r for r in report["runs"] if r["competition_id"] == "mini-tabular"]
    assert all(r["valid_submission"] and r["submission_exists"] for r in tabular)
    html = (base / "report.html").read_text()
    assert "<svg" in html and "mini-images" in html
    assert "<link" not in html and "<script" not in html  # self-contained

    killed = tmp_path / "killed"
    # Two kills: one inside a run (its journal holds a node, no run finished yet) and one
    # between finished runs; each resume continues from what the kill left.
    points: list[Callable[[], bool]] = [
        lambda: _journal_nodes(killed) >= 1,
        lambda: len(_results(killed)) >= 3,
    ]
    kills = 0
    first = True
    for ready in points:
        cmd = _run_args(mini, killed) if first else _cmd("resume", str(killed), "--quiet")
        first = False
        kills += _kill_when(cmd, ready)
        if len(_results(killed)) == 6:
            break
    assert kills == 2, f"the bench was killed only {kills} times"
    finished = {p: p.stat().st_mtime_ns for p in _results(killed)}
    final = subprocess.run(
        _cmd("resume", str(killed)), env=_env(), capture_output=True, text=True, timeout=600
    )
    assert final.returncode == 0, final.stderr[-2000:]
    assert len(_results(killed)) == 6
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items())  # finished: untouched
    for rd in killed.glob("runs/*/seed-*"):
        nodes = [r["node"]["step"] for r in read_journal(rd) if r["event"] == "node"]
        assert sorted(nodes) == list(range(STEPS)), (rd, nodes)  # every step exactly once
    assert _comparable(killed) == _comparable(base)
    # resuming a finished bench does nothing and keeps the report
    again = subprocess.run(
        _cmd("resume", str(killed), "--json"), env=_env(), capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert again.returncode == 0 and json.loads(again.stdout)["runs"] == 6
    assert "0 to do" in again.stderr
    assert _comparable(killed) == _comparable(base)


SAMPLE_PROGRAM = """```python
import os, shutil
shutil.copyfile(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), "submission.csv")
print("copied the sample submission")
```"""


def test_sample_submission_agent_gets_valid_kept_submissions(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    registry, data = mini
    out = tmp_path / "bench"
    config = sample_agent_config(mini, IDS)
    lines: list[str] = []
    reports = anyio.run(
        lambda: arun_bench(
            out,
            config=config,
            model=ScriptedModel(lambda _req: "plan: copy\n" + SAMPLE_PROGRAM),
            emit=lines.append,
        )
    )
    assert [r.competition_id for r in reports] == list(IDS)
    assert all(r.valid_submission and r.submission_exists for r in reports), reports
    by = {r.competition_id: r for r in reports}
    assert by["mini-images"].is_lower_better and by["mini-images"].score == 0.5
    for r in reports:
        kept = out / r.submission_path
        assert (
            kept.read_bytes()
            == (
                data / r.competition_id / "prepared" / "public" / "sample_submission.csv"
            ).read_bytes()
        )
    paths = write_report(out)
    sub = [json.loads(x) for x in paths["submission_jsonl"].read_text().splitlines()]
    assert {s["competition_id"] for s in sub} == set(IDS)
    graded = json.loads(paths["grading_report"].read_text())
    assert graded["total_runs"] == 3 and graded["total_valid_submissions"] == 3
    assert len(graded["competition_reports"]) == 3
    rep = bench_report(out)
    assert rep.metrics.metrics["valid_submissions_percentage"].mean == 100.0
    assert any("[3/3 runs" in ln for ln in lines)
    # the validation views were made inside the bench, answers outside the public view
    bench = MLEBench.locate(registry, data, valid_dir=out / "valid")
    vt = bench.task("mini-tabular")
    from openmle import Split

    assert vt.public_dir(Split.VALID).is_relative_to(out / "valid")
