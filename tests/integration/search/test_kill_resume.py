"""``kill -9`` a real search process at several points; ``resume`` must give the same journal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import openmle
from openmle.search import RunDir, export_sft, journal_fingerprint, read_journal

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SCRIPT = r"""
import hashlib, os, sys
import anyio
from openmle import Job, Outcome, RunResult
from openmle.search import Budget, ResumeSpec, SearchConfig, SearchSpec, resume_search, run_search
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

def model(request):
    digest = hashlib.sha256(request.messages[-1].content.encode()).hexdigest()
    value = int(digest[:6], 16) / 0xFFFFFF
    if value < 0.2:
        return "```python\nraise ValueError('bad')\n```"
    return f"```python\nscore = {value:.6f}\n```"

HOLD_LAST = os.environ.get("OPENMLE_TEST_HOLD_LAST") == "1"
calls = 0

async def grade(job):
    global calls
    calls += 1
    if HOLD_LAST and calls >= 24:  # the last job waits for the kill: the run cannot finish first
        await anyio.sleep_forever()
    await anyio.sleep(0.03)
    if "score = " not in job.code:
        return RunResult(outcome=Outcome.RUNTIME_ERROR, split=job.split,
                         error_signature="ValueError: bad", runtime_s=0.5)
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)

parts = dict(model=ScriptedModel(model), sandbox=FunctionSandbox(grade),
             selector=FunctionSelector(lambda c: 0.1 + (c.score or 0.0)))
mode, out = sys.argv[1], sys.argv[2]
if mode == "run":
    run_search(SearchSpec(task="toy", higher_is_better=True, budget=Budget(steps=24),
                          config=SearchConfig(initial_drafts=3, seed=3),
                          workers=3, ordered=True, description="", **parts), run_dir=out)
else:
    resume_search(out, ResumeSpec(**parts))
"""


def _run(mode: str, out: Path, *, hold_last: bool = False) -> subprocess.Popen[bytes]:
    """The search process; with ``hold_last`` its last job never ends (the process waits to
    be killed), so a kill aimed near the end cannot lose the race to the run finishing."""
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    if hold_last:
        env["OPENMLE_TEST_HOLD_LAST"] = "1"
    return subprocess.Popen([sys.executable, "-c", SCRIPT, mode, str(out)], env=env)


def _lines(out: Path) -> int:
    p = out / "journal.jsonl"
    return p.read_bytes().count(b"\n") if p.exists() else 0


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_kill_nine_then_resume_reproduces_the_uninterrupted_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyed: bool
) -> None:
    """Killing at several points (repeatedly in one run) loses and duplicates nothing; every
    node's recorded request (``requests/``) survives the kills, verified, and the SFT export
    equals the uninterrupted run's. Keyed, a kill between a journal append and the rewrite of
    ``journal.seal`` leaves lines after the sealed head: still resumable."""
    monkeypatch.delenv("OPENMLE_JOURNAL_KEY_FILE", raising=False)
    if keyed:
        monkeypatch.setenv("OPENMLE_JOURNAL_KEY", "k" * 32)
    else:
        monkeypatch.delenv("OPENMLE_JOURNAL_KEY", raising=False)
    ref = tmp_path / "ref"
    assert _run("run", ref).wait(timeout=120) == 0
    expected = journal_fingerprint(ref)
    total = len(expected)
    assert total > 40
    want = [{**r.to_dict(), "run_id": ""} for r in export_sft([ref], tmp_path / "ref.jsonl")]
    assert want and {r["prompt_source"] for r in want} == {"recorded"}

    for point in (1, total // 3, (2 * total) // 3, total - 2):
        out = tmp_path / f"killed_{point}"
        proc = _run("run", out, hold_last=True)
        deadline = time.monotonic() + 60
        while _lines(out) < point and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        killed_at = _lines(out)
        assert killed_at < total, "the process finished before it could be killed"
        # A second kill during the resume, then a clean resume.
        proc = _run("resume", out)
        deadline = time.monotonic() + 60
        while _lines(out) < killed_at + 5 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert _run("resume", out).wait(timeout=120) == 0
        got = journal_fingerprint(out)
        assert got == expected, f"killed at journal line {killed_at} (target {point})"
        steps = [r["node"]["step"] for r in read_journal(out) if r["event"] == "node"]
        assert steps == sorted(set(steps)) == list(range(24))
        rd = RunDir.open(out)
        assert rd.integrity == ("keyed" if keyed else "chained")
        for digest in rd.node_requests().values():
            rd.request(digest)  # present, and hashes to its name
        got_sft = export_sft([out], tmp_path / f"{out.name}.jsonl")
        assert [{**r.to_dict(), "run_id": ""} for r in got_sft] == want
