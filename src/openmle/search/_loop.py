"""The search core: an I/O-free state machine that proposes expansions and receives evaluations.

:class:`SearchCore` decides *what* to try next (an operator, its parents and the context) and
records *what happened* (a :class:`Node` per evaluated program); it never awaits, reads files or
calls a model. The async driver (``openmle.search.arun_search``) runs the model and the sandbox
and journals every call to the core, so a run directory can rebuild the core exactly.

Phases, as in the paper (reference 5.2): the first ``initial_drafts`` steps are Drafts; after
that the selector picks parents for Improve (one parent) or Crossover (two parents, with
probability ``crossover_prob`` once ``crossover_after`` successful nodes exist); a program that
fails enters a Debug cycle of at most ``max_debug_depth`` attempts; when ``repeated_errors``
consecutive nodes of a Debug chain fail with the same error signature the chain is abandoned
and a fresh Draft is forced. ``fresh_draft_prob`` draws an extra Draft at any step.

Departures from the released system:
- Debug is the only operator that follows a failure and it is driven by a queue, so concurrent
  workers never debug the same node twice and never lose a pending debug.
- Infrastructure failures (``Outcome.INFRA_ERROR``) are never debugged and never selected: they
  say nothing about the program (reference bug B5).
- The selection score is the sandbox's validation score. A score the program printed is
  recorded on the node and used only when ``trust_printed_score=True`` (reference bug B6: the
  released opt-in could not take effect; here it is explicit and written to the manifest).
- All randomness comes from one ``numpy`` generator whose state is journalled with every
  proposal, so a resumed run draws exactly what an uninterrupted one would.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, final

import attrs
import numpy as np
from attrs import define, field, frozen

from openmle._protocols import Selector
from openmle._types import (
    Candidate,
    Operator,
    Outcome,
    RunResult,
    Selection,
    Split,
    TaskMeta,
    Usage,
    as_selection,
)
from openmle._validation import check_positive, check_probability, fail, int_at_least, str_tuple
from openmle.errors import InvalidArgument
from openmle.search._board import Board
from openmle.search._budget import Budget, Consumption, Ledger, check_cost, check_usage
from openmle.search._cards import ExperienceCard
from openmle.search._islands import Islands, IslandSelector
from openmle.search._select import ThreeFactorSelector

__all__ = ["Evaluation", "Node", "Proposal", "SearchConfig", "SearchCore"]

_FEEDBACK_HEAD = 2000
_FEEDBACK_TAIL = 6000


@final
@frozen(kw_only=True)
class SearchConfig:
    """How the search expands nodes. Every ratio is configurable.

    Args:
        initial_drafts: Drafts before any Improve/Crossover (paper: 5).
        crossover_prob: probability of Crossover over Improve once it is allowed (paper: 0.5).
        crossover_after: successful nodes needed before Crossover is allowed (at least 2).
        fresh_draft_prob: probability of an unforced Draft at a selector step (paper: 0; 0.2 on
            NatureBench).
        max_debug_depth: Debug attempts per failed program before giving up (0 disables Debug).
        repeated_errors: consecutive identical error signatures in a Debug chain that abandon it
            and force a fresh Draft (at least 2).
        trust_printed_score: use the score the program printed for selection instead of the
            sandbox's validation score. Off by default; recorded in the manifest.
        seed: seed of the search's random generator.
        timeout_s: per-run wall-clock limit sent to the sandbox.
        retries: retries of a failed model call, and of a sandbox run that ended in
            ``INFRA_ERROR``, before the node is recorded as ``INFRA_ERROR``.
        retry_backoff_s: first retry delay in seconds (doubling each retry).
        max_infra_errors: consecutive ``INFRA_ERROR`` nodes (a sandbox or model that keeps
            failing or raising) after which the search stops with a
            :class:`~openmle.errors.BackendError`; counted per session, so ``resume`` tries
            again once the cause is fixed. 0 never stops.
        islands: island populations (0 or 1: none). With ``N >= 2`` every committed node
            has a home island (a Draft: ``step % N``; any other node: its first parent's),
            a scored node is offered to its home island (:meth:`Islands.admit`), and parents
            are chosen by an :class:`~openmle.search.IslandSelector` over the configured
            selector (which must then be a :class:`~openmle.search.ThreeFactorSelector`).
        migration_interval: with islands, :meth:`Islands.migrate` runs after every
            ``migration_interval`` committed nodes (the weaker half of the islands is reset
            from the stronger half); its random draw comes from a generator seeded by
            ``(seed, migration number)``, so a replayed journal migrates identically.
    """

    initial_drafts: int = field(default=5, validator=int_at_least(0, "SearchConfig.initial_drafts"))
    crossover_prob: float = field(default=0.5)
    crossover_after: int = field(default=2)
    fresh_draft_prob: float = field(default=0.0)
    max_debug_depth: int = field(
        default=3, validator=int_at_least(0, "SearchConfig.max_debug_depth")
    )
    repeated_errors: int = field(default=2)
    trust_printed_score: bool = False
    seed: int = field(default=0, validator=int_at_least(0, "SearchConfig.seed"))
    timeout_s: float = 600.0
    retries: int = field(default=2, validator=int_at_least(0, "SearchConfig.retries"))
    retry_backoff_s: float = 1.0
    max_infra_errors: int = field(
        default=10, validator=int_at_least(0, "SearchConfig.max_infra_errors")
    )
    islands: int = field(default=0, validator=int_at_least(0, "SearchConfig.islands"))
    migration_interval: int = field(default=10)

    def __attrs_post_init__(self) -> None:
        check_positive(self.retry_backoff_s, "SearchConfig.retry_backoff_s", allow_zero=True)
        check_probability(self.crossover_prob, "SearchConfig.crossover_prob")
        check_probability(self.fresh_draft_prob, "SearchConfig.fresh_draft_prob")
        check_positive(self.timeout_s, "SearchConfig.timeout_s")
        if isinstance(self.crossover_after, bool) or not (
            isinstance(self.crossover_after, int) and self.crossover_after >= 2
        ):
            raise fail("an integer >= 2", "SearchConfig.crossover_after", self.crossover_after)
        if isinstance(self.repeated_errors, bool) or not (
            isinstance(self.repeated_errors, int) and self.repeated_errors >= 2
        ):
            raise fail("an integer >= 2", "SearchConfig.repeated_errors", self.repeated_errors)
        if isinstance(self.migration_interval, bool) or not (
            isinstance(self.migration_interval, int) and self.migration_interval >= 1
        ):
            raise fail(
                "an integer >= 1", "SearchConfig.migration_interval", self.migration_interval
            )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchConfig:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


def _lineage_dict(step: Proposal | Node) -> dict[str, Any]:
    """The JSON-ready lineage fields a :class:`Proposal` and its :class:`Node` share
    (operator, parents, generation, debug depth, reason), in their ``to_dict`` order.
    """
    return {
        "operator": step.operator.value,
        "parent_ids": list(step.parent_ids),
        "generation": step.generation,
        "debug_depth": step.debug_depth,
        "reason": step.reason,
    }


@final
@frozen(kw_only=True)
class Proposal:
    """One expansion the core wants evaluated.

    Args:
        step: 0-based step index (also the order of proposals).
        node_id: the id the resulting node will have.
        operator: which operator to apply.
        parent_ids: the parents (empty for Draft; one for Improve/Debug; two for Crossover).
        generation: 1 + the parents' highest generation (0 for a Draft).
        debug_depth: position in a Debug chain (0 outside Debug).
        reason: why this operator: ``"initial"``, ``"selector"``, ``"debug"``, ``"forced_draft"``,
            ``"fresh_draft"`` or ``"no_parent"``.
        seed: a seed for the model request, derived from the run seed and the step.
        selection: what the selector chose and the probability it gave every candidate.
    """

    step: int
    node_id: str
    operator: Operator
    parent_ids: tuple[str, ...] = ()
    generation: int = 0
    debug_depth: int = 0
    reason: str = "selector"
    seed: int = 0
    selection: Selection | None = field(default=None, converter=as_selection)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return (
            {"step": self.step, "node_id": self.node_id}
            | _lineage_dict(self)
            | {
                "seed": self.seed,
                "selection": None if self.selection is None else self.selection.to_dict(),
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Proposal:
        """Inverse of :meth:`to_dict`."""
        d = dict(data)
        d["operator"] = Operator(d["operator"])
        d["parent_ids"] = tuple(d["parent_ids"])
        return cls(**d)


@final
@frozen(kw_only=True)
class Evaluation:
    """What happened to a proposal: the model's program and the sandbox's verdict.

    Args:
        code: the program ("" when the response held none).
        plan: the model's plan or explanation, if any.
        result: the sandbox's result on the validation split (MISSING_CODE when there was no
            program; INFRA_ERROR when the model or sandbox failed).
        usage: token usage of the model call(s).
        model: the id of the model that answered.
        model_s: wall seconds of the model call(s).
        wall_s: wall seconds of the whole expansion.
        cost_usd: money spent, if known.
        price_model: the model id the price table prices (the one the user asked for); default:
            ``model``.
        warnings: what the harness distrusted or replaced (invalid usage or cost, say).
        priors_shown: the ids of the cross-task priors the request showed (its metadata's
            ``priors_shown``).
        gpus: the GPUs the job leased (its GPU-seconds are ``runtime_s * gpus``).
    """

    code: str
    result: RunResult
    plan: str = ""
    usage: Usage = field(factory=Usage)
    model: str = ""
    model_s: float = 0.0
    wall_s: float = 0.0
    cost_usd: float | None = None
    price_model: str = ""
    warnings: tuple[str, ...] = ()
    priors_shown: tuple[str, ...] = ()
    gpus: float = 0.0


def _feedback(logs: str) -> str:
    if len(logs) <= _FEEDBACK_HEAD + _FEEDBACK_TAIL:
        return logs
    dropped = len(logs) - _FEEDBACK_HEAD - _FEEDBACK_TAIL
    return (
        f"{logs[:_FEEDBACK_HEAD]}\n[... {dropped} characters dropped ...]\n{logs[-_FEEDBACK_TAIL:]}"
    )


@final
@frozen(kw_only=True)
class Node:
    """One evaluated program: what was tried, how it ended, and what it cost.

    Args:
        node_id, step, operator, parent_ids, generation, debug_depth, reason: from the proposal.
        code: the program; plan: the model's plan.
        outcome: how the run ended.
        score: the selection score (the sandbox's validation score, or the printed score when
            the user opted in); None unless ``outcome`` is SUCCESS.
        valid_score: the sandbox's validation score; printed_score: what the program printed.
        error_signature, detail, exit_code: failure details.
        feedback: the program's output, capped (head and tail kept) for prompts and reports.
        family: method family; model: model id.
        used: what the node consumed.
        selection: the selector's choice that produced the proposal.
        elapsed_s: wall seconds since the run started (across sessions) when it was committed.
        card: the node's :class:`~openmle.search.ExperienceCard` (the board's record).
        warnings: what the harness distrusted or replaced while evaluating it (journalled only
            when there is any).
        island: the node's home island when the search runs islands (journalled only then).
        priors_shown: the ids of the cross-task priors its prompt showed (journalled only
            when there is any).

    Raises:
        InvalidArgument: a non-finite score, or a score on a node that did not succeed.
    """

    node_id: str
    step: int
    operator: Operator
    parent_ids: tuple[str, ...]
    generation: int
    debug_depth: int
    reason: str
    code: str
    plan: str
    outcome: Outcome
    score: float | None
    valid_score: float | None
    printed_score: float | None
    error_signature: str | None
    detail: str
    exit_code: int | None
    feedback: str
    family: str
    model: str
    used: Consumption
    selection: Selection | None = field(default=None, converter=as_selection)
    elapsed_s: float = 0.0
    card: ExperienceCard | None = None
    warnings: tuple[str, ...] = field(default=(), converter=str_tuple)
    island: int | None = None
    priors_shown: tuple[str, ...] = field(default=(), converter=str_tuple)

    def __attrs_post_init__(self) -> None:
        if self.island is not None and (
            isinstance(self.island, bool) or not isinstance(self.island, int) or self.island < 0
        ):
            raise InvalidArgument(
                f"Node.island must be an integer >= 0 or None, got {self.island!r}"
            )
        for name in ("score", "valid_score", "printed_score"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidArgument(f"Node.{name} must be a number or None, got {value!r}")
            if not math.isfinite(value):
                raise InvalidArgument(f"Node.{name} must be finite, got {value!r}")
        if self.outcome is not Outcome.SUCCESS and (
            self.score is not None or self.valid_score is not None
        ):
            raise InvalidArgument(
                f"Node {self.node_id!r}: a score on a node whose outcome is "
                f"{self.outcome.value!r} (only successful nodes have scores)"
            )

    @property
    def ok(self) -> bool:
        """True when the program ran and has a selection score."""
        return self.outcome is Outcome.SUCCESS and self.score is not None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return (
            {"node_id": self.node_id, "step": self.step}
            | _lineage_dict(self)
            | {
                "code": self.code,
                "plan": self.plan,
                "outcome": self.outcome.value,
                "score": self.score,
                "valid_score": self.valid_score,
                "printed_score": self.printed_score,
                "error_signature": self.error_signature,
                "detail": self.detail,
                "exit_code": self.exit_code,
                "feedback": self.feedback,
                "family": self.family,
                "model": self.model,
                "used": self.used.to_dict(),
                "selection": None if self.selection is None else self.selection.to_dict(),
                "elapsed_s": self.elapsed_s,
                "card": None if self.card is None else self.card.to_dict(),
            }
            | ({"warnings": list(self.warnings)} if self.warnings else {})
            | ({"island": self.island} if self.island is not None else {})
            | ({"priors_shown": list(self.priors_shown)} if self.priors_shown else {})
        )

    def run_result(self) -> RunResult:
        """The node's validation run as a :class:`RunResult` (logs capped to ``feedback``)."""
        return RunResult(
            outcome=self.outcome,
            score=self.valid_score,
            split=Split.VALID,
            logs=self.feedback,
            error_signature=None if self.outcome.is_success else self.error_signature,
            detail=self.detail,
            exit_code=self.exit_code,
            runtime_s=self.used.sandbox_s,
            queue_s=self.used.queue_s,
            printed_score=self.printed_score,
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        """Inverse of :meth:`to_dict`."""
        d = dict(data)
        card = d.get("card")
        d["card"] = None if card is None else ExperienceCard.from_dict(card)
        d["operator"] = Operator(d["operator"])
        d["outcome"] = Outcome(d["outcome"])
        d["parent_ids"] = tuple(d["parent_ids"])
        d["used"] = Consumption.from_dict(d["used"])
        d["warnings"] = tuple(d.get("warnings", ()))
        d["priors_shown"] = tuple(d.get("priors_shown", ()))
        return cls(**d)


def _derive_seed(seed: int, step: int) -> int:
    digest = hashlib.blake2b(f"{seed}:{step}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def island_base(config: SearchConfig, selector: Selector) -> ThreeFactorSelector | None:
    """The selector that chooses parents within an island (None without islands).

    Raises:
        InvalidArgument: islands with a selector that is no ThreeFactorSelector.
    """
    if config.islands < 2:
        return None
    base = selector.base if isinstance(selector, IslandSelector) else selector
    if not isinstance(base, ThreeFactorSelector):
        raise InvalidArgument(
            f"SearchConfig.islands={config.islands} needs a ThreeFactorSelector "
            f"(parents are chosen within an island by it) but got selector="
            f"{type(selector).__name__}; pass selector=ThreeFactorSelector(...) "
            "(CLI: --selector three-factor) or islands=0"
        )
    return base


@final
@define(eq=False)
class SearchCore:
    """The search state machine. Single-threaded; no I/O; driven by ``propose``/``commit``.

    Args:
        config: how to expand.
        selector: chooses parents among successful nodes.
        budget: caps; the core stops proposing when one is reached.
        higher_is_better: the task's metric direction (for the final choice and deltas).
        family_count: optional ``(family) -> int`` hook for novelty; by default the core counts
            committed nodes per family.

    Usage::

        core = SearchCore(config=SearchConfig(), selector=sel, budget=Budget(steps=10))
        while (p := core.propose()) is not None:
            core.commit(p, evaluate(p))
    """

    config: SearchConfig
    selector: Selector
    budget: Budget
    higher_is_better: bool = True
    nodes: dict[str, Node] = field(factory=dict, init=False)
    pending: dict[int, Proposal] = field(factory=dict, init=False)
    cancelled: set[int] = field(factory=set, init=False)
    ledger: Ledger = field(init=False)
    rng: np.random.Generator = field(init=False)
    board: Board = field(init=False)
    next_step: int = field(default=0, init=False)
    stop_reason: str | None = field(default=None, init=False)
    last_elapsed_s: float = field(default=0.0, init=False)
    _debug_queue: deque[str] = field(factory=deque, init=False)
    _forced_drafts: int = field(default=0, init=False)
    _family_counts: dict[str, int] = field(factory=dict, init=False)
    _n_ok: int = field(default=0, init=False)
    _done: set[int] = field(factory=set, init=False)
    _prefix: int = field(default=0, init=False)
    islands: Islands | None = field(default=None, init=False)
    migrations: int = field(default=0, init=False)
    _home: dict[str, int] = field(factory=dict, init=False)
    _since_migration: int = field(default=0, init=False)
    _island_base: ThreeFactorSelector | None = field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.ledger = Ledger(budget=self.budget)
        self.rng = np.random.default_rng(self.config.seed)
        self.board = Board(task=TaskMeta(higher_is_better=self.higher_is_better))
        base = island_base(self.config, self.selector)
        if base is not None:
            self._island_base = base
            self.islands = Islands(
                num_islands=self.config.islands, higher_is_better=self.higher_is_better
            )

    # ----------------------------------------------------------------------------------- views

    @property
    def committed_prefix(self) -> int:
        """How many leading steps (0, 1, ...) are committed or cancelled."""
        return self._prefix

    @property
    def steps_done(self) -> int:
        """Steps committed or cancelled (in any order)."""
        return self._prefix + len(self._done)

    @property
    def in_flight(self) -> int:
        """Proposals not yet committed or cancelled."""
        return len(self.pending)

    def successful(self) -> list[Node]:
        """Nodes with a selection score, in step order."""
        return [n for n in self.nodes.values() if n.ok]

    def best(self) -> Node | None:
        """The node with the best selection score (earliest on ties), or None."""
        best: Node | None = None
        for n in self.nodes.values():
            if not n.ok or n.score is None or not math.isfinite(n.score):
                continue
            if best is None or best.score is None or self._better(n.score, best.score):
                best = n
        return best

    def _better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b

    def exhausted(self) -> str | None:
        """Why the core will propose nothing more (a cap name), or None."""
        return self.stop_reason or self.ledger.exhausted()

    def compute_reserved(self) -> bool:
        """Whether the steps in flight are expected to use up the ``sandbox_s`` cap.

        ``Budget.sandbox_s`` is the fixed compute of a search: with several workers, a step is
        proposed only while the compute spent plus the expected compute of the steps in
        flight (their number times the mean sandbox seconds of a committed step) is under
        the cap. One worker, two or N spend the same total, within about one job's duration;
        more workers only spend it sooner. The same holds for ``Budget.gpu_s`` (GPU-seconds).
        Before any step is committed nothing is reserved.
        """
        if not self.pending or not self.nodes:
            return False
        for cap, spent in (
            (self.budget.sandbox_s, self.ledger.sandbox_s),
            (self.budget.gpu_s, self.ledger.gpu_s),
        ):
            if cap is not None and spent + len(self.pending) * spent / len(self.nodes) >= cap:
                return True
        return False

    # ---------------------------------------------------------------------------------- propose

    def propose(self) -> Proposal | None:
        """The next expansion to evaluate, or None once a budget cap is reached."""
        if self.exhausted() is not None or self.compute_reserved():
            return None
        step = self.next_step
        node_id = f"n{step:05d}"
        seed = _derive_seed(self.config.seed, step)
        proposal = self._choose(step, node_id, seed)
        self.next_step += 1
        self.pending[step] = proposal
        self.ledger.charge_step()
        return proposal

    def _choose(self, step: int, node_id: str, seed: int) -> Proposal:
        cfg = self.config
        make = partial(Proposal, step=step, node_id=node_id, seed=seed)
        if step < cfg.initial_drafts:
            return make(operator=Operator.DRAFT, reason="initial")
        if self._debug_queue:
            target = self.nodes[self._debug_queue.popleft()]
            return make(
                operator=Operator.DEBUG,
                parent_ids=(target.node_id,),
                generation=target.generation + 1,
                debug_depth=target.debug_depth + 1,
                reason="debug",
            )
        if self._forced_drafts:
            self._forced_drafts -= 1
            return make(operator=Operator.DRAFT, reason="forced_draft")
        n_ok = self._n_ok
        if not n_ok:
            return make(operator=Operator.DRAFT, reason="no_parent")
        if cfg.fresh_draft_prob > 0 and self.rng.random() < cfg.fresh_draft_prob:
            return make(operator=Operator.DRAFT, reason="fresh_draft")
        crossover = (
            n_ok >= cfg.crossover_after
            and cfg.crossover_prob > 0
            and self.rng.random() < cfg.crossover_prob
        )
        op = Operator.CROSSOVER if crossover else Operator.IMPROVE
        if cfg.trust_printed_score:
            candidates = [self._candidate(n) for n in self.successful()]
        else:
            # The board caches one candidate per scored node; family_count is left to the
            # selector (it counts families among the candidates, as the released code does).
            candidates = self.board.candidates()
        selector: Selector = self.selector
        if self.islands is not None and self._island_base is not None:
            selector = IslandSelector(base=self._island_base, islands=self.islands)
        selection = selector.select(candidates, self.rng, k=op.n_parents)
        if len(selection.chosen) != op.n_parents:
            raise InvalidArgument(
                f"selector returned {len(selection.chosen)} parents for {op.value}, "
                f"expected {op.n_parents}"
            )
        parents = tuple(selection.chosen)
        generation = 1 + max(self.nodes[p].generation for p in parents)
        return make(
            operator=op,
            parent_ids=parents,
            generation=generation,
            reason="selector",
            selection=selection,
        )

    def _candidate(self, node: Node) -> Candidate:
        parent_scores = [
            self.nodes[p].score for p in node.parent_ids if self.nodes[p].score is not None
        ]
        parent_best: float | None = None
        if parent_scores:
            clean = [s for s in parent_scores if s is not None]
            parent_best = max(clean) if self.higher_is_better else min(clean)
        return Candidate(
            node_id=node.node_id,
            score=node.score,
            parent_ids=node.parent_ids,
            parent_best_score=parent_best,
            family=node.family,
            family_count=self._family_counts.get(node.family, 1) - 1,
            generation=node.generation,
        )

    # ----------------------------------------------------------------------------------- commit

    def _priced(self, cost: float | None, evaluation: Evaluation, usage: Usage) -> float | None:
        """``cost``, else ``usage`` priced by the budget's price table as the evaluation's
        price model (None when unknown).

        Raises:
            InvalidArgument: the budget caps ``usd`` and tokens were used at an unknown cost;
                the message names the model id the price table was asked for.
        """
        looked_up = evaluation.price_model or evaluation.model
        if cost is None and self.budget.prices is not None:
            cost = self.budget.prices.cost(looked_up, usage)
        if cost is None and self.budget.usd is not None and usage.total_tokens > 0:
            known = sorted(self.budget.prices.prices) if self.budget.prices is not None else []
            raise InvalidArgument(
                f"Budget.usd is set but the cost of a step answered by model {looked_up!r} is "
                f"unknown: the model reported no cost and Budget.prices has no price for "
                f"{looked_up!r} (it prices {', '.join(map(repr, known)) or 'no model'}); add "
                f"{looked_up!r} (or '*') to the price table (CLI: --prices FILE) or drop the "
                "usd cap"
            )
        return cost

    def make_node(
        self, proposal: Proposal, evaluation: Evaluation, *, elapsed_s: float = 0.0
    ) -> Node:
        """Build (without applying) the node for ``proposal`` from its evaluation."""
        if proposal.step not in self.pending:
            raise InvalidArgument(
                f"step {proposal.step} is not pending; it was never proposed or is already done"
            )
        r = evaluation.result
        if r.split is not Split.VALID:
            raise InvalidArgument("search evaluations must be on the 'valid' split")
        valid = r.score if r.outcome is Outcome.SUCCESS else None
        score = valid
        if self.config.trust_printed_score and r.outcome is Outcome.SUCCESS:
            score = r.printed_score if r.printed_score is not None else valid
        warnings = list(evaluation.warnings)
        usage = evaluation.usage
        bad = check_usage(usage)
        if bad is not None:
            warnings.append(f"token usage ignored: {bad}")
            usage = Usage()
        cost = evaluation.cost_usd
        bad = check_cost(cost)
        if bad is not None:
            warnings.append(f"reported cost ignored: {bad}")
            cost = None
        cost = self._priced(cost, evaluation, usage)
        used = Consumption(
            sandbox_s=r.runtime_s,
            gpu_s=r.runtime_s * max(0.0, float(evaluation.gpus)),
            queue_s=r.queue_s,
            model_s=max(0.0, evaluation.model_s),
            wall_s=max(0.0, evaluation.wall_s),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=cost,
        )
        signature = r.error_signature
        if signature is None and not r.outcome.is_success:
            signature = r.outcome.value
        card = self.board.make_card(
            node_id=proposal.node_id,
            operator=proposal.operator,
            code=evaluation.code,
            result=r,
            parent_ids=proposal.parent_ids,
            plan=evaluation.plan,
            generation=proposal.generation,
            model_s=evaluation.model_s,
            usage=usage,
            cost_usd=cost,
        )
        return Node(
            node_id=proposal.node_id,
            step=proposal.step,
            operator=proposal.operator,
            parent_ids=proposal.parent_ids,
            generation=proposal.generation,
            debug_depth=proposal.debug_depth,
            reason=proposal.reason,
            code=evaluation.code,
            plan=evaluation.plan,
            outcome=r.outcome,
            score=score,
            valid_score=valid,
            printed_score=r.printed_score,
            error_signature=signature,
            detail=r.detail,
            exit_code=r.exit_code,
            feedback=_feedback(r.logs),
            family=card.family,
            model=evaluation.model,
            used=used,
            selection=proposal.selection,
            elapsed_s=elapsed_s,
            card=card,
            warnings=tuple(warnings),
            island=self._home_island(proposal),
            priors_shown=evaluation.priors_shown,
        )

    def _home_island(self, proposal: Proposal) -> int | None:
        """A Draft's home is ``step % islands``; any other node lives on its first parent's."""
        if self.islands is None:
            return None
        if proposal.parent_ids and proposal.parent_ids[0] in self._home:
            return self._home[proposal.parent_ids[0]]
        return proposal.step % self.islands.num_islands

    def _admit(self, node: Node) -> None:
        """Offer ``node`` to its home island, then migrate on schedule (see SearchConfig)."""
        islands = self.islands
        if islands is None:
            return
        home = node.island if node.island is not None else node.step % islands.num_islands
        home = min(home, islands.num_islands - 1)
        self._home[node.node_id] = home
        if node.ok and node.score is not None:
            islands = islands.admit(node.node_id, node.score, home)
        self._since_migration += 1
        if self._since_migration >= self.config.migration_interval:
            rng = np.random.default_rng([self.config.seed, self.migrations])
            islands = islands.migrate(rng)
            self.migrations += 1
            self._since_migration = 0
        self.islands = islands

    def commit(self, proposal: Proposal, evaluation: Evaluation, *, elapsed_s: float = 0.0) -> Node:
        """Record the evaluation of a pending proposal and return its node."""
        node = self.make_node(proposal, evaluation, elapsed_s=elapsed_s)
        self.apply(node)
        return node

    def apply(self, node: Node) -> None:
        """Apply a node built by :meth:`make_node` (also used to replay a journal)."""
        if node.step not in self.pending:
            raise InvalidArgument(f"node {node.node_id} is not pending")
        del self.pending[node.step]
        self.nodes[node.node_id] = node
        if node.card is not None:
            self.board.add(node.card)
        self._family_counts[node.family] = self._family_counts.get(node.family, 0) + 1
        self._n_ok += node.ok
        self._admit(node)
        self.ledger.charge(node.used)
        self.last_elapsed_s = max(self.last_elapsed_s, node.elapsed_s)
        self._mark_done(node.step)
        if node.outcome.is_program_failure:
            self._after_failure(node)

    def _after_failure(self, node: Node) -> None:
        cfg = self.config
        if node.operator is Operator.DEBUG and self._repeats(node) >= cfg.repeated_errors:
            self._forced_drafts += 1
            return
        if node.debug_depth < cfg.max_debug_depth:
            self._debug_queue.append(node.node_id)

    def _repeats(self, node: Node) -> int:
        """Consecutive nodes ending at ``node`` along its Debug chain with its signature."""
        count = 1
        cur = node
        while cur.operator is Operator.DEBUG and cur.parent_ids:
            parent = self.nodes.get(cur.parent_ids[0])
            if parent is None or parent.error_signature != node.error_signature:
                break
            count += 1
            cur = parent
        return count

    def cancel(self, step: int) -> None:
        """Drop a pending proposal (cancelled work); it will not be re-run on resume."""
        if step not in self.pending:
            raise InvalidArgument(f"step {step} is not pending")
        del self.pending[step]
        self.cancelled.add(step)
        self._mark_done(step)

    def _mark_done(self, step: int) -> None:
        self._done.add(step)
        while self._prefix in self._done:
            self._done.discard(self._prefix)
            self._prefix += 1

    def stop(self, reason: str) -> None:
        """Stop proposing (for example, the user interrupted the run)."""
        self.stop_reason = reason

    # ----------------------------------------------------------------------------- persistence

    def rng_state(self) -> dict[str, Any]:
        """The generator's state, JSON-ready."""
        return dict(self.rng.bit_generator.state)

    def restore_proposal(self, proposal: Proposal, rng_state: Mapping[str, Any]) -> None:
        """Replay a journalled proposal: mark it pending and restore the generator after it.

        Replaying is exact only in journal order (proposals and commits interleaved as they
        happened); :func:`openmle.search.resume_search` does that.
        """
        if proposal.step != self.next_step:
            raise InvalidArgument(
                f"journal out of order: expected step {self.next_step}, got {proposal.step}"
            )
        # Re-derive the choice to keep the debug queue and forced drafts in step.
        if proposal.operator is Operator.DEBUG and proposal.reason == "debug":
            self._debug_queue.remove(proposal.parent_ids[0])
        elif proposal.reason == "forced_draft":
            self._forced_drafts -= 1
        self.next_step += 1
        self.pending[proposal.step] = proposal
        self.ledger.charge_step()
        self.rng.bit_generator.state = dict(rng_state)

    def pending_in_order(self) -> Sequence[Proposal]:
        """Pending proposals by step (the ones a resumed run re-queues)."""
        return [self.pending[s] for s in sorted(self.pending)]
