"""A miniature MLE-bench made by the tests: a registry shaped like ``openai/mle-bench`` (its own
``mlebench`` package with graders, preparers, leaderboards and split files) and a data directory
as ``mlebench prepare`` leaves it.

Three competitions:

- ``mini-tabular``: CSV rows, binary label, accuracy (higher is better);
- ``mini-images``: a folder of tiny PNGs with labels in ``train.csv``, mean absolute error (lower
  is better);
- ``mini-jsonl``: text rows whose answers are JSONL, accuracy, and a validation split shipped in
  ``prepared/valid``.
"""

from __future__ import annotations

import importlib.util
import random
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from openmle.bench import BenchConfig
from openmle.bench.mlebench._miniature._formats import png as image_png

IDS = ("mini-images", "mini-jsonl", "mini-tabular")

HELPERS = '''
class InvalidSubmissionError(Exception):
    """A submission that cannot be graded."""
'''

# The CSV reading and writing every preparer below shares (prepended to each ``prepare.py``).
CSV_IO = """
import csv
from pathlib import Path


def read_rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


def write(path, header, rs):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rs:
            w.writerow([r[h] for h in header])


def split(rows, every, at):
    \"\"\"(train, test): every ``every``-th row from the ``at``-th is a test row.\"\"\"
    test = [r for i, r in enumerate(rows) if i % every == at]
    train = [r for i, r in enumerate(rows) if i % every != at]
    return train, test
"""

TABULAR_PREPARE = (
    CSV_IO
    + """


def prepare(raw: Path, public: Path, private: Path) -> None:
    rows = read_rows(raw / "train.csv")
    train, test = split(rows, 5, 0)
    write(public / "train.csv", ["id", "x1", "x2", "label"], train)
    write(public / "test.csv", ["id", "x1", "x2"], test)
    sample = [dict(id=r["id"], label=0) for r in test]
    write(public / "sample_submission.csv", ["id", "label"], sample)
    write(private / "test.csv", ["id", "label"], test)
"""
)

ACCURACY_GRADE = """
from mlebench.grade_helpers import InvalidSubmissionError


def grade(submission, answers):
    if "id" not in submission.columns or "label" not in submission.columns:
        raise InvalidSubmissionError("the submission needs columns id and label")
    if len(submission) != len(answers):
        raise InvalidSubmissionError("the submission has the wrong number of rows")
    merged = answers.merge(submission, on="id", suffixes=("", "_pred"))
    if len(merged) != len(answers):
        raise InvalidSubmissionError("the submission's ids do not match the test ids")
    return float((merged["label"].astype(str) == merged["label_pred"].astype(str)).mean())
"""

IMAGES_PREPARE = (
    CSV_IO
    + """
import shutil


def prepare(raw: Path, public: Path, private: Path) -> None:
    rows = read_rows(raw / "train.csv")
    (public / "train").mkdir()
    (public / "test").mkdir()
    train, test = split(rows, 4, 0)
    for r in train:
        shutil.copyfile(raw / "train" / (r["id"] + ".png"), public / "train" / (r["id"] + ".png"))
    for r in test:
        shutil.copyfile(raw / "train" / (r["id"] + ".png"), public / "test" / (r["id"] + ".png"))
    write(public / "train.csv", ["id", "bright"], train)
    sample = [dict(id=r["id"], bright=0.5) for r in test]
    write(public / "sample_submission.csv", ["id", "bright"], sample)
    write(private / "test.csv", ["id", "bright"], test)
"""
)

MAE_GRADE = """
from mlebench.grade_helpers import InvalidSubmissionError


def grade(submission, answers):
    if list(submission.columns) != ["id", "bright"]:
        raise InvalidSubmissionError("the submission needs exactly the columns id, bright")
    merged = answers.merge(submission, on="id", suffixes=("", "_pred"))
    if len(merged) != len(answers) or len(submission) != len(answers):
        raise InvalidSubmissionError("the submission's ids do not match the test ids")
    return float((merged["bright"] - merged["bright_pred"].astype(float)).abs().mean())
"""

JSONL_PREPARE = (
    CSV_IO
    + """
import json


def prepare(raw: Path, public: Path, private: Path) -> None:
    rows = read_rows(raw / "train.csv")
    train, test = split(rows, 5, 1)
    write(public / "train.csv", ["id", "text", "label"], train)
    write(public / "test.csv", ["id", "text"], test)
    sample = [dict(id=r["id"], label="a") for r in test]
    write(public / "sample_submission.csv", ["id", "label"], sample)
    with open(private / "answers.jsonl", "w") as fh:
        for r in test:
            fh.write(json.dumps({"id": int(r["id"]), "label": r["label"]}) + "\\n")
"""
)

JSONL_GRADE = """
from mlebench.grade_helpers import InvalidSubmissionError


def grade(submission, answers):
    truth = {a["id"]: a["label"] for a in answers}
    if "id" not in submission.columns or "label" not in submission.columns:
        raise InvalidSubmissionError("the submission needs columns id and label")
    got = {int(i): str(v) for i, v in zip(submission["id"], submission["label"])}
    if set(got) != set(truth):
        raise InvalidSubmissionError("the submission's ids do not match the test ids")
    return sum(got[i] == truth[i] for i in truth) / len(truth)
"""


def png(path: Path, value: int) -> None:
    """A 4x4 grayscale PNG of one shade."""
    path.write_bytes(image_png(4, 4, (value, value, value), gray=True))


