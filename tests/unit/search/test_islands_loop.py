"""Islands in the search loop: admission, migration on schedule, and exact resume."""

from __future__ import annotations

import hashlib
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from tests.unit.search._det import det_grade, det_model, ordered_run

from openmle import Operator, Outcome, RunResult
from openmle.errors import InvalidArgument
from openmle.search import (
    Budget,
    Evaluation,
    Proposal,
    ResumeSpec,
    RunDir,
    SearchConfig,
    SearchCore,
    ThreeFactorSelector,
    journal_fingerprint,
    resume_search,
)
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel


def _score(step: int) -> float:
    digest = hashlib.sha256(f"s{step}".encode()).digest()
    return int.from_bytes(digest[:3], "little") / 0xFFFFFF


def _eval(p: Proposal) -> Evaluation:
    if p.step % 5 == 4:
        return Evaluation(
            code="raise ValueError\n",
            result=RunResult(outcome=Outcome.RUNTIME_ERROR, error_signature="E", runtime_s=0.1),
        )
    return Evaluation(
        code=f"score = {_score(p.step)}\n",
        result=RunResult(outcome=Outcome.SUCCESS, score=_score(p.step), runtime_s=1.0),
    )


def _core(steps: int = 40, islands: int = 3, interval: int = 6) -> SearchCore:
    return SearchCore(
        config=SearchConfig(initial_drafts=4, seed=3, islands=islands, migration_interval=interval),
        selector=ThreeFactorSelector(),
        budget=Budget(steps=steps),
    )


def test_nodes_are_admitted_to_home_islands_and_children_inherit_them() -> None:
    """Drafts live on ``step % N``; every other node on its first parent's island; a
    scored node is on its home island unless refused (below the mean) or migrated away."""
    c = _core(steps=30, interval=1000)  # no migration
    log: list[tuple[Proposal, Any]] = []
    before: dict[int, Any] = {}
    while True:
        before_islands = c.islands
        p = c.propose()
        if p is None:
            break
        before[p.step] = before_islands
        log.append((p, c.commit(p, _eval(p))))
    assert c.islands is not None and c.migrations == 0
    for p, node in log:
        if p.operator is Operator.DRAFT:
            assert node.island == p.step % 3
        else:
            assert node.island == c.nodes[p.parent_ids[0]].island
    members = {n for island in c.islands.members for n, _ in island}
    assert members  # admission happened
    for i, island in enumerate(c.islands.members):
        for n, s in island:
            assert c.nodes[n].island == i and c.nodes[n].score == s
    # Selector steps draw from the islands: the first parent was on an island then, and both
    # parents of a Crossover share one when some island held two (IslandSelector's promise).
    crossovers = 0
    for p, _ in log:
        if p.reason != "selector":
            continue
        state = before[p.step]
        assert state.island_of(p.parent_ids[0]) is not None
        if p.operator is Operator.CROSSOVER and any(len(m) >= 2 for m in state.members):
            crossovers += 1
            assert len({state.island_of(q) for q in p.parent_ids}) == 1


def test_migration_runs_on_schedule_and_resets_the_weaker_half() -> None:
    """After every ``migration_interval`` committed nodes the weaker half is reset to one
    member (the best node of a stronger island); the stronger half is untouched."""
    c = _core(steps=30, islands=4, interval=6)
    seen = 0
    while (p := c.propose()) is not None:
        before = c.islands
        c.commit(p, _eval(p))
        if c.migrations > seen:
            seen = c.migrations
            assert before is not None and c.islands is not None
            # the admit of this node happened first, then the migration
            admitted = before
            node = c.nodes[p.node_id]
            if node.ok and node.score is not None and node.island is not None:
                admitted = before.admit(node.node_id, node.score, node.island)
            order = admitted.ranked()
            for i in order[:2]:
                assert c.islands.members[i] == admitted.members[i]
            for i in order[2:]:
                assert len(c.islands.members[i]) <= 1
    assert c.migrations == 30 // 6


def test_replaying_the_calls_rebuilds_the_same_island_state() -> None:
    """A fresh core fed the same proposals and nodes (journal order) has equal islands."""
    a = _core()
    calls: list[tuple[Proposal, dict[str, Any], Any]] = []
    while (p := a.propose()) is not None:
        rng = a.rng_state()
        calls.append((p, rng, a.commit(p, _eval(p))))
    b = _core()
    for p, rng, node in calls:
        b.restore_proposal(p, rng)
        b.apply(node)
    assert a.islands == b.islands and a.migrations == b.migrations and a.migrations > 0


def test_islands_need_a_three_factor_selector() -> None:
    """Islands choose parents with an IslandSelector over a ThreeFactorSelector."""
    with pytest.raises(InvalidArgument, match="ThreeFactorSelector"):
        SearchCore(
            config=SearchConfig(islands=2),
            selector=FunctionSelector(lambda c: 1.0),
            budget=Budget(steps=3),
        )
    with pytest.raises(InvalidArgument, match="migration_interval"):
        SearchConfig(migration_interval=0)


def _parts() -> dict[str, Any]:
    return {
        "model": ScriptedModel(partial(det_model, fail_below=0.15)),
        "sandbox": FunctionSandbox(det_grade),
        "selector": ThreeFactorSelector(),
    }


def _islands_of(path: Path) -> Any:
    rd = RunDir.open(path)
    cfg = SearchConfig.from_dict(rd.manifest["config"])
    core = SearchCore(config=cfg, selector=ThreeFactorSelector(), budget=Budget(steps=10_000))
    rd.replay(core)
    rd.close()
    return core.islands, core.migrations


@pytest.mark.parametrize("workers", [1, 3])
def test_resume_with_islands_from_every_journal_prefix_is_exact(
    tmp_path: Path, workers: int
) -> None:
    """Cutting the journal anywhere and resuming gives the same journal and island state."""
    config = SearchConfig(initial_drafts=3, seed=5, islands=3, migration_interval=4)
    a = ordered_run(tmp_path / "a", steps=16, workers=workers, config=config, **_parts())
    expected = journal_fingerprint(a)
    want = _islands_of(a)
    assert want[0] is not None and want[1] == 4
    assert any(n.get("island") is not None for n in _node_dicts(a))
    lines = (a / "journal.jsonl").read_bytes().split(b"\n")[:-1]
    for cut in range(0, len(lines), 3):
        b = tmp_path / f"b{cut}"
        b.mkdir()
        shutil.copy(a / "manifest.json", b / "manifest.json")
        torn = lines[cut][: len(lines[cut]) // 2] if cut % 2 else b""
        (b / "journal.jsonl").write_bytes(b"".join(x + b"\n" for x in lines[:cut]) + torn)
        resume_search(b, ResumeSpec(**_parts()))
        assert journal_fingerprint(b) == expected, f"cut at line {cut}"
        assert _islands_of(b) == want, f"cut at line {cut}"


def _node_dicts(path: Path) -> list[dict[str, Any]]:
    return [n.to_dict() for n in RunDir.open(path).nodes()]
