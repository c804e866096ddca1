"""Selectors: conformance, presets, islands, baselines and the RL parent selector."""

from __future__ import annotations

import json

import numpy as np
import pytest

from openmle import Candidate, Operator, Selector
from openmle.errors import InvalidArgument
from openmle.search import (
    DEFAULT_MIX,
    GreedySelector,
    Islands,
    IslandSelector,
    OperatorMix,
    RLParentSelector,
    ThreeFactorSelector,
    UniformSelector,
    plan_rl_step,
    rl_fitness,
)
from openmle.testing import check_selector, sample_candidates


def _islands_for(cands: list[Candidate], n: int = 3) -> Islands:
    isl = Islands(num_islands=n)
    for i, c in enumerate(cands):
        isl = Islands(
            num_islands=n,
            members=[
                (*m, (c.node_id, c.score or 0.0)) if j == i % n else m
                for j, m in enumerate(isl.members)
            ],
        )
    return isl


@pytest.mark.parametrize(
    "selector",
    [
        ThreeFactorSelector.preset("paper"),
        ThreeFactorSelector.preset("released"),
        ThreeFactorSelector.preset("released", normalization="rank", higher_is_better=False),
        ThreeFactorSelector.preset("released", normalization="hybrid", temperature=0.1),
        GreedySelector(),
        GreedySelector(higher_is_better=False),
        UniformSelector(),
        RLParentSelector(),
        IslandSelector(base=ThreeFactorSelector(), islands=_islands_for(sample_candidates())),
    ],
    ids=repr,
)
def test_conformance(selector: Selector) -> None:
    """Every selector keeps the Selector contract (openmle.testing.check_selector)."""
    assert isinstance(selector, Selector)
    check_selector(selector)
    check_selector(selector, sample_candidates(20, seed=4))


def test_presets() -> None:
    """The paper states 1.0/0.6/0.3; the released code ships 1.0/0.4/0.25."""
    paper = ThreeFactorSelector.preset("paper")
    released = ThreeFactorSelector.preset("released", temperature=2.0)
    assert (paper.w_score, paper.w_delta, paper.w_novelty) == (1.0, 0.6, 0.3)
    assert (released.w_score, released.w_delta, released.w_novelty) == (1.0, 0.4, 0.25)
    assert released.temperature == 2.0
    with pytest.raises(InvalidArgument, match="preset"):
        ThreeFactorSelector.preset("fast")
    with pytest.raises(InvalidArgument, match="temperature"):
        ThreeFactorSelector(temperature=0.0)
    with pytest.raises(InvalidArgument, match="normalization"):
        ThreeFactorSelector(normalization="zscore")


def test_components_are_reported() -> None:
    """Each candidate's score/delta/novelty/utility/probability row is in the selection."""
    cands = [
        Candidate(node_id="a", score=0.5, family="x"),
        Candidate(node_id="b", score=0.7, parent_best_score=0.5, family="x"),
        Candidate(node_id="c", score=0.6, family="y"),
    ]
    sel = ThreeFactorSelector.preset("released", explain=True).select(
        cands, np.random.default_rng(0)
    )
    comps = [dict(c) for c in sel.components]
    assert [c["score"] for c in comps] == [0.0, 1.0, 0.5]
    assert [c["delta"] for c in comps] == [0.0, 1.0, 0.0]
    assert comps[2]["novelty"] == 1.0 and comps[0]["novelty"] == pytest.approx(2**-0.5)
    assert sel.utilities[1] == pytest.approx(1.0 + 0.4 + 0.25 * 2**-0.5)


def test_greedy_and_direction() -> None:
    """Greedy takes the best score in the task's direction; unscored last."""
    cands = [Candidate(node_id=n, score=s) for n, s in (("a", 0.2), ("b", 0.9), ("c", None))]
    rng = np.random.default_rng(0)
    assert GreedySelector().select(cands, rng, k=2).chosen == ("b", "a")
    assert GreedySelector(higher_is_better=False).select(cands, rng, k=3).chosen == ("a", "b", "c")


