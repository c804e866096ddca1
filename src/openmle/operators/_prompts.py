"""The four operators as prompt builders.

A prompt is a system message and one user message made of titled sections, in this order:
task, data, the operator's inputs (parent programs with their feedback), the operator's
guidance, the search memory block, cross-task priors (Draft and Improve only), the execution
budget (with the time left), Debug's timeout
advice, the submission check, the answer format, and any extra task instructions. Every
prompt has a hard character budget (:class:`PromptBudget`); over it, sections are cut
deterministically (memory first, then feedback, then parent code, then the data description).

Which scores may reach a prompt is explicit: **validation scores yes, test scores never**.
Parent feedback is rendered from a :class:`~openmle.RunResult` by :func:`render_feedback`,
which refuses a result graded on the test split; memory blocks come from experience cards,
which cannot hold one. No other argument of the builders carries a score.

The wording is our own (the released templates are not reused). Users can pass their own
:class:`OperatorTemplates`.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

import attrs
from attrs import field, frozen

from openmle._types import (
    Message,
    ModelRequest,
    Operator,
    Outcome,
    RunResult,
    Split,
    check_operator,
)
from openmle._validation import check_type, fail
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.operators._prompt_budget import Section, clip, fit_sections

__all__ = [
    "DEFAULT_TEMPLATES",
    "OperatorTemplates",
    "ParentView",
    "PromptBudget",
    "TaskBrief",
    "build_request",
    "format_duration",
    "render_feedback",
]


def _frozen_map(value: Mapping[Any, str]) -> Mapping[Operator, str]:
    return MappingProxyType({check_operator(k): str(v) for k, v in dict(value).items()})


@frozen(kw_only=True)
class OperatorTemplates:
    """The fixed wording of the prompts; replace any field to customise.

    Args:
        system: the system message shared by every operator.
        role: one line per operator appended to the system message.
        guidance: per operator, what to do this step.
        memory_intro: per operator, one line introducing the memory block.
        no_memory: shown when there is no memory yet.
        budget: the execution budget line; ``{limit}`` is replaced by the time a run may take.
        remaining: what is left of the search, shown after the budget line when the caller
            passes ``steps_left`` or ``time_left_s``; ``{left}`` is replaced by e.g.
            ``"4 steps and 12 minutes"``.
        timeout_advice: Debug only, when the parent timed out or ran out of memory.
        submission_check: what a valid submission looks like.
        answer_format: how to lay out the answer (plan, then exactly one program).
    """

    system: str = (
        "You are an experienced machine-learning engineer who writes complete, runnable Python "
        "programs for tabular, text and image prediction tasks. You reason about the data "
        "before modelling, validate honestly on held-out data, and keep programs within "
        "their time limits."
    )
    role: Mapping[Operator, str] = field(
        converter=_frozen_map,
        factory=lambda: {
            Operator.DRAFT: "This step starts a fresh solution from scratch.",
            Operator.IMPROVE: "This step refines one existing solution.",
            Operator.DEBUG: "This step repairs one solution that failed.",
            Operator.CROSSOVER: "This step merges the strengths of two existing solutions.",
        },
    )
    guidance: Mapping[Operator, str] = field(
        converter=_frozen_map,
        factory=lambda: {
            Operator.DRAFT: (
                "Propose one complete approach that differs from the ideas already explored "
                "(see the search memory). Prefer a solid, simple baseline over an ambitious "
                "one that may not finish. Hold out part of the training data, report the "
                "validation metric, then predict the test set."
            ),
            Operator.IMPROVE: (
                "Pick one concrete change that should raise the validation metric of the "
                "parent program (features, model, tuning, training schedule or "
                "post-processing), explain why, and apply only that change. Keep the parent's "
                "validation scheme so the numbers stay comparable."
            ),
            Operator.DEBUG: (
                "Work out the root cause of the failure from the feedback before editing. Fix "
                "it while keeping the parent's core idea; do not swap in a different method to "
                "dodge the bug. If the fix is small, you may also make one safe improvement."
            ),
            Operator.CROSSOVER: (
                "Read both parents, name what each does better, and write one program that "
                "combines those parts into a single coherent approach (for example the "
                "features of one with the model of the other, or a blend of both). Keep one "
                "consistent validation scheme."
            ),
        },
    )
    memory_intro: Mapping[Operator, str] = field(
        converter=_frozen_map,
        factory=lambda: {
            Operator.DRAFT: "Ideas this search has already tried (avoid repeating them):",
            Operator.IMPROVE: (
                "What the search learned around this parent. Build on changes that helped, "
                "avoid ones that hurt, and do not repeat a sibling's attempt."
            ),
            Operator.DEBUG: (
                "Related attempts, same error first. Do not repeat a fix that already failed."
            ),
            Operator.CROSSOVER: ("What the search learned about both parents and how they differ."),
        },
    )
    no_memory: str = "Nothing recorded yet."
    budget: str = (
        "A single run of your program may take at most {limit}, including data loading, "
        "training, validation and writing the submission. Size the model, the number of "
        "folds and epochs so it finishes well inside that limit."
    )
    remaining: str = (
        "This search has {left} left in total; choose an idea that can pay off within that."
    )
    timeout_advice: str = (
        "The parent ran out of time or memory. Cut the cost first: fewer epochs or folds, a "
        "smaller model, a sample of the training data, or lower-resolution inputs."
    )
    submission_check: str = (
        "Before finishing, the program must write ./submission.csv with the same columns, "
        "column order and number of rows as sample_submission.csv, the same ids in the same "
        "order, and no missing or infinite values. Align train and test features and handle "
        "missing values first."
    )
    answer_format: str = (
        "Answer with a short plan (a few sentences) followed by exactly one fenced Python code "
        "block holding the whole program: ```python ... ```. The program reads the data from "
        "the directory in the DATA_DIR environment variable and prints the validation metric."
    )


DEFAULT_TEMPLATES: Final = OperatorTemplates()
"""The default wording."""


@frozen(kw_only=True)
class TaskBrief:
    """What the task says: description, data description, and optional extra instructions."""

    description: str = field(validator=lambda _, a, v: check_type(v, str, f"TaskBrief.{a.name}"))
    data_description: str = field(
        default="", validator=lambda _, a, v: check_type(v, str, f"TaskBrief.{a.name}")
    )
    instructions: str = field(
        default="", validator=lambda _, a, v: check_type(v, str, f"TaskBrief.{a.name}")
    )


def _by_operator(value: Mapping[Any, int]) -> dict[str, int]:
    """Operator-keyed caps with the keys as operator values, sorted (a stable repr)."""
    return dict(sorted((check_operator(k).value, v) for k, v in dict(value).items()))


@frozen(kw_only=True)
class PromptBudget:
    """Character limits of one prompt (system + user message).

    Args:
        max_chars: hard cap on the whole prompt (of every operator without its own cap).
        code_chars: cap on each parent program.
        feedback_chars: cap on each parent's feedback.
        memory_chars: cap on the memory block.
        operator_max_chars: per-operator hard caps, by operator value (``"improve"``,
            ``"crossover"``...), replacing ``max_chars`` for that operator. The paper preset
            sizes Improve at 54,300 and Crossover at 78,400 characters (the paper's p99).
    """

    max_chars: int = 48_000
    code_chars: int = 16_000
    feedback_chars: int = 3_000
    memory_chars: int = 8_000
    operator_max_chars: Mapping[str, int] = attrs.field(
        factory=dict, converter=_by_operator, hash=False
    )

    def __attrs_post_init__(self) -> None:
        for name in ("max_chars", "code_chars", "feedback_chars", "memory_chars"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise fail("an integer > 0", f"PromptBudget.{name}", v)
        if self.max_chars < 2_000:
            raise fail("at least 2000", "PromptBudget.max_chars", self.max_chars)
        for op, v in self.operator_max_chars.items():
            if isinstance(v, bool) or not isinstance(v, int) or v < 2_000:
                raise fail("an integer >= 2000", f"PromptBudget.operator_max_chars[{op!r}]", v)

    def max_chars_for(self, operator: Operator | str) -> int:
        """The hard cap of ``operator``'s prompt."""
        return self.operator_max_chars.get(check_operator(operator).value, self.max_chars)


def render_feedback(result: RunResult, *, max_log_chars: int = 3_000) -> str:
    """What a parent's run looked like, for the model: outcome, validation score, logs.

    Args:
        result: the parent's validation run.
        max_log_chars: cap on the log excerpt (head and tail kept).

    Raises:
        InvalidArgument: ``result`` was graded on the test split (test scores never reach a
            prompt).
    """
    check_type(result, RunResult, "result")
    if result.split is not Split.VALID:
        raise InvalidArgument(
            "render_feedback got a result graded on the test split; prompts may show "
            "validation results only"
        )
    lines = [f"Outcome: {result.outcome.value}"]
    if result.score is not None:
        lines.append(f"Validation score: {result.score:.6g}")
    if result.error_signature and not result.outcome.is_success:
        lines.append(f"Error: {result.error_signature}")
    if result.detail:
        lines.append(f"Detail: {result.detail}")
    lines.append(f"Runtime: {format_duration(result.runtime_s)}")
    if result.logs.strip():
        lines.append("Output:\n" + clip(result.logs.strip(), max_log_chars, keep_head=0.3))
    return "\n".join(lines)


@frozen(kw_only=True)
class ParentView:
    """A parent as a prompt shows it: its program and the feedback of its run.

    Build one with :meth:`from_result` so the feedback goes through :func:`render_feedback`.
    """

    node_id: str
    code: str
    feedback: str = ""
    timed_out: bool = False

    @classmethod
    def from_result(
        cls, node_id: str, code: str, result: RunResult, *, max_log_chars: int = 3_000
    ) -> ParentView:
        """A view with feedback rendered from a validation ``result``."""
        return cls(
            node_id=node_id,
            code=code,
            feedback=render_feedback(result, max_log_chars=max_log_chars),
            timed_out=result.outcome in (Outcome.TIMEOUT, Outcome.OOM),
        )


def format_duration(seconds: float) -> str:
    """``seconds`` as words: ``"45 seconds"``, ``"12 minutes"``, ``"2 hours 5 minutes"``
    (a negative time is ``"0 seconds"``).

    Raises:
        InvalidArgumentType: ``seconds`` is not a number.
        InvalidArgument: ``seconds`` is NaN or infinite.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, numbers.Real):
        raise InvalidArgumentType(
            f"Expected a number of seconds but got seconds={seconds!r:.40} "
            f"(type={type(seconds).__name__})"
        )
    if not math.isfinite(seconds):
        raise fail("a finite number of seconds", "seconds", seconds)
    s = max(0, math.floor(seconds))
    if s < 90:
        return f"{s} second{'s' if s != 1 else ''}"
    minutes = s // 60
    if minutes < 90:
        return f"{minutes} minutes"
    hours, rest = divmod(minutes, 60)
    out = f"{hours} hour{'s' if hours != 1 else ''}"
    return f"{out} {rest} minutes" if rest else out


_TITLES = {1: ("Program", "Feedback"), 2: ("Program {i}", "Feedback {i}")}


def _budget_body(
    templates: OperatorTemplates,
    limit: float,
    steps_left: int | None,
    time_left_s: float | None,
    sandbox_left_s: float | None,
) -> str:
    """The execution budget section: the per-run limit, then what the search has left
    (steps, wall time, program run time), each part only when the budget caps it.
    """
    body = templates.budget.format(limit=format_duration(limit))
    left = [f"{steps_left} step{'s' if steps_left != 1 else ''}"] if steps_left is not None else []
    if time_left_s is not None:
        wall = " of wall time" if sandbox_left_s is not None else ""
        left.append(format_duration(time_left_s) + wall)
    if sandbox_left_s is not None:
        left.append(f"{format_duration(sandbox_left_s)} of program run time")
    if left:
        said = left[0] if len(left) == 1 else ", ".join(left[:-1]) + " and " + left[-1]
        body += "\n" + templates.remaining.format(left=said)
    return body


def _check_inputs(memory: object, priors: object, steps_left: object) -> None:
    """Refuse a ``memory`` or ``priors`` that is not a string and a bad ``steps_left``.

    An un-awaited ``OperatorMemory.build(...)`` coroutine passed as ``memory`` is closed (so
    Python does not warn later) and named in the error with the fix.
    """
    if not isinstance(memory, str):
        hint = (
            " OperatorMemory.build() is a coroutine function: pass "
            "`memory=await memory.build(...)`."
            if inspect.iscoroutine(memory)
            else ""
        )
        if inspect.iscoroutine(memory):
            memory.close()  # never awaited: close it so Python does not warn later
        raise InvalidArgument(
            f"memory must be a str (the memory block), got {type(memory).__name__}.{hint}"
        )
    if not isinstance(priors, str):
        raise InvalidArgument(
            f"priors must be a str (render_priors(...).text), got {type(priors).__name__}"
        )
    if steps_left is not None and (
        isinstance(steps_left, bool) or not isinstance(steps_left, int) or steps_left < 0
    ):
        raise InvalidArgument(f"steps_left must be an integer >= 0 or None, got {steps_left!r}")


def _parent_sections(parents: tuple[ParentView, ...], budget: PromptBudget) -> list[Section]:
    """The starting-point line, then each parent's program and feedback (clipped)."""
    if not parents:
        return []
    intro = (
        "Below is the current program and what happened when it ran."
        if len(parents) == 1
        else "Below are two programs and what happened when each ran."
    )
    sections = [Section(title="Starting point", body=intro, priority=-1)]
    code_t, fb_t = _TITLES[len(parents)]
    for i, p in enumerate(parents, start=1):
        sections.append(
            Section(
                title=code_t.format(i=i),
                body="```python\n" + clip(p.code, budget.code_chars, keep_head=0.6) + "\n```",
                priority=2,
                keep_head=0.6,
            )
        )
        sections.append(
            Section(
                title=fb_t.format(i=i),
                body=clip(p.feedback, budget.feedback_chars, keep_head=0.3),
                priority=1,
                keep_head=0.3,
            )
        )
    return sections


def _memory_section(
    op: Operator, memory: str, templates: OperatorTemplates, budget: PromptBudget
) -> Section:
    """The search memory block behind the operator's intro line (or the no-memory line)."""
    mem = memory.strip() or templates.no_memory
    return Section(
        title="Search memory",
        body=templates.memory_intro[op] + "\n\n" + clip(mem, budget.memory_chars, keep_head=0.8),
        priority=0,
        keep_head=0.8,
    )


def _priors_section(priors: str, budget: PromptBudget) -> Section:
    """The cross-task priors block, clipped to the memory cap."""
    return Section(
        title="Priors from other tasks",
        body=clip(priors.strip(), budget.memory_chars, keep_head=1.0),
        priority=0,
        keep_head=1.0,
    )


def _request_metadata(
    metadata: Mapping[str, Any] | None,
    op: Operator,
    parents: tuple[ParentView, ...],
    priors: str,
    priors_shown: Sequence[str],
    show_priors: bool,
) -> dict[str, Any]:
    """The caller's metadata plus the operator, the parent ids and (when priors were passed)
    the ids of the priors shown (empty when the block was not shown).
    """
    meta = {
        **dict(metadata or {}),
        "operator": op.value,
        "parent_ids": [p.node_id for p in parents],
    }
    if priors_shown or priors.strip():
        meta["priors_shown"] = [str(i) for i in priors_shown] if show_priors else []
    return meta


def _closing_sections(
    op: Operator, parents: tuple[ParentView, ...], task: TaskBrief, templates: OperatorTemplates
) -> list[Section]:
    """Debug's timeout advice (when a parent timed out), the submission check, the answer
    format and the task's extra instructions.
    """
    sections: list[Section] = []
    if op is Operator.DEBUG and any(p.timed_out for p in parents):
        sections.append(
            Section(title="Time and memory", body=templates.timeout_advice, priority=-1)
        )
    sections.append(Section(title="Submission check", body=templates.submission_check, priority=-1))
    sections.append(Section(title="Answer format", body=templates.answer_format, priority=-1))
    if task.instructions.strip():
        sections.append(Section(title="Task instructions", body=task.instructions, priority=4))
    return sections


def build_request(
    operator: Operator | str,
    *,
    task: TaskBrief,
    parents: Sequence[ParentView] = (),
    memory: str = "",
    priors: str = "",
    priors_shown: Sequence[str] = (),
    execution_timeout_s: float,
    time_left_s: float | None = None,
    steps_left: int | None = None,
    sandbox_left_s: float | None = None,
    budget_blind: bool = False,
    templates: OperatorTemplates = DEFAULT_TEMPLATES,
    budget: PromptBudget | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    seed: int | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> ModelRequest:
    """Build one operator's request.

    Args:
        operator: Draft (no parent), Improve or Debug (one), Crossover (two).
        task: the task's description.
        parents: the parents, as many as the operator takes.
        memory: the memory block (see :class:`openmle.search.OperatorMemory`).
        priors: a block of cross-task priors (see :func:`openmle.priors.render_priors`),
            shown to Draft and Improve only (ignored by Debug and Crossover); it is the
            first section cut when the prompt is over budget.
        priors_shown: the ids of the priors in ``priors`` (``RenderedPriors.shown``); put in
            the request's metadata as ``priors_shown`` (empty when the block is not shown),
            so the caller can record them with the node.
        execution_timeout_s: the sandbox limit of one run.
        time_left_s: search time left; the budget line shows ``min(timeout, time left)``.
        steps_left: search steps left, if the budget caps them. With ``time_left_s`` it makes
            the remaining line ("This search has 4 steps and 12 minutes left").
        sandbox_left_s: program run seconds left of the search's sandbox budget, if capped;
            shown in the remaining line ("... and 3 hours of program run time left").
        budget_blind: leave the execution budget section (per-run limit and what is left of
            the search) out of the prompt.
        templates: the wording.
        budget: character limits (default :class:`PromptBudget`).
        temperature, max_tokens, seed: passed on to the request.
        metadata: passed on (the operator and parent ids are added).

    Returns:
        A :class:`~openmle.ModelRequest` whose prompt is at most
        ``budget.max_chars_for(operator)`` long.

    Raises:
        InvalidArgument: the wrong number of parents, or ``memory`` that is not a string (an
            un-awaited ``OperatorMemory.build(...)`` coroutine: ``build`` is async, await it).
    """
    _check_inputs(memory, priors, steps_left)
    op = check_operator(operator)
    budget = budget or PromptBudget()
    parents = tuple(parents)
    if len(parents) != op.n_parents:
        raise InvalidArgument(
            f"{op.value} takes {op.n_parents} parent(s) but got {len(parents)}; pass "
            f"parents=[ParentView, ...]"
        )
    max_chars = budget.max_chars_for(op)
    system = clip(f"{templates.system}\n\n{templates.role[op]}", max_chars // 4)
    limit = execution_timeout_s if time_left_s is None else min(execution_timeout_s, time_left_s)
    show_priors = bool(priors.strip()) and op in (Operator.DRAFT, Operator.IMPROVE)
    sections = [
        Section(title="Task", body=task.description, priority=5, keep_head=0.7),
        Section(title="Data", body=task.data_description, priority=3, keep_head=0.7),
        *_parent_sections(parents, budget),
        Section(title="What to do", body=templates.guidance[op], priority=-1),
        _memory_section(op, memory, templates, budget),
    ]
    if show_priors:
        sections.append(_priors_section(priors, budget))
    if not budget_blind:
        body = _budget_body(templates, limit, steps_left, time_left_s, sandbox_left_s)
        sections.append(Section(title="Execution budget", body=body, priority=-1))
    sections.extend(_closing_sections(op, parents, task, templates))
    user = fit_sections(sections, max(0, max_chars - len(system)))
    meta = _request_metadata(metadata, op, parents, priors, priors_shown, show_priors)
    return ModelRequest(
        messages=(Message(role="system", content=system), Message(role="user", content=user)),
        operator=op,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        metadata=meta,
    )
