"""Parent selection for RL training: program fitness, operator sampling, reward-gated pools.

Fitness of each program of a task (recomputed over all of the task's programs, 0..3)::

    fitness = exploit + explore + cooling
    exploit = min-max(reward)                       all equal -> 0.5
    explore = min-max(variance of children rewards)  no children -> 0.5; all equal -> 0.5
    cooling = min-max(1 - visits / max visits)       no visits anywhere -> raw 1, all -> 0.5

``reward`` is the node's base reward (``Candidate.reward``), ``children_rewards`` the base
rewards of its direct children (a crossover child counts for both parents), ``visits`` the
number of children. Variance is the population variance. The reported ``cooling`` is the raw
``1 - visits / max visits`` (1 when no node has been visited); the normalised value enters the
sum. This matches the released program database (golden ``rl_db_fitness``) exactly.

Parents: Improve and Crossover draw among programs with reward > 0, Debug among programs with
reward <= 0, in proportion to fitness, without replacement (uniform when every weight is 0).
Programs without a reward are in neither pool. Operators are drawn from an
:class:`OperatorMix` (default 0.50 / 0.17 / 0.17 / 0.16 for Draft / Improve / Debug /
Crossover); when the drawn operator has no parents available :func:`plan_rl_step` falls back
(Crossover -> Improve -> Debug -> Draft, Improve -> Debug -> Draft, Debug -> Improve -> Draft).

Departures: the released sync launchers ignore the configured mix and hard-code 0.5 / 1/6 /
1/6 / 1/6 (reference P2); here the mix is whatever you pass. A program without a reward is
kept out of both pools (the released code treats missing as 0, i.e. a Debug parent).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, final

import numpy as np
from attrs import field, frozen

from openmle._protocols import Selector
from openmle._types import Candidate, Operator, Selection
from openmle._validation import check_finite, fail
from openmle.errors import InvalidArgument
from openmle.search._select import _check_k, _minmax, _nan_array, draw_without_replacement

__all__ = [
    "DEFAULT_MIX",
    "OperatorMix",
    "RLFitness",
    "RLParentSelector",
    "RLStep",
    "plan_rl_step",
    "rl_fitness",
]


@frozen(kw_only=True)
class RLFitness:
    """One program's fitness and its parts (see the module docstring)."""

    node_id: str
    fitness: float
    exploit: float
    explore: float
    cooling: float
    visits: int
    child_variance: float | None


def rl_fitness(candidates: Sequence[Candidate]) -> list[RLFitness]:
    """Fitness of every candidate, computed over all of them (one task's programs)."""
    cands = list(candidates)
    if not cands:
        return []
    exploit = _minmax(_nan_array([c.reward for c in cands]), True).tolist()
    variances: list[float | None] = [
        float(np.var(np.asarray(c.children_rewards, dtype=np.float64)))
        if c.children_rewards
        else None
        for c in cands
    ]
    finite = [v for v in variances if v is not None]
    if finite and max(finite) > min(finite):
        lo, hi = min(finite), max(finite)
        explore = [0.5 if v is None else (v - lo) / (hi - lo) for v in variances]
    else:
        explore = [0.5] * len(cands)
    top = max(c.visits for c in cands)
    raw_cooling = [1.0 - c.visits / top if top > 0 else 1.0 for c in cands]
    cooling = _minmax(_nan_array(raw_cooling), True).tolist()
    return [
        RLFitness(
            node_id=c.node_id,
            fitness=e + x + k,
            exploit=e,
            explore=x,
            cooling=r,
            visits=c.visits,
            child_variance=v,
        )
        for c, e, x, k, r, v in zip(
            cands, exploit, explore, cooling, raw_cooling, variances, strict=True
        )
    ]


def _in_pool(c: Candidate, operator: Operator | None) -> bool:
    if operator is None:
        return True
    if c.reward is None:
        return False
    if operator is Operator.DEBUG:
        return c.reward <= 0
    return c.reward > 0


