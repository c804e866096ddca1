"""The job service's side of a bench: :func:`bench_task_sandbox` (``openmle serve --sandbox
openmle.bench:bench_task_sandbox``) runs the jobs of ``openmle bench run --sandbox service:URL``
(see :mod:`openmle.bench._engines`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from openmle.bench._engines import TaskDirResolver
from openmle.bench._runner import _Resolver
from openmle.errors import InvalidArgument

if TYPE_CHECKING:
    from openmle import Sandbox

__all__ = ["bench_task_sandbox"]


def bench_task_sandbox(
    inner: str = "local", *, workdir: Path | None = None, **options: Any
) -> Sandbox:
    """The sandbox a job service runs a bench's jobs on.

    ``openmle serve --sandbox openmle.bench:bench_task_sandbox``: ``inner`` (``local`` or
    ``docker``, built by :func:`openmle.backends.build_sandbox` with ``options``) resolving
    each job's task, a bench task directory, to its competition (graded there, the test
    submission kept in the bench directory).

    Raises:
        InvalidArgument: ``inner`` names no sandbox taking a ``resolver``.
    """
    from openmle.backends import build_sandbox, sandbox_takes

    if not sandbox_takes(inner, "resolver"):
        raise InvalidArgument(f"bench_task_sandbox: inner={inner!r} takes no resolver")
    optional: dict[str, Any] = {} if workdir is None else {"workdir": workdir}
    return build_sandbox(inner, {**options, "resolver": TaskDirResolver(_Resolver.open)}, optional)
