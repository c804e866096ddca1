"""Memory plan invariants over random trees: right nodes, right order, hard budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.search._trees import grow_board

from openmle import TaskMeta
from openmle.search import Board, MemoryConfig, OperatorMemory

trees = st.builds(
    grow_board,
    st.integers(min_value=4, max_value=80),
    seed=st.integers(min_value=0, max_value=10_000),
    task=st.builds(TaskMeta, higher_is_better=st.booleans()),
    fail_rate=st.sampled_from([0.2, 0.5]),
)


@settings(max_examples=60, deadline=None)
@given(trees, st.integers(min_value=200, max_value=6000), st.data())
def test_memory_plans_and_budgets(board: Board, max_chars: int, data: st.DataObject) -> None:
    """Plans name real related nodes within their caps; rendered blocks fit the budget."""
    cfg = MemoryConfig(max_chars=max_chars)
    mem = OperatorMemory(board, cfg)
    scored = [c.node_id for c in board if c.score is not None]
    failed = list(board.failed_nodes())
    if scored:
        p = data.draw(st.sampled_from(scored))
        plan = mem.plan("improve", [p])
        assert len(plan.ancestors[0]) <= cfg.improve_ancestors
        assert set(plan.ancestors[0]) <= set(board.ancestors(p))
        assert len(plan.siblings[0]) <= cfg.improve_siblings
        for s in plan.siblings[0]:
            assert set(board.parents(s)) & set(board.parents(p)) and s != p
        assert len(mem.render(plan)) <= max_chars
    if len(scored) >= 2:
        a, b = data.draw(st.lists(st.sampled_from(scored), min_size=2, max_size=2, unique=True))
        plan = mem.plan("crossover", [a, b])
        assert all(len(s) <= cfg.crossover_siblings for s in plan.siblings)
        assert len(mem.render(plan)) <= max_chars
    if failed:
        f = data.draw(st.sampled_from(failed))
        plan = mem.plan("debug", [f])
        sig = board.card(f).error_signature
        same = [n for n in plan.related if board.card(n).error_signature == sig and n in failed]
        assert list(plan.related[: len(same)]) == same  # same signature first
        assert f not in plan.related and len(plan.related) <= cfg.debug_related
        assert len(mem.render(plan)) <= max_chars
    assert len(mem.render(mem.plan("draft"))) <= max_chars
