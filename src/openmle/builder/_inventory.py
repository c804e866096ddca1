"""Inventory: a deterministic description of the raw data, and a bounded text of it for a model.

Nothing here runs the data's code or trusts its names: files are read as bytes and CSV text,
statistics are computed with the standard library, and every string that goes into the text is
clipped, so a hostile file cannot blow up the prompt.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import Any

from attrs import field, frozen

from openmle._readback import loads_untrusted
from openmle.builder._conventions import (
    CLASS_FILE_COLUMN,
    CLASS_LABEL_COLUMN,
    Hints,
    read_hints,
)
from openmle.builder._intake import Intake

__all__ = ["CLASS_FOLDERS", "ColumnStats", "FileInfo", "Inventory", "class_folders", "inventory"]

MAX_TEXT_CHARS = 6000
"""The inventory text's length bound."""
MAX_CSV_BYTES = 256 * 1024 * 1024
_MAX_UNIQUE = 1000
_MAX_NAME = 60
_ID_WORDS = ("id", "key", "index", "uuid")
_TARGET_WORDS = ("target", "label", "class", "y", "outcome", "species", "churn", "price")
_TABULAR = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl"}
IMAGE_FORMATS = ("png", "jpg", "jpeg", "bmp", "gif", "webp", "tif", "tiff")
"""File formats (suffixes) the builder treats as images."""
_GROUP_AT = 5
"""More non-table files than this in one folder and format are one line of the text."""


def _clip(text: str, n: int = _MAX_NAME) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= n else text[: n - 3] + "..."


def _number(cell: str) -> float | None:
    try:
        x = float(cell)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


@frozen(kw_only=True)
class ColumnStats:
    """One column's statistics.

    Args:
        name: the column name.
        kind: ``"numeric"`` (every non-empty cell a finite number), ``"integer"`` (numeric with
            whole values) or ``"categorical"``.
        missing: empty cells.
        unique: distinct non-empty values (capped at 1000; ``unique_capped`` says so).
        minimum, maximum, mean: for numeric columns.
        top: up to five most frequent values (categorical or low-cardinality columns).
        all_unique: every cell filled and no value repeated (exact, beyond the ``unique``
            cap: what an id column needs).
        mean_words: categorical columns: the mean number of whitespace-separated words per
            filled cell (free text has many; a name or a code one to three).
    """

    name: str
    kind: str
    missing: int
    unique: int
    unique_capped: bool
    minimum: float | None = None
    maximum: float | None = None
    mean: float | None = None
    top: tuple[str, ...] = ()
    all_unique: bool = False
    mean_words: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "kind": self.kind,
            "missing": self.missing,
            "unique": self.unique,
            "unique_capped": self.unique_capped,
            "minimum": self.minimum,
            "maximum": self.maximum,
            "mean": self.mean,
            "top": list(self.top),
            "all_unique": self.all_unique,
            "mean_words": self.mean_words,
        }


