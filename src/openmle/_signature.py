"""Normalised error signatures: the same failure gives the same string across runs.

A signature is ``"<ExceptionType>: <message>"`` taken from the last Python traceback in the
logs, with paths, numbers, hex ids and quoted values replaced by placeholders, so Debug memory
and the task board can group repeated errors. Logs without a traceback give a signature from
the outcome alone (e.g. ``"timeout"``).
"""

from __future__ import annotations

import re

__all__ = ["error_signature", "normalise_message"]

_EXC_LINE = re.compile(
    r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Fault|Kill"
    r"|Iteration|Timeout))(?::\s?(?P<msg>.*))?$"
)
_TRACEBACK = "Traceback (most recent call last):"
_SUBS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-+@~]+)+/?"), "<path>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "<hex>"),
    (re.compile(r"'[^']*'"), "'<str>'"),
    (re.compile(r'"[^"]*"'), '"<str>"'),
    (re.compile(r"(?<![A-Za-z_])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)
_MAX_LEN = 200


def normalise_message(message: str) -> str:
    """Strip paths, hex ids, quoted values and numbers from ``message``; collapse spaces."""
    for pattern, repl in _SUBS:
        message = pattern.sub(repl, message)
    return message.strip()[:_MAX_LEN]


def error_signature(logs: str, *, fallback: str | None = None) -> str | None:
    """Return the normalised signature of the last exception in ``logs``.

    Args:
        logs: captured stdout/stderr of a run.
        fallback: what to return when the logs hold no recognisable exception (for example the
            outcome name such as ``"timeout"``); None by default.

    Returns:
        ``"ValueError: could not convert string to float: '<str>'"``-style text, or ``fallback``.
    """
    lines = logs.splitlines()
    start = 0
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].strip() == _TRACEBACK:
            start = i
            break
    found: str | None = None
    for line in lines[start:]:
        m = _EXC_LINE.match(line.strip())
        if m:
            exc_type = m.group("type").rsplit(".", 1)[-1]
            msg = m.group("msg") or ""
            found = f"{exc_type}: {normalise_message(msg)}" if msg.strip() else exc_type
    return found if found is not None else fallback
