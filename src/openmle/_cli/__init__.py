"""The ``openmle`` command line: ``openmle <command> --help`` for every command.

Each command group lives in its own private module exposing ``register(subparsers)``; the
modules are listed in ``_COMMAND_MODULES`` and imported when the parser is built.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from openmle._version import __version__
from openmle.errors import OpenMLEError

__all__ = ["build_parser", "main"]

_COMMAND_MODULES: tuple[str, ...] = (
    "openmle._cli._demo",
    "openmle._cli._serve",
    "openmle._cli._task",
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


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
        return int(handler(args))
    except OpenMLEError as exc:
        print(f"openmle: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("openmle: interrupted", file=sys.stderr)
        return 130
