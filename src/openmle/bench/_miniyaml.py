"""A reader for the small subset of YAML that MLE-bench's ``config.yaml`` and
``checksums.yaml`` use, for when PyYAML is not installed.

Supported: block mappings and block sequences by indentation (sequence items may be
scalars or mappings), ``#`` comments, empty flow collections (``[]``, ``{}``), and plain,
single- and double-quoted scalars resolved as PyYAML's ``safe_load`` resolves them (YAML 1.1:
``null``/``~``/empty, ``true``/``false``/``yes``/``no``/``on``/``off``, integers with ``_``
separators, ``0x``/``0o`` integers, floats with a dot, ``.inf``/``.nan``). Anything else
(anchors, aliases, tags, block scalars, non-empty flow collections, multi-line scalars)
raises ``ValueError`` naming the line, so a file outside the subset is refused rather than
misread.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["load"]

_NULL = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}
_FALSE = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"}
_INT = re.compile(r"^[-+]?(0|[1-9][0-9_]*)$")
_HEX = re.compile(r"^[-+]?0x[0-9a-fA-F_]+$")
_OCT = re.compile(r"^[-+]?0[0-7_]+$")
_FLOAT = re.compile(r"^[-+]?([0-9][0-9_]*)?\.[0-9_]*([eE][-+][0-9]+)?$")
_INF = re.compile(r"^[-+]?\.(inf|Inf|INF)$")
_NAN = re.compile(r"^\.(nan|NaN|NAN)$")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/", "0": "\0", "r": "\r"}

# PyYAML reads "y" and "n" as strings; only the words above in their YAML 1.1 forms are bools
_TRUE -= {"y", "Y"}
_FALSE -= {"n", "N"}


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"" and (i == 0 or line[i - 1] in " :-[{,"):
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def _quoted(s: str, where: str) -> str:
    """A single- or double-quoted scalar's text."""
    q = s[0]
    if len(s) < 2 or s[-1] != q:
        raise ValueError(f"{where}: unterminated quoted string")
    if q == "'":
        return s[1:-1].replace("''", "'")
    out, i, body = [], 0, s[1:-1]
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in _ESCAPES:
                raise ValueError(f"{where}: unsupported escape \\{nxt}")
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _number(s: str) -> int | float | None:
    """``s`` as PyYAML resolves an int or float, else None."""
    if _INT.match(s):
        return int(s.replace("_", ""))
    if _HEX.match(s):
        return int(s.replace("_", ""), 16)
    if _OCT.match(s) and s.lstrip("+-") != "0":
        return int(s.replace("_", ""), 8)
    if _FLOAT.match(s) and any(c.isdigit() for c in s):
        return float(s.replace("_", ""))
    if _INF.match(s):
        return -math.inf if s.startswith("-") else math.inf
    if _NAN.match(s):
        return math.nan
    return None


def _scalar(text: str, where: str) -> Any:
    s = text.strip()
    if not s:
        return None
    if s[0] in "'\"":
        return _quoted(s, where)
    if s in ("[]", "{}"):
        return [] if s == "[]" else {}
    if s[0] in "&*!|>[{@`%" or s == "-" or s.startswith(("- ", "? ")):
        raise ValueError(f"{where}: {s[:20]!r} is outside the YAML subset this reader supports")
    if s in _NULL:
        return None
    if s in _TRUE or s in _FALSE:
        return s in _TRUE
    number = _number(s)
    if number is not None:
        return number
    if ": " in s or s.endswith(":"):
        raise ValueError(f"{where}: a nested mapping on one line is outside the subset")
    return s


