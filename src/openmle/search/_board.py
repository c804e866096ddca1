"""The task board: the task-global aggregate of every experience card.

The board is derived state. It is updated incrementally with :meth:`Board.add` (O(log n) per
card) and can always be rebuilt from the cards with :meth:`Board.from_cards`; both give the same
:meth:`Board.to_dict`. Resume therefore needs only the cards (which round-trip through JSON
exactly).

Lineage words are defined once, here:

- *parents* of a node: the ids it was built from (0 for Draft, 1 for Improve/Debug, 2 for
  Crossover), in order.
- *children* of a node: the nodes that list it as a parent, in insertion order.
- *siblings* of a node: the other nodes that share at least one parent with it, in insertion
  order (the node itself excluded; Drafts have no siblings). This is the Evo meaning; the
  released RL memory called the selected parent's *children* its siblings (reference S10).
- *ancestors* of a node: its parents, their parents, and so on, breadth first, nearest first,
  each once.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
from attrs import define, field, frozen

from openmle._types import Candidate, Operator, Outcome, RunResult, TaskMeta, Usage
from openmle._validation import check_type
from openmle.errors import InvalidArgument
from openmle.search._cards import ExperienceCard, novelty_of
from openmle.search._families import UNKNOWN_FAMILY

__all__ = ["Board", "FamilyStats"]


@frozen(kw_only=True)
class FamilyStats:
    """Per-family aggregate.

    Args:
        count: cards of the family.
        valid_count: of which succeeded (have a validation score).
        fail_count: of which failed (program failure; infrastructure errors are not counted).
        best_score: best raw validation score of the family, None if none succeeded.
        best_node: the node holding ``best_score``.
    """

    count: int = 0
    valid_count: int = 0
    fail_count: int = 0
    best_score: float | None = None
    best_node: str | None = None

    @property
    def fail_rate(self) -> float:
        """``fail_count / count`` (0 for an empty family)."""
        return self.fail_count / self.count if self.count else 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (with ``fail_rate``)."""
        return {
            "count": self.count,
            "valid_count": self.valid_count,
            "fail_count": self.fail_count,
            "best_score": self.best_score,
            "best_node": self.best_node,
            "fail_rate": self.fail_rate,
        }


