"""Run directories: journal, manifest, board, torn lines, and exact resume from any prefix."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.search._det import ORDERED, det_grade, det_parts, ordered_run

from openmle import Job, Outcome, RunResult, Split
from openmle.errors import InvalidArgument, RunDirError
from openmle.search import (
    Budget,
    Node,
    ResumeSpec,
    RunDir,
    SearchConfig,
    SearchSpec,
    aresume_search,
    arun_search,
    journal_fingerprint,
    read_journal,
    reset_unstarted_run_dir,
    resume_search,
    run_search,
)
from openmle.testing import FunctionSandbox


def original(tmp_path: Path, steps: int = 14, workers: int = 2) -> Path:
    """An uninterrupted ordered run in ``tmp_path/a``."""
    return ordered_run(tmp_path / "a", steps=steps, workers=workers, **det_parts())


class _TrustedSandbox:
    """A sandbox that says its programs could read the answers (``trusted = True``)."""

    trusted = True

    def __init__(self) -> None:
        self.inner = FunctionSandbox(det_grade)

    async def run(self, job: Job) -> RunResult:
        return await self.inner.run(job)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_manifest_marks_a_trusted_sandbox(tmp_path: Path) -> None:
    """A run on a sandbox that declares ``trusted = True`` says so in its manifest; any other
    sandbox is recorded as not trusted."""
    for name, sandbox in (("t", _TrustedSandbox()), ("f", FunctionSandbox(det_grade))):
        kw = {**det_parts(), "sandbox": sandbox}
        run_search(
            SearchSpec(task="toy", higher_is_better=True, **kw, budget=Budget(steps=1)),
            run_dir=tmp_path / name,
        )
    assert RunDir.open(tmp_path / "t").manifest["sandbox"]["trusted"] is True
    assert RunDir.open(tmp_path / "f").manifest["sandbox"]["trusted"] is False


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
            SearchSpec(
                task="toy",
                higher_is_better=True,
                **det_parts(),
                budget=Budget(steps=1),
                description="",
            ),
            run_dir=tmp_path / "x",
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
        result = resume_search(b, ResumeSpec(**det_parts()))
        assert journal_fingerprint(b) == expected, f"cut at line {cut}"
        assert result.best is not None
    assert result.test_result is not None and result.test_result.split is Split.TEST


def test_resume_of_a_finished_run_does_nothing_new(tmp_path: Path) -> None:
    """Resuming a complete run neither proposes nor grades again."""
    a = original(tmp_path, steps=5)
    before = (a / "journal.jsonl").read_bytes()
    result = resume_search(a, ResumeSpec(**det_parts()))
    assert (a / "journal.jsonl").read_bytes() == before
    assert result.test_result is not None


def test_resume_with_a_larger_budget_extends_the_run(tmp_path: Path) -> None:
    """A new budget on resume continues the same run."""
    a = original(tmp_path, steps=5)
    result = resume_search(a, ResumeSpec(budget=Budget(steps=8), **det_parts()))
    assert len(result.nodes) == 8
    assert len(RunDir.open(a).nodes()) == 8


def test_unordered_resume_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """Without ordered commits, a cut-and-resumed run still has each step exactly once."""
    a = tmp_path / "a"
    run_search(
        SearchSpec(
            task="toy",
            higher_is_better=True,
            **det_parts(),
            budget=Budget(steps=12),
            config=SearchConfig(initial_drafts=3, seed=2),
            workers=3,
            description="",
        ),
        run_dir=a,
    )
    lines = (a / "journal.jsonl").read_bytes().split(b"\n")[:-1]
    for cut in (1, 5, 13, len(lines) - 3):
        b = tmp_path / f"b{cut}"
        b.mkdir()
        shutil.copy(a / "manifest.json", b / "manifest.json")
        (b / "journal.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:cut]))
        resume_search(b, ResumeSpec(**det_parts()))
        records = read_journal(b)
        steps = [r["node"]["step"] for r in records if r["event"] == "node"]
        assert sorted(steps) == list(range(12)), f"cut at {cut}"
        proposals = [r["proposal"]["step"] for r in records if r["event"] == "proposal"]
        assert proposals == list(range(12))
        assert sum(r["event"] == "final" for r in records) == 1


# ------------------------------------------------------------------------------ tampering


def _rewrite(path: Path, edit: Any) -> None:
    """Apply ``edit(records)`` to the journal, writing the records back as JSON lines."""
    p = path / "journal.jsonl"
    records = [json.loads(x) for x in p.read_text().splitlines()]
    records = edit(records)
    p.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_an_edited_score_is_detected_by_the_hash_chain(tmp_path: Path) -> None:
    """Raising a node's score to 0.999 breaks the chain: reading, reporting and resuming the
    run refuse it, naming the line."""
    a = original(tmp_path, steps=5)
    assert RunDir.open(a).integrity == "chained"

    def edit(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for r in records:
            if r["event"] == "node" and r["node"]["score"] is not None:
                r["node"]["score"] = r["node"]["valid_score"] = 0.999
                break
        return records

    _rewrite(a, edit)
    with pytest.raises(RunDirError, match=r"line \d+ fails the journal's hash chain"):
        RunDir.open(a).nodes()
    with pytest.raises(RunDirError, match="hash chain"):
        resume_search(a, ResumeSpec(**det_parts()))
    from openmle.search._runs.report import write_report

    with pytest.raises(RunDirError, match="hash chain"):
        write_report(a)


def test_a_forged_final_record_is_refused(tmp_path: Path) -> None:
    """An appended `final` record claiming a perfect test score fails the chain; one that
    names no node is refused even in an unchained (old) run."""
    a = original(tmp_path, steps=4)
    nodes = RunDir.open(a).nodes()
    forged = {
        "event": "final",
        "node_id": nodes[0].node_id,
        "result": RunResult(outcome=Outcome.SUCCESS, score=1.0, split=Split.TEST).to_dict(),
    }
    with (a / "journal.jsonl").open("a") as f:
        f.write(json.dumps(forged) + "\n")
    with pytest.raises(RunDirError, match="hash chain"):
        RunDir.open(a).final_result()
    old = _unchained_copy(a, tmp_path / "old")
    _rewrite(old, lambda rs: [*rs, {**forged, "node_id": "n99999"}])
    with pytest.raises(RunDirError, match="no journalled node"):
        RunDir.open(old).final_result()


def _unchained_copy(src: Path, dst: Path) -> Path:
    """A schema-1 run directory (written before the hash chain) with ``src``'s records."""
    dst.mkdir()
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["schema_version"] = 1
    for part in ("model", "sandbox"):  # recorded specs came after the chain
        manifest[part].pop("spec", None)
    (dst / "manifest.json").write_text(json.dumps(manifest))
    lines = []
    for line in (src / "journal.jsonl").read_text().splitlines():
        r = json.loads(line)
        r.pop("chain", None)
        lines.append(json.dumps(r) + "\n")
    (dst / "journal.jsonl").write_text("".join(lines))
    return dst


