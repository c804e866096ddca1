"""The ``openmle`` command line: ``openmle <command> --help`` for every command.

Each command group lives in its own private module exposing ``register(subparsers)``; the
modules are listed in ``_COMMAND_MODULES`` and imported when the parser is built.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Iterator, Sequence

from openmle._version import __version__
from openmle.errors import OpenMLEError

__all__ = ["build_parser", "main"]

_COMMAND_MODULES: tuple[str, ...] = (
    "openmle._cli._search",
    "openmle._cli._serve",
    "openmle._cli._task",
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""Interrupted by SIGINT or SIGTERM (the run directory can be resumed)."""


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``openmle`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="openmle",
        description="Search, grade and train machine-learning-engineering agents.",
    )
    parser.add_argument("--version", action="version", version=f"openmle {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code (0 ok, 1 failure, 2 usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        with _sigterm_as_sigint():
            return int(handler(args))
    except OpenMLEError as exc:
        print(f"openmle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("openmle: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


@contextlib.contextmanager
def _sigterm_as_sigint() -> Iterator[None]:
    """Handle SIGTERM (what ``timeout``, systemd, Kubernetes and Slurm send) as SIGINT.

    The handler re-sends the process SIGINT, so a terminated command stops exactly as an
    interrupted one does: the running search is cancelled, its sandboxes are cleaned up and
    closed, the run directory stays resumable, and the exit code is 130.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, frame: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
