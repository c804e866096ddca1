"""MLE-bench Lite end to end on the miniature of all 22 competitions (MLE-bench's prepared
layout, openmle's own graders), on the local sandbox.

- One bench run (shared by the tests that read it): a program that copies the sample
  submission (unzipping it where MLE-bench ships it zipped); the search selects on each
  competition's validation view (made from ``prepared/public`` by its rule), then runs on the
  test split in the local sandbox: a valid submission on all 22, graded out of process to
  the score the competition's grader gives in process. The grading process also grades (and
  refuses) without pandas (the ``pip install openmle`` case).
  The training pools are sized so that a 10% hold-out holds both classes of every scored
  label.
- ``openmle bench run smoke``: the shipped smoke suite runs from a bare cache, no Kaggle data
  and no MLE-bench checkout.
"""

from __future__ import annotations

import csv
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.bench._minibench import sample_agent_config

from openmle import Outcome, RunResult
from openmle.bench import LITE_IDS, SMOKE_IDS, arun_bench, build_miniature
from openmle.bench._miniyaml import load as load_yaml
from openmle.search import read_journal
from openmle.testing import ScriptedModel

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SAMPLE_CODE = """\
import os, shutil, zipfile

data = os.environ["DATA_DIR"]
names = sorted(n for n in os.listdir(data) if "sample" in n.lower() and "submission" in n.lower())
src = os.path.join(data, names[0])
if src.endswith(".zip"):
    with zipfile.ZipFile(src) as z:
        with open("submission.csv", "wb") as out:
            out.write(z.read(z.namelist()[0]))
else:
    shutil.copyfile(src, "submission.csv")
print("copied", names[0])
"""


@pytest.fixture(scope="module")
def lite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_miniature(tmp_path_factory.mktemp("lite"))


def _expected(registry: Path, data: Path, cid: str) -> float:
    cfg = load_yaml((registry / "mlebench/competitions" / cid / "config.yaml").read_text())

    def table(p: Path) -> dict[str, Any]:
        with p.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
        return {"columns": rows[0], "rows": rows[1:]}

    grade = importlib.import_module(
        f"openmle.bench.mlebench._miniature.graders.{cid.replace('-', '_')}"
    ).grade
    score = grade(
        table(data / cfg["dataset"]["sample_submission"]),
        table(data / cfg["dataset"]["answers"]),
    )
    return float(round(score, 5))  # a test grade is rounded as MLE-bench's grade_csv rounds


@pytest.fixture(scope="module")
def lite_bench(
    lite: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[Any]]:
    """ONE bench run of the sample-submission agent on all 22 competitions (its directory and
    reports), shared by the tests that read it (xdist group ``lite_bench``: on one worker)."""
    pytest.importorskip("pandas")
    out = tmp_path_factory.mktemp("lite-bench") / "bench"
    config = sample_agent_config(lite, LITE_IDS)
    program = "plan: copy the sample submission\n```python\n" + SAMPLE_CODE + "```"
    reports = anyio.run(
        lambda: arun_bench(out, config=config, model=ScriptedModel(lambda _req: program))
    )
    return out, list(reports)


@pytest.mark.xdist_group("lite_bench")
def test_sample_submission_is_valid_and_graded_on_every_lite_competition(
    lite: tuple[Path, Path], lite_bench: tuple[Path, list[Any]]
) -> None:
    """The sample submission, run in the local sandbox on the test split (the bench's final
    run), is graded out of process to the score the competition's grader gives in process."""
    registry, data = lite
    out, _reports = lite_bench
    for cid in LITE_IDS:
        finals = [r for r in read_journal(out / "runs" / cid / "seed-0") if r["event"] == "final"]
        assert len(finals) == 1, (cid, finals)
        r = RunResult.from_dict(finals[0]["result"])
        assert r.split == "test" and r.outcome is Outcome.SUCCESS, (cid, r.detail, r.logs[-500:])
        assert r.score == pytest.approx(_expected(registry, data, cid), abs=1e-9), cid


GRADE_WITHOUT_PANDAS = """
import json, sys
sys.modules["pandas"] = None  # import pandas -> ImportError, as in `pip install openmle`
from openmle.bench.mlebench import child
print(json.dumps([child.grade(c) for c in json.loads(sys.argv[1])]))
"""


def test_grading_needs_no_pandas(lite: tuple[Path, Path], tmp_path: Path) -> None:
    registry, data = lite
    configs, expected = [], []
    for cid in ("spooky-author-identification", "aptos2019-blindness-detection"):
        cfg = load_yaml((registry / "mlebench/competitions" / cid / "config.yaml").read_text())
        sample = data / cfg["dataset"]["sample_submission"]
        bad = tmp_path / f"{cid}-bad.csv"
        bad.write_text(sample.read_text().split("\n", 1)[0] + "\n")  # the header alone
        configs += [
            {
                "repo_root": str(registry),
                "grade_fn": cfg["grader"]["grade_fn"],
                "submission": str(sub),
                "answers": str(data / cfg["dataset"]["answers"]),
            }
            for sub in (sample, bad)
        ]
        expected.append(_expected(registry, data, cid))
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[3] / "src")
    done = subprocess.run(
        [sys.executable, "-c", GRADE_WITHOUT_PANDAS, json.dumps(configs)],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)
    for k, want in enumerate(expected):
        good, refused = results[2 * k], results[2 * k + 1]
        assert good["score"] == round(want, 5), good  # rounded as MLE-bench's Grader rounds
        assert refused["score"] is None and "invalid submission" in refused["reason"]


@pytest.mark.xdist_group("lite_bench")
def test_bench_runner_gets_a_valid_submission_on_every_lite_competition(
    lite_bench: tuple[Path, list[Any]],
) -> None:
    _out, reports = lite_bench
    assert [r.competition_id for r in reports] == list(LITE_IDS)
    bad = [(r.competition_id, r.reason) for r in reports if not r.valid_submission]
    assert not bad, bad


def test_smoke_suite_runs_from_a_bare_cache(tmp_path: Path) -> None:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["OPENMLE_CACHE"] = str(tmp_path / "cache")
    out = tmp_path / "smoke"
    done = subprocess.run(
        [sys.executable, "-m", "openmle", "bench", "run", "smoke", "--out", str(out),
         "--budget", "steps=1", "--json", "--quiet"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout)
    assert summary["runs"] == len(SMOKE_IDS)
    # the offline model copes with every layout (zipped images, JSON records): all valid
    assert summary["valid"] == len(SMOKE_IDS)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["suite"] == "smoke"
    assert manifest["config"]["competitions"] == list(SMOKE_IDS)
    assert manifest["config"]["registry"].startswith(str(tmp_path / "cache"))
    for name in ("report.md", "report.json", "report.html"):
        assert (out / name).is_file()
    doctor = subprocess.run(
        [sys.executable, "-m", "openmle", "bench", "doctor", "smoke"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]
    assert f"{len(SMOKE_IDS)} of {len(SMOKE_IDS)} competitions ready" in doctor.stdout
