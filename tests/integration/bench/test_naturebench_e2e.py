"""`openmle bench run --benchmark naturebench` end to end on a miniature NatureBench checkout.

The offline model runs the three cases (two domains; a CPU case, a "GPU" case and a case whose
evaluator fails) through the CLI on the local sandbox; each job the search makes is recorded,
so the GPU demand of the GPU case and the 4-hour default are checked where they matter. Then
`openmle bench report --judge` writes NatureBench's metrics, ``results.csv`` and
``submission.yaml``; the metrics are checked against a hand computation from the evaluator's raw
results and the SOTA values written in ``_mininb``, with an invalid (judged) and an unscored
case, and ``results.csv`` passes the specification's rules.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.unit.bench._mininb import build

from openmle.bench.naturebench import GRADE_RECORD, check_results

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]


def _env(jobs: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env["OPENMLE_TEST_JOBS"] = str(jobs)
    env["CUDA_VISIBLE_DEVICES"] = "0"  # one (pretend) GPU for the sandbox to lease
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "openmle", "bench", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _hand_g(cid: str, raw: dict[str, Any]) -> float:
    """g by hand from the constants in _mininb's metadata."""
    if cid == "nb-cpu-bio":  # ErrorRate, lower is better, SOTA "~0.05 to ~0.2" -> 0.05
        return -(float(raw["main"]["ErrorRate"]) - 0.05) / 0.05
    # Accuracy, higher is better, SOTA max(0.8, 0.75); 'extra' has no score: -1; 'zero' skipped
    return ((float(raw["main"]["Accuracy"]) - 0.8) / 0.8 + -1.0) / 2


def test_naturebench_bench_run_and_report(tmp_path: Path) -> None:
    # As the harness lays it out: the download under --data-dir, task-set/ in the checkout.
    data = build(tmp_path / "naturebench_data")
    checkout = tmp_path / "NatureBench"
    checkout.mkdir()
    for name in ("task-set", "submit-results"):
        shutil.move(data / name, checkout / name)
    jobs = tmp_path / "jobs.jsonl"
    out = tmp_path / "bench"
    env = _env(jobs)
    _cli(
        env, "run", "all", "--benchmark", "naturebench", "--tasks-dir", str(data),
        "--registry", str(checkout),
        "--model", "offline", "--seeds", "1", "--budget", "steps=3", "--out", str(out),
        "--sandbox", "tests.integration.bench._nbsandbox:recording", "--quiet",
    )  # fmt: skip
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["benchmark"] == "naturebench"
    assert manifest["naturebench"]["root"] == str(data.resolve())
    assert manifest["naturebench"]["harness"] == str(checkout.resolve())

    # Resource demand reached the jobs the search made (valid and test).
    seen: dict[str, set[int]] = {}
    for line in jobs.read_text().splitlines():
        job = json.loads(line)
        cid = job["task"].split("@seed-")[0]
        seen.setdefault(cid, set()).add(job["resources"]["gpus"])
        assert job["timeout_s"] == 14_400.0  # the reference 4 hours by default
    assert seen == {"nb-cpu-bio": {0}, "nb-gpu-chem": {1}, "nb-broken-bio": {1}}

    judge = tmp_path / "judge.json"
    judge.write_text(
        json.dumps({"nb-gpu-chem": {"is_valid": False, "reason": "used the test labels"}})
    )
    _cli(
        env, "report", str(out), "--judge", str(judge), "--judge-model", "a-judge",
        "--organization", "Independent", "--contact", "me@example.org",
    )  # fmt: skip

    # The evaluator's structured result is recorded per case.
    raws: dict[str, dict[str, Any]] = {}
    for cid in ("nb-cpu-bio", "nb-gpu-chem"):
        rec = json.loads((out / "submissions" / cid / "seed-0" / GRADE_RECORD).read_text())
        assert rec["case_id"] == cid and rec["status"] == "scored", rec
        raws[cid] = rec["raw"]
        assert rec["g"] == pytest.approx(_hand_g(cid, rec["raw"]))
    # The broken evaluator failed every validation grade: nothing was test-graded, and the
    # evaluator's failure is what the search recorded for its programs.
    assert not (out / "submissions" / "nb-broken-bio" / "seed-0" / GRADE_RECORD).exists()
    journal = (out / "runs" / "nb-broken-bio" / "seed-0" / "journal.jsonl").read_text()
    assert "the evaluator raised RuntimeError" in journal

    g_cpu = _hand_g("nb-cpu-bio", raws["nb-cpu-bio"])
    g_gpu = _hand_g("nb-gpu-chem", raws["nb-gpu-chem"])
    metrics = json.loads((out / "naturebench" / "metrics.json").read_text())["seeds"]["0"]
    overall = metrics["overall"]
    every = [g_cpu, -1.0, -1.0]  # gpu judged invalid, broken unscored
    assert overall["task_count"] == 3
    assert overall["score_rate"] == pytest.approx(2 / 3)
    assert overall["completion_rate"] == pytest.approx(1 / 3)
    assert overall["invalid_count"] == 1 and overall["no_score_count"] == 1
    assert overall["match_sota"] == pytest.approx((g_cpu >= 0) / 3)
    assert overall["surpass_sota"] == pytest.approx((g_cpu > 0.1) / 3)
    assert overall["mean_g_all"] == pytest.approx(statistics.fmean(every))
    assert overall["median_g_all"] == pytest.approx(statistics.median(every))
    assert overall["median_g_valid"] == pytest.approx(g_cpu)
    bio, chem = metrics["by_domain"]["Biology"], metrics["by_domain"]["Chemistry"]
    assert bio["task_count"] == 2 and bio["completion_rate"] == pytest.approx(0.5)
    assert bio["mean_g_all"] == pytest.approx((g_cpu - 1.0) / 2)
    assert chem["score_rate"] == 1.0 and chem["completion_rate"] == 0.0
    assert chem["mean_g_all"] == -1.0 and chem["median_g_valid"] is None

    results = out / "naturebench" / "seed-0" / "results.csv"
    assert check_results(results, ["nb-cpu-bio", "nb-gpu-chem", "nb-broken-bio"]) == []
    lines = results.read_text().splitlines()
    assert lines[0] == "case_id,final_status,best_score,judge_verdict,judge_reason"
    assert lines[1] == "nb-broken-bio,no_valid_attempt,,not_applicable,not_applicable"
    assert lines[2].startswith("nb-cpu-bio,success,") and lines[2].endswith(
        ",valid,no validity judge was run"
    )
    assert float(lines[2].split(",")[2]) == pytest.approx(g_cpu)
    assert lines[3].endswith(",invalid,used the test labels")
    assert float(lines[3].split(",")[2]) == pytest.approx(g_gpu)  # raw g kept when invalid
    yaml_text = (out / "naturebench" / "seed-0" / "submission.yaml").read_text()
    assert 'organization: "Independent"' in yaml_text
    assert 'judge_model: "a-judge"' in yaml_text and "timeout_seconds:" in yaml_text