def _split_key(content: str, where: str) -> tuple[str, str] | None:
    """``key: rest`` -> (key, rest); None when ``content`` is not a mapping entry."""
    if content[0] in "'\"":
        q = content[0]
        end = content.find(q, 1)
        while q == "'" and end != -1 and content[end + 1 : end + 2] == "'":
            end = content.find(q, end + 2)
        if end == -1:
            raise ValueError(f"{where}: unterminated quoted key")
        rest = content[end + 1 :]
        if not rest.startswith(":") or (len(rest) > 1 and rest[1] != " "):
            return None
        return str(_scalar(content[: end + 1], where)), rest[1:]
    m = re.match(r"^([^#:]+?|[^#]*?[^ ]):( |$)", content)
    if m is None:
        return None
    return m.group(1), content[m.end() :]


def load(text: str) -> Any:
    """Parse ``text`` (see the module doc) into dicts, lists and scalars.

    Raises:
        ValueError: the text is outside the supported subset or malformed (names the line).
    """
    lines: list[tuple[int, str, int]] = []
    for n, raw in enumerate(text.splitlines(), start=1):
        if "\t" in raw[: len(raw) - len(raw.lstrip())]:
            raise ValueError(f"line {n}: tab indentation")
        stripped = _strip_comment(raw)
        if stripped.strip() in ("", "---"):
            continue
        lines.append((len(stripped) - len(stripped.lstrip(" ")), stripped.strip(), n))
    if not lines:
        return None
    value, pos = _block(lines, 0, lines[0][0])
    if pos != len(lines):
        raise ValueError(f"line {lines[pos][2]}: unexpected indentation")
    return value


def _block(lines: list[tuple[int, str, int]], pos: int, indent: int) -> tuple[Any, int]:
    if lines[pos][1].startswith("- ") or lines[pos][1] == "-":
        return _sequence(lines, pos, indent)
    return _mapping(lines, pos, indent)


def _value(
    lines: list[tuple[int, str, int]], pos: int, rest: str, parent: int, where: str
) -> tuple[Any, int]:
    """The value after ``key:`` or ``-``: inline, or a nested block on the next lines."""
    if rest.strip():
        return _scalar(rest, where), pos
    if pos < len(lines) and (
        lines[pos][0] > parent or (lines[pos][0] == parent and lines[pos][1].startswith("-"))
    ):
        return _block(lines, pos, lines[pos][0])
    return None, pos


def _mapping(lines: list[tuple[int, str, int]], pos: int, indent: int) -> tuple[Any, int]:
    out: dict[Any, Any] = {}
    while pos < len(lines) and lines[pos][0] == indent:
        _, content, n = lines[pos]
        where = f"line {n}"
        if content.startswith("- "):
            break
        kv = _split_key(content, where)
        if kv is None:
            raise ValueError(f"{where}: expected 'key: value'")
        k, rest = kv
        key = _scalar(k, where) if k[:1] not in "'\"" else k
        if key in out:
            raise ValueError(f"{where}: duplicate key {key!r}")
        out[key], pos = _value(lines, pos + 1, rest, indent, where)
    if pos < len(lines) and lines[pos][0] > indent:
        raise ValueError(f"line {lines[pos][2]}: unexpected indentation")
    return out, pos


def _sequence(lines: list[tuple[int, str, int]], pos: int, indent: int) -> tuple[Any, int]:
    out: list[Any] = []
    while pos < len(lines) and lines[pos][0] == indent and lines[pos][1].startswith("-"):
        _, content, n = lines[pos]
        where = f"line {n}"
        body = content[1:]
        if body and not body.startswith(" "):
            raise ValueError(f"{where}: expected '- item'")
        item = body.strip()
        if not item:
            value, pos = _value(lines, pos + 1, "", indent, where)
            out.append(value)
            continue
        inner = indent + 1 + (len(body) - len(body.lstrip(" ")))
        if _split_key(item, where) is not None and item[0] not in "[{":
            # a mapping item: its first entry on the dash line, the rest aligned below
            sub = [(inner, item, n), *lines[pos + 1 :]]
            value, used = _mapping(sub, 0, inner)
            out.append(value)
            pos = pos + used
        else:
            out.append(_scalar(item, where))
            pos += 1
    return out, pos
