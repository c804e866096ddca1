"""Parent selection: the three-factor selector, islands, and greedy/uniform baselines.

Every selector is a frozen value and a pure function of its candidates and the ``rng`` it is
handed (no hidden state), so an async steady-state loop can resume exactly: same candidates,
same generator state, same draw.

Three-factor utility of candidate ``i`` (the paper's "score, gain, novelty"):

    u_i = w_s * S_i + w_d * D_i + w_n * N_i,    p = softmax(u / T)

- ``S_i`` (score): the candidate's validation score normalised over the offered candidates
  (``minmax``: ``(v - min) / (max - min)``, reversed for lower-is-better, all equal -> 0.5;
  ``rank``: average-rank percentile ``(rank - 1) / (n - 1)``, one scored candidate -> 0.5;
  ``hybrid``: ``w * minmax + (1 - w) * rank``). A candidate without a score gets 0.
- ``D_i`` (gain): how much the node improved on its best parent, ``max(0, signed(v - best
  parent))``. ``minmax`` divides by the largest gain (the released "minmax" is really
  max-scaling); ``rank``/``hybrid`` rank the gains of all candidates and keep 0 for no gain.
  No parent or no parent score -> 0.
- ``N_i`` (novelty): ``1 / sqrt(1 + n_family)`` where ``n_family`` counts other explored nodes
  of the same method family (``Candidate.family_count``; when None, the other candidates of
  the same family).

Presets: ``paper`` (1.0 / 0.6 / 0.3, as the paper states) and ``released`` (1.0 / 0.4 / 0.25,
what the released code ships, reference P1; the golden ``evo_parent_utilities`` and
``rl_parent_utilities`` vectors are reproduced exactly with it).

Departures from the released code: draws without replacement renormalise the remaining mass
step by step (numpy's ``choice(replace=False)`` raises when fewer than ``k`` weights are
non-zero); the island reset keeps the *stronger* half (the AIRA-Dojo reading keeps the weaker
half, peers.md), island choice only considers islands that can supply ``k`` parents, and every
candidate of the chosen island is offered (never nodes outside it, openevolve #222).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final, final

import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from openmle._types import Candidate, Selection
from openmle._validation import check_choice, check_finite, check_positive, check_probability, fail
from openmle.errors import InvalidArgument

__all__ = [
    "PRESETS",
    "GreedySelector",
    "IslandSelector",
    "Islands",
    "Normalization",
    "ThreeFactorSelector",
    "UniformSelector",
    "UtilityRow",
    "draw_without_replacement",
    "softmax",
]


class Normalization(enum.StrEnum):
    """How score and gain components are scaled to [0, 1]."""

    MINMAX = "minmax"
    RANK = "rank"
    HYBRID = "hybrid"


PRESETS: Final[Mapping[str, tuple[float, float, float]]] = {
    "paper": (1.0, 0.6, 0.3),
    "released": (1.0, 0.4, 0.25),
}
"""Weights (score, gain, novelty) by preset name."""


def softmax(
    utilities: Sequence[float] | npt.NDArray[np.float64], temperature: float
) -> list[float]:
    """Numerically stable ``softmax(u / T)``; uniform if anything is not finite."""
    check_positive(temperature, "temperature")
    if len(utilities) == 0:
        return []
    u = np.asarray(utilities, dtype=np.float64) / temperature
    if not np.all(np.isfinite(u)):
        return [1.0 / len(u)] * len(u)
    e = np.exp(u - u.max())
    p = e / e.sum()
    return [float(x) for x in p]


def draw_without_replacement(
    probabilities: Sequence[float] | npt.NDArray[np.float64], rng: np.random.Generator, k: int
) -> list[int]:
    """Draw ``min(k, #candidates)`` distinct indices, renormalising after each draw.

    Zero-probability indices are drawn only once every positive one is taken (then uniformly).
    """
    n = len(probabilities)
    w = np.nan_to_num(np.asarray(probabilities, dtype=np.float64), nan=0.0, posinf=0.0)
    w = np.maximum(w, 0.0)
    alive = np.ones(n, dtype=bool)
    out: list[int] = []
    for _ in range(min(k, n)):
        live = np.where(alive, w, 0.0)
        total = float(live.sum())
        if total > 0 and math.isfinite(total):
            p = live / total
        else:
            p = alive / float(alive.sum())
        pick = int(rng.choice(n, p=p))
        out.append(pick)
        alive[pick] = False
    return out


def _minmax_np(values: npt.NDArray[np.float64], higher_is_better: bool) -> npt.NDArray[np.float64]:
    """Vector form of :func:`_minmax` (NaN marks a missing value)."""
    out = np.zeros(len(values), dtype=np.float64)
    finite = ~np.isnan(values)
    if not finite.any():
        return out
    lo, hi = float(values[finite].min()), float(values[finite].max())
    if hi == lo:
        out[finite] = 0.5
        return out
    x = (values[finite] - lo) / (hi - lo)
    out[finite] = x if higher_is_better else 1.0 - x
    return out


def _rank_np(values: npt.NDArray[np.float64], higher_is_better: bool) -> npt.NDArray[np.float64]:
    """Vector form of :func:`_rank` (NaN marks a missing value)."""
    out = np.zeros(len(values), dtype=np.float64)
    finite = ~np.isnan(values)
    n = int(finite.sum())
    if n == 0:
        return out
    if n == 1:
        out[finite] = 0.5
        return out
    srt = np.sort(values[finite])
    v = values[finite]
    lo = np.searchsorted(srt, v, side="left")
    hi = np.searchsorted(srt, v, side="right")
    worse = lo if higher_is_better else n - hi
    rank = worse + (hi - lo + 1) / 2.0
    out[finite] = (rank - 1.0) / (n - 1)
    return out


def _minmax(values: Sequence[float | None], higher_is_better: bool) -> list[float]:
    finite = [v for v in values if v is not None]
    if not finite:
        return [0.0] * len(values)
    lo, hi = min(finite), max(finite)
    out = []
    for v in values:
        if v is None:
            out.append(0.0)
        elif hi == lo:
            out.append(0.5)
        else:
            x = (v - lo) / (hi - lo)
            out.append(x if higher_is_better else 1.0 - x)
    return out


def _rank(values: Sequence[float | None], higher_is_better: bool) -> list[float]:
    finite = sorted(v for v in values if v is not None)
    n = len(finite)
    out = []
    for v in values:
        if v is None:
            out.append(0.0)
        elif n == 1:
            out.append(0.5)
        else:
            lo = bisect.bisect_left(finite, v)
            hi = bisect.bisect_right(finite, v)
            worse = lo if higher_is_better else n - hi
            rank = worse + (hi - lo + 1) / 2.0
            out.append((rank - 1.0) / (n - 1))
    return out


@frozen(kw_only=True)
class UtilityRow:
    """One candidate's utility breakdown (what :attr:`Selection.components` holds, as floats)."""

    node_id: str
    score: float
    delta: float
    novelty: float
    utility: float
    probability: float

    def as_mapping(self) -> dict[str, float]:
        """``{"score", "delta", "novelty", "utility", "probability"}``."""
        return {
            "score": self.score,
            "delta": self.delta,
            "novelty": self.novelty,
            "utility": self.utility,
            "probability": self.probability,
        }


def _normalization(value: object) -> Normalization:
    if isinstance(value, Normalization):
        return value
    check_choice(str(value), [n.value for n in Normalization], "normalization")
    return Normalization(str(value))


def _nonneg(instance: Any, attribute: Any, value: float) -> None:
    v = check_finite(value, f"ThreeFactorSelector.{attribute.name}")
    if v < 0:
        raise fail("a weight >= 0", f"ThreeFactorSelector.{attribute.name}", value)


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise fail("an integer >= 1", "k", k)
    return k


@final
@frozen(kw_only=True)
class ThreeFactorSelector:
    """Softmax over score, gain over the best parent, and family novelty.

    Args:
        w_score, w_delta, w_novelty: component weights (>= 0). Use :meth:`preset` for the
            paper's or the released weights.
        temperature: softmax temperature (> 0); lower is greedier.
        normalization: ``"minmax"``, ``"rank"`` or ``"hybrid"`` for the score and gain terms.
        hybrid_minmax_weight: weight of min-max in ``hybrid`` (rank gets the rest).
        higher_is_better: the task's score direction.
        explain: when True, :attr:`Selection.components` holds each candidate's score, delta,
            novelty, utility and probability (off by default: it costs a mapping per
            candidate; :meth:`utilities` gives the same rows on demand).

    The selection's ``utilities`` always hold each candidate's utility.
    """

    w_score: float = field(default=1.0, validator=_nonneg)
    w_delta: float = field(default=0.4, validator=_nonneg)
    w_novelty: float = field(default=0.25, validator=_nonneg)
    temperature: float = 1.0
    normalization: Normalization = field(default=Normalization.MINMAX, converter=_normalization)
    hybrid_minmax_weight: float = 0.5
    higher_is_better: bool = True
    explain: bool = False

    def __attrs_post_init__(self) -> None:
        check_positive(self.temperature, "ThreeFactorSelector.temperature")
        check_probability(self.hybrid_minmax_weight, "ThreeFactorSelector.hybrid_minmax_weight")

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ThreeFactorSelector:
        """``"paper"`` (1.0/0.6/0.3) or ``"released"`` (1.0/0.4/0.25), other fields overridable."""
        check_choice(name, PRESETS, "preset")
        ws, wd, wn = PRESETS[name]
        return cls(**{"w_score": ws, "w_delta": wd, "w_novelty": wn, **overrides})

    def _normalise(
        self, values: npt.NDArray[np.float64], higher_is_better: bool
    ) -> npt.NDArray[np.float64]:
        if self.normalization is Normalization.MINMAX:
            return _minmax_np(values, higher_is_better)
        if self.normalization is Normalization.RANK:
            return _rank_np(values, higher_is_better)
        w = self.hybrid_minmax_weight
        a = _minmax_np(values, higher_is_better)
        b = _rank_np(values, higher_is_better)
        return w * a + (1.0 - w) * b

    def _arrays(
        self, cands: Sequence[Candidate]
    ) -> tuple[
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
    ]:
        nan = math.nan
        score = np.fromiter(
            (nan if c.score is None else c.score for c in cands), np.float64, len(cands)
        )
        parent = np.fromiter(
            (nan if c.parent_best_score is None else c.parent_best_score for c in cands),
            np.float64,
            len(cands),
        )
        s = self._normalise(score, self.higher_is_better)
        gain = score - parent if self.higher_is_better else parent - score
        gain = np.where(np.isnan(gain) | (gain <= 0), 0.0, gain)
        if self.normalization is Normalization.MINMAX:
            top = float(gain.max())
            d = gain / top if top > 0 else np.zeros(len(cands))
        else:
            d = np.where(gain > 0, self._normalise(gain, True), 0.0)
        fam_counts = Counter(c.family for c in cands)
        counts = np.fromiter(
            (
                c.family_count if c.family_count is not None else fam_counts[c.family] - 1
                for c in cands
            ),
            np.float64,
            len(cands),
        )
        nov = 1.0 / np.sqrt(1.0 + counts)
        util = self.w_score * s + self.w_delta * d + self.w_novelty * nov
        return s, d, nov, util, np.asarray(softmax(util, self.temperature))

    def utilities(self, candidates: Sequence[Candidate]) -> list[UtilityRow]:
        """Each candidate's components, utility and probability (no island step)."""
        cands = list(candidates)
        if not cands:
            return []
        arrays = self._arrays(cands)
        return [
            UtilityRow(node_id=c.node_id, score=s, delta=d, novelty=n, utility=u, probability=p)
            for c, s, d, n, u, p in zip(cands, *(a.tolist() for a in arrays), strict=True)
        ]

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Choose ``k`` distinct parents (see the class docstring)."""
        k = _check_k(k)
        cands = list(candidates)
        if not cands:
            raise InvalidArgument("ThreeFactorSelector.select needs at least one candidate")
        s, d, nov, util, prob = self._arrays(cands)
        chosen = draw_without_replacement(prob, rng, k)
        components: tuple[dict[str, float], ...] = ()
        if self.explain:
            components = tuple(
                {"score": a, "delta": b, "novelty": c, "utility": u, "probability": p}
                for a, b, c, u, p in zip(
                    s.tolist(), d.tolist(), nov.tolist(), util.tolist(), prob.tolist(), strict=True
                )
            )
        return Selection(
            chosen=tuple(cands[i].node_id for i in chosen),
            node_ids=tuple(c.node_id for c in cands),
            probabilities=tuple(prob.tolist()),
            utilities=tuple(util.tolist()),
            components=components,
        )


def _selection(
    cands: Sequence[Candidate],
    rows: Sequence[UtilityRow],
    chosen: Sequence[int],
    probabilities: Sequence[float],
) -> Selection:
    return Selection(
        chosen=tuple(cands[i].node_id for i in chosen),
        node_ids=tuple(c.node_id for c in cands),
        probabilities=tuple(probabilities),
        utilities=tuple(r.utility for r in rows),
        components=tuple(r.as_mapping() for r in rows),
    )


@final
@frozen(kw_only=True)
class GreedySelector:
    """Always the best-scored candidates (a baseline).

    The probability mass is split evenly among the candidates tied at the best score (all
    candidates when none has a score); ``k > 1`` takes the next best in order, ties broken by
    candidate order. ``rng`` is not used.
    """

    higher_is_better: bool = True

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Choose the ``k`` best candidates."""
        k = _check_k(k)
        cands = list(candidates)
        if not cands:
            raise InvalidArgument("GreedySelector.select needs at least one candidate")
        sign = 1.0 if self.higher_is_better else -1.0

        def key(i: int) -> tuple[int, float, int]:
            s = cands[i].score
            return (0, -sign * s, i) if s is not None else (1, 0.0, i)

        order = sorted(range(len(cands)), key=key)
        best = cands[order[0]].score
        tied = [i for i in range(len(cands)) if cands[i].score == best]
        probs = [1.0 / len(tied) if i in tied else 0.0 for i in range(len(cands))]
        return Selection(
            chosen=tuple(cands[i].node_id for i in order[:k]),
            node_ids=tuple(c.node_id for c in cands),
            probabilities=tuple(probs),
        )


@final
@frozen(kw_only=True)
class UniformSelector:
    """Uniformly random parents, without replacement (a baseline)."""

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Choose ``k`` distinct candidates uniformly."""
        k = _check_k(k)
        cands = list(candidates)
        if not cands:
            raise InvalidArgument("UniformSelector.select needs at least one candidate")
        probs = [1.0 / len(cands)] * len(cands)
        chosen = draw_without_replacement(probs, rng, k)
        return Selection(
            chosen=tuple(cands[i].node_id for i in chosen),
            node_ids=tuple(c.node_id for c in cands),
            probabilities=tuple(probs),
        )


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
class IslandSelector:
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
        island_p = softmax(_minmax(means, self.base.higher_is_better), self.base.temperature)
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
