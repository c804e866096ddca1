"""Island populations and the island selector.

:class:`Islands` is a frozen value holding the island populations (``admit`` and ``migrate``
return a new one); :class:`IslandSelector` chooses an island, then parents within it with a
:class:`~openmle.search.ThreeFactorSelector`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, final

import numpy as np
from attrs import field, frozen

from openmle._protocols import Selector
from openmle._types import Candidate, Selection
from openmle._validation import check_finite, fail
from openmle.errors import InvalidArgument
from openmle.search._select import (
    ThreeFactorSelector,
    UtilityRow,
    _check_k,
    _minmax,
    _nan_array,
    _selection,
    draw_without_replacement,
    softmax,
)

__all__ = ["IslandSelector", "Islands"]


def _members(value: object) -> tuple[tuple[tuple[str, float], ...], ...]:
    if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
        raise fail("a sequence of islands", "Islands.members", value)
    return tuple(tuple((str(n), float(s)) for n, s in island) for island in value)


@final
@frozen(kw_only=True)
class Islands:
    """Island populations for :class:`IslandSelector`.

    A frozen value: :meth:`admit` and :meth:`migrate` return a new one, so the search loop can
    checkpoint it as JSON (:meth:`to_dict`) and resume exactly.

    Args:
        num_islands: number of islands (>= 1).
        capacity: most nodes per island; admitting past it evicts the island's worst.
        higher_is_better: the task's score direction.
        members: per island, ``(node_id, score)`` pairs in admission order.

    Admission: an empty island takes any scored node; otherwise a node enters only if its score
    is at least the island's mean (direction-aware). A child belongs on its parent's island —
    pass that island to :meth:`admit` (openevolve #391 sent every child to island 0).
    """

    num_islands: int = 1
    capacity: int = 500
    higher_is_better: bool = True
    members: tuple[tuple[tuple[str, float], ...], ...] = field(default=(), converter=_members)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.num_islands, bool) or self.num_islands < 1:
            raise fail("an integer >= 1", "Islands.num_islands", self.num_islands)
        if isinstance(self.capacity, bool) or self.capacity < 1:
            raise fail("an integer >= 1", "Islands.capacity", self.capacity)
        if self.members and len(self.members) != self.num_islands:
            raise InvalidArgument("Islands.members must have one entry per island")
        if not self.members:
            object.__setattr__(self, "members", tuple(() for _ in range(self.num_islands)))

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b

    def _strength(self, island: int) -> float | None:
        scores = [s for _, s in self.members[island]]
        if not scores:
            return None
        return max(scores) if self.higher_is_better else min(scores)

    def island_of(self, node_id: str) -> int | None:
        """The island holding ``node_id`` (the first, after a migration copy), or None."""
        for i, island in enumerate(self.members):
            if any(n == node_id for n, _ in island):
                return i
        return None

    def admit(self, node_id: str, score: float, island: int) -> Islands:
        """Offer a scored node to ``island``; returns the new state (unchanged if refused or
        already there).
        """
        if isinstance(island, bool) or not 0 <= island < self.num_islands:
            raise fail(f"an island index in [0, {self.num_islands})", "island", island)
        score = check_finite(score, "score")
        pop = list(self.members[island])
        if any(n == node_id for n, _ in pop):
            return self
        if pop:
            mean = sum(s for _, s in pop) / len(pop)
            if not (score == mean or self._better(score, mean)):
                return self
        pop.append((node_id, score))
        if len(pop) > self.capacity:
            worst = min(
                range(len(pop)),
                key=lambda j: (pop[j][1] if self.higher_is_better else -pop[j][1], -j),
            )
            pop.pop(worst)
        members = list(self.members)
        members[island] = tuple(pop)
        return Islands(
            num_islands=self.num_islands,
            capacity=self.capacity,
            higher_is_better=self.higher_is_better,
            members=members,
        )

    def ranked(self) -> list[int]:
        """Island indices, strongest first (by best score; empty islands last; ties by index)."""

        def key(i: int) -> tuple[int, float, int]:
            s = self._strength(i)
            if s is None:
                return (1, 0.0, i)
            return (0, -s if self.higher_is_better else s, i)

        return sorted(range(self.num_islands), key=key)

    def migrate(self, rng: np.random.Generator) -> Islands:
        """Reset the weaker half of the islands and seed each from a random stronger one.

        The stronger ``ceil(n / 2)`` islands are kept unchanged; each island of the weaker
        ``floor(n / 2)`` is emptied and receives the best node of one stronger island chosen
        uniformly. One island: nothing changes.
        """
        if self.num_islands < 2:
            return self
        order = self.ranked()
        keep = order[: math.ceil(self.num_islands / 2)]
        reset = order[math.ceil(self.num_islands / 2) :]
        members = list(self.members)
        donors = [i for i in keep if members[i]]
        for i in reset:
            if not donors:
                members[i] = ()
                continue
            d = donors[int(rng.integers(len(donors)))]
            best = max(members[d], key=lambda m: m[1] if self.higher_is_better else -m[1])
            members[i] = (best,)
        return Islands(
            num_islands=self.num_islands,
            capacity=self.capacity,
            higher_is_better=self.higher_is_better,
            members=members,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "num_islands": self.num_islands,
            "capacity": self.capacity,
            "higher_is_better": self.higher_is_better,
            "members": [[[n, s] for n, s in island] for island in self.members],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Islands:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


@final
@frozen(kw_only=True)
class IslandSelector(Selector):
    """Choose an island, then parents within it with a :class:`ThreeFactorSelector`.

    Args:
        base: the within-island selector (its temperature and direction also rank islands).
        islands: the current island populations.

    An island is chosen by softmax of its min-max-normalised mean score among the islands
    that hold at least ``k`` of the offered candidates (the largest one when none does); all
    parents come from that island (when ``k`` exceeds every island, the remaining parents are
    drawn from the other candidates by their probabilities). A candidate's probability is the
    sum over islands of ``P(island) * P(candidate | island)``; candidates on no island get 0
    and are drawn only when nothing else is left.

    Raises:
        InvalidArgument: no offered candidate is on any island.
    """

    base: ThreeFactorSelector = field(factory=ThreeFactorSelector)
    islands: Islands = field(factory=Islands)

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Choose ``k`` distinct parents from one island."""
        k = _check_k(k)
        cands = list(candidates)
        index = {c.node_id: j for j, c in enumerate(cands)}
        groups: dict[int, list[int]] = {}
        for i, island in enumerate(self.islands.members):
            js = sorted({index[n] for n, _ in island if n in index})
            if js:
                groups[i] = js
        if not groups:
            raise InvalidArgument(
                "IslandSelector.select: none of the candidates is on an island; admit nodes "
                "with Islands.admit first"
            )
        able = [i for i in sorted(groups) if len(groups[i]) >= k] or [
            max(sorted(groups), key=lambda i: len(groups[i]))
        ]
        means: list[float | None] = []
        for i in able:
            vals = [s for s in (cands[j].score for j in groups[i]) if s is not None]
            means.append(sum(vals) / len(vals) if vals else None)
        island_p = softmax(
            _minmax(_nan_array(means), self.base.higher_is_better).tolist(), self.base.temperature
        )
        pick = able[draw_without_replacement(island_p, rng, 1)[0]]
        joint = [0.0] * len(cands)
        rows: list[UtilityRow | None] = [None] * len(cands)
        picked_rows: list[UtilityRow] = []
        for i, pi in zip(able, island_p, strict=True):
            sub = self.base.utilities([cands[j] for j in groups[i]])
            if i == pick:
                picked_rows = sub
            for j, row in zip(groups[i], sub, strict=True):
                joint[j] += pi * row.probability
                if rows[j] is None or i == pick:
                    rows[j] = row
        local = draw_without_replacement([r.probability for r in picked_rows], rng, k)
        chosen = [groups[pick][x] for x in local]
        if len(chosen) < k:
            rest = [j for j in range(len(cands)) if j not in set(chosen)]
            extra = draw_without_replacement([joint[j] for j in rest], rng, k - len(chosen))
            chosen.extend(rest[x] for x in extra)
        full = [
            r
            if r is not None
            else UtilityRow(
                node_id=c.node_id, score=0.0, delta=0.0, novelty=0.0, utility=0.0, probability=0.0
            )
            for r, c in zip(rows, cands, strict=True)
        ]
        return _selection(cands, full, chosen, joint)
