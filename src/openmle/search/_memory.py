"""Operator-conditioned memory: a small, targeted context block per operator call.

Instead of showing the model the whole search history, each operator sees only the nodes that
bear on its step (defaults, all configurable in :class:`MemoryConfig`):

- **Draft**: a compact summary of the ideas explored so far (per family: tries, failures, best
  validation score, the best node's plan), repeated errors, and under-explored families.
- **Improve**: the parent, up to 3 ancestors, and up to 3 *siblings* of the parent (other
  nodes sharing a parent with it, see :class:`~openmle.search.Board`), scored siblings first
  ranked by three-factor utility (released weights), then failed ones, newest first.
- **Crossover**: both parents, up to 2 ancestors and 2 siblings of each, and a
  complementarity line (different families: combine the models; same family: combine the
  changes).
- **Debug**: the failing parent and up to 8 related nodes: same error signature first (newest
  first), then other recent nodes.

Every block starts with board lines (best node, the parents' family statistics, repeated
errors, score trend) and is cut to a hard character budget by dropping whole entries from the
end, then clipping.

Scores in memory are validation scores (cards cannot hold test scores). Summaries are
synthesised lazily by :class:`~openmle.search.SummaryStore` (``_summaries.py``: model calls and
a disk cache, the only I/O of memory) only for the nodes a prompt is about to show.

Departures from the released code: the released RL memory called the parent's children its
"siblings" and Evo called the parent's siblings so (S10); here sibling means one thing. The
memory block is budgeted by whole entries rather than truncated mid-line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, final

from attrs import define, field, frozen

from openmle._types import Operator, check_operator
from openmle.errors import InvalidArgument
from openmle.operators import clip
from openmle.search._board import Board
from openmle.search._cards import ExperienceCard
from openmle.search._select import ThreeFactorSelector

__all__ = [
    "DeferredMemory",
    "MemoryConfig",
    "MemoryPlan",
    "OperatorMemory",
    "card_line",
]


@frozen(kw_only=True)
class MemoryConfig:
    """How much each operator's memory shows.

    Args:
        improve_ancestors, improve_siblings: Improve's vertical and horizontal context.
        crossover_ancestors, crossover_siblings: per parent, for Crossover.
        debug_related: related nodes shown to Debug.
        draft_families: families listed in Draft's summary (most tried first).
        plan_chars: cap on a plan excerpt on a card line.
        summary_chars: cap on a model-written summary on a card line.
        max_chars: hard cap on the whole block.
    """

    improve_ancestors: int = 3
    improve_siblings: int = 3
    crossover_ancestors: int = 2
    crossover_siblings: int = 2
    debug_related: int = 8
    draft_families: int = 12
    plan_chars: int = 280
    summary_chars: int = 420
    max_chars: int = 8_000


@frozen(kw_only=True)
class MemoryPlan:
    """Which nodes a memory block will show, by role (ids in display order)."""

    operator: Operator
    parents: tuple[str, ...]
    ancestors: tuple[tuple[str, ...], ...] = ()
    siblings: tuple[tuple[str, ...], ...] = ()
    related: tuple[str, ...] = ()

    def node_ids(self) -> tuple[str, ...]:
        """Every node the block shows, each once, in display order."""
        seen: dict[str, None] = {}
        for n in self.parents:
            seen[n] = None
        for group in (*self.ancestors, *self.siblings):
            for n in group:
                seen[n] = None
        for n in self.related:
            seen[n] = None
        return tuple(seen)


def _fmt(score: float | None) -> str:
    return "none" if score is None else f"{score:.6g}"


def card_line(card: ExperienceCard, board: Board, config: MemoryConfig) -> str:
    """One node as memory shows it: id, lineage, family, validation score, gain, rank, time,
    then the model-written summary (or, without one, the plan).
    """
    return _card_body(_card_head(card, board), card.summary, card.plan, config)


def _card_head(card: ExperienceCard, board: Board) -> str:
    parts = [f"[{card.node_id}] {card.operator.value}"]
    if card.parent_ids:
        parts[0] += " of " + "+".join(card.parent_ids)
    parts.append(card.family)
    if card.score is not None:
        parts.append(f"valid {_fmt(card.score)}")
        if card.delta_vs_parent is not None:
            parts.append(f"gain {card.delta_vs_parent:+.4g}")
        rank = board.rank_of(card.node_id)
        parts.append(f"rank {rank}")
    else:
        parts.append(f"{card.outcome.value}: {card.error_signature or '-'}")
    parts.append(f"{card.sandbox_s:.0f}s")
    if card.node_id == board.best_node:
        parts.append("current best")
    if card.is_new_direction:
        parts.append("new direction")
    return " | ".join(parts)


def _card_body(head: str, summary: str | None, plan: str, config: MemoryConfig) -> str:
    text = summary or plan
    limit = config.summary_chars if summary else config.plan_chars
    text = " ".join(text.split())
    return f"{head}\n    {clip(text, limit, keep_head=1.0)}" if text else head


@frozen
class _Line:
    """A card line whose text (summary or plan) is filled in when the block is rendered."""

    node_id: str
    head: str
    plan: str


@frozen
class _Idea:
    """Draft's idea line for a family's best node (summary or plan), filled in later."""

    node_id: str
    plan: str


_Part = str | _Line | _Idea


@final
@frozen
class DeferredMemory:
    """A memory block laid out from the board as it was, waiting for node summaries.

    Everything that depends on the board (which nodes, their scores, ranks, statistics) is
    fixed when it is made (:meth:`OperatorMemory.defer`); only the text of each shown node
    (its summary, or its plan without one) is filled in by :meth:`render`. A search builds
    the block when it proposes a step and fills it after fetching summaries, so the prompt
    does not depend on how long the summaries took.

    Attributes:
        node_ids: the nodes whose summaries the block can show, in display order.
    """

    node_ids: tuple[str, ...]
    _entries: tuple[tuple[_Part, ...], ...]
    _config: MemoryConfig

    def render(self, summaries: Mapping[str, str] | None = None) -> str:
        """The block with ``summaries`` (node id -> text) shown, plans for the rest; within
        the configured ``max_chars``.
        """
        got = summaries or {}
        cfg = self._config
        entries: list[str] = []
        for parts in self._entries:
            out: list[str] = []
            for part in parts:
                if isinstance(part, str):
                    out.append(part)
                elif isinstance(part, _Line):
                    out.append(_card_body(part.head, got.get(part.node_id), part.plan, cfg))
                else:
                    idea = " ".join((got.get(part.node_id) or part.plan).split())
                    if idea:
                        out.append("\n    " + clip(idea, cfg.plan_chars, keep_head=1.0))
            entries.append("".join(out))
        return _fit_entries(entries, cfg.max_chars)


def _rank_siblings(board: Board, ids: Sequence[str], limit: int) -> tuple[str, ...]:
    scored = [n for n in ids if board.card(n).score is not None]
    failed = [n for n in ids if board.card(n).score is None]
    ranked: list[str] = []
    if scored:
        sel = ThreeFactorSelector.preset("released", higher_is_better=board.task.higher_is_better)
        rows = sel.utilities(board.candidates(scored))
        order = sorted(range(len(rows)), key=lambda i: (-rows[i].utility, i))
        ranked = [scored[i] for i in order]
    ranked += sorted(failed, key=lambda n: -board.card(n).step)
    return tuple(ranked[:limit])


class SummarySource(Protocol):
    """Where :meth:`OperatorMemory.build` gets node summaries.

    A :class:`~openmle.search.SummaryStore` calls a model; this module does no I/O.
    """

    async def ensure(
        self,
        board: Board,
        node_ids: Sequence[str],
        *,
        code_of: Callable[[str], str | None] | None = None,
    ) -> Mapping[str, str]:
        """Summaries of ``node_ids`` (those that could be had)."""


@define(eq=False)
class OperatorMemory:
    """Builds the memory block of an operator call from the board.

    Args:
        board: the task board.
        config: how much to show.
    """

    board: Board
    config: MemoryConfig = field(factory=MemoryConfig)

    def plan(self, operator: Operator | str, parent_ids: Sequence[str] = ()) -> MemoryPlan:
        """Which nodes the block for ``operator`` on ``parent_ids`` shows."""
        op = check_operator(operator)
        parents = tuple(parent_ids)
        if len(parents) != op.n_parents:
            raise InvalidArgument(
                f"{op.value} takes {op.n_parents} parent(s) but got parent_ids={list(parents)}"
            )
        for p in parents:
            self.board.card(p)
        cfg = self.config
        if op is Operator.DRAFT:
            return MemoryPlan(operator=op, parents=())
        if op is Operator.DEBUG:
            focus = self.board.card(parents[0])
            related: list[str] = []
            if focus.error_signature:
                same = self.board.nodes_with_signature(focus.error_signature)
                related += [n for n in reversed(same) if n != focus.node_id]
            if len(related) < cfg.debug_related:
                ids = self.board.node_ids
                for n in reversed(ids[-(cfg.debug_related * 4 + 1) :]):
                    if n != focus.node_id and n not in related:
                        related.append(n)
                    if len(related) >= cfg.debug_related:
                        break
            return MemoryPlan(
                operator=op, parents=parents, related=tuple(related[: cfg.debug_related])
            )
        n_anc = cfg.improve_ancestors if op is Operator.IMPROVE else cfg.crossover_ancestors
        n_sib = cfg.improve_siblings if op is Operator.IMPROVE else cfg.crossover_siblings
        ancestors = tuple(self.board.ancestors(p, limit=n_anc) for p in parents)
        siblings = tuple(
            _rank_siblings(
                self.board, [s for s in self.board.siblings(p) if s not in parents], n_sib
            )
            for p in parents
        )
        return MemoryPlan(operator=op, parents=parents, ancestors=ancestors, siblings=siblings)

    def _board_lines(self, parents: Sequence[str]) -> list[str]:
        b = self.board
        lines = [
            f"Nodes so far: {len(b)}; best: {b.best_node or 'none'} "
            f"(valid {_fmt(b.best_score)}, {b.best_family or '-'})"
        ]
        stats = b.family_stats()
        for fam in dict.fromkeys(b.card(p).family for p in parents):
            s = stats[fam]
            lines.append(
                f"Family {fam}: {s.count} tried, {s.fail_count} failed, best valid "
                f"{_fmt(s.best_score)} ({s.best_node or '-'})"
            )
        under = b.underexplored_families()
        if under:
            lines.append("Under-explored families: " + ", ".join(under))
        errors = b.repeated_errors()
        if errors:
            lines.append("Repeated errors: " + "; ".join(f"{sig} (x{n})" for sig, n in errors[:3]))
        trend = b.score_trend()
        if trend is not None:
            lines.append(f"Recent gain trend: {trend:+.4g}")
        return lines

    def render(self, plan: MemoryPlan) -> str:
        """The memory block for ``plan``, within ``config.max_chars`` (deterministic), showing
        the summaries already on the board's cards.
        """
        block = self.defer(plan)
        b = self.board
        return block.render({n: s for n in block.node_ids if (s := b.card(n).summary)})

    def defer(self, plan: MemoryPlan) -> DeferredMemory:
        """The block for ``plan`` laid out from the board now, its node texts filled in later
        (see :class:`DeferredMemory`).
        """
        b, cfg = self.board, self.config
        if plan.operator is Operator.DRAFT:
            return self._defer_draft()
        entries: list[tuple[_Part, ...]] = [("\n".join(self._board_lines(plan.parents)),)]

        def line(n: str) -> _Line:
            card = b.card(n)
            return _Line(n, _card_head(card, b), card.plan)

        if plan.operator is Operator.DEBUG:
            entries.append(("Failing program:\n", line(plan.parents[0])))
            entries.extend(("Related: ", line(n)) for n in plan.related)
        else:
            for i, p in enumerate(plan.parents):
                label = "Parent" if len(plan.parents) == 1 else f"Parent {i + 1}"
                entries.append((f"{label}:\n", line(p)))
                entries.extend((f"Ancestor of {p}: ", line(n)) for n in plan.ancestors[i])
                entries.extend((f"Sibling of {p}: ", line(n)) for n in plan.siblings[i])
            if plan.operator is Operator.CROSSOVER:
                fa, fb = (b.card(p).family for p in plan.parents)
                if fa != fb:
                    entries.append(
                        (
                            f"Complementarity: the parents use different methods ({fa} vs "
                            f"{fb}); combine their models or blend their predictions.",
                        )
                    )
                else:
                    entries.append(
                        (
                            f"Complementarity: both parents are {fa}; combine their feature "
                            f"and tuning changes rather than the model.",
                        )
                    )
        return DeferredMemory(plan.node_ids(), tuple(entries), cfg)

    def _defer_draft(self) -> DeferredMemory:
        b, cfg = self.board, self.config
        if not len(b):
            return DeferredMemory((), (), cfg)
        stats = b.family_stats()
        fams = sorted(stats, key=lambda f: (-stats[f].count, f))[: cfg.draft_families]
        entries: list[tuple[_Part, ...]] = [
            (f"Nodes so far: {len(b)}; best valid {_fmt(b.best_score)} ({b.best_family})",)
        ]
        shown: list[str] = []
        for f in fams:
            s = stats[f]
            head = f"- {f}: {s.count} tried, {s.fail_count} failed, best valid {_fmt(s.best_score)}"
            if s.best_node is None:
                entries.append((head,))
            else:
                shown.append(s.best_node)
                entries.append((head, _Idea(s.best_node, b.card(s.best_node).plan)))
        under = b.underexplored_families()
        if under:
            entries.append(("Under-explored families: " + ", ".join(under),))
        errors = b.repeated_errors()
        if errors:
            entries.append(
                ("Repeated errors: " + "; ".join(f"{sig} (x{n})" for sig, n in errors[:3]),)
            )
        return DeferredMemory(tuple(shown), tuple(entries), cfg)

    async def build(
        self,
        operator: Operator | str,
        parent_ids: Sequence[str] = (),
        *,
        store: SummarySource | None = None,
        code_of: Callable[[str], str | None] | None = None,
    ) -> str:
        """Plan the block, synthesise missing summaries for exactly those nodes, render it.

        Args:
            operator, parent_ids: the operator call.
            store: where summaries come from, e.g. a :class:`~openmle.search.SummaryStore`
                (None: plans only).
            code_of: the program of a node by id (summaries need it).
        """
        plan = self.plan(operator, parent_ids)
        if store is None:
            return self.render(plan)
        block = self.defer(plan)
        return block.render(await store.ensure(self.board, block.node_ids, code_of=code_of))


def _fit_entries(entries: Sequence[str], max_chars: int) -> str:
    out: list[str] = []
    used = 0
    for e in entries:
        add = len(e) + (1 if out else 0)
        if used + add > max_chars:
            if not out:
                out.append(clip(e, max_chars, keep_head=1.0))
            break
        out.append(e)
        used += add
    return "\n".join(out)