def test_runs_without_a_chain_are_still_read_and_resumed(tmp_path: Path) -> None:
    """A run written before the chain reads and resumes (marked unchained, never chained
    halfway); a chain line appearing in it is refused."""
    a = original(tmp_path, steps=5)
    old = _unchained_copy(a, tmp_path / "old")
    rd = RunDir.open(old)
    assert rd.integrity == "unchained"
    assert [n.node_id for n in rd.nodes()] == [n.node_id for n in RunDir.open(a).nodes()]
    with pytest.warns(UserWarning, match="before the journal hash chain"):
        result = resume_search(old, ResumeSpec(budget=Budget(steps=7), **det_parts()))
    assert len(result.nodes) == 7
    assert all("chain" not in r for r in read_journal(old))
    from openmle.search._runs.report import write_report

    assert "before the hash chain" in write_report(old).read_text()
    assert "hash chain verified" in write_report(a).read_text()
    _rewrite(old, lambda rs: [*rs[:-1], {**rs[-1], "chain": "0" * 64}])
    with pytest.raises(RunDirError, match="carries a hash chain"):
        RunDir.open(old).records()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_scores_are_never_valid(tmp_path: Path, value: str) -> None:
    """A NaN or Infinity in the journal is a RunDirError naming the line (before: accepted,
    and NaN won "best"); a Node refuses a non-finite score."""
    a = original(tmp_path, steps=4)
    old = _unchained_copy(a, tmp_path / "old")
    p = old / "journal.jsonl"
    lines = p.read_text().splitlines()
    i = next(i for i, x in enumerate(lines) if '"event": "node"' in x and '"score": 0.' in x)
    lines[i] = lines[i].replace('"score": 0.', f'"score": {value}, "was": 0.', 1)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match=rf"line {i + 1} .*not a finite number"):
        RunDir.open(old).nodes()
    node = RunDir.open(a).nodes()[0]
    with pytest.raises(InvalidArgument, match="finite"):
        Node.from_dict({**node.to_dict(), "score": float(value)})


def test_resume_refuses_a_run_whose_journal_was_deleted(tmp_path: Path) -> None:
    """A manifest without its journal is refused, not restarted as a fresh search."""
    a = original(tmp_path, steps=3)
    (a / "journal.jsonl").unlink()
    with pytest.raises(RunDirError, match=r"no journal\.jsonl"):
        resume_search(a, ResumeSpec(**det_parts()))
    assert not (a / "journal.jsonl").exists()


