"""N workers at the same total sandbox compute: ``Budget.sandbox_s`` is the fixed quantity.

More workers spend the same compute sooner, not more of it: 1, 2 and 4 workers on one budget
spend the same sandbox seconds within one job's duration, and the journal of a parallel
fixed-compute run still resumes exactly.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.search._toy import toy_spec

from openmle import Job, ModelRequest, Outcome, Resources, RunResult
from openmle.search import (
    Budget,
    ResumeSpec,
    SearchConfig,
    SearchSpec,
    journal_fingerprint,
    resume_search,
    run_search,
)
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

CAP = 12.0


def _model(request: ModelRequest) -> str:
    digest = hashlib.sha256(request.messages[-1].content.encode()).hexdigest()
    return f"```python\nscore = {int(digest[:6], 16) / 0xFFFFFF:.6f}\n```"


def _runtime(name: str, spread: float) -> float:
    h = int(hashlib.sha256(name.encode()).hexdigest()[:4], 16) / 0xFFFF
    return 1.0 + spread * (h - 0.5)


def _sandbox(spread: float) -> FunctionSandbox:
    async def run(job: Job) -> RunResult:
        # Completion order is scrambled; the compute each job reports is its own.
        name = job.name or ""
        await anyio.sleep(0.002 * (int(name[1:]) % 4) if name[1:].isdigit() else 0)
        value = float(job.code.split("score = ")[1].split()[0])
        return RunResult(
            outcome=Outcome.SUCCESS,
            score=value,
            split=job.split,
            runtime_s=_runtime(name, spread),
        )

    return FunctionSandbox(run)


def _search(workers: int, spread: float, run_dir: Path | None = None, **kw: Any) -> Any:
    return run_search(
        SearchSpec(
            task="toy",
            higher_is_better=True,
            model=ScriptedModel(_model),
            sandbox=_sandbox(spread),
            selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
            budget=Budget(sandbox_s=CAP),
            config=SearchConfig(initial_drafts=2, seed=4),
            workers=workers,
            description="",
            final_test=False,
            **kw,
        ),
        run_dir=run_dir,
    )


@pytest.mark.parametrize("spread", [0.0, 0.2])
def test_one_two_and_four_workers_spend_the_same_compute(spread: float) -> None:
    """The sandbox seconds spent differ by at most one job's duration across 1, 2 and 4
    workers, and none stops short of the cap (running work finishes)."""
    spent = {}
    longest = 0.0
    for workers in (1, 2, 4):
        result = _search(workers, spread)
        spent[workers] = result.spent["sandbox_s"]
        longest = max([longest, *(n.used.sandbox_s for n in result.nodes)])
        assert result.stop_reason == "sandbox_s"
        assert CAP <= spent[workers] <= CAP + longest * 1.5, spent
    assert max(spent.values()) - min(spent.values()) <= longest, (spent, longest)
    if spread == 0.0:
        assert len(set(spent.values())) == 1, spent  # equal jobs: exactly the same compute


def test_four_workers_do_not_overspend_by_the_jobs_in_flight() -> None:
    """Four workers stop proposing while the jobs in flight are expected to reach the cap
    (without that they spent 15 s of a 12 s cap: three jobs too many)."""
    four = _search(4, 0.0)
    assert four.spent["sandbox_s"] == CAP  # 12 jobs of 1 s: not 12 + 3 in flight


@pytest.mark.parametrize("workers", [2, 4])
def test_fixed_compute_parallel_run_resumes_exactly(tmp_path: Path, workers: int) -> None:
    """Cut the journal anywhere and resume: the same journal as the uninterrupted run."""
    a = tmp_path / "a"
    _search(workers, 0.2, run_dir=a, ordered=True)
    expected = journal_fingerprint(a)
    lines = (a / "journal.jsonl").read_bytes().split(b"\n")[:-1]
    for cut in range(0, len(lines), 2):
        b = tmp_path / f"b{cut}"
        b.mkdir()
        shutil.copy(a / "manifest.json", b / "manifest.json")
        torn = lines[cut][: len(lines[cut]) // 2] if cut % 4 == 2 else b""
        (b / "journal.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:cut]) + torn)
        resume_search(
            b,
            ResumeSpec(
                model=ScriptedModel(_model),
                sandbox=_sandbox(0.2),
                selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
                final_test=False,
            ),
        )
        assert journal_fingerprint(b) == expected, f"cut at line {cut}"


def test_gpu_seconds_are_a_fixed_compute_cap_too() -> None:
    """Jobs that lease GPUs count runtime x GPUs; a gpu_s cap is spent the same way by 1, 2
    and 4 workers, and the ledger and every node report it."""
    spent = {}
    for workers in (1, 2, 4):
        result = run_search(
            toy_spec(
                ScriptedModel(_model),
                _sandbox(0.0),
                budget=Budget(gpu_s=2 * CAP),
                config=SearchConfig(initial_drafts=2, seed=4),
                workers=workers,
                final_test=False,
                resources=Resources(gpus=2),
            )
        )
        assert result.stop_reason == "gpu_s"
        assert all(n.used.gpu_s == 2 * n.used.sandbox_s for n in result.nodes)
        spent[workers] = result.spent["gpu_s"]
    assert set(spent.values()) == {2 * CAP}, spent
    assert Budget.from_dict(Budget(gpu_s=5.0).to_dict()).gpu_s == 5.0
    assert "gpu_s" not in Budget(steps=3).to_dict()
