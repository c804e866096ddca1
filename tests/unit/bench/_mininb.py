"""A miniature NatureBench checkout made by the tests: ``tasks/<case>/{problem,evaluation,
environment,metadata.json}``, ``task-set/*.txt`` and ``submit-results/case_metadata.csv``, laid
out as the harness leaves them after its download step.

Three cases in two domains:

- ``nb-cpu-bio`` (Biology, ``cpu``): one instance ``main``, primary metric ``ErrorRate``
  (lower is better), SOTA ``"~0.05 to ~0.2"`` (the better end: 0.05);
- ``nb-gpu-chem`` (Chemistry, ``gpu_low``): instances ``main`` (``Accuracy``, higher is better,
  SOTA ``[{"value": "0.8 ± 0.01"}, {"value": "0.75"}]``: the best variant, 0.8) and ``extra``
  (``Accuracy``, SOTA ``"(mean=0.5)"``) for which the evaluator returns no score, so it counts
  ``g = -1``; a third instance with SOTA 0 is skipped;
- ``nb-broken-bio`` (Biology, ``gpu_high``): its evaluator raises, so the case is unscored.

Tabular data in ``problem/data/`` (``train.csv``, ``test.csv``, ``sample_submission.csv``) that
the offline model solves: the label is ``x > 0``. The answers are in
``evaluation/ground_truth/answers.csv`` only.
"""

from __future__ import annotations

import json
import random
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from openmle.bench import BenchRun, NatureBench
    from openmle.bench._runner import _Resolver

CASES = {
    "nb-cpu-bio": ("Biology", "cpu"),
    "nb-gpu-chem": ("Chemistry", "gpu_low"),
    "nb-broken-bio": ("Biology", "gpu_high"),
}

EVALUATOR = """
import csv
import os

EVAL_DIR = os.path.dirname(os.path.abspath(__file__))
OUTPUT_DIR = os.environ.get("OUTPUT_DIR")
if not OUTPUT_DIR:
    raise RuntimeError("OUTPUT_DIR environment variable is required")


def _read(path):
    with open(path) as fh:
        return {row["id"]: row["label"] for row in csv.DictReader(fh)}


def run_evaluation():
    print("===EVAL_RESULT_JSON===")  # noise on stdout is never parsed
    truth = _read(os.path.join(EVAL_DIR, "ground_truth", "answers.csv"))
    try:
        pred = _read(os.path.join(OUTPUT_DIR, "submission.csv"))
    except (OSError, KeyError) as exc:
        return {"main": {"METRIC": None, "error": str(exc)}}
    hits = sum(str(pred.get(k, "")).strip() in (v, v + ".0") for k, v in truth.items())
    acc = hits / len(truth)
    out = {"main": {"METRIC": VALUE}}
    out.update(EXTRA)
    return out
"""


def _metadata(domain: str, entries: list[dict[str, object]], gpu: str) -> dict[str, object]:
    return {
        "task_name": "mini",
        "domain_metadata": {"primary_domain": domain, "sub_domain": "mini", "domain_tags": []},
        "compute_resource_requirements": {
            "cpu_compute": {"severity": "low", "quantity_text": "1 core"},
            "gpu_compute": {"severity": gpu, "quantity_text": ""},
            "runtime": {"severity": "short", "quantity_text": "seconds"},
        },
        "performance_entries": entries,
    }


def _entry(name: str, metric: str, direction: str, sota: object) -> dict[str, object]:
    return {
        "dataset_name": name,
        "metrics": [
            {"name": "Other", "is_primary": False, "metric_direction": direction,
             "sota_score": [{"value": "123", "method": "x"}]},
            {"name": metric, "is_primary": True, "metric_direction": direction,
             "sota_score": sota},
        ],
    }  # fmt: skip


