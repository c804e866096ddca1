"""The I/O-free search core driven by scripted evaluations."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from openmle import Operator, Outcome, RunResult, Selection, Usage
from openmle.errors import InvalidArgument
from openmle.search import Budget, Evaluation, PriceTable, Proposal, SearchConfig, SearchCore
from openmle.testing import FunctionSelector


def ok(score: float, printed: float | None = None, runtime: float = 1.0) -> Evaluation:
    """A successful evaluation with ``score``."""
    return Evaluation(
        code=f"print({score})\n",
        result=RunResult(
            outcome=Outcome.SUCCESS, score=score, printed_score=printed, runtime_s=runtime
        ),
        usage=Usage(prompt_tokens=10, completion_tokens=5),
        model="m",
    )


def fail(
    signature: str = "ValueError: bad", outcome: Outcome = Outcome.RUNTIME_ERROR
) -> Evaluation:
    """A failed evaluation with ``signature``."""
    return Evaluation(
        code="raise ValueError\n",
        result=RunResult(outcome=outcome, error_signature=signature, runtime_s=0.5),
    )


def core(steps: int = 20, **cfg: object) -> SearchCore:
    """A core with a score-proportional selector."""
    config = SearchConfig(**cfg)  # type: ignore[arg-type]
    return SearchCore(
        config=config,
        selector=FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
        budget=Budget(steps=steps),
    )


def drive(c: SearchCore, evaluate: Callable[[Proposal], Evaluation]) -> list[Proposal]:
    """Propose and commit until the core stops; return the proposals."""
    out = []
    while (p := c.propose()) is not None:
        out.append(p)
        c.commit(p, evaluate(p))
    return out


def test_initial_drafts_then_selector_operators() -> None:
    """The first drafts come first; later steps improve or cross over selected parents."""
    c = core(steps=30, initial_drafts=4, crossover_prob=0.5)
    props = drive(c, lambda p: ok(0.1 * (p.step % 7)))
    assert [p.operator for p in props[:4]] == [Operator.DRAFT] * 4
    later = {p.operator for p in props[4:]}
    assert later == {Operator.IMPROVE, Operator.CROSSOVER}
    for p in props[4:]:
        assert len(p.parent_ids) == p.operator.n_parents
        assert p.selection is not None and set(p.parent_ids) <= set(p.selection.chosen)
        assert all(q in c.nodes for q in p.parent_ids)
    assert len(c.nodes) == 30
    assert c.exhausted() == "steps"


def test_crossover_probability_zero_and_one() -> None:
    """crossover_prob=0 never crosses over; 1 always does once two nodes succeed."""
    never = drive(core(steps=12, initial_drafts=3, crossover_prob=0.0), lambda p: ok(0.5))
    assert Operator.CROSSOVER not in {p.operator for p in never}
    always = drive(core(steps=12, initial_drafts=3, crossover_prob=1.0), lambda p: ok(0.5))
    assert {p.operator for p in always[3:]} == {Operator.CROSSOVER}


def test_failed_node_enters_bounded_debug_cycle() -> None:
    """A failure is debugged up to max_debug_depth times with growing depth, then abandoned."""
    sigs = iter(f"Err{i}" for i in range(100))
    c = core(steps=8, initial_drafts=1, max_debug_depth=3, repeated_errors=5)
    props = drive(c, lambda p: fail(next(sigs)))
    ops = [(p.operator, p.debug_depth) for p in props]
    assert ops[:4] == [
        (Operator.DRAFT, 0),
        (Operator.DEBUG, 1),
        (Operator.DEBUG, 2),
        (Operator.DEBUG, 3),
    ]
    # After the chain gives up, nothing succeeded: the core drafts again.
    assert ops[4] == (Operator.DRAFT, 0)
    assert props[1].parent_ids == (props[0].node_id,)
    assert props[2].parent_ids == (props[1].node_id,)


def test_debug_fix_ends_the_chain() -> None:
    """A Debug that succeeds closes the chain; the next step uses the selector."""
    c = core(steps=4, initial_drafts=1, crossover_prob=0.0)
    results = iter([fail(), ok(0.7), ok(0.8), ok(0.9)])
    props = drive(c, lambda p: next(results))
    assert [p.operator for p in props] == [
        Operator.DRAFT,
        Operator.DEBUG,
        Operator.IMPROVE,
        Operator.IMPROVE,
    ]


def test_repeated_identical_errors_force_a_fresh_draft() -> None:
    """Two consecutive identical signatures in a Debug chain force a Draft next."""
    c = core(steps=5, initial_drafts=1, max_debug_depth=10, repeated_errors=2, crossover_prob=0.0)
    first = ok(0.5)
    seq = iter([first, fail("Same"), fail("Same"), ok(0.6), ok(0.6)])
    props = drive(c, lambda p: next(seq))
    assert [(p.operator, p.reason) for p in props] == [
        (Operator.DRAFT, "initial"),
        (Operator.IMPROVE, "selector"),
        (Operator.DEBUG, "debug"),
        (Operator.DRAFT, "forced_draft"),
        (Operator.IMPROVE, "selector"),
    ]


def test_infra_errors_are_never_debugged_nor_selected() -> None:
    """INFRA_ERROR nodes get no Debug and never become parents."""
    c = core(steps=6, initial_drafts=2)
    seq = iter(
        [
            Evaluation(code="x", result=RunResult.infra_error("down")),
            ok(0.3),
            ok(0.4),
            ok(0.5),
            ok(0.6),
            ok(0.7),
        ]
    )
    props = drive(c, lambda p: next(seq))
    assert Operator.DEBUG not in {p.operator for p in props}
    assert all("n00000" not in p.parent_ids for p in props)
    assert c.nodes["n00000"].score is None


def test_printed_score_is_recorded_not_trusted_by_default() -> None:
    """Selection uses the sandbox score unless trust_printed_score is set."""
    c = core(steps=1)
    p = c.propose()
    assert p is not None
    node = c.commit(p, ok(0.2, printed=0.99))
    assert (node.score, node.valid_score, node.printed_score) == (0.2, 0.2, 0.99)
    t = core(steps=1, trust_printed_score=True)
    p = t.propose()
    assert p is not None
    node = t.commit(p, ok(0.2, printed=0.99))
    assert (node.score, node.valid_score) == (0.99, 0.2)


def test_best_respects_direction_and_ties() -> None:
    """The best node follows the metric direction; ties keep the earliest."""
    scores = iter([0.5, 0.2, 0.9, 0.2])
    hi = core(steps=4)
    drive(hi, lambda p: ok(next(scores)))
    assert hi.best() is not None and hi.best().score == 0.9  # type: ignore[union-attr]
    lo = SearchCore(
        config=SearchConfig(),
        selector=FunctionSelector(lambda c: 1.0),
        budget=Budget(steps=4),
        higher_is_better=False,
    )
    scores = iter([0.5, 0.2, 0.9, 0.2])
    drive(lo, lambda p: ok(next(scores)))
    assert lo.best() is not None and lo.best().node_id == "n00001"  # type: ignore[union-attr]


def test_nodes_record_consumption_and_ledger_caps_stop_work() -> None:
    """Cards carry what they consumed; a token cap stops proposals."""
    c = SearchCore(
        config=SearchConfig(),
        selector=FunctionSelector(lambda c: 1.0),
        budget=Budget(tokens=40, prices=PriceTable(prices={"m": (1e6, 1e6)})),
    )
    props = drive(c, lambda p: ok(0.5, runtime=2.0))
    assert len(props) == 3  # 15 tokens per node: 15, 30, 45 >= 40
    node = c.nodes["n00000"]
    assert node.used.sandbox_s == 2.0
    assert node.used.tokens == 15
    assert node.used.cost_usd == pytest.approx(15.0)
    assert c.ledger.tokens == 45
    assert c.exhausted() == "tokens"


def test_commit_checks_pending_and_split() -> None:
    """Committing an unknown step or a test-split result is an argument error."""
    c = core(steps=3)
    p = c.propose()
    assert p is not None
    with pytest.raises(InvalidArgument, match="valid"):
        c.commit(
            p,
            Evaluation(code="", result=RunResult(outcome=Outcome.SUCCESS, score=1.0, split="test")),
        )
    c.commit(p, ok(0.1))
    with pytest.raises(InvalidArgument, match="not pending"):
        c.commit(p, ok(0.1))


def test_concurrent_proposals_never_debug_a_node_twice() -> None:
    """Several proposals in flight share one debug queue: each failure is debugged once."""
    c = core(steps=12, initial_drafts=3)
    first = [c.propose() for _ in range(3)]
    for p in first:
        assert p is not None
        c.commit(p, fail(f"E{p.step}"))
    debug = [c.propose() for _ in range(3)]
    targets = [p.parent_ids[0] for p in debug if p is not None]
    assert sorted(targets) == ["n00000", "n00001", "n00002"]


def test_replay_restores_state_and_random_stream() -> None:
    """Replaying proposals (with their rng states) and nodes rebuilds an identical core."""
    a = core(steps=25, initial_drafts=3, fresh_draft_prob=0.2)
    log: list[tuple[str, object, object]] = []
    while (p := a.propose()) is not None:
        log.append(("p", p, a.rng_state()))
        ev = ok(0.01 * p.step) if p.step % 4 else fail(f"E{p.step % 3}")
        log.append(("n", a.make_node(p, ev), None))
        a.apply(log[-1][1])  # type: ignore[arg-type]
        if p.step == 14:
            break
    b = core(steps=25, initial_drafts=3, fresh_draft_prob=0.2)
    for kind, obj, rng in log:
        if kind == "p":
            b.restore_proposal(obj, rng)  # type: ignore[arg-type]
        else:
            b.apply(obj)  # type: ignore[arg-type]
    rest_a: list[Proposal] = []
    rest_b: list[Proposal] = []
    for c_, rest in ((a, rest_a), (b, rest_b)):
        while (p := c_.propose()) is not None:
            rest.append(p)
            c_.commit(p, ok(0.02 * p.step) if p.step % 5 else fail("E"))
    assert rest_a == rest_b
    assert [n.to_dict() for n in a.nodes.values()] == [n.to_dict() for n in b.nodes.values()]


def test_config_validation_messages() -> None:
    """Bad ratios and counts name the field."""
    with pytest.raises(InvalidArgument, match="crossover_prob"):
        SearchConfig(crossover_prob=1.5)
    with pytest.raises(InvalidArgument, match="repeated_errors"):
        SearchConfig(repeated_errors=1)
    with pytest.raises(InvalidArgument, match="initial_drafts"):
        SearchConfig(initial_drafts=-1)
    assert SearchConfig.from_dict(SearchConfig(seed=3).to_dict()) == SearchConfig(seed=3)


def test_proposals_journal_the_whole_selection() -> None:
    """A proposal's selection is a typed Selection and its JSON form keeps every field (the
    per-candidate components were dropped); journals written without them still load."""
    sel = Selection(
        chosen=("a",),
        node_ids=("a", "b"),
        probabilities=(0.7, 0.3),
        utilities=(1.0, 0.2),
        components=({"score": 1.0, "delta": 0.0}, {"score": 0.2, "delta": math.nan}),
    )
    p = Proposal(step=3, node_id="n3", operator=Operator.IMPROVE, parent_ids=("a",), selection=sel)
    back = Proposal.from_dict(json.loads(json.dumps(p.to_dict(), allow_nan=False)))
    assert back.selection is not None
    assert back.selection.components[0] == {"score": 1.0, "delta": 0.0}
    assert math.isnan(back.selection.components[1]["delta"])
    assert (back.selection.chosen, back.selection.node_ids) == (sel.chosen, sel.node_ids)
    assert (back.selection.probabilities, back.selection.utilities) == (
        sel.probabilities,
        sel.utilities,
    )
    old = {"chosen": ["a"], "node_ids": ["a", "b"], "probabilities": [0.7, 0.3]}
    loaded = Proposal.from_dict({**p.to_dict(), "selection": old})
    assert loaded.selection is not None and loaded.selection.components == ()
    with pytest.raises(InvalidArgument, match="unknown keys"):
        Proposal.from_dict({**p.to_dict(), "selection": {**old, "test_score": 1.0}})
