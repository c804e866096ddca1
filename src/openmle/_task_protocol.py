"""What a sandbox needs from a task: where the public data is, and a grader outside its reach.

``openmle.gym.Task`` implements :class:`TaskHandle`; a sandbox depends only on this protocol,
so users can grade against their own task stores. Resolution of a ``Job.task`` reference (a
bundled name or a path) goes through a ``TaskResolver``; the default is ``openmle.gym``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from openmle._types import Split

__all__ = ["GradeLike", "TaskEnvironment", "TaskHandle", "TaskResolver"]


@runtime_checkable
class GradeLike(Protocol):
    """The part of a grade report a sandbox needs."""

    @property
    def score(self) -> float | None:
        """Finite score when the submission is valid, else None."""
        ...

    @property
    def valid(self) -> bool:
        """Whether the submission satisfied the task's format and graded to a finite number."""
        ...

    @property
    def reason(self) -> str:
        """Why it is invalid (empty when valid); never contains answer values."""
        ...


@runtime_checkable
class TaskHandle(Protocol):
    """A task as a sandbox sees it.

    Contract:
        - ``public_dir(split)`` is a directory the program may read (mounted read-only): for
          ``VALID`` a deterministic hold-out view of the public training data (its answers held
          elsewhere), for ``TEST`` the task's ``data/public``.
        - ``grade(submission, split)`` runs outside the program's sandbox (its own process) and
          never raises for a bad submission: it returns ``valid=False`` with a reason.
        - ``private_paths`` are paths the program must never be able to read.
    """

    @property
    def name(self) -> str:
        """The task name."""
        ...

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """Paths holding hidden answers (never mounted, never readable by the program)."""
        ...

    def public_dir(self, split: Split) -> Path:
        """The directory the program reads through ``$DATA_DIR`` for ``split``."""
        ...

    def grade(self, submission: Path, split: Split) -> GradeLike:
        """Grade ``submission`` against the answers of ``split`` (blocking; out of process)."""
        ...


@runtime_checkable
class TaskEnvironment(Protocol):
    """A task that may ship its own environment (optional, beside :class:`TaskHandle`).

    ``dockerfile`` is the task's Dockerfile or None; its folder is the build context (untrusted:
    it must not hold or overlap the private paths). ``DockerSandbox`` builds it into the image
    the task's jobs run in.
    """

    @property
    def dockerfile(self) -> Path | None:
        """The task's Dockerfile, or None to run in the sandbox's image."""
        ...


TaskResolver = Callable[[str], TaskHandle]
"""Turns a ``Job.task`` reference (bundled name or path) into a :class:`TaskHandle`."""
