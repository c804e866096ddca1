"""Experience cards: one frozen, versioned record per evaluated node.

A card is filled deterministically from the node's :class:`~openmle.RunResult` and program
(:meth:`ExperienceCard.build`), then placed by the board before the node
(:meth:`openmle.search.Board.make_card` fills step, family count, novelty, delta to the
parents, rank and incumbency); it never calls a model. This module imports no board: the card
is a value, the board the aggregate that knows where a card stands. The only
field filled later is ``summary`` (a model-written description, see
:class:`openmle.search.SummaryStore`), set with :meth:`ExperienceCard.with_summary`.

Scores on cards are **validation** scores only: :meth:`ExperienceCard.build` refuses a result
graded on the test split, and the card has no field that could hold a test score, so nothing
built from cards (memory blocks, prompts, the board) can show one (reference S6).

Departures from the released code: the card stores the split its score came from, keeps
``fitness`` in a direction-free form (higher is always better), and its ``rank`` and
``is_incumbent`` are computed at insertion from the board, not patched in afterwards.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from attrs import field, frozen

from openmle._exports import warn_deprecated
from openmle._types import Operator, Outcome, RunResult, Split, TaskMeta, Usage, check_operator
from openmle._validation import check_type, fail, optional_finite, str_tuple
from openmle.errors import InvalidArgument
from openmle.search._families import UNKNOWN_FAMILY, analyse

__all__ = ["CARD_SCHEMA_VERSION", "ExperienceCard", "novelty_of"]

CARD_SCHEMA_VERSION = 1
"""Version of the card's JSON form; :meth:`ExperienceCard.from_dict` refuses newer ones."""


def novelty_of(family_count: int) -> float:
    """Novelty ``1 / sqrt(1 + n)`` of a node whose family ``n`` other nodes already share."""
    return 1.0 / math.sqrt(1.0 + family_count)


def _opt_float(value: object) -> float | None:
    return optional_finite(value, "ExperienceCard field")


def _operator(value: object) -> Operator:
    return check_operator(value)


def _outcome(value: object) -> Outcome:
    return value if isinstance(value, Outcome) else Outcome(str(value))


def _valid_split(value: object) -> Split:
    split = value if isinstance(value, Split) else Split(str(value))
    if split is not Split.VALID:
        raise InvalidArgument(
            "ExperienceCard.split must be 'valid': search cards hold validation results only, "
            "test scores never enter search state or prompts; grade the test split outside search"
        )
    return split


def signed(score: float | None, task: TaskMeta) -> float | None:
    """``score`` in a direction-free form (higher is always better), None stays None."""
    if score is None:
        return None
    return task.signed(score)


