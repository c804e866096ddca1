"""Ctrl-C and SIGTERM for a whole ``openmle`` command: the first stops it, a second is
absorbed while it cleans up, a third exits at once.

The rule (stated in ``docs/reference/cli.md``):

1. The first SIGINT or SIGTERM stops the command. Inside :func:`run_async` the event loop's
   main task is cancelled (as asyncio's own handler does): the search, bench or training
   stops, its programs are killed, its journal is sealed, its sandbox closed; elsewhere a
   ``KeyboardInterrupt`` is raised. The command says how to continue and exits 130.
2. A second one while it shuts down is absorbed: a line on stderr says it goes on cleaning up.
3. A third exits at once, status 130: the programs this process's sandboxes started are
   SIGKILLed first (:func:`openmle.backends.kill_own_programs`); what the cleanup had not
   removed yet (a workspace, a container) is left to the next run's stale sweep. The run
   directory stays resumable (every step is committed to its journal before it counts).

Why not asyncio's handler (``anyio.run`` installs it when SIGINT has Python's default
handler): at the second Ctrl-C it raises ``KeyboardInterrupt`` wherever the loop happens to
be, in the middle of the shielded cleanup, and leaves the event loop with its tasks half run:
programs outlived the command, and the interpreter could wait forever at exit for worker
threads that the abandoned main task was to stop. And after the command has returned, Python
itself restores SIGINT's default action while it tears down, so a late Ctrl-C killed the
process by signal (wait status -2) instead of letting it exit 130: :func:`handled` keeps this
module's handler until the atexit handlers ran, then ignores both signals for the last
milliseconds of the interpreter's teardown.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import anyio

from openmle._cli._common import EXIT_INTERRUPTED, note_signal

__all__ = ["FORCE_AFTER", "deferred", "handled", "run_async"]

T = TypeVar("T")

FORCE_AFTER = 3
"""The signal (SIGINT or SIGTERM, counted together) that exits at once."""

_AGAIN = (
    b"openmle: interrupted again: still cleaning up (interrupt once more to exit at once; "
    b"the run's programs are killed, its temporary files may be left)\n"
)
_NOW = b"openmle: interrupted three times: exiting now, after killing the run's programs\n"


class _State:
    """What the handler knows; one per process (signals reach the main thread only)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.count = 0  # signals received since the command started
        self.task: asyncio.Task[Any] | None = None  # run_async's main task, while it runs
        self.held = 0  # depth of deferred() blocks
        self.pending = False  # the first signal came inside deferred()
        self.returned = False  # the command returned: what is left is the interpreter's exit


_state = _State()


def _on_signal(signum: int, frame: object) -> None:
    _state.count += 1
    if _state.count == 1 and not _state.returned:
        note_signal(signum)  # the interrupt line names it
        if _state.held:
            _state.pending = True
            return
        task = _state.task
        if task is not None and not task.done():
            task.cancel()
            task.get_loop().call_soon_threadsafe(_nothing)  # wake a loop blocked in select()
            return
        raise KeyboardInterrupt
    if _state.count >= FORCE_AFTER:
        _exit_now()
    os.write(2, _AGAIN)  # not sys.stderr: the main thread may be inside its write


def _nothing() -> None:
    return None


def _exit_now() -> None:
    """Kill this process's programs and exit 130 at once (no cleanup, no atexit)."""
    with contextlib.suppress(BaseException):
        os.write(2, _NOW)
    with contextlib.suppress(BaseException):
        from openmle.backends import kill_own_programs

        kill_own_programs()
    os._exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def handled(*, process: bool) -> Iterator[None]:
    """Handle SIGINT and SIGTERM by the rule above for the block (the whole command).

    A command started with SIGINT ignored (a background job of a shell script, whose ``&``
    ignores it) keeps ignoring it; SIGTERM (what ``timeout``, systemd, Kubernetes and Slurm
    send) is still handled. ``process``: the block is the whole ``openmle`` process
    (``main()`` run as the program): the handler then stays after the block, through the
    interpreter's exit (joining threads, atexit), and both signals are ignored for the
    teardown after that. Otherwise (an in-process caller) the previous handlers come back.
    Off the main thread (where no signal arrives) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.reset()
    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        if sig == signal.SIGINT and signal.getsignal(sig) is signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, _on_signal)
    if process:
        atexit.register(_ignore_late, tuple(previous))  # registered first: runs last
    try:
        yield
    finally:
        _state.returned = True
        if not process:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _ignore_late(signals: tuple[int, ...]) -> None:
    """The last atexit handler: ignore ``signals`` while the interpreter tears down (it would
    otherwise restore their default action, death by signal, for that time).
    """
    for sig in signals:
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold off the first interrupt for the block (closing a sandbox: it must not be left
    half closed) and raise it, as ``KeyboardInterrupt``, when the block ends. Later signals
    follow the rule (the third exits at once).
    """
    _state.held += 1
    try:
        yield
    finally:
        _state.held -= 1
        if not _state.held and _state.pending:
            _state.pending = False
            raise KeyboardInterrupt


def run_async(fn: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(fn)`` whose main task the first interrupt cancels (see the rule above).

    Returns what ``fn`` returns; an interrupted run raises ``KeyboardInterrupt`` (as
    ``anyio.run`` under asyncio's handler did), unless ``fn`` handled the cancellation and
    returned.
    """

    async def main() -> T:
        _state.task = asyncio.current_task()
        try:
            return await fn()
        finally:
            _state.task = None

    try:
        return anyio.run(main)
    except asyncio.CancelledError:
        if _state.count:
            raise KeyboardInterrupt from None
        raise
    except BaseExceptionGroup as group:
        if _state.count and group.split((asyncio.CancelledError, KeyboardInterrupt))[1] is None:
            raise KeyboardInterrupt from None
        raise
