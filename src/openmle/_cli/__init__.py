"""The ``openmle`` command line: ``openmle <command> --help`` for every command.

Each command group lives in its own private module exposing ``register(subparsers)``; the
modules are listed in ``_COMMAND_MODULES`` and imported when the parser is built.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import re
from collections.abc import Sequence
from typing import NoReturn

from openmle._cli._common import (
    DEBUG_ENV,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    debug_enabled,
    interrupted,
    run_guarded,
    use_app_dir,
)
from openmle._cli._interrupts import handled
from openmle._cli._pid1 import init_if_pid1
from openmle._version import __version__

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "interrupted",
    "main",
]

_COMMAND_MODULES: tuple[str, ...] = (
    "openmle._cli._bench",
    "openmle._cli._search",
    "openmle._cli._serve",
    "openmle._cli._task",
    "openmle._cli._train",
)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line in the CLI's format.

    ``openmle search: error: argument --workers: expected an integer >= 1, got '0'; see
    openmle search --help`` on stderr, exit 2 (no usage block). Subcommand parsers are of
    this class too (``add_subparsers`` makes parsers of its parser's class).
    """

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE; see PROG --help`` on stderr and exit 2."""
        self.exit(EXIT_USAGE, f"{self.prog}: error: {_one_line(message)}; see {self.prog} --help\n")


_ARGUMENT = re.compile(r"argument (?P<flags>[^:\s]+): (?P<rest>.*)", re.DOTALL)


def _one_line(message: str) -> str:
    """``message`` (argparse's) on one line, without argparse's ``argument --flag:`` when the
    rest already starts by naming the flag (``argument --track: --track: unknown ...``).
    """
    text = " ".join(message.split())
    m = _ARGUMENT.fullmatch(text)
    if m is not None and m["rest"].startswith(tuple(m["flags"].split("/"))):
        return m["rest"]
    return text


def build_parser() -> argparse.ArgumentParser:
    """Build the full ``openmle`` argument parser (usage errors are one line, exit 2)."""
    parser = _Parser(
        prog="openmle",
        description="Search, grade and train machine-learning-engineering agents.",
    )
    parser.add_argument("--version", action="version", version=f"openmle {__version__}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help=f"print the traceback of an error (also: {DEBUG_ENV}=1 in the environment)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code.

    0 ok, 1 the command failed, 2 a usage error (a bad flag or value), 130 interrupted;
    see ``openmle._cli._common`` and ``docs/reference/errors.md``. Run as the ``openmle``
    program (``argv`` None) by PID 1 of a container, it first forks a minimal init that
    forwards signals and reaps orphans (``openmle._cli._pid1``; off with
    ``OPENMLE_NO_INIT=1``); an in-process caller (``argv`` given) is never forked.
    """
    if argv is None:
        init_if_pid1()  # before the command modules' imports and any thread
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command that got them, with its own --help
        _refuse_unknown(_chosen(parser, args), extra)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    debug = debug_enabled(bool(getattr(args, "debug", False)))

    def call() -> int:
        use_app_dir(getattr(args, "app_dir", None))
        return int(handler(args))

    # Ctrl-C and SIGTERM: the first stops the command, a second is absorbed while it cleans
    # up, a third exits at once (openmle._cli._interrupts; docs/reference/cli.md).
    with handled(process=argv is None):
        return run_guarded(call, debug=debug)


def _chosen(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost (sub)command parser ``args`` went through (``openmle bench doctor``)."""
    current = parser
    while True:
        sub = next((a for a in current._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, sub.dest, None) if sub is not None else None
        if sub is None or name not in sub.choices:
            return current
        current = sub.choices[name]


def _refuse_unknown(parser: argparse.ArgumentParser, extra: Sequence[str]) -> None:
    """Exit 2 with one line from ``parser`` (its prog and ``--help``), naming the arguments it
    does not take and, for a misspelt flag, the closest one it does (``--tsk``: did you mean
    ``--task``?).
    """
    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    hints = []
    for arg in extra:
        if arg.startswith("--"):
            close = difflib.get_close_matches(arg.partition("=")[0], flags, n=1, cutoff=0.6)
            if close:
                hints.append(f"{arg.partition('=')[0]}: did you mean {close[0]}?")
    why = f"unrecognized arguments: {' '.join(extra)}"
    parser.error(why + (f" ({'; '.join(hints)})" if hints else ""))
