"""Content fingerprints of raw data, for the decontamination blocklist.

Two kinds, each a blocklist line (see :mod:`openmle.gym._decontam`):

- ``sha256:<hex>``: a file's bytes. A renamed copy of a file (another folder or file name)
  has the same one.
- ``table:<hex>``: a table's content (:func:`table_fingerprint`), the same for a copy that was
  renamed **and** re-saved: another line ending, byte-order mark, quoting, delimiter (CSV or
  TSV), number format (``1``, ``1.0``, ``1.000``), row order or column order, or converted
  between CSV and JSON records. A changed cell, row or column name changes it.

:func:`fingerprint_lines` lists both for every file under a folder: what
``openmle task blocklist PATH`` prints and appends to a blocklist file, so a user who holds
evaluation data (a benchmark's download that openmle cannot ship hashes of) can refuse it in
every later build, renamed or not.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterable
from pathlib import Path

from openmle.builder._inventory import read_records, read_table
from openmle.errors import InvalidArgument

__all__ = ["TABLE_SUFFIXES", "fingerprint_lines", "table_fingerprint"]

TABLE_SUFFIXES = (".csv", ".tsv", ".json", ".jsonl")
"""The files that get a ``table:`` fingerprint (read as tables, as the inventory reads them)."""


def _cell(text: str) -> str:
    text = text.strip()
    try:
        x = float(text)
    except ValueError:
        return text
    return format(x, ".12g") if math.isfinite(x) else text.lower()


def table_fingerprint(path: Path | str) -> str | None:
    """The SHA-256 (hex) of a table's content in a canonical form, or None when ``path`` is
    not a readable table (:data:`TABLE_SUFFIXES`, at most the inventory's size bounds).

    The canonical form: the columns sorted by their (stripped) names, every cell stripped and
    a number written as ``format(x, ".12g")``, the rows sorted, as compact JSON in UTF-8. So
    a copy that differs in line endings, byte-order mark, quoting, CSV/TSV/JSON form, number
    format, row order or column order has the same fingerprint; any changed cell does not.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        return None
    try:
        if suffix in (".json", ".jsonl"):
            header, rows = read_records(p)
        else:
            header, rows = read_table(p, "\t" if suffix == ".tsv" else ",")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, csv.Error):
        return None
    names = [h.strip() for h in header]
    order = sorted(range(len(names)), key=lambda j: (names[j], j))
    body = sorted([_cell(r[j]) for j in order] for r in rows)
    canonical = json.dumps([[names[j] for j in order], body], ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fingerprint_lines(paths: Iterable[Path | str], *, name: str = "") -> list[str]:
    """Blocklist lines for every regular file under ``paths`` (files or folders, recursed,
    symbolic links skipped): ``sha256:<hex>  # <file>`` and, for a table,
    ``table:<hex>  # <file> (table)``; first ``name:<name>`` when ``name`` is given.

    Raises:
        InvalidArgument: a path that does not exist (names it and the fix).
    """
    lines = [f"name:{name.strip()}"] if name.strip() else []
    for given in paths:
        root = Path(given).expanduser()
        if not root.exists():
            raise InvalidArgument(f"PATH {str(given)!r} does not exist; give a data file or folder")
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for f in files:
            if f.is_symlink() or not f.is_file():
                continue
            shown = f.name if f == root else f.relative_to(root).as_posix()
            shown = "".join(c if c.isprintable() and c != "#" else "?" for c in shown)[:120]
            lines.append(f"sha256:{_file_sha256(f)}  # {shown}")
            table = table_fingerprint(f)
            if table is not None:
                lines.append(f"table:{table}  # {shown} (table)")
    return lines
