"""The exception tree of ``openmle``: one root, mapped at every backend boundary.

::

    OpenMLEError
    ├── InvalidArgument (also ValueError)      bad input from a user: names the field and the fix
    │   ├── InvalidArgumentType (also TypeError)
    │   ├── TaskPackageError                    a task package breaks the contract
    │   └── Unsupported (also NotImplementedError)  a combination not implemented (as released)
    ├── MissingDependency (also ImportError)    an optional extra is not installed
    ├── BackendError                            a backend (not the candidate program) failed
    │   ├── SandboxError
    │   │   └── SandboxUnavailable              engine/daemon/service unreachable
    │   ├── ModelError
    │   │   ├── ModelAuthError                  401/403: bad or missing key
    │   │   ├── ModelNotFoundError              404: unknown model id
    │   │   ├── ModelRateLimited                429 after every retry
    │   │   └── ModelTimeout
    │   ├── JobServiceError                     a 4xx answer from the job service
    │   └── TrainerError
    ├── BudgetExhausted                         a hard budget cap was reached
    ├── RunDirError                             a run directory cannot be created or resumed
    └── MultipleErrors                          several errors ended one call (carries them)

A failing *candidate program* is never an exception: it is an :class:`openmle.Outcome` on its
:class:`openmle.RunResult`. Exceptions are for the harness: bad arguments, broken infrastructure
(when the caller asked to be told rather than to get an ``INFRA_ERROR`` result), missing extras.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "BudgetExhausted",
    "InvalidArgument",
    "InvalidArgumentType",
    "JobServiceError",
    "MissingDependency",
    "ModelAuthError",
    "ModelError",
    "ModelNotFoundError",
    "ModelRateLimited",
    "ModelTimeout",
    "MultipleErrors",
    "OpenMLEError",
    "RunDirError",
    "SandboxError",
    "SandboxUnavailable",
    "TaskPackageError",
    "TrainerError",
    "Unsupported",
]


class OpenMLEError(Exception):
    """Root of every exception raised by ``openmle`` on purpose."""


class InvalidArgument(OpenMLEError, ValueError):
    """An argument or a field of user input is invalid.

    The message names the field, what was expected, what was given, and how to fix it.
    """


class InvalidArgumentType(InvalidArgument, TypeError):
    """An argument has the wrong type (also a ``TypeError``)."""


class TaskPackageError(InvalidArgument):
    """A task package on disk breaks the package contract; the message names the file."""


class Unsupported(InvalidArgument, NotImplementedError):
    """A documented combination of options that is not implemented, as released.

    The message names the alternative. Also a ``NotImplementedError``.
    """


class MissingDependency(OpenMLEError, ImportError):
    """An optional dependency is missing; the message gives the ``pip install`` line."""


class BackendError(OpenMLEError):
    """A backend failed for reasons outside the candidate program."""


class SandboxError(BackendError):
    """The sandbox itself failed (not the program it ran)."""


class SandboxUnavailable(SandboxError):
    """The sandbox engine, daemon or service could not be reached."""


class ModelError(BackendError):
    """An operator model call failed."""


class ModelAuthError(ModelError):
    """The model service refused the credentials (HTTP 401/403)."""


class ModelNotFoundError(ModelError):
    """The model service does not know the requested model id (HTTP 404)."""


class ModelRateLimited(ModelError):
    """The model service kept answering 429 after every retry."""


class ModelTimeout(ModelError):
    """A model call did not finish within its timeout."""


class JobServiceError(BackendError):
    """The job service refused a request (HTTP 4xx); ``status`` and ``detail`` say why."""

    def __init__(self, message: str, *, status: int, detail: object = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class TrainerError(BackendError):
    """A trainer failed to step, save or load."""


class BudgetExhausted(OpenMLEError):
    """A hard budget cap was reached and the caller asked for an exception."""


class RunDirError(OpenMLEError):
    """A run directory cannot be created, read or resumed."""


class MultipleErrors(OpenMLEError):
    """Several errors ended one call at once; ``exceptions`` holds each of them.

    For example two concurrent expansions of a search failing together.

    The public entry points raise the one underlying exception when a single error caused the
    failure, never an ``ExceptionGroup``; only when several did they raise this, so
    ``except OpenMLEError`` still catches it.

    Attributes:
        group: the exception group as the event loop raised it.
        exceptions: its leaf exceptions, nested groups flattened, in order.
    """

    def __init__(self, group: BaseExceptionGroup[BaseException]) -> None:
        leaves = _leaves(group)
        kinds = ", ".join(f"{type(e).__name__}: {str(e)[:200]}" for e in leaves)
        super().__init__(f"{len(leaves)} errors ended the call at once: {kinds}")
        self.group = group
        self.exceptions: tuple[BaseException, ...] = tuple(leaves)


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out