def build(root: Path, *, seed: int = 0) -> Path:
    """Write the checkout under ``root``; returns ``root``."""
    rng = random.Random(seed)
    (root / "task-set").mkdir(parents=True)
    for suite in ("cpu", "gpu_low", "gpu_high"):
        ids = [c for c, (_d, s) in CASES.items() if s == suite]
        (root / "task-set" / f"{suite}.txt").write_text("".join(i + "\n" for i in ids))
    (root / "task-set" / "all.txt").write_text("".join(c + "\n" for c in CASES))
    (root / "submit-results").mkdir()
    (root / "submit-results" / "case_metadata.csv").write_text(
        "case_id,domain\n" + "".join(f"{c},{d}\n" for c, (d, _s) in CASES.items())
    )
    for cid, (domain, _suite) in CASES.items():
        case = root / "tasks" / cid
        data = case / "problem" / "data"
        truth = case / "evaluation" / "ground_truth"
        data.mkdir(parents=True)
        truth.mkdir(parents=True)
        (case / "environment").mkdir()
        (case / "environment" / "Dockerfile.v3").write_text("FROM naturebench-base:latest\n")
        rows = []
        for i in range(200):
            x = rng.uniform(-3, 3)
            rows.append((i, round(x, 4), round(rng.gauss(0, 1), 4), int(x > 0)))
        train, test = rows[:160], rows[160:]
        (data / "train.csv").write_text(
            "id,x,noise,label\n" + "".join(f"{i},{x},{n},{y}\n" for i, x, n, y in train)
        )
        (data / "test.csv").write_text(
            "id,x,noise\n" + "".join(f"{i},{x},{n}\n" for i, x, n, _y in test)
        )
        (data / "sample_submission.csv").write_text(
            "id,label\n" + "".join(f"{i},0\n" for i, *_ in test)
        )
        (truth / "answers.csv").write_text(
            "id,label\n" + "".join(f"{i},{y}\n" for i, _x, _n, y in test)
        )
        (case / "problem" / "README.md").write_text(
            f"# {cid}\n\nPredict `label` (0 or 1) for every row of `test.csv`; write "
            "`submission.csv` with the columns of `sample_submission.csv`.\n"
        )
        if cid == "nb-cpu-bio":
            body = EVALUATOR.replace("METRIC", "ErrorRate").replace("VALUE", "1.0 - acc")
            body = body.replace("EXTRA", "{}")
            entries = [_entry("main", "Error_Rate", "lower_is_better", "~0.05 to ~0.2")]
            gpu = "none"
        elif cid == "nb-gpu-chem":
            body = EVALUATOR.replace("METRIC", "Accuracy").replace("VALUE", "acc")
            # 'extra' has no finite score (and must not borrow main's); 'zero' is skipped.
            body = body.replace("EXTRA", '{"extra": {"Accuracy": None, "error": "not produced"}}')
            entries = [
                _entry("main", "Accuracy", "higher_is_better",
                       [{"value": "0.8 ± 0.01", "method": "A"}, {"value": "0.75", "method": "B"}]),
                _entry("extra", "Accuracy", "higher_is_better", "(mean=0.5)"),
                _entry("zero", "Accuracy", "higher_is_better", "0"),
            ]  # fmt: skip
            gpu = "low"
        else:
            body = "def run_evaluation():\n    raise RuntimeError('broken evaluator')\n"
            entries = [_entry("main", "Accuracy", "higher_is_better", "0.9")]
            gpu = "high"
        (case / "evaluation" / "evaluator.py").write_text(textwrap.dedent(body))
        (case / "metadata.json").write_text(
            json.dumps(_metadata(domain, entries, gpu), ensure_ascii=False, indent=2)
        )
    return root


MULTI_CASE = "nb-multi-out"
"""A case whose evaluator reads one file per instance: ``OUTPUT_DIR/<inst>/pred.csv``."""

MULTI_EVALUATOR = """
import csv
import os

EVAL_DIR = os.path.dirname(os.path.abspath(__file__))
OUTPUT_DIR = os.environ["OUTPUT_DIR"]


def _read(path):
    with open(path) as fh:
        return {row["id"]: row["label"] for row in csv.DictReader(fh)}


def run_evaluation():
    out = {}
    for inst in ("inst1", "inst2"):
        truth = _read(os.path.join(EVAL_DIR, "ground_truth", inst + ".csv"))
        try:
            pred = _read(os.path.join(OUTPUT_DIR, inst, "pred.csv"))
        except (OSError, KeyError) as exc:
            out[inst] = {"Accuracy": None, "error": type(exc).__name__}
            continue
        hits = sum(pred.get(k, "").strip() == v for k, v in truth.items())
        out[inst] = {"Accuracy": hits / len(truth)}
    return out
"""


def add_multi_output_case(root: Path, *, rows: int = 20) -> str:
    """Add :data:`MULTI_CASE` under ``root/tasks`` (Physics, in no task-set list).

    Two instances, ``inst1`` and ``inst2``, each with ``problem/data/<inst>.csv`` (``id,x``;
    the label is ``x > 0``) and answers in ``evaluation/ground_truth/<inst>.csv`` only;
    primary metric ``Accuracy`` (higher is better), SOTA 0.8 for both. Returns the case id.
    """
    case = root / "tasks" / MULTI_CASE
    data = case / "problem" / "data"
    truth = case / "evaluation" / "ground_truth"
    data.mkdir(parents=True, exist_ok=True)  # idempotent: the same files again
    truth.mkdir(parents=True, exist_ok=True)
    for k, inst in enumerate(("inst1", "inst2")):
        xs = [((i * 7 + 3 * k) % 11) - 5 + 0.5 for i in range(rows)]
        (data / f"{inst}.csv").write_text(
            "id,x\n" + "".join(f"{i},{x}\n" for i, x in enumerate(xs))
        )
        (truth / f"{inst}.csv").write_text(
            "id,label\n" + "".join(f"{i},{int(x > 0)}\n" for i, x in enumerate(xs))
        )
    (case / "problem" / "README.md").write_text(
        f"# {MULTI_CASE}\n\nFor each instance write `$OUTPUT_DIR/<instance>/pred.csv` "
        "(`id,label`, label = 1 when x > 0).\n"
    )
    (case / "evaluation" / "evaluator.py").write_text(textwrap.dedent(MULTI_EVALUATOR))
    entries = [_entry(inst, "Accuracy", "higher_is_better", "0.8") for inst in ("inst1", "inst2")]
    (case / "metadata.json").write_text(json.dumps(_metadata("Physics", entries, "none")))
    return MULTI_CASE


def bench_run(
    nb: NatureBench, out: Path, competitions: Sequence[str], *, suite: str = "x"
) -> tuple[BenchRun, _Resolver]:
    """A NatureBench run of ``competitions`` (seed 0, the offline model) created in ``out``, and
    the bench's task resolver for it (``"<case>@seed-0"`` -> the case's task wrapper)."""
    from openmle.bench import BenchConfig, BenchRun
    from openmle.bench._runner import _Resolver

    cfg = BenchConfig(
        suite=suite, competitions=competitions, seeds=[0], model="offline",
        data_dir=str(nb.root), benchmark="naturebench",
    )  # fmt: skip
    run = BenchRun.create(out, cfg, nb)
    return run, _Resolver(bench=nb, run=run)