@pytest.mark.parametrize(
    "line",
    [
        "[]",
        '"node"',
        '{"event": "node"}',
        '{"event": "node", "node": []}',
        '{"event": "node", "node": {"node_id": "x"}}',
        '{"event": "proposal"}',
        '{"event": "cancel", "step": "zero"}',
        '{"event": "final", "node_id": "n00000"}',
        '{"event": 7}',
    ],
)
def test_malformed_records_are_run_dir_errors_naming_the_line(tmp_path: Path, line: str) -> None:
    """Records of the wrong shape give a RunDirError with the line number (before: a raw
    AttributeError or KeyError), in reading and in resuming."""
    a = original(tmp_path, steps=3)
    old = _unchained_copy(a, tmp_path / "old")
    p = old / "journal.jsonl"
    lines = p.read_text().splitlines()
    lines.insert(2, line)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match="line 3"):
        RunDir.open(old).nodes()
    with pytest.raises(RunDirError, match="line 3"), pytest.warns(UserWarning, match="hash chain"):
        resume_search(old, ResumeSpec(**det_parts()))


def test_garbage_in_sessions_file_does_not_break_reading(tmp_path: Path) -> None:
    """sessions.jsonl is informational: lines that are not session records are skipped (the
    report still renders) instead of raising a raw KeyError or JSONDecodeError."""
    a = original(tmp_path, steps=3)
    with (a / "sessions.jsonl").open("a") as f:
        f.write('[]\n{"no_event": 1}\nnot json\n')
    assert [s["event"] for s in RunDir.open(a).sessions()] == ["start", "end"]
    from openmle.search._runs.report import write_report

    assert write_report(a).exists()


class _GatedFsync:
    """``os.fsync`` that waits (in whatever thread calls it) until the test releases it."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.waited: list[bool] = []
        self._real = os.fsync

    def __call__(self, fd: int) -> None:
        self.entered.set()
        self.waited.append(self.release.wait(timeout=10))  # False: nobody could release it
        self._real(fd)

    async def until_entered(self) -> None:
        """Wait on the event loop until an fsync is in progress (the loop runs: the point)."""
        assert await anyio.to_thread.run_sync(self.entered.wait, 60)


def _journalled_steps(path: Path) -> list[int]:
    return [r["step"] for r in read_journal(path) if r["event"] == "cancel"]


def test_journal_fsync_runs_off_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the journal is fsync'd the event loop keeps running: a task on it can release the
    fsync (on the loop itself the fsync would wait for a release that never comes)."""
    out = original(tmp_path, steps=2)
    gate = _GatedFsync()
    monkeypatch.setattr(os, "fsync", gate)
    rd = RunDir.open(out)

    async def scenario() -> None:
        async with rd.writing():
            rd.cancel(100, "test")
            await gate.until_entered()
            gate.release.set()

    anyio.run(scenario)
    rd.close()
    assert gate.waited and all(gate.waited)
    assert _journalled_steps(out) == [100]


def test_queued_writes_survive_cancellation_in_order_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled while a batch is being fsync'd: that batch completes, the records queued behind
    it are written (shielded) when the block exits, in call order, each once, chain intact."""
    out = original(tmp_path, steps=2)
    gate = _GatedFsync()
    monkeypatch.setattr(os, "fsync", gate)
    rd = RunDir.open(out)

    async def scenario() -> None:
        with anyio.CancelScope() as scope:
            async with rd.writing():
                rd.cancel(100, "test")
                await gate.until_entered()
                rd.cancel(101, "test")
                rd.cancel(102, "test")
                scope.cancel()
                gate.release.set()
                await anyio.sleep(60)  # cancelled at once
        assert scope.cancelled_caught

    anyio.run(scenario)
    rd.close()
    assert _journalled_steps(out) == [100, 101, 102]  # read_journal verified the chain too


def test_a_failed_journal_write_is_one_run_dir_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails in the writer thread ends the block with a RunDirError (not an
    exception group, not a raw OSError), and nothing queued after it is written."""
    out = original(tmp_path, steps=2)

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    rd = RunDir.open(out)

    async def scenario() -> None:
        async with rd.writing():
            rd.cancel(100, "test")
            await anyio.sleep(60)  # the writer's failure cancels the block

    with pytest.raises(RunDirError, match="No space left"):
        anyio.run(scenario)
    rd.close()
    monkeypatch.undo()
    assert _journalled_steps(out) == [100]  # written before the fsync failed; nothing after


