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
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from openmle.bench import BenchConfig
from openmle.bench.mlebench._miniature._formats import png as image_png

IDS = ("mini-images", "mini-jsonl", "mini-tabular")

PROGRAMS = Path(__file__).with_name("_minibench_programs")
"""The registry's program files (each competition's ``prepare.py`` and ``grade.py``, and
``mlebench``'s ``grade_helpers.py`` and ``utils.py``) as real modules."""


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
    """Run ``cid``'s ``prepare.py`` with the registry's ``mlebench`` importable (as
    ``mlebench prepare`` runs it); this process's modules are left as they were."""
    spec = importlib.util.spec_from_file_location(
        f"_mini_prepare_{cid.replace('-', '_')}",
        registry / "mlebench" / "competitions" / cid / "prepare.py",
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    before = {k: v for k, v in sys.modules.items() if k.partition(".")[0] == "mlebench"}
    sys.path.insert(0, str(registry))
    try:
        spec.loader.exec_module(mod)
        (out / "public").mkdir(parents=True)
        (out / "private").mkdir(parents=True)
        mod.prepare(raw, out / "public", out / "private")
    finally:
        sys.path.remove(str(registry))
        for k in [k for k in sys.modules if k.partition(".")[0] == "mlebench"]:
            del sys.modules[k]
        sys.modules.update(before)


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
    for name in ("grade_helpers.py", "utils.py"):
        shutil.copyfile(PROGRAMS / name, pkg / name)
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
            "tabular",
            [round(0.99 - 0.02 * i, 5) for i in range(20)],
        ),
        "mini-images": (
            "test.csv",
            "sample_submission.csv",
            "mae",
            "images",
            [round(0.01 + 0.03 * i, 5) for i in range(12)],
        ),
        "mini-jsonl": (
            "answers.jsonl",
            "sample_submission.csv",
            "accuracy",
            "jsonl",
            [1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.55, 0.5],
        ),
    }
    for cid, (answers, sample, grader, programs, board) in specs.items():
        d = comps / cid
        d.mkdir()
        (d / "__init__.py").write_text("")
        (d / "config.yaml").write_text(_config(cid, answers, sample, grader))
        (d / "description.md").write_text(f"# {cid}\n\nPredict the label; see the data.\n")
        shutil.copyfile(PROGRAMS / f"{programs}_prepare.py", d / "prepare.py")
        shutil.copyfile(PROGRAMS / f"{programs}_grade.py", d / "grade.py")
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