@frozen(kw_only=True)
class ExperienceCard:
    """What search knows about one evaluated node.

    Identity and lineage:
        node_id, operator, parent_ids, generation, step (insertion order, 0-based).
    Outcome:
        outcome, score (raw validation score, None unless SUCCESS), split (always ``valid``),
        fitness (``score`` signed so that higher is better), reward (training reward if any),
        error_signature (None on success).
    Resources:
        sandbox_s (program runtime, queue excluded), model_s (operator-model seconds),
        prompt_tokens, completion_tokens, cost_usd (None when unknown).
    Method:
        imports, family (see :func:`openmle.search.method_family`), family_count_before (cards
        of the same family before this one).
    Derived signals:
        delta_vs_parent (fitness minus the best parent's fitness; None without a scored parent;
        may be negative), novelty (``1/sqrt(1 + family_count_before)``), rank (1 = best among
        scored nodes at insertion, None without a score), is_incumbent (best so far at
        insertion), selection_utility (utility the selector gave the node's parent, if any).
    Semantic evidence:
        plan (the model's plan text), summary (model-written summary, filled lazily).
    """

    schema_version: int = CARD_SCHEMA_VERSION
    node_id: str = field(validator=attrs.validators.instance_of(str))
    operator: Operator = field(converter=_operator)
    parent_ids: tuple[str, ...] = field(default=(), converter=str_tuple)
    generation: int = 0
    step: int = 0
    outcome: Outcome = field(converter=_outcome)
    score: float | None = field(default=None, converter=_opt_float)
    split: Split = field(default=Split.VALID, converter=_valid_split)
    fitness: float | None = field(default=None, converter=_opt_float)
    reward: float | None = field(default=None, converter=_opt_float)
    error_signature: str | None = None
    sandbox_s: float = 0.0
    model_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = field(default=None, converter=_opt_float)
    imports: tuple[str, ...] = field(default=(), converter=str_tuple)
    family: str = UNKNOWN_FAMILY
    family_count_before: int = 0
    delta_vs_parent: float | None = field(default=None, converter=_opt_float)
    novelty: float = 1.0
    rank: int | None = None
    is_incumbent: bool = False
    selection_utility: float | None = field(default=None, converter=_opt_float)
    plan: str = ""
    summary: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.schema_version != CARD_SCHEMA_VERSION:
            raise InvalidArgument(
                f"ExperienceCard.schema_version={self.schema_version!r} is not supported "
                f"(this openmle reads version {CARD_SCHEMA_VERSION}); upgrade openmle"
            )
        if self.score is not None and self.outcome is not Outcome.SUCCESS:
            raise InvalidArgument(
                f"ExperienceCard.score must be None unless outcome is SUCCESS "
                f"(node {self.node_id!r} has outcome {self.outcome.value!r})"
            )

    @property
    def total_tokens(self) -> int:
        """``prompt_tokens + completion_tokens``."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def is_new_direction(self) -> bool:
        """True when no earlier card shared the family."""
        return self.family_count_before == 0

    @property
    def succeeded(self) -> bool:
        """True when the node ran and got a validation score."""
        return self.outcome is Outcome.SUCCESS and self.score is not None

    @classmethod
    def build(
        cls,
        *,
        node_id: str,
        operator: Operator | str,
        code: str,
        result: RunResult,
        task: TaskMeta,
        board: Any = None,
        parent_ids: Sequence[str] = (),
        plan: str = "",
        generation: int = 0,
        reward: float | None = None,
        model_s: float = 0.0,
        usage: Usage | None = None,
        cost_usd: float | None = None,
        selection_utility: float | None = None,
    ) -> ExperienceCard:
        """Fill a card from the node's result and program, as the first node of a search.

        The fields that depend on the nodes before it (step, family count, novelty, delta to
        the parents, rank, incumbency) are those of an empty search; to place a card after
        other nodes, let the board make it: :meth:`openmle.search.Board.make_card`.

        Args:
            node_id: the new node's id.
            operator: the operator that wrote the program.
            code: the program (for imports and family).
            result: how its run ended; must be graded on the validation split.
            task: the task's score direction.
            board: deprecated (removed in openmle 0.2.0): ``board.make_card(...)`` with the
                same arguments but ``task`` and ``board`` does this.
            parent_ids: the node's parents, first parent first.
            plan, generation, reward, model_s, usage, cost_usd, selection_utility: recorded as is.

        Raises:
            InvalidArgument: a test-split result (or, with ``board``, a node id already on it).
        """
        if board is not None:
            warn_deprecated(
                "ExperienceCard.build(board=...)",
                "use board.make_card(...) (same arguments without task and board)",
            )
            card: ExperienceCard = board.make_card(
                node_id=node_id,
                operator=operator,
                code=code,
                result=result,
                parent_ids=parent_ids,
                plan=plan,
                generation=generation,
                reward=reward,
                model_s=model_s,
                usage=usage,
                cost_usd=cost_usd,
                selection_utility=selection_utility,
            )
            return card
        check_type(result, RunResult, "result")
        if result.split is not Split.VALID:
            raise InvalidArgument(
                f"ExperienceCard.build got a result graded on split={result.split.value!r} for "
                f"node {node_id!r}; search cards hold validation results only (test scores never "
                f"reach search state or prompts)"
            )
        usage = usage or Usage()
        imports, family = analyse(code)
        score = result.score if result.outcome is Outcome.SUCCESS else None
        fitness = signed(score, task)
        return cls(
            node_id=node_id,
            operator=operator,
            parent_ids=tuple(parent_ids),
            generation=generation,
            step=0,
            outcome=result.outcome,
            score=score,
            fitness=fitness,
            reward=reward,
            error_signature=(
                None
                if result.outcome is Outcome.SUCCESS
                else (result.error_signature or result.outcome.value)
            ),
            sandbox_s=result.runtime_s,
            model_s=model_s,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=cost_usd,
            imports=imports,
            family=family,
            family_count_before=0,
            delta_vs_parent=None,
            novelty=novelty_of(0),
            rank=None if fitness is None else 1,
            is_incumbent=fitness is not None,
            selection_utility=selection_utility,
            plan=plan,
        )

    def with_summary(self, summary: str | None) -> ExperienceCard:
        """A copy with ``summary`` set (the only field filled after insertion)."""
        return attrs.evolve(self, summary=summary)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; :meth:`from_dict` of it gives an equal card."""
        d = attrs.asdict(self, recurse=False)
        d["operator"] = self.operator.value
        d["outcome"] = self.outcome.value
        d["split"] = self.split.value
        d["parent_ids"] = list(self.parent_ids)
        d["imports"] = list(self.imports)
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExperienceCard:
        """Inverse of :meth:`to_dict`; unknown keys and newer schema versions are errors."""
        if not isinstance(data, Mapping):
            raise fail("a mapping", "ExperienceCard data", data)
        known = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InvalidArgument(f"ExperienceCard.from_dict got unknown keys {unknown}")
        return cls(**dict(data))
