"""How the driver turns a proposal into a model request and a response into a program.

:class:`PromptBuilder` is the seam: ``build(proposal, parents, task)`` returns the
:class:`~openmle.ModelRequest`, ``parse(text)`` returns ``(plan, code)``. The default builder
(:class:`BasicPrompts`) writes short operator prompts in our own words: the task description,
each parent's code and feedback in fenced blocks, one line of guidance per operator and the
submission contract. ``openmle.operators`` has the full prompt builders with
operator-conditioned memory; any object with these two methods can replace this one.

What reaches a prompt: the task's public description, parent programs, their (capped) output
and their *validation* scores. Test scores and hidden answers never do.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, final, runtime_checkable

from attrs import frozen

from openmle._types import Message, ModelRequest, Operator
from openmle.search._loop import Node, Proposal

__all__ = ["BasicPrompts", "PromptBuilder", "TaskInfo", "detect_family", "extract_program"]

_FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


@frozen(kw_only=True)
class TaskInfo:
    """What prompts may say about the task.

    Args:
        name: the task reference (bundled name or path).
        description: the task's public description.
        higher_is_better: metric direction.
        timeout_s: the per-run wall-clock limit.
    """

    name: str
    description: str = ""
    higher_is_better: bool = True
    timeout_s: float = 600.0


@runtime_checkable
class PromptBuilder(Protocol):
    """Builds operator requests and parses responses."""

    def build(self, proposal: Proposal, parents: Sequence[Node], task: TaskInfo) -> ModelRequest:
        """The request for ``proposal`` given its parent nodes (in ``parent_ids`` order)."""
        ...

    def parse(self, text: str) -> tuple[str, str]:
        """``(plan, code)`` from a response; ``code`` is ``""`` when there is no program."""
        ...


def extract_program(text: str) -> tuple[str, str]:
    """Split a response into ``(plan, code)``.

    The program is the first fenced block labelled ``python`` (or ``py``), else the first fenced
    block of any label; the plan is the text before it. No fence gives ``("<text>", "")``.
    """
    blocks = list(_FENCE.finditer(text))
    if not blocks:
        return text.strip(), ""
    chosen = next((b for b in blocks if b.group(1).lower() in {"python", "py"}), blocks[0])
    return text[: chosen.start()].strip(), chosen.group(2).strip() + "\n"


_FAMILY_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("lightgbm", ("lightgbm",)),
    ("xgboost", ("xgboost",)),
    ("catboost", ("catboost",)),
    ("neural_net", ("torch", "tensorflow", "keras")),
    ("sklearn", ("sklearn",)),
    ("numpy", ("numpy",)),
)
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.MULTILINE)


def detect_family(code: str) -> str:
    """A coarse method family from the program's top-level imports (``"unknown"`` if none).

    ``openmle.search`` offers a richer detector; this one keeps the driver independent of it.
    """
    mods = set(_IMPORT.findall(code))
    for family, names in _FAMILY_RULES:
        if mods & set(names):
            return family
    return "unknown"


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
    """Short operator prompts with parents' code and feedback in fenced blocks."""

    feedback_chars: int = 4000

    def build(self, proposal: Proposal, parents: Sequence[Node], task: TaskInfo) -> ModelRequest:
        """See :class:`PromptBuilder`."""
        op = proposal.operator
        parts = [f"# Task\n\n{task.description.strip() or task.name}\n"]
        for i, node in enumerate(parents, start=1):
            label = f" {i}" if len(parents) > 1 else ""
            score = "none" if node.score is None else f"{node.score:.6g}"
            feedback = node.feedback[-self.feedback_chars :]
            parts.append(
                f"# Previous solution{label} ({node.node_id}, outcome {node.outcome.value}, "
                f"validation score {score})\n\n```python\n{node.code.rstrip()}\n```\n\n"
                f"# Feedback{label}\n\n```text\n{feedback.rstrip()}\n```\n"
            )
        parts.append(f"# Guidance\n\n{_GUIDANCE[op]}\n")
        parts.append(
            "# Submission\n\nRead the data from the directory in $DATA_DIR and write "
            "./submission.csv in the format of sample_submission.csv. The run must finish "
            f"within {task.timeout_s:.0f} seconds. Answer with a short plan, then one "
            "```python``` block."
        )
        return ModelRequest(
            messages=(
                Message(role="system", content="You write machine-learning programs."),
                Message(role="user", content="\n".join(parts)),
            ),
            operator=op,
            seed=proposal.seed,
            metadata={
                "task": task.name,
                "step": proposal.step,
                "node_id": proposal.node_id,
                "parent_ids": list(proposal.parent_ids),
                "higher_is_better": task.higher_is_better,
            },
        )

    def parse(self, text: str) -> tuple[str, str]:
        """See :class:`PromptBuilder`."""
        return extract_program(text)
