"""Exact agreement with the released selection code (golden vectors).

Families are inputs to the selectors, so these tests take each program's family from the
golden ``method_family`` records (the released detector that produced the vector); our own
detector is tested on its own in ``test_families.py``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from tests._golden import decode, records

from openmle import Candidate
from openmle.search import ThreeFactorSelector, UtilityRow, rl_fitness
from openmle.search._select import PRESETS

REL = 1e-12


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=REL, abs_tol=1e-15)


def _assert_utilities(rows: Sequence[UtilityRow], expected: list[Any], rid: str) -> None:
    """Each row matches its golden record (node id, the three components, utility and
    probability), in order."""
    for row, exp in zip(rows, expected, strict=True):
        assert row.node_id == str(exp["node_id"])
        got = (row.score, row.delta, row.novelty, row.utility, row.probability)
        want = (
            exp["score_component"],
            exp["delta_component"],
            exp["novelty_component"],
            exp["utility"],
            exp["probability"],
        )
        assert all(_close(g, x) for g, x in zip(got, want, strict=True)), (rid, got, want)


def _families(which: str) -> dict[str, str]:
    return {r["inputs"]["code"]: r["output"][which] for r in records("method_family")}


def _evo_ids() -> list[str]:
    return [r["id"] for r in records("evo_parent_utilities")]


def _by_id(kind: str, rid: str) -> dict[str, Any]:
    rec = next(r for r in records(kind) if r["id"] == rid)
    return dict(decode(rec))


@pytest.mark.parametrize("rid", _evo_ids())
def test_evo_parent_utilities(rid: str) -> None:
    """Score, gain, novelty, utility and probability match Evo with the released preset."""
    rec = _by_id("evo_parent_utilities", rid)
    flags, inp = rec["flags"], rec["inputs"]
    w = flags["weights"]
    assert (w["score"], w["delta"], w["novelty"]) == PRESETS["released"]
    hib = not flags["lower_is_better"]
    norm = flags["component_normalization"]
    assert norm["score"] == norm["delta"]
    fam = _families("evo_family")
    nodes = {n["id"]: n for n in inp["nodes"]}
    cards = inp["previous_cards"]
    cands = []
    for cid in inp["candidate_ids"]:
        node = nodes[cid]
        parent_scores = [
            nodes[p]["metric_value"]
            for p in node["parent_ids"]
            if p in nodes and nodes[p]["metric_value"] is not None
        ]
        best_parent = (max if hib else min)(parent_scores) if parent_scores else None
        family = fam[node["code"]]
        count = (
            sum(1 for c in cards if c["method_family_auto"] == family and c["node_id"] != cid)
            if cards
            else None
        )
        cands.append(
            Candidate(
                node_id=cid,
                score=node["metric_value"],
                parent_ids=tuple(node["parent_ids"]),
                parent_best_score=best_parent,
                family=family,
                family_count=count,
            )
        )
    selector = ThreeFactorSelector.preset(
        "released",
        normalization=norm["score"],
        hybrid_minmax_weight=norm.get("hybrid_minmax_weight", 0.5),
        temperature=flags["temperature"],
        higher_is_better=hib,
    )
    _assert_utilities(selector.utilities(cands), rec["output"]["utilities"], rid)


@pytest.mark.parametrize("rid", [r["id"] for r in records("rl_parent_utilities")])
def test_rl_parent_utilities(rid: str) -> None:
    """The RL three-factor utilities match with the released preset.

    The RL database's selection score falls back to the row's reward (0.0 in these records)
    when the metadata has none; parents are ``parent_id`` plus ``crossover_parent_ids``; family
    counts run over every program of the task.
    """
    rec = _by_id("rl_parent_utilities", rid)
    flags, inp = rec["flags"], rec["inputs"]
    fam = _families("rl_family")
    progs = {p["id"]: p for p in inp["all_programs"]}

    def fit(pid: int) -> float:
        v = progs[pid]["metadata"].get("metric_static_base_reward")
        return 0.0 if v is None else float(v)

    cands = []
    for cid in inp["candidate_ids"]:
        p = progs[cid]
        parents = ([p["parent_id"]] if p["parent_id"] is not None else []) + list(
            p["metadata"].get("crossover_parent_ids") or []
        )
        parent_fits = [fit(q) for q in parents if q in progs]
        family = fam[p["code"]]
        cands.append(
            Candidate(
                node_id=str(cid),
                score=fit(cid),
                parent_ids=tuple(str(q) for q in parents),
                parent_best_score=max(parent_fits) if parent_fits else None,
                family=family,
                family_count=sum(
                    1 for q, o in progs.items() if q != cid and fam[o["code"]] == family
                ),
            )
        )
    selector = ThreeFactorSelector.preset(
        "released",
        temperature=flags["temperature"],
        higher_is_better=not flags["lower_is_better"],
    )
    _assert_utilities(selector.utilities(cands), rec["output"]["utilities"], rid)


@pytest.mark.parametrize("rid", [r["id"] for r in records("rl_db_fitness")])
def test_rl_db_fitness(rid: str) -> None:
    """Exploit, explore, cooling, visits, variance and fitness match the program database."""
    rec = _by_id("rl_db_fitness", rid)
    progs = rec["inputs"]["programs_in_insert_order (ids are 1..N)"]
    ids = list(range(1, len(progs) + 1))
    children: dict[int, list[int]] = {i: [] for i in ids}
    for i, p in zip(ids, progs, strict=True):
        parents = {p["parent_id"]} if p["parent_id"] is not None else set()
        parents |= set(p["crossover_parent_ids"] or [])
        for q in sorted(parents):
            children[q].append(i)
    cands = [
        Candidate(
            node_id=str(i),
            reward=progs[i - 1]["base_reward"],
            children_rewards=tuple(progs[c - 1]["base_reward"] for c in children[i]),
            visits=len(children[i]),
        )
        for i in ids
    ]
    for row, exp in zip(rl_fitness(cands), rec["output"]["rows"], strict=True):
        assert row.node_id == str(exp["id"])
        assert row.visits == exp["visit_count"]
        assert _close(row.child_variance, exp["child_base_reward_variance"]), rid
        got = (row.fitness, row.exploit, row.explore, row.cooling)
        want = (
            exp["fitness"],
            exp["exploit_coefficient"],
            exp["explore_coefficient"],
            exp["cooling_coefficient"],
        )
        assert all(_close(g, x) for g, x in zip(got, want, strict=True)), (rid, got, want)
