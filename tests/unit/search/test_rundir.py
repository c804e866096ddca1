"""Run directories: journal, manifest, board, torn lines, and exact resume from any prefix."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from openmle import Job, ModelRequest, Outcome, RunResult, Split
from openmle.errors import InvalidArgument, RunDirError
from openmle.search import (
    Budget,
    RunDir,
    SearchConfig,
    journal_fingerprint,
    read_journal,
    resume_search,
    run_search,
)
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel


def det_model(request: ModelRequest) -> str:
    """A deterministic model: the program depends on the whole prompt (so on the parents)."""
    digest = hashlib.sha256(request.messages[-1].content.encode()).hexdigest()
    value = int(digest[:6], 16) / 0xFFFFFF
    if value < 0.2:
        return "```python\nraise ValueError('bad value 3')\n```"
    return f"```python\nscore = {value:.6f}\n```"


def det_grade(job: Job) -> RunResult:
    """Grades 'score = x' programs; others fail with a runtime error."""
    if "score = " not in job.code:
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR,
            split=job.split,
            error_signature="ValueError: bad value <n>",
            logs="Traceback (most recent call last):\nValueError: bad value 3\n",
            runtime_s=0.5,
        )
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


def kwargs() -> dict[str, Any]:
    """Arguments shared by the original and resumed runs."""
    return {
        "model": ScriptedModel(det_model),
        "sandbox": FunctionSandbox(det_grade),
        "selector": FunctionSelector(lambda c: 0.1 + (c.score or 0.0)),
    }


def original(tmp_path: Path, steps: int = 14, workers: int = 2) -> Path:
    """An uninterrupted ordered run."""
    out = tmp_path / "a"
    run_search(
        "toy",
        **kwargs(),
        budget=Budget(steps=steps),
        config=SearchConfig(initial_drafts=3, seed=7, fresh_draft_prob=0.1),
        workers=workers,
        ordered=True,
        run_dir=out,
        description="",
    )
    return out


def test_run_dir_layout_and_manifest(tmp_path: Path) -> None:
    """The run writes a manifest, a journal, the board and each node's program and logs."""
    out = original(tmp_path, steps=6)
    manifest = json.loads((out / "manifest.json").read_text())
    for key in ("openmle_version", "task", "model", "sandbox", "budget", "config", "seeds"):
        assert key in manifest
    assert manifest["trust_printed_score"] is False
    assert manifest["score_used_for_selection"] == "sandbox_valid_score"
    assert manifest["prompts"]["template_sha256"]
    assert manifest["packages"]["numpy"]
    assert manifest["hardware"]["cpus"]
    events = [r["event"] for r in read_journal(out)]
    assert events.count("proposal") == 6 and events.count("node") == 6
    assert events[-1] == "final"
    for i in range(6):
        assert (out / "nodes" / f"n{i:05d}" / "program.py").exists()
    board = json.loads((out / "board.json").read_text())
    assert board["num_nodes"] == 6
    assert (out / "final" / "program.py").exists()
    kinds = [s["event"] for s in RunDir.open(out).sessions()]
    assert kinds == ["start", "end"]


def test_refuses_non_empty_run_dir(tmp_path: Path) -> None:
    """A new search never writes into a used directory."""
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "f").write_text("")
    with pytest.raises(InvalidArgument, match="resume"):
        run_search(
            "toy",
            **kwargs(),
            budget=Budget(steps=1),
            run_dir=tmp_path / "x",
            description="",
        )


def test_open_requires_a_manifest(tmp_path: Path) -> None:
    """Opening a directory without a manifest says what to pass instead."""
    with pytest.raises(RunDirError, match="not a run directory"):
        RunDir.open(tmp_path)


def test_torn_last_line_is_ignored_and_repaired(tmp_path: Path) -> None:
    """A half-written last line is skipped, and truncated when repairing."""
    p = tmp_path / "journal.jsonl"
    p.write_bytes(b'{"event":"cancel","step":0}\n{"event":"ca')
    assert len(read_journal(p)) == 1
    read_journal(p, repair=True)
    assert p.read_bytes() == b'{"event":"cancel","step":0}\n'
    p.write_bytes(b'{"event":"cancel","step":0}\n{"event":"cancel","step":1}')
    assert len(read_journal(p)) == 1  # complete JSON without its newline is still torn


def test_damaged_middle_line_is_an_error(tmp_path: Path) -> None:
    """Corruption before the last line is reported, not skipped."""
    p = tmp_path / "journal.jsonl"
    p.write_bytes(b'{"event":"cancel"\n{"event":"cancel","step":1}\n')
    with pytest.raises(RunDirError, match="line 1"):
        read_journal(p)


@pytest.mark.parametrize("workers", [1, 3])
def test_resume_from_every_journal_prefix_gives_the_same_journal(
    tmp_path: Path, workers: int
) -> None:
    """Cutting the journal anywhere (even mid-line) and resuming reproduces the full run."""
    a = original(tmp_path, workers=workers)
    expected = journal_fingerprint(a)
    raw = (a / "journal.jsonl").read_bytes()
    lines = raw.split(b"\n")[:-1]
    for cut in range(len(lines)):
        b = tmp_path / f"b{cut}"
        b.mkdir()
        shutil.copy(a / "manifest.json", b / "manifest.json")
        torn = lines[cut][: len(lines[cut]) // 2] if cut % 2 else b""
        (b / "journal.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:cut]) + torn)
        result = resume_search(b, **kwargs())
        assert journal_fingerprint(b) == expected, f"cut at line {cut}"
        assert result.best is not None
    assert result.test_result is not None and result.test_result.split is Split.TEST


def test_resume_of_a_finished_run_does_nothing_new(tmp_path: Path) -> None:
    """Resuming a complete run neither proposes nor grades again."""
    a = original(tmp_path, steps=5)
    before = (a / "journal.jsonl").read_bytes()
    result = resume_search(a, **kwargs())
    assert (a / "journal.jsonl").read_bytes() == before
    assert result.test_result is not None


def test_resume_with_a_larger_budget_extends_the_run(tmp_path: Path) -> None:
    """A new budget on resume continues the same run."""
    a = original(tmp_path, steps=5)
    result = resume_search(a, budget=Budget(steps=8), **kwargs())
    assert len(result.nodes) == 8
    assert len(RunDir.open(a).nodes()) == 8


def test_unordered_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Without ordered commits, a cut-and-resumed run still has each step exactly once."""
    a = tmp_path / "a"
    run_search(
        "toy",
        **kwargs(),
        budget=Budget(steps=12),
        config=SearchConfig(initial_drafts=3, seed=2),
        workers=3,
        run_dir=a,
        description="",
    )
    lines = (a / "journal.jsonl").read_bytes().split(b"\n")[:-1]
    for cut in (1, 5, 13, len(lines) - 3):
        b = tmp_path / f"b{cut}"
        b.mkdir()
        shutil.copy(a / "manifest.json", b / "manifest.json")
        (b / "journal.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:cut]))
        resume_search(b, **kwargs())
        records = read_journal(b)
        steps = [r["node"]["step"] for r in records if r["event"] == "node"]
        assert sorted(steps) == list(range(12)), f"cut at {cut}"
        proposals = [r["proposal"]["step"] for r in records if r["event"] == "proposal"]
        assert proposals == list(range(12))
        assert sum(r["event"] == "final" for r in records) == 1
