"""Experience cards: deterministic filling, exact JSON round trips, validation-only scores."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.unit.search._trees import PROGRAMS, grow_board, result_for

from openmle import Operator, Outcome, RunResult, Split, TaskMeta, Usage
from openmle.errors import InvalidArgument
from openmle.search import CARD_SCHEMA_VERSION, Board, ExperienceCard
from openmle.search._cards import novelty_of


def test_card_filled_from_result_and_board() -> None:
    """A child card gets lineage, family, delta, novelty, rank and resources from the state."""
    task = TaskMeta(higher_is_better=True)
    board = Board(task=task)
    root = ExperienceCard.build(
        node_id="a", operator="draft", code=PROGRAMS[0], result=result_for(0.7), task=task
    )
    board.add(root)
    child = board.make_card(
        node_id="b",
        operator=Operator.IMPROVE,
        code=PROGRAMS[0],
        result=result_for(0.8),
        parent_ids=["a"],
        plan="tune lr",
        usage=Usage(prompt_tokens=100, completion_tokens=20),
        model_s=3.0,
        cost_usd=0.01,
        generation=1,
    )
    assert child.family == "lightgbm" and child.imports == ("lightgbm",)
    assert child.family_count_before == 1 and not child.is_new_direction
    assert child.novelty == novelty_of(1)
    assert child.delta_vs_parent == pytest.approx(0.1)
    assert child.rank == 1 and child.is_incumbent and child.step == 1
    assert child.total_tokens == 120 and child.sandbox_s == 1.5 and child.model_s == 3.0
    assert child.split is Split.VALID and child.fitness == 0.8


def test_lower_is_better_delta_and_fitness() -> None:
    """For lower-is-better tasks a drop in score is a positive delta; fitness is negated."""
    task = TaskMeta(higher_is_better=False)
    board = Board(task=task)
    board.add(
        ExperienceCard.build(
            node_id="a", operator="draft", code="", result=result_for(0.5), task=task
        )
    )
    child = board.make_card(
        node_id="b",
        operator="improve",
        code="",
        result=result_for(0.3),
        parent_ids=["a"],
    )
    assert child.fitness == -0.3
    assert child.delta_vs_parent == pytest.approx(0.2)
    assert child.is_incumbent and child.rank == 1
    assert board.best_score == 0.5


def test_failed_card_has_signature_and_no_score() -> None:
    """A failure keeps its error signature and never a score, rank or delta."""
    card = ExperienceCard.build(
        node_id="x",
        operator="draft",
        code="",
        result=result_for(None, sig="ValueError: x"),
        task=TaskMeta(),
    )
    assert card.score is None and card.rank is None and card.delta_vs_parent is None
    assert card.error_signature == "ValueError: x" and not card.succeeded


def test_test_split_results_are_refused() -> None:
    """Cards hold validation results only; a test-graded result is an error, not data."""
    test_result = RunResult(outcome=Outcome.SUCCESS, score=0.9, split=Split.TEST)
    with pytest.raises(InvalidArgument, match="validation results only"):
        ExperienceCard.build(
            node_id="x", operator="draft", code="", result=test_result, task=TaskMeta()
        )
    good = ExperienceCard.build(
        node_id="x", operator="draft", code="", result=result_for(0.5), task=TaskMeta()
    )
    data = good.to_dict()
    data["split"] = "test"
    with pytest.raises(InvalidArgument, match="validation results only"):
        ExperienceCard.from_dict(data)


def test_json_round_trip_is_exact() -> None:
    """Every card of a grown board survives json.dumps/json.loads unchanged."""
    board = grow_board(60, seed=3)
    for card in board:
        back = ExperienceCard.from_dict(json.loads(json.dumps(card.to_dict())))
        assert back == card
    summarised = board.cards[5].with_summary("uses lightgbm with 5 folds")
    assert ExperienceCard.from_dict(json.loads(json.dumps(summarised.to_dict()))) == summarised


def test_from_dict_rejects_unknown_keys_and_versions() -> None:
    """Unknown keys and a newer schema version fail with a message naming them."""
    data = grow_board(2).cards[0].to_dict()
    with pytest.raises(InvalidArgument, match="unknown keys"):
        ExperienceCard.from_dict({**data, "test_score": 0.9})
    with pytest.raises(InvalidArgument, match="schema_version"):
        ExperienceCard.from_dict({**data, "schema_version": CARD_SCHEMA_VERSION + 1})


def test_score_only_on_success() -> None:
    """A card cannot carry a score with a failure outcome."""
    data = grow_board(1).cards[0].to_dict()
    with pytest.raises(InvalidArgument, match="score must be None"):
        ExperienceCard.from_dict({**data, "outcome": "timeout", "score": 0.5})


def test_duplicate_node_refused() -> None:
    """Building a card for an id already on the board is an error."""
    board = grow_board(3)
    with pytest.raises(InvalidArgument, match="already on the board"):
        board.make_card(
            node_id="n0",
            operator="draft",
            code="",
            result=result_for(0.1),
        )


def test_the_board_makes_cards_and_build_board_is_deprecated() -> None:
    """board.make_card places a card after the board's cards without adding it; the old
    ExperienceCard.build(board=...) still gives the same card, with a DeprecationWarning."""
    board = grow_board(12, seed=5)
    before = len(board)
    parent = next(c for c in board if c.fitness is not None)
    args: dict[str, Any] = {
        "node_id": "new",
        "operator": "improve",
        "code": PROGRAMS[1],
        "result": result_for(0.99),
        "parent_ids": [parent.node_id],
    }
    made = board.make_card(**args)
    assert len(board) == before and not board.has("new")
    assert made.step == before and made.rank == 1 and made.is_incumbent
    assert made.family_count_before == board.family_count(made.family)
    assert made.delta_vs_parent == pytest.approx(0.99 - (parent.fitness or 0.0))
    alone = ExperienceCard.build(task=board.task, **args)  # as the first node of a search
    assert alone.step == 0 and alone.family_count_before == 0 and alone.delta_vs_parent is None
    with pytest.warns(DeprecationWarning, match=r"board\.make_card"):
        old = ExperienceCard.build(task=board.task, board=board, **args)
    assert old == made