@frozen(kw_only=True)
class FileInfo:
    """One raw file: its format and, for a table, schema, row count and column statistics."""

    path: str
    format: str
    size: int
    rows: int | None = None
    columns: tuple[ColumnStats, ...] = ()
    error: str = ""

    def column(self, name: str) -> ColumnStats | None:
        """The statistics of column ``name``, or None."""
        return next((c for c in self.columns if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "path": self.path,
            "format": self.format,
            "size": self.size,
            "rows": self.rows,
            "columns": [c.to_dict() for c in self.columns],
            "error": self.error,
        }


@frozen(kw_only=True)
class Inventory:
    """The inventory stage's record.

    Args:
        files: every raw file, sorted by path.
        id_candidates: ``file:column`` pairs whose values are unique and whose name looks like
            an id.
        target_candidates: ``file:column`` pairs that look like a label (by name, else the
            table's last column), most likely first; the sample submission's target first.
        hints: what the raw folder's sample submission and description, and the user's goal,
            say the task is (see :mod:`openmle.builder._conventions`).
    """

    files: tuple[FileInfo, ...]
    id_candidates: tuple[str, ...]
    target_candidates: tuple[str, ...]
    hints: Hints = field(factory=Hints)

    def file(self, path: str) -> FileInfo | None:
        """The file at ``path`` (relative to the raw directory), or None."""
        return next((f for f in self.files if f.path == path), None)

    @property
    def tables(self) -> tuple[FileInfo, ...]:
        """The files read as tables."""
        return tuple(f for f in self.files if f.rows is not None)

    def goal_warning(self) -> str | None:
        """Why the user's goal did not choose the target: it names no column (the words and
        the columns of the labelled table, else of the first table); None without a goal, or
        when the goal names a column.
        """
        hints = self.hints
        if not hints.goal or hints.goal_target is not None:
            return None
        tables = [f for f in self.tables if "submission" not in f.path.lower()] or list(self.tables)
        table = next((f for f in tables if f.path == hints.labelled_file), None)
        table = table or (tables[0] if tables else None)
        if table is None:
            return None
        names = [_clip(c.name) for c in table.columns[:30]]
        more = f", ... ({len(table.columns)} in all)" if len(table.columns) > 30 else ""
        example = self.target_candidates[0].rpartition(":")[2] if self.target_candidates else ""
        hint = f', e.g. --goal "predict {_clip(example)}"' if example else ""
        return (
            f"the goal (--goal) {_clip(hints.goal, 200)!r} names no column of "
            f"{_clip(table.path)} (columns: {', '.join(names)}{more}), so the target is "
            f"the builder's guess: name the column to predict{hint}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "files": [f.to_dict() for f in self.files],
            "id_candidates": list(self.id_candidates),
            "target_candidates": list(self.target_candidates),
            "hints": self.hints.to_dict(),
        }

    def text(self, limit: int = MAX_TEXT_CHARS) -> str:
        """A compact text of the inventory, at most ``limit`` characters."""
        lines = [f"{len(self.files)} raw file(s)."]
        groups = _file_groups(self.files)
        for f in self.files:
            group = groups.get(f.path)
            if group is not None:
                if group:
                    lines.append(group)
                continue
            head = f"- {_clip(f.path)} ({f.format}, {f.size} bytes"
            head += f", {f.rows} rows)" if f.rows is not None else ")"
            lines.append(head + (f" unreadable: {_clip(f.error, 120)}" if f.error else ""))
            for c in f.columns:
                more = "+" if c.unique_capped else ""
                line = f"    {_clip(c.name)}: {c.kind}, {c.unique}{more} unique"
                line += f", {c.missing} missing"
                if c.minimum is not None:
                    line += f", range [{c.minimum:.4g}, {c.maximum:.4g}], mean {c.mean:.4g}"
                if c.top:
                    line += ", top " + ", ".join(_clip(t, 20) for t in c.top)
                if c.mean_words is not None and c.mean_words >= TEXT_WORDS:
                    line += f", free text ({c.mean_words:.1f} words per cell)"
                lines.append(line)
        lines.append("id candidates: " + (", ".join(map(_clip, self.id_candidates)) or "none"))
        lines.append(
            "target candidates: " + (", ".join(map(_clip, self.target_candidates)) or "none")
        )
        if not self.hints.empty:  # first: a wide table's columns must not crowd them out
            lines.insert(0, "conventions (follow them):\n" + self.hints.text())
        text = "\n".join(lines)
        return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"


TEXT_WORDS = 5.0
"""A categorical column with at least this many words per cell on average is free text."""


def image_folders(files: tuple[FileInfo, ...]) -> dict[str, int]:
    """Folders (relative, ``""`` for the top) holding image files, with their image counts,
    counting every image under the folder (so ``train/`` counts ``train/cat/1.png``).
    """
    out: dict[str, int] = {}
    for f in files:
        if f.format not in IMAGE_FORMATS:
            continue
        parts = f.path.split("/")[:-1]
        for k in range(len(parts) + 1):
            key = "/".join(parts[:k])
            out[key] = out.get(key, 0) + 1
    return out


CLASS_FOLDERS = "image_folders"
"""The format of a per-class image folder read as a table (see :func:`class_folders`)."""


def class_folders(paths: list[str] | tuple[str, ...]) -> dict[str, list[tuple[str, str]]]:
    """Per-class image folders among the raw files' relative ``paths``.

    A folder is a class root when at least two of its direct subfolders (their names not
    starting with ``.``, none named like a split or a file kind: ``train``, ``test_images``,
    ``masks``...) hold image files directly (``train/cat/1.png``, ``train/dog/2.png``):
    each such image is a labelled row whose label is its subfolder's name. Images directly in
    the root, deeper than one level below it, or elsewhere (an unlabeled ``test/*.png``) are
    not rows. Returns each root (``""`` for the top folder) with its rows, ``(path under the
    root, label)``, sorted by path; the offline prepare.py reads the same rows.
    """
    by_root: dict[str, dict[str, list[str]]] = {}
    for path in paths:
        parts = path.split("/")
        if len(parts) < 2 or parts[-1].rsplit(".", 1)[-1].lower() not in IMAGE_FORMATS:
            continue
        if "." not in parts[-1] or parts[-2].startswith("."):
            continue
        root = "/".join(parts[:-2])
        by_root.setdefault(root, {}).setdefault(parts[-2], []).append(parts[-1])
    return {
        root: sorted(
            (f"{label}/{name}", label) for label, names in classes.items() for name in names
        )
        for root, classes in sorted(by_root.items())
        if len(classes) >= 2 and not any(_not_a_class(c) for c in classes)
    }


_NOT_CLASSES = frozenset(
    [
        "train",
        "training",
        "test",
        "testing",
        "val",
        "valid",
        "validation",
        "dev",
        "eval",
        "evaluation",
        "holdout",
        "unlabeled",
        "unlabelled",
        "images",
        "image",
        "imgs",
        "img",
        "masks",
        "mask",
        "labels",
    ]
)
"""Words that name a split or a kind of file, not a class: a folder holding ``train/`` and
``test/`` (or ``train_images/``, ``masks/``) is not a per-class image folder."""


def _not_a_class(name: str) -> bool:
    return any(w in _NOT_CLASSES for w in re.split(r"[^a-z0-9]+", name.lower()))


def class_table_path(root: str) -> str:
    """The inventory path of the per-class image folder ``root``: ``root/`` (``./`` for the
    top folder); a spec's ``data_file`` names it.
    """
    return f"{root}/" if root else "./"


def class_table_root(path: str) -> str:
    """The folder of the per-class image table ``path`` (the inverse of
    :func:`class_table_path`).
    """
    return "" if path == "./" else path.rstrip("/")


def _class_tables(
    record: Intake, folders: dict[str, list[tuple[str, str]]], hints: Hints
) -> list[FileInfo]:
    """A table for each per-class image folder: columns ``file`` (the image's path under the
    folder; its first part is the label, so it is never a feature) and ``label``. When a raw
    sample submission answers for the folder (``hints.labelled_file``), the first is named as
    its id column, and the label as its answer column (its ``species``) when that holds the
    classes (``"labels"``).
    """
    sizes = {f.path: f.size for f in record.files}
    out = []
    for root, rows in folders.items():
        prefix = f"{root}/" if root else ""
        file, label = CLASS_FILE_COLUMN, CLASS_LABEL_COLUMN
        if hints.labelled_file == class_table_path(root):
            file = hints.id_column or file
            if hints.answer_format == "labels":
                label = hints.target or label
        out.append(
            FileInfo(
                path=class_table_path(root),
                format=CLASS_FOLDERS,
                size=sum(sizes[prefix + p] for p, _ in rows),
                rows=len(rows),
                columns=(
                    _column_stats(file, [p for p, _ in rows]),
                    _column_stats(label, [c for _, c in rows]),
                ),
            )
        )
    return out


def _file_groups(files: tuple[FileInfo, ...]) -> dict[str, str]:
    """Non-table files in a folder and format with more than :data:`_GROUP_AT` members: the
    first file maps to one summary line, the others to ``""`` (the text lists none of them).
    """
    members: dict[tuple[str, str], list[FileInfo]] = {}
    for f in files:
        if f.rows is None and not f.error:
            folder = f.path.rsplit("/", 1)[0] if "/" in f.path else ""
            members.setdefault((folder, f.format), []).append(f)
    out: dict[str, str] = {}
    for (folder, fmt), group in members.items():
        if len(group) <= _GROUP_AT:
            continue
        size = sum(f.size for f in group)
        where = _clip(folder + "/", 80) if folder else "the top folder"
        out[group[0].path] = (
            f"- {where}: {len(group)} {fmt} files ({size} bytes), e.g. {_clip(group[0].path)}"
        )
        out.update({f.path: "" for f in group[1:]})
    return out


def _column_stats(name: str, cells: list[str]) -> ColumnStats:
    values = [c for c in cells if c.strip() != ""]
    missing = len(cells) - len(values)
    counts: dict[str, int] = {}
    capped = False
    for v in values:
        if v in counts:
            counts[v] += 1
        elif len(counts) < _MAX_UNIQUE:
            counts[v] = 1
        else:
            capped = True
    numbers = [_number(v) for v in values]
    all_unique = bool(values) and not missing and len(set(values)) == len(values)
    top = tuple(k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5])
    if values and all(x is not None for x in numbers):
        xs = [x for x in numbers if x is not None]
        kind = "integer" if all(x.is_integer() for x in xs) else "numeric"
        return ColumnStats(
            name=name,
            kind=kind,
            missing=missing,
            unique=len(counts),
            unique_capped=capped,
            minimum=min(xs),
            maximum=max(xs),
            mean=math.fsum(xs) / len(xs),
            top=top if len(counts) <= 20 else (),
            all_unique=all_unique,
        )
    return ColumnStats(
        name=name,
        kind="categorical",
        missing=missing,
        unique=len(counts),
        unique_capped=capped,
        top=top,
        all_unique=all_unique,
        mean_words=sum(len(v.split()) for v in values) / len(values) if values else None,
    )


