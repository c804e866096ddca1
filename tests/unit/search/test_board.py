"""The board: aggregates, lineage words, incremental updates equal a rebuild."""

from __future__ import annotations

import pytest
from tests.unit.search._trees import PROGRAMS, add_card, grow_board, result_for

from openmle import TaskMeta
from openmle.errors import InvalidArgument
from openmle.search import Board, ExperienceCard


def test_lineage_words() -> None:
    """Children, siblings (share a parent) and ancestors (breadth first) follow the docs."""
    b = Board()
    add_card(b, "r1", 0.5)
    add_card(b, "r2", 0.6)
    add_card(b, "a", 0.55, ("r1",))
    add_card(b, "b", 0.52, ("r1",))
    add_card(b, "x", 0.7, ("a", "r2"))
    add_card(b, "c", 0.51, ("r2",))
    assert b.children("r1") == ("a", "b")
    assert b.siblings("a") == ("b",)
    assert b.siblings("x") == ("c",)
    assert b.siblings("r1") == ()
    assert b.ancestors("x") == ("a", "r2", "r1")
    assert b.ancestors("x", limit=2) == ("a", "r2")


def test_aggregates() -> None:
    """Best node and family, family stats, under-explored families and repeated errors."""
    b = Board(task=TaskMeta(higher_is_better=False))
    add_card(b, "a", 0.4, code=PROGRAMS[0])
    add_card(b, "b", 0.2, code=PROGRAMS[1])
    add_card(b, "c", None, code=PROGRAMS[1], sig="KeyError: x")
    add_card(b, "d", None, code=PROGRAMS[2], sig="KeyError: x")
    add_card(b, "e", 0.3, ("b",), code=PROGRAMS[1])
    assert b.best_node == "b" and b.best_score == 0.2 and b.best_family == "xgboost"
    stats = b.family_stats()
    assert stats["xgboost"].count == 3 and stats["xgboost"].fail_count == 1
    assert stats["xgboost"].best_node == "b"
    assert stats["catboost"].fail_rate == 1.0
    assert b.underexplored_families() == ("lightgbm",)
    assert b.repeated_errors() == (("KeyError: x", 2),)
    assert b.nodes_with_signature("KeyError: x") == ("c", "d")
    assert b.score_trend() == pytest.approx(-0.1)
    assert b.rank_of("e") == 2 and b.rank_of("c") is None
    assert [c.node_id for c in b.candidates()] == ["a", "b", "e"]
    assert b.candidates(["e"])[0].parent_best_score == 0.2
    assert [c.family_count for c in b.candidates()] == [None, None, None]
    assert [c.family_count for c in b.candidates(board_family_counts=True)] == [0, 2, 2]


def test_rebuild_equals_incremental() -> None:
    """Board.from_cards gives the same snapshot as the incrementally built board."""
    board = grow_board(120, seed=5)
    again = Board.from_cards(board.cards, board.task)
    assert again.to_dict() == board.to_dict()


def test_board_refuses_orphans_and_duplicates() -> None:
    """Parents must be present before children; ids are unique."""
    b = Board()
    add_card(b, "a", 0.5)
    card = ExperienceCard.build(
        node_id="z",
        operator="improve",
        code="",
        result=result_for(0.1),
        task=b.task,
        parent_ids=["missing"],
    )
    with pytest.raises(InvalidArgument, match="not on the board"):
        b.add(card)
    with pytest.raises(InvalidArgument, match="already on the board"):
        b.add(b.card("a"))
    add_card(b, "f", None, sig="E")
    with pytest.raises(InvalidArgument, match="no validation score"):
        b.candidates(["f"])
