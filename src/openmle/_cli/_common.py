"""What every ``openmle`` command shares: exit codes, the error line, the interrupt line.

Exit codes (documented in ``docs/reference/errors.md``):

- 0: the command did its job.
- 1: it ran and failed: a backend, run directory or model error, a search in which no node
  succeeded, a task package with validation errors, an invalid submission.
- 2: the command line is wrong: an unknown flag or a bad value (argparse), or an
  :class:`~openmle.errors.InvalidArgument` raised for user input (an unknown task, a broken
  task package named by ``--task``, a bad ``--budget``).
- 130: interrupted (Ctrl-C, or SIGTERM, which the CLI handles as Ctrl-C); the line after
  ``openmle: interrupted`` says how to continue.

Any :class:`~openmle.errors.OpenMLEError` prints one line, ``openmle: error: <message>``, on
stderr; an ``ExceptionGroup`` of them prints one line per error. A traceback is printed only
with ``openmle --debug`` or ``OPENMLE_DEBUG=1`` in the environment.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from openmle.errors import InvalidArgument, OpenMLEError

__all__ = [
    "DEBUG_ENV",
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "SERVER_SPECS",
    "debug_enabled",
    "interrupted",
    "note_signal",
    "recorded_spec",
    "report_error",
    "run_guarded",
    "use_app_dir",
]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""Interrupted by SIGINT or SIGTERM (the run directory can be resumed)."""
DEBUG_ENV = "OPENMLE_DEBUG"
"""Environment variable: ``1`` (or ``true``/``yes``) prints tracebacks, like ``--debug``."""


def debug_enabled(flag: bool = False) -> bool:
    """``--debug`` was given or ``$OPENMLE_DEBUG`` is set to a true value."""
    value = os.environ.get(DEBUG_ENV, "").strip().lower()
    return flag or value in {"1", "true", "yes", "on"}


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for inner in exc.exceptions:
            out.extend(_leaves(inner))
        return out
    return [exc]


def report_error(exc: BaseException, *, debug: bool = False, stream: TextIO | None = None) -> int:
    """Print ``openmle: error: <message>`` for each OpenMLEError in ``exc``; the exit code.

    ``exc`` is an :class:`OpenMLEError` or a (nested) group whose leaves all are; anything else
    is re-raised (a bug: its traceback is the useful output). Returns :data:`EXIT_USAGE` when
    every error is an :class:`InvalidArgument`, else :data:`EXIT_FAILURE`.
    """
    out = sys.stderr if stream is None else stream
    leaves = _leaves(exc)
    if not leaves or not all(isinstance(e, OpenMLEError) for e in leaves):
        raise exc
    if debug:
        traceback.print_exception(exc, file=out)
    seen: set[str] = set()
    for e in leaves:
        message = str(e) or type(e).__name__
        if message not in seen:
            seen.add(message)
            out.write(f"openmle: error: {message}\n")
    out.flush()
    return EXIT_USAGE if all(isinstance(e, InvalidArgument) for e in leaves) else EXIT_FAILURE


_signals: list[int] = []


def note_signal(signum: int) -> None:
    """Remember that ``signum`` (SIGTERM) caused the coming interrupt, for its message."""
    _signals.append(int(signum))


def interrupted(
    run_dir: Path | str | None = None,
    *,
    signum: int | None = None,
    resume: str = "openmle resume",
) -> int:
    """Say the command was interrupted and how to continue; returns :data:`EXIT_INTERRUPTED`.

    The one interrupt handler of the CLI (Ctrl-C and SIGTERM alike): prints
    ``openmle: interrupted (SIGNAL)`` on stderr and, when ``run_dir`` holds a run (its
    manifest was written), the ``<resume> RUN_DIR`` line that continues it (``resume``:
    ``openmle resume`` for a run directory, ``openmle bench resume`` for a bench directory).
    ``signum`` defaults to the signal :func:`note_signal` recorded, else SIGINT.
    """
    if signum is None:
        signum = _signals[-1] if _signals else signal.SIGINT
    name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    sys.stderr.write(f"openmle: interrupted ({name})\n")
    if run_dir is not None and (Path(run_dir) / "manifest.json").is_file():
        sys.stderr.write(
            f"openmle: nothing committed is lost; continue with: "
            f"{resume} {shlex.quote(str(run_dir))}\n"
        )
    sys.stderr.flush()
    return EXIT_INTERRUPTED


def use_app_dir(path: str | None) -> None:
    """Put ``--app-dir DIR`` first on ``sys.path``, so ``--sandbox``/``--model``
    ``module:callable`` specs import from it (without it, the current folder is searched when
    the module is not installed; see ``openmle.backends.make_sandbox``).

    Raises:
        InvalidArgument: ``path`` is not a directory.
    """
    if path is None:
        return
    folder = Path(path).expanduser().resolve()
    if not folder.is_dir():
        raise InvalidArgument(
            f"--app-dir {path}: not a directory; name the folder that holds your package "
            "(the one with myagent/ for --sandbox myagent.sandbox:make)"
        )
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


APP_DIR_HELP = (
    "folder to import --sandbox/--model module:callable factories from (default: installed "
    "packages, then the current folder, as python -m finds them)"
)


def run_guarded(call: Callable[[], int], *, debug: bool = False) -> int:
    """Run a command handler; errors and interrupts become a message and an exit code."""
    try:
        return int(call())
    except KeyboardInterrupt:
        return interrupted()
    except (OpenMLEError, BaseExceptionGroup) as exc:
        if isinstance(exc, BaseExceptionGroup) and any(
            isinstance(e, KeyboardInterrupt) for e in _leaves(exc)
        ):
            return interrupted()
        return report_error(exc, debug=debug_enabled(debug))


SERVER_SPECS = ("openai:", "service:")
"""Spec prefixes of parts that talk to a server (and send it an API key from the environment)."""


def recorded_spec(spec: str, *, flag: str, where: str) -> str:
    """``spec``, read from ``where`` (a run or bench directory's manifest), when it may be used
    without the user naming it on this command line.

    A manifest can be edited (a received run directory, a shared bench directory), so a part
    that talks to a server (``openai:URL``, ``service:URL``) is never taken from it: resuming
    would send the prompts, the programs and ``$OPENAI_API_KEY`` (or the job service's key) to
    whatever URL the file names. Such a spec is used only when the user names it again with
    ``flag``.

    Raises:
        InvalidArgument: ``spec`` talks to a server; the message shows its URL and the flag.
    """
    if spec.startswith(SERVER_SPECS):
        shown = spec if len(spec) <= 200 else spec[:200] + "..."
        raise InvalidArgument(
            f"{where} records {flag} {shown!r}, which talks to a server; resume sends prompts "
            f"and an API key from the environment only to a server named on this command "
            f"line: pass {flag} SPEC (e.g. {flag} {shown}) if you trust that URL"
        )
    return spec
