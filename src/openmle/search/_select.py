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

import enum
import math
from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any, Final, final

import attrs
import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from openmle._protocols import Selector
from openmle._types import Candidate, Selection
from openmle._validation import check_choice, check_finite, check_positive, check_probability, fail
from openmle.errors import InvalidArgument

__all__ = [
    "PRESETS",
    "GreedySelector",
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
    return _softmax_array(np.asarray(utilities, dtype=np.float64), temperature).tolist()  # type: ignore[no-any-return]


def _softmax_array(u: npt.NDArray[np.float64], temperature: float) -> npt.NDArray[np.float64]:
    """:func:`softmax` of a non-empty float array, as an array (no per-element Python work)."""
    u = u / temperature
    if not np.all(np.isfinite(u)):
        return np.full(len(u), 1.0 / len(u))
    e = np.exp(u - u.max())
    return e / e.sum()  # type: ignore[no-any-return]


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


def _minmax(values: npt.NDArray[np.float64], higher_is_better: bool) -> npt.NDArray[np.float64]:
    """Min-max scaled to [0, 1], flipped when lower is better; all equal: 0.5; NaN: 0."""
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


def _rank(values: npt.NDArray[np.float64], higher_is_better: bool) -> npt.NDArray[np.float64]:
    """Mid-rank scaled to [0, 1] (ties share their mean), best 1; one value: 0.5; NaN: 0."""
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


_SCORE = attrgetter("score")
_PARENT_BEST = attrgetter("parent_best_score")
_FAMILY = attrgetter("family")
_FAMILY_COUNT = attrgetter("family_count")
_NODE_ID = attrgetter("node_id")


@frozen
class _Columns:
    """The candidates' fields the three-factor utility reads, as arrays (NaN for None)."""

    cands: tuple[Candidate, ...]
    node_ids: tuple[str, ...]
    score: npt.NDArray[np.float64]
    parent: npt.NDArray[np.float64]
    family_count: npt.NDArray[np.float64]
    any_unset: bool
    """Whether some ``family_count`` is None (counted among the candidates)."""
    family_code: npt.NDArray[np.intp]
    """Each candidate's family as a small integer (first seen, first numbered)."""
    codes: Mapping[str, int]


_CACHED_COLUMNS = 4
_last_columns: list[tuple[_Columns, ...]] = [()]
"""Recent calls' columns, newest first: a search offers the same candidates again, plus new
ones at the end, so only the new ones are read (a cache keyed by the candidates themselves,
compared by identity first; any other sequence is read in full)."""


def _floats(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    return np.array(values, dtype=np.float64) if values else np.zeros(0)


def _columns(cands: Sequence[Candidate]) -> _Columns:
    """The columns of ``cands``, reading only candidates the previous call did not have."""
    given = tuple(cands)
    prev: _Columns | None = None
    recent = _last_columns[0]  # one read: another thread may replace it
    for seen in recent:
        n = len(seen.cands)
        if n == len(given) and seen.cands == given:
            return seen
        if n < len(given) and (prev is None or n > len(prev.cands)) and given[:n] == seen.cands:
            prev = seen
    start = len(prev.cands) if prev is not None else 0
    new = given[start:]
    fcs = list(map(_FAMILY_COUNT, new))
    codes = dict(prev.codes) if prev is not None else {}
    fam_codes = [codes.setdefault(f, len(codes)) for f in map(_FAMILY, new)]
    tail = _Columns(
        cands=tuple(new),
        node_ids=tuple(map(_NODE_ID, new)),
        score=_floats(list(map(_SCORE, new))),
        parent=_floats(list(map(_PARENT_BEST, new))),
        family_count=_floats(fcs),
        any_unset=None in fcs,
        family_code=np.array(fam_codes, dtype=np.intp),
        codes=codes,
    )
    cols = tail
    if prev is not None and start:
        cols = _Columns(
            cands=prev.cands + tail.cands,
            node_ids=prev.node_ids + tail.node_ids,
            score=np.concatenate([prev.score, tail.score]),
            parent=np.concatenate([prev.parent, tail.parent]),
            family_count=np.concatenate([prev.family_count, tail.family_count]),
            any_unset=prev.any_unset or tail.any_unset,
            family_code=np.concatenate([prev.family_code, tail.family_code]),
            codes=codes,
        )
    kept = [c for c in recent if c is not prev][: _CACHED_COLUMNS - 1]
    for arr in (cols.score, cols.parent, cols.family_count, cols.family_code):
        arr.flags.writeable = False  # shared by later calls
    _last_columns[0] = (cols, *kept)
    return cols


def _nan_array(values: Sequence[float | None]) -> npt.NDArray[np.float64]:
    """``values`` as a float array, a missing value (None) as NaN."""
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


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
        """``{"score", "delta", "novelty", "utility", "probability"}``: every field but
        ``node_id``, in field order.
        """
        return attrs.asdict(self, recurse=False, filter=lambda a, _: a.name != "node_id")


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


def _checked(
    candidates: Sequence[Candidate], k: object, selector: str
) -> tuple[list[Candidate], int]:
    """A selector's arguments checked: the candidates as a non-empty list, and ``k``."""
    k = _check_k(k)
    cands = list(candidates)
    if not cands:
        raise InvalidArgument(f"{selector}.select needs at least one candidate")
    return cands, k


@final
@frozen(kw_only=True)
class ThreeFactorSelector(Selector):
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
            return _minmax(values, higher_is_better)
        if self.normalization is Normalization.RANK:
            return _rank(values, higher_is_better)
        w = self.hybrid_minmax_weight
        a = _minmax(values, higher_is_better)
        b = _rank(values, higher_is_better)
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
        cols = _columns(cands)
        score, parent = cols.score, cols.parent
        s = self._normalise(score, self.higher_is_better)
        gain = score - parent if self.higher_is_better else parent - score
        gain = np.where(np.isnan(gain) | (gain <= 0), 0.0, gain)
        if self.normalization is Normalization.MINMAX:
            top = float(gain.max())
            d = gain / top if top > 0 else np.zeros(len(cands))
        else:
            d = np.where(gain > 0, self._normalise(gain, True), 0.0)
        counts = cols.family_count
        if cols.any_unset:  # count the other candidates of each family
            among = np.bincount(cols.family_code)[cols.family_code] - 1.0
            counts = np.where(np.isnan(counts), among, counts)
        nov = 1.0 / np.sqrt(1.0 + counts)
        util = self.w_score * s + self.w_delta * d + self.w_novelty * nov
        return s, d, nov, util, _softmax_array(util, self.temperature)

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
        cands, k = _checked(candidates, k, "ThreeFactorSelector")
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
            node_ids=_columns(cands).node_ids,
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
class GreedySelector(Selector):
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
        cands, k = _checked(candidates, k, "GreedySelector")
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
class UniformSelector(Selector):
    """Uniformly random parents, without replacement (a baseline)."""

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Choose ``k`` distinct candidates uniformly."""
        cands, k = _checked(candidates, k, "UniformSelector")
        probs = [1.0 / len(cands)] * len(cands)
        chosen = draw_without_replacement(probs, rng, k)
        return Selection(
            chosen=tuple(cands[i].node_id for i in chosen),
            node_ids=tuple(c.node_id for c in cands),
            probabilities=tuple(probs),
        )