def test_islands_admission_capacity_and_json() -> None:
    """Admission needs the island mean; capacity evicts the worst; JSON round trip is exact."""
    isl = Islands(num_islands=2, capacity=2)
    isl = isl.admit("a", 0.5, 0).admit("b", 0.4, 0)  # below the mean: refused
    assert [n for n, _ in isl.members[0]] == ["a"]
    isl = isl.admit("c", 0.7, 0).admit("d", 0.9, 0)
    assert [n for n, _ in isl.members[0]] == ["c", "d"]
    assert Islands.from_dict(json.loads(json.dumps(isl.to_dict()))) == isl
    assert isl.admit("d", 0.95, 0) is isl  # already there
    with pytest.raises(InvalidArgument, match="island index"):
        isl.admit("e", 0.1, 2)


def test_island_selector_picks_within_one_island() -> None:
    """All parents come from one island; nodes on no island are never drawn."""
    cands = [Candidate(node_id=f"n{i}", score=0.1 * i, family=f"f{i}") for i in range(8)]
    isl = Islands(num_islands=2)
    for i in range(6):
        isl = isl.admit(f"n{i}", 0.1 * i, i % 2)
    sel = IslandSelector(islands=isl).select(cands, np.random.default_rng(1), k=2)
    homes = {isl.island_of(n) for n in sel.chosen}
    assert len(homes) == 1
    assert sel.probability_of("n6") == 0.0 and sel.probability_of("n7") == 0.0
    assert sum(sel.probabilities) == pytest.approx(1.0)


def test_rl_pools_and_fallbacks() -> None:
    """Improve/Crossover draw reward > 0, Debug reward <= 0; empty pools fall back."""
    cands = [
        Candidate(node_id="g1", reward=0.6),
        Candidate(node_id="g2", reward=0.2, children_rewards=(0.1, 0.5), visits=2),
        Candidate(node_id="b1", reward=-0.5),
        Candidate(node_id="b2", reward=0.0),
        Candidate(node_id="u", reward=None),
    ]
    rng = np.random.default_rng(3)
    for _ in range(20):
        assert set(RLParentSelector(operator=Operator.IMPROVE).select(cands, rng).chosen) <= {
            "g1",
            "g2",
        }
        assert set(RLParentSelector(operator=Operator.DEBUG).select(cands, rng).chosen) <= {
            "b1",
            "b2",
        }
    sel = RLParentSelector(operator=Operator.CROSSOVER).select(cands, rng, k=2)
    assert set(sel.chosen) == {"g1", "g2"} and sel.probability_of("u") == 0.0
    with pytest.raises(InvalidArgument, match="draft"):
        RLParentSelector(operator=Operator.DRAFT)
    only_bad = [c for c in cands if c.node_id.startswith("b")]
    with pytest.raises(InvalidArgument, match="no candidate is in the pool"):
        RLParentSelector(operator=Operator.IMPROVE).select(only_bad, rng)
    step = plan_rl_step(only_bad, rng, mix=OperatorMix(draft=0, improve=0, debug=0, crossover=1))
    assert step.requested is Operator.CROSSOVER and step.operator is Operator.DEBUG
    assert step.selection is not None and step.selection.chosen[0] in {"b1", "b2"}
    assert plan_rl_step([], rng).operator is Operator.DRAFT
    assert plan_rl_step(cands, rng, force_draft=True).selection is None


def test_rl_fitness_parts() -> None:
    """Fitness adds exploit, explore and normalised cooling."""
    rows = rl_fitness(
        [
            Candidate(node_id="a", reward=1.0, children_rewards=(0.0, 1.0), visits=2),
            Candidate(node_id="b", reward=0.0),
        ]
    )
    assert [r.exploit for r in rows] == [1.0, 0.0]
    assert [r.explore for r in rows] == [0.5, 0.5]
    assert [r.cooling for r in rows] == [0.0, 1.0]
    assert rows[0].fitness == 1.5 and rows[1].fitness == 1.5
    assert rows[0].child_variance == 0.25 and rows[1].child_variance is None


