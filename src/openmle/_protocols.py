"""The four pluggable roles, as small ``typing.Protocol`` classes.

Each protocol has one to three methods. Reference implementations subclass the protocol
explicitly so mypy checks them where they are defined; any other class with the same methods
works too (structural typing). The protocols are runtime-checkable (``isinstance`` checks that
the methods exist, not their signatures). ``Selector`` declares empty ``__slots__`` so that the
frozen, slotted attrs selectors that subclass it stay slotted. ``openmle.testing`` has an
in-memory fake and a conformance check for each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Protocol, TypeVar, runtime_checkable

import numpy as np

from openmle._types import Candidate, Job, ModelRequest, ModelResponse, RunResult, Selection

__all__ = ["OperatorModel", "Sandbox", "Selector", "Trainer"]

BatchT_contra = TypeVar("BatchT_contra", contravariant=True)


@runtime_checkable
class Sandbox(Protocol):
    """Runs candidate programs and grades their submissions outside the program's reach.

    Contract:
        - ``run`` never raises for anything the program does: crashes, timeouts, OOM, missing or
          invalid submissions come back as a :class:`RunResult` outcome. Infrastructure failures
          come back as ``Outcome.INFRA_ERROR`` (never a score).
        - The hidden answers are never readable by the program, its logs or its artifacts.
        - Cancellation of ``run`` stops the program and cleans up before it propagates.
        - ``aclose`` releases every resource; ``run`` after ``aclose`` raises ``SandboxError``.

    Optional: ``async def task_meta(self, task: str) -> TaskMeta | None`` reports a task's
    metric direction and bounds when the sandbox knows tasks this machine cannot resolve (a job
    service); ``None`` means "cannot tell". The search asks it only when ``higher_is_better``
    was not passed and the task does not resolve locally, and refuses to start when it cannot
    tell (the direction is never guessed).

    Optional: ``trusted: bool``. ``True`` says the sandbox does not keep the answers from the
    program (a plain subprocess on a machine its user controls); a run records it in its
    manifest (``sandbox.trusted``), and :func:`openmle.testing.check_sandbox` checks such a
    sandbox with its ``trusted`` profile. Absent means False.
    """

    async def run(self, job: Job) -> RunResult:
        """Run ``job`` to completion and return how it ended."""
        ...

    async def aclose(self) -> None:
        """Release every resource held by the sandbox (idempotent)."""
        ...


@runtime_checkable
class OperatorModel(Protocol):
    """Answers operator prompts (any LLM service, a local policy, an offline program writer).

    Contract: ``complete`` returns the answer with its token usage, or raises a
    :class:`openmle.errors.ModelError` subclass once its own retries are spent.
    """

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request."""
        ...


@runtime_checkable
class Selector(Protocol):
    """Chooses parents among candidates; a pure function of its inputs and ``rng``.

    Contract: returns a :class:`Selection` with the probability of every candidate (summing to
    1) and ``k`` distinct chosen ids (fewer only when there are fewer candidates). The same
    candidates and the same ``rng`` state give the same selection.
    """

    __slots__ = ()  # subclassing keeps an attrs/slotted implementation slotted

    def select(
        self, candidates: Sequence[Candidate], rng: np.random.Generator, *, k: int = 1
    ) -> Selection:
        """Choose ``k`` distinct candidates."""
        ...


@runtime_checkable
class Trainer(Protocol[BatchT_contra]):
    """Updates a policy from batches and checkpoints it exactly.

    Contract: ``step`` returns finite metrics; ``save`` then ``load`` into a fresh trainer
    restores everything needed for the next ``step`` to give the same result (model, optimiser,
    RNG, step counter).
    """

    def step(self, batch: BatchT_contra) -> Mapping[str, float]:
        """Take one optimisation step (or one accumulation micro-step) on ``batch``."""
        ...

    def save(self, path: str | PathLike[str]) -> None:
        """Write a checkpoint directory at ``path``."""
        ...

    def load(self, path: str | PathLike[str]) -> None:
        """Restore the checkpoint at ``path``."""
        ...
