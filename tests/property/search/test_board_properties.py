"""Card and board invariants over random search trees."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.search._trees import grow_board

from openmle import TaskMeta
from openmle.search import Board, ExperienceCard
from openmle.search._cards import novelty_of

trees = st.builds(
    grow_board,
    st.integers(min_value=1, max_value=60),
    seed=st.integers(min_value=0, max_value=10_000),
    task=st.builds(TaskMeta, higher_is_better=st.booleans()),
    fail_rate=st.sampled_from([0.0, 0.3, 0.9]),
)


@settings(max_examples=60, deadline=None)
@given(trees)
def test_resume_from_json_cards_is_exact(board: Board) -> None:
    """Cards through JSON rebuild a board with the same snapshot and the same cards."""
    cards = [ExperienceCard.from_dict(json.loads(json.dumps(c.to_dict()))) for c in board]
    again = Board.from_cards(cards, board.task)
    assert again.cards == board.cards
    assert again.to_dict() == board.to_dict()


@settings(max_examples=60, deadline=None)
@given(trees)
def test_aggregates_agree_with_cards(board: Board) -> None:
    """Best score is the direction-aware best; family counts add up; novelty follows counts."""
    scores = [c.score for c in board if c.score is not None]
    if scores:
        best = max(scores) if board.task.higher_is_better else min(scores)
        assert board.best_score == best
        assert board.card(board.best_node or "").score == best
    else:
        assert board.best_node is None
    assert sum(s.count for s in board.family_stats().values()) == len(board)
    seen: dict[str, int] = {}
    for card in board:
        assert card.family_count_before == seen.get(card.family, 0)
        assert card.novelty == novelty_of(card.family_count_before)
        seen[card.family] = seen.get(card.family, 0) + 1
        assert (card.score is None) == (card.rank is None)
    incumbents = [c for c in board if c.is_incumbent]
    if scores:
        assert incumbents[-1].node_id == board.best_node


@settings(max_examples=40, deadline=None)
@given(trees)
def test_lineage_is_consistent(board: Board) -> None:
    """Every child lists its parent; siblings share a parent; ancestors come before a node."""
    for card in board:
        for p in card.parent_ids:
            assert card.node_id in board.children(p)
        for s in board.siblings(card.node_id):
            assert set(board.parents(s)) & set(card.parent_ids)
        for a in board.ancestors(card.node_id):
            assert board.card(a).step < card.step