def test_operator_mix() -> None:
    """The default mix is the paper's; sampling follows it; all-zero is uniform."""
    probs = DEFAULT_MIX.probabilities()
    assert probs[Operator.DRAFT] == pytest.approx(0.5)
    assert probs[Operator.CROSSOVER] == pytest.approx(0.16)
    rng = np.random.default_rng(0)
    draws = [DEFAULT_MIX.sample(rng) for _ in range(4000)]
    assert abs(draws.count(Operator.DRAFT) / 4000 - 0.5) < 0.05
    zero = OperatorMix(draft=0, improve=0, debug=0, crossover=0)
    assert set(zero.probabilities().values()) == {0.25}
    with pytest.raises(InvalidArgument, match=r"OperatorMix\.debug"):
        OperatorMix(debug=-0.1)


def test_reference_selectors_subclass_the_runtime_checkable_protocol() -> None:
    """Each reference selector subclasses `Selector` (checked by mypy where it is defined), and
    stays a frozen, slotted attrs value that passes the runtime check."""
    import attrs

    from openmle import Selector
    from openmle.search import (
        GreedySelector,
        Islands,
        IslandSelector,
        RLParentSelector,
        ThreeFactorSelector,
        UniformSelector,
    )

    assert getattr(Selector, "_is_protocol", False) and getattr(
        Selector, "_is_runtime_protocol", False
    )
    base = ThreeFactorSelector(higher_is_better=True)
    instances = [
        base,
        GreedySelector(higher_is_better=True),
        UniformSelector(),
        IslandSelector(base=base, islands=Islands(members=((("n0", 0.5),),))),
        RLParentSelector(),
    ]
    for sel in instances:
        cls = type(sel)
        assert Selector in cls.__mro__, cls
        assert isinstance(sel, Selector)
        assert attrs.has(cls) and not hasattr(sel, "__dict__"), cls  # still slotted
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            sel.x = 1  # type: ignore[attr-defined]
        assert getattr(cls, "select") is not Selector.select  # noqa: B009


def test_column_cache_gives_the_uncached_utilities() -> None:
    """Growing, reordered, shrunk and edited candidate lists read as if read afresh."""
    import attrs

    from openmle.search import _select

    cands = [
        Candidate(
            node_id=f"n{i}",
            score=None if i % 7 == 3 else 0.5 + 0.01 * (i % 13),
            parent_best_score=None if i % 3 else 0.55,
            family=("lgbm", "xgb", "cnn")[i % 3],
            family_count=None if i % 5 else i % 4,
        )
        for i in range(40)
    ]
    sel = ThreeFactorSelector.preset("released")

    def fresh(cs: list[Candidate]) -> list[tuple[float, ...]]:
        _select._last_columns[0] = ()
        return [(r.score, r.delta, r.novelty, r.utility) for r in sel.utilities(cs)]

    def cached(cs: list[Candidate]) -> list[tuple[float, ...]]:
        return [(r.score, r.delta, r.novelty, r.utility) for r in sel.utilities(cs)]

    edited = [*cands[:10], attrs.evolve(cands[10], score=0.99, family="new"), *cands[11:]]
    sequences = [cands[:10], cands[:25], cands, cands[:25], cands[::-1], cands[5:], edited, cands]
    want = [fresh(cs) for cs in sequences]
    _select._last_columns[0] = ()
    got = [cached(cs) for cs in sequences]
    np.testing.assert_equal(got, want)
    rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
    a = sel.select(cands, rng_a, k=3)
    _select._last_columns[0] = ()
    assert a == sel.select(list(cands), rng_b, k=3)