@define(eq=False)
class Board:
    """Everything search knows about one task, derived from its cards.

    Args:
        task: the task's score direction.

    Not thread-safe: one writer (the search loop's commit step) adds cards.
    """

    task: TaskMeta = field(factory=TaskMeta)
    _cards: dict[str, ExperienceCard] = field(factory=dict, init=False)
    _order: list[str] = field(factory=list, init=False)
    _children: dict[str, list[str]] = field(factory=dict, init=False)
    _families: dict[str, FamilyStats] = field(factory=dict, init=False)
    _sorted_fitness: list[float] = field(factory=list, init=False)
    _errors: Counter[str] = field(factory=Counter, init=False)
    _outcomes: Counter[str] = field(factory=Counter, init=False)
    _operators: Counter[str] = field(factory=Counter, init=False)
    _deltas: list[float] = field(factory=list, init=False)
    _best: str | None = field(default=None, init=False)
    _by_signature: dict[str, list[str]] = field(factory=dict, init=False)
    _sandbox_s: float = field(default=0.0, init=False)
    _model_s: float = field(default=0.0, init=False)
    _candidates: dict[str, Candidate] = field(factory=dict, init=False)

    @classmethod
    def from_cards(cls, cards: Iterable[ExperienceCard], task: TaskMeta | None = None) -> Board:
        """Rebuild a board from cards in insertion order."""
        board = cls(task=task or TaskMeta())
        for card in cards:
            board.add(card)
        return board

    # ---------------------------------------------------------------- writing

    def make_card(
        self,
        *,
        node_id: str,
        operator: Operator | str,
        code: str,
        result: RunResult,
        parent_ids: Sequence[str] = (),
        plan: str = "",
        generation: int = 0,
        reward: float | None = None,
        model_s: float = 0.0,
        usage: Usage | None = None,
        cost_usd: float | None = None,
        selection_utility: float | None = None,
    ) -> ExperienceCard:
        """The card of a new node placed after the cards on this board (not added: see
        :meth:`add`).

        :meth:`ExperienceCard.build` fills it from the result and the program; the board then
        sets what depends on the nodes before it: ``step``, ``family_count_before`` and
        ``novelty``, ``delta_vs_parent`` (parents must be on the board), ``rank`` and
        ``is_incumbent``. The arguments are those of :meth:`ExperienceCard.build` (the task's
        direction is the board's).

        Raises:
            InvalidArgument: a test-split result, or a node id already on the board.
        """
        card = ExperienceCard.build(
            node_id=node_id,
            operator=operator,
            code=code,
            result=result,
            task=self.task,
            parent_ids=parent_ids,
            plan=plan,
            generation=generation,
            reward=reward,
            model_s=model_s,
            usage=usage,
            cost_usd=cost_usd,
            selection_utility=selection_utility,
        )
        if self.has(node_id):
            raise InvalidArgument(f"node_id={node_id!r} is already on the board; ids are unique")
        count = self.family_count(card.family)
        delta = rank = None
        incumbent = False
        if card.fitness is not None:
            parent_fits = [
                f
                for p in card.parent_ids
                if self.has(p) and (f := self.card(p).fitness) is not None
            ]
            if parent_fits:
                delta = card.fitness - max(parent_fits)
            rank = self.count_better_than(card.fitness) + 1
            best = self.best_fitness
            incumbent = best is None or card.fitness > best
        return attrs.evolve(
            card,
            step=len(self),
            family_count_before=count,
            novelty=novelty_of(count),
            delta_vs_parent=delta,
            rank=rank,
            is_incumbent=incumbent,
        )

    def add(self, card: ExperienceCard) -> None:
        """Insert a card.

        Raises:
            InvalidArgument: a duplicate node id, or a parent that is not on the board.
        """
        check_type(card, ExperienceCard, "card")
        if card.node_id in self._cards:
            raise InvalidArgument(f"node_id={card.node_id!r} is already on the board")
        for p in card.parent_ids:
            if p not in self._cards:
                raise InvalidArgument(
                    f"card {card.node_id!r} names parent {p!r}, which is not on the board; "
                    f"add parents before their children"
                )
        self._cards[card.node_id] = card
        self._order.append(card.node_id)
        self._children[card.node_id] = []
        for p in dict.fromkeys(card.parent_ids):
            self._children[p].append(card.node_id)
        old = self._families.get(card.family, FamilyStats())
        best_score, best_node = old.best_score, old.best_node
        if card.fitness is not None and (
            best_score is None or card.fitness > self._fitness_of(best_score)
        ):
            best_score, best_node = card.score, card.node_id
        failed = card.outcome.is_program_failure
        self._families[card.family] = FamilyStats(
            count=old.count + 1,
            valid_count=old.valid_count + (1 if card.succeeded else 0),
            fail_count=old.fail_count + (1 if failed else 0),
            best_score=best_score,
            best_node=best_node,
        )
        if card.fitness is not None:
            prev = self.best_fitness
            bisect.insort(self._sorted_fitness, card.fitness)
            if prev is None or card.fitness > prev:
                self._best = card.node_id
        if failed and card.error_signature:
            self._errors[card.error_signature] += 1
            self._by_signature.setdefault(card.error_signature, []).append(card.node_id)
        self._outcomes[card.outcome.value] += 1
        self._operators[card.operator.value] += 1
        if card.delta_vs_parent is not None:
            self._deltas.append(card.delta_vs_parent)
        self._sandbox_s += card.sandbox_s
        self._model_s += card.model_s
        if card.succeeded:
            self._candidates[card.node_id] = self._make_candidate(card)

    def set_summary(self, node_id: str, summary: str | None) -> ExperienceCard:
        """Replace a card by a copy with ``summary`` set; returns the new card."""
        card = self.card(node_id).with_summary(summary)
        self._cards[node_id] = card
        return card

    def _fitness_of(self, score: float) -> float:
        return self.task.signed(score)

    def _make_candidate(self, card: ExperienceCard) -> Candidate:
        parent_scores = [
            self._cards[p].score for p in card.parent_ids if self._cards[p].score is not None
        ]
        best_parent = None
        if parent_scores:
            fn = max if self.task.higher_is_better else min
            best_parent = fn(s for s in parent_scores if s is not None)
        return Candidate(
            node_id=card.node_id,
            score=card.score,
            parent_ids=card.parent_ids,
            parent_best_score=best_parent,
            family=card.family,
            reward=card.reward,
            generation=card.generation,
        )

    # ---------------------------------------------------------------- reading

    def __len__(self) -> int:
        return len(self._order)

    def __iter__(self) -> Iterator[ExperienceCard]:
        return (self._cards[n] for n in self._order)

    def has(self, node_id: str) -> bool:
        """True when ``node_id`` is on the board."""
        return node_id in self._cards

    def card(self, node_id: str) -> ExperienceCard:
        """The card of ``node_id``.

        Raises:
            InvalidArgument: unknown node id.
        """
        try:
            return self._cards[node_id]
        except KeyError:
            raise InvalidArgument(f"node_id={node_id!r} is not on the board") from None

    @property
    def cards(self) -> tuple[ExperienceCard, ...]:
        """Every card, in insertion order."""
        return tuple(self)

    @property
    def node_ids(self) -> tuple[str, ...]:
        """Every node id, in insertion order."""
        return tuple(self._order)

    @property
    def best_node(self) -> str | None:
        """The scored node with the best validation score (first inserted on ties)."""
        return self._best

    @property
    def best_fitness(self) -> float | None:
        """Best fitness (signed score, higher is better), None before any success."""
        return self._sorted_fitness[-1] if self._sorted_fitness else None

    @property
    def best_score(self) -> float | None:
        """Best raw validation score, None before any success."""
        return None if self._best is None else self._cards[self._best].score

    @property
    def best_family(self) -> str | None:
        """Family of :attr:`best_node`."""
        return None if self._best is None else self._cards[self._best].family

    def count_better_than(self, fitness: float) -> int:
        """How many scored nodes have a strictly higher fitness."""
        return len(self._sorted_fitness) - bisect.bisect_right(self._sorted_fitness, fitness)

    def rank_of(self, node_id: str) -> int | None:
        """Current rank of a node among scored nodes (1 = best), None without a score."""
        f = self.card(node_id).fitness
        return None if f is None else self.count_better_than(f) + 1

    def family_count(self, family: str) -> int:
        """How many cards have ``family``."""
        stats = self._families.get(family)
        return stats.count if stats else 0

    def family_stats(self) -> Mapping[str, FamilyStats]:
        """Per-family statistics, families sorted by name."""
        return {k: self._families[k] for k in sorted(self._families)}

    def underexplored_families(self, *, max_count: int = 2) -> tuple[str, ...]:
        """Known families tried at most ``max_count`` times that did not always fail, sorted."""
        return tuple(
            sorted(
                f
                for f, s in self._families.items()
                if f != UNKNOWN_FAMILY and s.count <= max_count and s.fail_rate < 1.0
            )
        )

    def repeated_errors(self, *, min_count: int = 2) -> tuple[tuple[str, int], ...]:
        """Error signatures of failed nodes seen at least ``min_count`` times, most first."""
        rows = [(sig, n) for sig, n in self._errors.items() if n >= min_count]
        return tuple(sorted(rows, key=lambda r: (-r[1], r[0])))

    def nodes_with_signature(self, signature: str) -> tuple[str, ...]:
        """Failed nodes with ``signature``, in insertion order."""
        return tuple(self._by_signature.get(signature, ()))

    def score_trend(self, *, window: int = 5) -> float | None:
        """Mean of the last ``window`` parent deltas (fitness units), None without any."""
        recent = self._deltas[-window:]
        return sum(recent) / len(recent) if recent else None

    def parents(self, node_id: str) -> tuple[str, ...]:
        """The node's parents, in order."""
        return self.card(node_id).parent_ids

    def children(self, node_id: str) -> tuple[str, ...]:
        """Nodes listing ``node_id`` as a parent, in insertion order."""
        self.card(node_id)
        return tuple(self._children[node_id])

    def siblings(self, node_id: str) -> tuple[str, ...]:
        """Other nodes sharing at least one parent with ``node_id``, in insertion order."""
        seen: dict[str, None] = {}
        for p in self.parents(node_id):
            for c in self._children[p]:
                if c != node_id:
                    seen[c] = None
        return tuple(sorted(seen, key=lambda n: self._cards[n].step))

    def ancestors(self, node_id: str, *, limit: int | None = None) -> tuple[str, ...]:
        """Parents, grandparents, ... breadth first, nearest first, each once."""
        out: list[str] = []
        seen = {node_id}
        frontier = list(self.parents(node_id))
        while frontier and (limit is None or len(out) < limit):
            nxt: list[str] = []
            for n in frontier:
                if n in seen:
                    continue
                seen.add(n)
                out.append(n)
                if limit is not None and len(out) >= limit:
                    break
                nxt.extend(self._cards[n].parent_ids)
            frontier = nxt
        return tuple(out)

    def candidates(
        self, node_ids: Sequence[str] | None = None, *, board_family_counts: bool = False
    ) -> list[Candidate]:
        """Selector candidates for the scored nodes (all, or ``node_ids`` in that order).

        Args:
            node_ids: which nodes (each must have a validation score); None for all.
            board_family_counts: when False (default) ``family_count`` is left None, so the
                selector counts families among the candidates it is offered (what the released
                code does when no cards exist); when True it is the number of *other* cards of
                the family on the board, failures included (the released code's count over
                the cards it holds).

        ``parent_best_score`` is the direction-aware best parent score.
        """
        if node_ids is None:
            out = list(self._candidates.values())
        else:
            out = []
            for n in node_ids:
                cand = self._candidates.get(n)
                if cand is None:
                    raise InvalidArgument(
                        f"node {n!r} has no validation score; it cannot be a parent"
                    )
                out.append(cand)
        if board_family_counts:
            out = [attrs.evolve(c, family_count=self.family_count(c.family) - 1) for c in out]
        return out

    def failed_nodes(self) -> tuple[str, ...]:
        """Nodes whose program failed, in insertion order."""
        return tuple(n for n in self._order if self._cards[n].outcome.is_program_failure)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready snapshot (what a run directory writes as ``board.json``)."""
        return {
            "num_nodes": len(self),
            "best_node": self.best_node,
            "best_score": self.best_score,
            "best_family": self.best_family,
            "higher_is_better": self.task.higher_is_better,
            "family_stats": {k: v.to_dict() for k, v in self.family_stats().items()},
            "underexplored_families": list(self.underexplored_families()),
            "repeated_errors": [list(r) for r in self.repeated_errors()],
            "score_trend": self.score_trend(),
            "outcome_counts": dict(sorted(self._outcomes.items())),
            "operator_counts": {op.value: self._operators.get(op.value, 0) for op in Operator},
            "parent_graph": {n: list(self._cards[n].parent_ids) for n in self._order},
            "score_history": [
                [n, self._cards[n].score] for n in self._order if self._cards[n].score is not None
            ],
            "sandbox_s": self._sandbox_s,
            "model_s": self._model_s,
            "success_count": self._outcomes.get(Outcome.SUCCESS.value, 0),
        }