class _HeldSandbox:
    """Grades as :func:`det_grade`, but each job waits until ``release`` is set."""

    def __init__(self) -> None:
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def run(self, job: Job) -> RunResult:
        self.entered.set()
        await self.release.wait()
        return det_grade(job)

    async def aclose(self) -> None:
        pass


def _toy_spec(sandbox: Any, steps: int) -> SearchSpec:
    return SearchSpec(
        task="toy",
        higher_is_better=True,
        **{**det_parts(), "sandbox": sandbox},
        budget=Budget(steps=steps),
        config=ORDERED,
        workers=1,
        ordered=True,
        description="",
    )


def test_a_second_driver_of_a_run_is_refused_and_its_journal_stays_whole(
    tmp_path: Path,
) -> None:
    """Two drivers of one run directory (two `bench resume` of one bench, `openmle resume`
    twice) interleaved their journal lines: the hash chain broke and the run could be neither
    resumed nor reported. The second driver is refused, naming the first; the first finishes
    with a whole journal, and the run resumes once it has ended.
    """
    a = original(tmp_path, steps=3, workers=1)
    fresh = tmp_path / "fresh"

    async def main() -> None:
        held, new = _HeldSandbox(), _HeldSandbox()
        longer = ResumeSpec(budget=Budget(steps=5), **{**det_parts(), "sandbox": held})
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: aresume_search(a, longer))
            tg.start_soon(lambda: arun_search(_toy_spec(new, 2), run_dir=fresh))
            with anyio.fail_after(30):
                await held.entered.wait()
                await new.entered.wait()
            with pytest.raises(RunDirError, match=rf"another process \(process {os.getpid()} "):
                await aresume_search(a, ResumeSpec(**det_parts()))
            # a new run in a directory another driver is starting (no step committed yet)
            # no longer clears that driver's files
            with pytest.raises(RunDirError, match="being written by another process"):
                await arun_search(_toy_spec(FunctionSandbox(det_grade), 2), run_dir=fresh)
            held.release.set()
            new.release.set()

    anyio.run(main)
    assert [r["node"]["step"] for r in read_journal(a) if r["event"] == "node"] == list(range(5))
    assert [r["node"]["step"] for r in read_journal(fresh) if r["event"] == "node"] == [0, 1]
    resume_search(a, ResumeSpec(budget=Budget(steps=6), **det_parts()))  # the lock was dropped
    assert len(RunDir.open(a).nodes()) == 6


def test_a_hard_linked_writer_lock_is_refused_and_its_target_kept(tmp_path: Path) -> None:
    """A run directory from elsewhere whose ``writer.lock`` is a hard link to another file
    of the user's: resuming it truncated that file and wrote the holder line into it. It is
    refused, naming the file and the fix, and the other file is untouched."""
    a = original(tmp_path, steps=2, workers=1)
    victim = tmp_path / "notes.txt"
    victim.write_text("keep me\n")
    (a / "writer.lock").unlink(missing_ok=True)
    os.link(victim, a / "writer.lock")
    with pytest.raises(RunDirError, match=r"writer\.lock' is not a file of the run's own"):
        resume_search(a, ResumeSpec(budget=Budget(steps=3), **det_parts()))
    assert victim.read_text() == "keep me\n"


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "folder"])
def test_reset_clears_an_unstarted_run_whatever_stands_for_its_lock(
    tmp_path: Path, kind: str
) -> None:
    """:func:`reset_unstarted_run_dir` on a directory with no manifest: its contents go (a
    link in the lock's place is removed, never followed), a started run is kept."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    rd = tmp_path / "run"
    (rd / "nodes").mkdir(parents=True)
    (rd / "journal.jsonl").write_text("")
    lock = rd / "writer.lock"
    if kind == "symlink":
        lock.symlink_to(victim)
    elif kind == "hardlink":
        os.link(victim, lock)
    else:
        (lock / "x").mkdir(parents=True)
    assert reset_unstarted_run_dir(rd) is False
    assert sorted(p.name for p in rd.iterdir()) == ["writer.lock"]
    assert lock.is_file() and not lock.is_symlink() and victim.read_text() == "keep me\n"
    (tmp_path / "linked").symlink_to(rd)  # a link to a folder: its contents are not touched
    (rd / "keep.txt").write_text("x")
    with pytest.raises(RunDirError, match="is a symbolic link; pass the folder itself"):
        reset_unstarted_run_dir(tmp_path / "linked")
    assert (rd / "keep.txt").read_text() == "x"
    started = original(tmp_path / "s", steps=1, workers=1)
    assert reset_unstarted_run_dir(started) is True
    assert (started / "manifest.json").is_file() and (started / "journal.jsonl").is_file()