def _config(cid: str, answers: str, sample: str, grader: str) -> str:
    return textwrap.dedent(
        f"""\
        id: {cid}
        name: {cid.replace("-", " ").title()}
        competition_type: simple
        awards_medals: false
        prizes: null
        description: mlebench/competitions/{cid}/description.md

        dataset:
          answers: {cid}/prepared/private/{answers}
          sample_submission: {cid}/prepared/public/{sample}

        grader:
          name: {grader}
          grade_fn: mlebench.competitions.{cid}.grade:grade

        preparer: mlebench.competitions.{cid}.prepare:prepare
        """
    )


def _board(path: Path, scores: list[float]) -> None:
    lines = ["teamId,score,submissionDate"]
    lines += [f"{i},{s},2020-01-01" for i, s in enumerate(scores)]
    path.write_text("\n".join(lines) + "\n")


def _run_prepare(registry: Path, cid: str, raw: Path, out: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        f"_mini_prepare_{cid.replace('-', '_')}",
        registry / "mlebench" / "competitions" / cid / "prepare.py",
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (out / "public").mkdir(parents=True)
    (out / "private").mkdir(parents=True)
    mod.prepare(raw, out / "public", out / "private")


def mini_config(mini: tuple[Path, Path], **fields: Any) -> BenchConfig:
    """A bench of the prepared registry ``mini`` (registry, data: what :func:`build` returns);
    the suite is ``custom``, one seed (0) and the offline model unless ``fields`` say otherwise,
    every other field as ``fields`` give it or BenchConfig's default."""
    registry, data = mini
    fields = {"suite": "custom", "seeds": (0,), "model": "offline", **fields}
    return BenchConfig(data_dir=str(data), registry=str(registry), **fields)


def sample_agent_config(mini: tuple[Path, Path], competitions: Sequence[str]) -> BenchConfig:
    """One step of a model that copies the sample submission, on each of ``competitions`` of
    the MLE-bench Lite suite (``mini`` prepared as :func:`mini_config` takes it)."""
    return mini_config(
        mini,
        suite="mle-bench-lite",
        competitions=competitions,
        model="sample",
        budget={"steps": 1},
        time_limit_s=120.0,
        concurrency=2,
    )


def build(root: Path) -> tuple[Path, Path]:
    """Make ``root/mle-bench`` (the registry) and ``root/data`` (prepared); return both."""
    registry = root / "mle-bench"
    pkg = registry / "mlebench"
    comps = pkg / "competitions"
    comps.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (comps / "__init__.py").write_text("")
    (pkg / "grade_helpers.py").write_text(HELPERS)
    splits = registry / "experiments" / "splits"
    splits.mkdir(parents=True)
    (splits / "low.txt").write_text("\n".join(IDS))
    (splits / "medium.txt").write_text("mini-tabular\n")
    (splits / "high.txt").write_text("mini-images\n")
    data = root / "data"
    rng = random.Random(7)
    specs = {
        "mini-tabular": (
            "test.csv",
            "sample_submission.csv",
            "accuracy",
            TABULAR_PREPARE,
            ACCURACY_GRADE,
            [round(0.99 - 0.02 * i, 5) for i in range(20)],
        ),
        "mini-images": (
            "test.csv",
            "sample_submission.csv",
            "mae",
            IMAGES_PREPARE,
            MAE_GRADE,
            [round(0.01 + 0.03 * i, 5) for i in range(12)],
        ),
        "mini-jsonl": (
            "answers.jsonl",
            "sample_submission.csv",
            "accuracy",
            JSONL_PREPARE,
            JSONL_GRADE,
            [1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.55, 0.5],
        ),
    }
    for cid, (answers, sample, grader, prepare, grade, board) in specs.items():
        d = comps / cid
        d.mkdir()
        (d / "__init__.py").write_text("")
        (d / "config.yaml").write_text(_config(cid, answers, sample, grader))
        (d / "description.md").write_text(f"# {cid}\n\nPredict the label; see the data.\n")
        (d / "prepare.py").write_text(prepare)
        (d / "grade.py").write_text(grade)
        _board(d / "leaderboard.csv", board)
        raw = data / cid / "raw"
        raw.mkdir(parents=True)
        if cid == "mini-tabular":
            rows = ["id,x1,x2,label"]
            for i in range(150):
                x1, x2 = rng.random(), rng.random()
                rows.append(f"{i},{x1:.4f},{x2:.4f},{int(x1 + x2 > 1)}")
            (raw / "train.csv").write_text("\n".join(rows) + "\n")
        elif cid == "mini-images":
            (raw / "train").mkdir()
            rows = ["id,bright"]
            for i in range(24):
                bright = i % 2
                png(raw / "train" / f"img{i:03d}.png", 200 if bright else 30)
                rows.append(f"img{i:03d},{bright}")
            (raw / "train.csv").write_text("\n".join(rows) + "\n")
        else:
            rows = ["id,text,label"]
            for i in range(60):
                label = "a" if i % 3 else "b"
                rows.append(f"{i},{'alpha words' if label == 'a' else 'beta words'} {i},{label}")
            (raw / "train.csv").write_text("\n".join(rows) + "\n")
        _run_prepare(registry, cid, raw, data / cid / "prepared")
        (data / cid / "prepared" / "public" / "description.md").write_text(
            (d / "description.md").read_text()
        )
    # mini-jsonl ships its own validation split
    _run_prepare(
        registry,
        "mini-jsonl",
        data / "mini-jsonl" / "prepared" / "public",
        data / "mini-jsonl" / "prepared" / "valid",
    )
    return registry, data


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The miniature MLE-bench of :func:`build` (registry, data), made once per test module;
    a conftest (or test module) imports it to offer it."""
    return build(tmp_path_factory.mktemp("minibench"))