def read_table(path: Path, delimiter: str = ",") -> tuple[list[str], list[list[str]]]:
    """Read a CSV/TSV as a header and rows of strings (UTF-8, BOM allowed).

    Raises:
        ValueError: empty, too large, or a row with a different number of cells.
    """
    if path.stat().st_size > MAX_CSV_BYTES:
        raise ValueError(f"larger than {MAX_CSV_BYTES} bytes")
    text = path.read_text(encoding="utf-8-sig")
    records = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    if not records:
        raise ValueError("empty file")
    header, rows = records[0], [r for r in records[1:] if r]
    for i, r in enumerate(rows, start=2):
        if len(r) != len(header):
            raise ValueError(f"line {i} has {len(r)} cells, the header {len(header)}")
    return header, rows


MAX_JSON_BYTES = 64 * 1024 * 1024


def read_records(path: Path) -> tuple[list[str], list[list[str]]]:
    """Read JSON records (a list of objects, or JSON Lines: one object a line) as a table:
    the keys in order of first appearance, every value as text (missing or null: ``""``;
    a number or boolean as JSON writes it; a nested value as compact JSON).

    Raises:
        ValueError: too large, not JSON, or not a non-empty list of objects.
    """
    import json

    if path.stat().st_size > MAX_JSON_BYTES:
        raise ValueError(f"larger than {MAX_JSON_BYTES} bytes")
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.lower() == ".jsonl":
        records = [loads_untrusted(line) for line in text.splitlines() if line.strip()]
    else:
        records = loads_untrusted(text)
    if not isinstance(records, list) or not records:
        raise ValueError("not a non-empty JSON list of records")
    if not all(isinstance(r, dict) for r in records):
        raise ValueError("every record must be a JSON object")
    header = list(dict.fromkeys(str(k) for r in records for k in r))

    def cell(value: Any) -> str:
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        return json.dumps(value, separators=(",", ":"), sort_keys=True)

    return header, [[cell(r.get(h)) for h in header] for r in records]


