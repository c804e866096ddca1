"""How the driver turns a proposal into a model request and a response into a program.

:class:`PromptBuilder` is the seam: ``build(proposal, parents, task, board=..., time_left_s=...)``
returns the :class:`~openmle.ModelRequest`; ``parse(text)`` returns ``(plan, code)``.

- :class:`OperatorPrompts` (the default) uses :mod:`openmle.operators` (the four operator
  prompts, hard character budgets) with :class:`~openmle.search.OperatorMemory` built from the
  search's board, so each operator sees its own small context: the parent's lineage and
  siblings for Improve, both parents for Crossover, same-signature failures for Debug.
  With a :class:`~openmle.search.SummaryStore` (``summaries=``) the memory shows model-written
  summaries of the nodes it lists, synthesised on demand: :meth:`OperatorPrompts.defer` lays
  the block out from the board when the step is proposed and returns a
  :class:`PendingRequest`; the search fetches the missing summaries of exactly those nodes
  in the step's worker (cached in memory and, in a run directory, on disk) and then renders
  the prompt. The prompt therefore depends on the board at proposal time and on the summaries,
  never on how long the summaries took, which keeps resumed runs exact (a resumed step reads
  the summaries from the disk cache). A failed summary shows the node's plan instead.
- :class:`BasicPrompts` is a minimal builder (parents' code and feedback only) for tests and
  for models that want short prompts.

What reaches a prompt: the task's public description, parent programs, their (capped) output
and *validation* scores. Test scores and hidden answers never do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, final, runtime_checkable

from attrs import field, frozen

from openmle._types import Message, ModelRequest, ModelResponse, Operator, Usage
from openmle.operators import (
    DEFAULT_TEMPLATES,
    OperatorTemplates,
    ParentView,
    PromptBudget,
    TaskBrief,
    build_request,
    parse_response,
    render_feedback,
)
from openmle.search._board import Board
from openmle.search._loop import Node, Proposal
from openmle.search._memory import DeferredMemory, MemoryConfig, OperatorMemory
from openmle.search._summaries import SummaryStore

__all__ = [
    "BasicPrompts",
    "DeferringPromptBuilder",
    "OperatorPrompts",
    "PendingRequest",
    "PromptBuilder",
    "TaskInfo",
]


@frozen(kw_only=True)
class TaskInfo:
    """What prompts may say about the task.

    Args:
        name: the task reference (bundled name or path).
        description: the task's public description.
        higher_is_better: metric direction.
        timeout_s: the per-run wall-clock limit.
        priors: the cross-task priors block retrieved for this task
            (:func:`openmle.priors.render_priors`; empty: none), shown to Draft and Improve.
        priors_shown: the ids of the priors in ``priors``.
        steps_left: steps the search has left after this one, when the budget caps steps
            (set per step by the search; None: not capped).
        sandbox_left_s: program run seconds left of the budget's ``sandbox_s`` cap, at the
            step's proposal (set per step by the search; None: not capped).
    """

    name: str
    description: str = ""
    higher_is_better: bool = True
    timeout_s: float = 600.0
    priors: str = ""
    priors_shown: tuple[str, ...] = ()
    steps_left: int | None = None
    sandbox_left_s: float | None = None


@runtime_checkable
class PromptBuilder(Protocol):
    """Builds operator requests and parses responses."""

    def build(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: Board | None = None,
        time_left_s: float | None = None,
    ) -> ModelRequest:
        """The request for ``proposal`` given its parent nodes (in ``parent_ids`` order).

        Args:
            board: the search's board before this step (for memory), if any.
            time_left_s: search wall time left, if the budget caps it.
        """
        ...

    def parse(self, text: str) -> tuple[str, str | None]:
        """``(plan, code)`` from a response; ``code`` is None when there is no program."""
        ...


@final
@frozen(kw_only=True, eq=False)
class PendingRequest:
    """A request whose memory block waits for node summaries (see :meth:`resolve`).

    Attributes:
        memory: the memory block, laid out when the step was proposed.
        store: where the summaries come from.
        board: the board whose cards the summaries are about.
        finish: builds the request around the rendered memory.
    """

    memory: DeferredMemory
    store: SummaryStore
    board: Board
    finish: Callable[[str], ModelRequest]

    @property
    def node_ids(self) -> tuple[str, ...]:
        """The nodes whose summaries the memory shows."""
        return self.memory.node_ids

    async def resolve(
        self, code_of: Callable[[str], str | None] | None = None
    ) -> tuple[ModelRequest, Usage, float | None]:
        """Fetch the missing summaries, render the memory and build the request.

        Args:
            code_of: the program of a node by id (a summary is about the program).

        Returns:
            ``(request, usage, cost_usd)``: the request, and the tokens and cost of the
            summary calls this made (zero when no call was made; cost None when a call did
            not report its cost, so that a budget's price table prices the tokens instead).
        """
        responses: list[ModelResponse] = []
        summaries = await self.store.ensure(
            self.board, self.node_ids, code_of=code_of, responses=responses
        )
        usage = sum((r.usage for r in responses), Usage())
        costs = [r.cost_usd for r in responses]
        cost = None if None in costs else sum(c for c in costs if c is not None)
        return self.finish(self.memory.render(summaries)), usage, cost


@runtime_checkable
class DeferringPromptBuilder(PromptBuilder, Protocol):
    """A :class:`PromptBuilder` whose requests may wait for node summaries."""

    def defer(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: Board | None = None,
        time_left_s: float | None = None,
    ) -> ModelRequest | PendingRequest:
        """Like :meth:`PromptBuilder.build`, but the memory's summaries may be fetched later."""
        ...


def _metadata(proposal: Proposal, task: TaskInfo) -> dict[str, object]:
    return {
        "task": task.name,
        "step": proposal.step,
        "node_id": proposal.node_id,
        "parent_ids": list(proposal.parent_ids),
        "higher_is_better": task.higher_is_better,
    }


@final
@frozen(kw_only=True)
class OperatorPrompts(DeferringPromptBuilder):
    """Operator prompts from :mod:`openmle.operators` with operator-conditioned memory.

    Args:
        templates: the wording (see :class:`openmle.operators.OperatorTemplates`).
        budget: character limits of each prompt (per operator with
            ``PromptBudget.operator_max_chars``).
        data_preview: a preview of the task's public data (:func:`openmle.gym.data_preview`),
            shown to Draft as the prompt's "Data" section (empty: none). It is part of the
            request, so every node's recorded request holds it.
        memory: how much memory each operator sees; None disables memory.
        temperature, max_tokens: passed on to every request.
        summaries: where model-written node summaries come from (None: memory shows plans).
            A search with a run directory gives a store without ``cache_dir`` the directory
            ``<run_dir>/summaries``.
    """

    templates: OperatorTemplates = DEFAULT_TEMPLATES
    budget: PromptBudget = field(factory=PromptBudget)
    data_preview: str = ""
    memory: MemoryConfig | None = field(factory=MemoryConfig)
    temperature: float | None = None
    max_tokens: int | None = None
    summaries: SummaryStore | None = field(default=None, eq=False)

    def template_hash(self) -> str:
        """A hash of the templates and limits (recorded in the run manifest)."""
        import hashlib

        blob = repr((self.templates, self.budget, self.memory, self.data_preview)).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def build(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: Board | None = None,
        time_left_s: float | None = None,
    ) -> ModelRequest:
        """See :class:`PromptBuilder` (memory shows the summaries already on the board)."""
        memory = ""
        if self.memory is not None and board is not None and len(board):
            om = OperatorMemory(board=board, config=self.memory)
            memory = om.render(om.plan(proposal.operator, proposal.parent_ids))
        return self._request(proposal, parents, task, time_left_s)(memory)

    def defer(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: Board | None = None,
        time_left_s: float | None = None,
    ) -> ModelRequest | PendingRequest:
        """See :class:`DeferringPromptBuilder`: a :class:`PendingRequest` when a summary store
        is set and the memory shows nodes, else the request itself.
        """
        if self.summaries is None or self.memory is None or board is None or not len(board):
            return self.build(proposal, parents, task, board=board, time_left_s=time_left_s)
        om = OperatorMemory(board=board, config=self.memory)
        block = om.defer(om.plan(proposal.operator, proposal.parent_ids))
        if not block.node_ids:
            return self._request(proposal, parents, task, time_left_s)(block.render())
        return PendingRequest(
            memory=block,
            store=self.summaries,
            board=board,
            finish=self._request(proposal, parents, task, time_left_s),
        )

    def _request(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        time_left_s: float | None,
    ) -> Callable[[str], ModelRequest]:
        views = [
            ParentView.from_result(
                p.node_id, p.code, p.run_result(), max_log_chars=self.budget.feedback_chars
            )
            for p in parents
        ]

        def finish(memory: str) -> ModelRequest:
            preview = self.data_preview if proposal.operator is Operator.DRAFT else ""
            return build_request(
                proposal.operator,
                task=TaskBrief(
                    description=task.description.strip() or task.name, data_description=preview
                ),
                parents=views,
                memory=memory,
                priors=task.priors,
                priors_shown=task.priors_shown,
                execution_timeout_s=task.timeout_s,
                time_left_s=time_left_s,
                steps_left=task.steps_left,
                sandbox_left_s=task.sandbox_left_s,
                templates=self.templates,
                budget=self.budget,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=proposal.seed,
                metadata=_metadata(proposal, task),
            )

        return finish

    def parse(self, text: str) -> tuple[str, str | None]:
        """See :class:`PromptBuilder` (:func:`openmle.operators.parse_response`)."""
        parsed = parse_response(text)
        return parsed.plan, parsed.code


_GUIDANCE = {
    Operator.DRAFT: "Write a complete first solution. Try one clear idea.",
    Operator.IMPROVE: "Improve the previous solution by changing one thing, and say what.",
    Operator.DEBUG: (
        "The previous solution failed. Find the root cause in the feedback, keep its idea, "
        "and fix it."
    ),
    Operator.CROSSOVER: "Combine the strengths of the two previous solutions into one program.",
}


@final
@frozen(kw_only=True)
class BasicPrompts(PromptBuilder):
    """Short operator prompts: the task, each parent's code and feedback, one guidance line."""

    feedback_chars: int = 3000

    def build(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: Board | None = None,
        time_left_s: float | None = None,
    ) -> ModelRequest:
        """See :class:`PromptBuilder`."""
        op = proposal.operator
        parts = [f"## Task\n\n{task.description.strip() or task.name}\n"]
        for i, node in enumerate(parents, start=1):
            label = f" {i}" if len(parents) > 1 else ""
            feedback = render_feedback(node.run_result(), max_log_chars=self.feedback_chars)
            parts.append(
                f"## Program{label}\n\n```python\n{node.code.rstrip()}\n```\n\n"
                f"## Feedback{label}\n\n{feedback.rstrip()}\n"
            )
        limit = task.timeout_s if time_left_s is None else min(task.timeout_s, time_left_s)
        left = [f"{task.steps_left} steps"] if task.steps_left is not None else []
        if task.sandbox_left_s is not None:
            left.append(f"{task.sandbox_left_s:.0f} seconds of program run time")
        meta = _metadata(proposal, task)
        if task.priors.strip() and op in (Operator.DRAFT, Operator.IMPROVE):
            parts.append(f"## Priors from other tasks\n\n{task.priors.strip()}\n")
            meta["priors_shown"] = list(task.priors_shown)
        parts.append(f"## What to do\n\n{_GUIDANCE[op]}\n")
        parts.append(
            "## Submission\n\nRead the data from the directory in $DATA_DIR and write "
            "./submission.csv in the format of sample_submission.csv. The run must finish "
            f"within {limit:.0f} seconds. Answer with a short plan, then one "
            "```python``` block." + (f" The search has {' and '.join(left)} left." if left else "")
        )
        return ModelRequest(
            messages=(
                Message(role="system", content="You write machine-learning programs."),
                Message(role="user", content="\n".join(parts)),
            ),
            operator=op,
            seed=proposal.seed,
            metadata=meta,
        )

    def parse(self, text: str) -> tuple[str, str | None]:
        """See :class:`PromptBuilder`."""
        parsed = parse_response(text)
        return parsed.plan, parsed.code