@final
@frozen(kw_only=True)
class RLParentSelector(Selector):
    """Fitness-proportional parents from a reward-gated pool.

    Args:
        operator: which pool to draw from (Improve/Crossover: reward > 0; Debug: reward <= 0;
            None: every candidate). Draft takes no parents and is refused.

    Candidates outside the pool get probability 0 and are never drawn, so a selection may hold
    fewer than ``k`` parents when the pool is small.

    Raises:
        InvalidArgument: the pool is empty (see :func:`plan_rl_step` for the fallbacks).
    """

    operator: Operator | None = None

    def __attrs_post_init__(self) -> None:
        if self.operator is Operator.DRAFT:
            raise InvalidArgument("RLParentSelector.operator cannot be 'draft' (no parents)")

    def pool(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The candidates this selector may draw."""
        return [c for c in candidates if _in_pool(c, self.operator)]

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Draw up to ``k`` distinct parents in proportion to fitness within the pool."""
        k = _check_k(k)
        cands = list(candidates)
        rows = rl_fitness(cands)
        mask = [_in_pool(c, self.operator) for c in cands]
        if not any(mask):
            op = self.operator.value if self.operator else "any"
            raise InvalidArgument(
                f"RLParentSelector({op}): no candidate is in the pool; "
                f"use plan_rl_step for the operator fallbacks"
            )
        weights = [r.fitness if m else 0.0 for r, m in zip(rows, mask, strict=True)]
        total = sum(weights)
        n_pool = sum(mask)
        if total > 0:
            probs = [w / total for w in weights]
        else:
            probs = [1.0 / n_pool if m else 0.0 for m in mask]
        pool_idx = [i for i, m in enumerate(mask) if m]
        local = draw_without_replacement([probs[i] for i in pool_idx], rng, k)
        return Selection(
            chosen=tuple(cands[pool_idx[j]].node_id for j in local),
            node_ids=tuple(c.node_id for c in cands),
            probabilities=tuple(probs),
            utilities=tuple(r.fitness for r in rows),
            components=tuple(
                {"exploit": r.exploit, "explore": r.explore, "cooling": r.cooling} for r in rows
            ),
        )


def _prob(instance: object, attribute: object, value: float) -> None:
    v = check_finite(value, f"OperatorMix.{getattr(attribute, 'name', '')}")
    if v < 0:
        raise fail("a probability >= 0", f"OperatorMix.{getattr(attribute, 'name', '')}", value)


@final
@frozen(kw_only=True)
class OperatorMix:
    """Probabilities of drawing each operator (normalised; all zero means uniform)."""

    draft: float = field(default=0.50, validator=_prob)
    improve: float = field(default=0.17, validator=_prob)
    debug: float = field(default=0.17, validator=_prob)
    crossover: float = field(default=0.16, validator=_prob)

    def probabilities(self) -> dict[Operator, float]:
        """Normalised probability of each operator, in :class:`Operator` order."""
        raw = {op: float(getattr(self, op.value)) for op in Operator}
        total = sum(raw.values())
        if total <= 0:
            return {op: 1.0 / len(raw) for op in raw}
        return {op: p / total for op, p in raw.items()}

    def sample(self, rng: np.random.Generator) -> Operator:
        """Draw one operator."""
        probs = self.probabilities()
        ops = list(probs)
        return ops[int(rng.choice(len(ops), p=np.asarray(list(probs.values()))))]


DEFAULT_MIX: Final = OperatorMix()
"""The paper's operator mix: Draft 0.50, Improve 0.17, Debug 0.17, Crossover 0.16."""

_FALLBACKS: Final[dict[Operator, tuple[Operator, ...]]] = {
    Operator.DRAFT: (Operator.DRAFT,),
    Operator.IMPROVE: (Operator.IMPROVE, Operator.DEBUG, Operator.DRAFT),
    Operator.DEBUG: (Operator.DEBUG, Operator.IMPROVE, Operator.DRAFT),
    Operator.CROSSOVER: (Operator.CROSSOVER, Operator.IMPROVE, Operator.DEBUG, Operator.DRAFT),
}


@frozen(kw_only=True)
class RLStep:
    """What one RL sample does: the operator (after fallbacks) and its parent selection."""

    requested: Operator
    operator: Operator
    selection: Selection | None


def plan_rl_step(
    candidates: Sequence[Candidate],
    rng: np.random.Generator,
    *,
    mix: OperatorMix = DEFAULT_MIX,
    force_draft: bool = False,
) -> RLStep:
    """Draw an operator, then its parents, falling back when a pool cannot supply them.

    Args:
        candidates: the task's programs.
        rng: the generator (operator draw first, then parents).
        mix: operator probabilities.
        force_draft: always Draft (evaluation, or an empty task).
    """
    requested = Operator.DRAFT if force_draft or not candidates else mix.sample(rng)
    for op in _FALLBACKS[requested]:
        if op is Operator.DRAFT:
            return RLStep(requested=requested, operator=op, selection=None)
        sel = RLParentSelector(operator=op)
        if len(sel.pool(candidates)) >= op.n_parents:
            return RLStep(
                requested=requested,
                operator=op,
                selection=sel.select(candidates, rng, k=op.n_parents),
            )
    raise AssertionError("unreachable: every fallback chain ends in Draft")  # pragma: no cover