def _looks_like(name: str, words: tuple[str, ...]) -> bool:
    low = name.strip().lower()
    return low in words or any(low.endswith(("_" + w, " " + w)) for w in words)


def inventory(record: Intake, *, goal: str = "", metric: str | None = None) -> Inventory:
    """Describe every raw file; tables get schemas, row counts and column statistics.

    ``goal`` (the user's words) and ``metric`` (a vetted metric name, checked by the caller)
    go into the hints with what the folder's sample submission and description say.
    """
    files: list[FileInfo] = []
    tables: dict[str, tuple[list[str], list[list[str]]]] = {}
    ids: list[str] = []
    targets: list[str] = []
    for raw in record.files:
        path = record.raw_dir / raw.path
        fmt = _TABULAR.get(path.suffix.lower(), path.suffix.lower().lstrip(".") or "unknown")
        if fmt not in ("csv", "tsv", "json", "jsonl"):
            files.append(FileInfo(path=raw.path, format=fmt, size=raw.size))
            continue
        try:
            if fmt in ("json", "jsonl"):
                header, rows = read_records(path)
            else:
                header, rows = read_table(path, "\t" if fmt == "tsv" else ",")
        except (OSError, UnicodeDecodeError, ValueError, RecursionError, csv.Error) as exc:
            files.append(FileInfo(path=raw.path, format=fmt, size=raw.size, error=str(exc)))
            continue
        tables[raw.path] = (header, rows)
        columns = [_column_stats(h, [r[j] for r in rows]) for j, h in enumerate(header)]
        files.append(
            FileInfo(
                path=raw.path, format=fmt, size=raw.size, rows=len(rows), columns=tuple(columns)
            )
        )
        ids.extend(
            f"{raw.path}:{c.name}"
            for c in columns
            if _looks_like(c.name, _ID_WORDS) and c.all_unique
        )
        named = [c for c in columns if _looks_like(c.name, _TARGET_WORDS)]
        last = [columns[-1]] if columns and not _looks_like(columns[-1].name, _ID_WORDS) else []
        targets.extend(f"{raw.path}:{c.name}" for c in named + [c for c in last if c not in named])
    folders = class_folders(tuple(f.path for f in record.files))
    hints = read_hints(record, tables, goal=goal, metric=metric, class_rows=folders)
    del tables
    for table in _class_tables(record, folders, hints):  # listed just before the folder's files
        prefix = "" if table.path == "./" else table.path
        at = next(k for k, f in enumerate(files) if f.path.startswith(prefix))
        files.insert(at, table)
        targets.append(f"{table.path}:{table.columns[1].name}")
    first = [f"{hints.labelled_file}:{hints.target}"] if hints.target else []
    if hints.goal_target is not None:
        holding = [f for f in files if f.column(hints.goal_target) is not None and f.rows]
        holding.sort(key=lambda f: (f.path != hints.labelled_file, -(f.rows or 0)))
        first.insert(0, f"{holding[0].path}:{hints.goal_target}")
    targets = list(dict.fromkeys(first + targets))
    return Inventory(
        files=tuple(files),
        id_candidates=tuple(ids),
        target_candidates=tuple(targets),
        hints=hints,
    )
