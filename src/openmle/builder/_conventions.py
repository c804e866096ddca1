"""Conventions: what a raw folder says about its own task (Kaggle style), and the user's goal.

A raw folder downloaded from a competition often ships a sample submission (any CSV whose name
holds ``submission``, such as Titanic's ``gender_submission.csv``) and a description
(``description.txt`` / ``description.md``). The sample submission names the id column and the
answer columns, in order, and their format; the labelled table is the one that holds the
answer (every other table with the id column is the unlabeled test file, never split); the
description is the task's description and may name its metric. A user's goal
(``--goal "predict Survived"``, ``--metric``) steers the same choices. These :class:`Hints`
go into the inventory: the model reads them, the offline spec follows them before any
heuristic, a spec answer that contradicts them is sent back, and the gate checks the package
against them.

Files are read as CSV text with the inventory's bounds; names and text are clipped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle.builder._intake import Intake

__all__ = ["Hints", "clean_description", "metric_named", "read_hints"]

MAX_DESCRIPTION_CHARS = 2000
"""The longest description kept (the spec's description bound)."""
MAX_GOAL_CHARS = 500
"""The longest goal text kept."""
DESCRIPTION_NAMES = ("description.txt", "description.md")
"""Raw file names read as the task's description (case-insensitive, top level)."""
_MAX_CLASSES = 100
CLASS_FILE_COLUMN = "file"
"""A per-class image folder's column of image paths under it (their first part the class)."""
CLASS_LABEL_COLUMN = "label"
"""A per-class image folder's label column, unless its sample submission names it."""

# Metric names as a description writes them -> the vetted library's name. Earliest match wins;
# "RMSE ... logarithm" is RMSLE (House Prices' wording).
_METRIC_PATTERNS: tuple[tuple[str, str], ...] = (
    ("rmsle", r"\brmsle\b|root[- ]mean[- ]squared?[- ]log(arithmic)?[- ]error"),
    (
        "rmsle",
        r"\b(rmse|root[- ]mean[- ]squared?[- ]error)\b[^.\n]{0,80}?\blog(arithm)?s?\b",
    ),
    ("rmse", r"\brmse\b|root[- ]mean[- ]squared?[- ]error"),
    ("mae", r"\bmae\b|mean[- ]absolute[- ]error"),
    ("log_loss", r"\blog[- ]?loss\b|logarithmic loss|cross[- ]entropy"),
    ("auc", r"\b(roc[- ]?)?auc\b|area under the (roc )?curve"),
    # Micro-averaged F1 of one label per row is accuracy (plant-seedlings' "MeanFScore").
    ("accuracy", r"\bmicro[- ]?(averaged[- ])?f1\b|\bf1[- _]?micro\b"),
    ("macro_f1", r"\bmacro[- ]?(averaged )?f1\b|\bf1[- ]score\b|\bmean f1\b"),
    ("map@k", r"\bmap@\d+\b|mean average precision"),
    ("accuracy", r"\baccuracy\b|\bpercentage of .{0,40}correctly\b"),
)


def metric_named(text: str) -> str | None:
    """The vetted metric ``text`` names first (see the patterns above), or None."""
    found: list[tuple[int, int, str]] = []
    for rank, (name, pattern) in enumerate(_METRIC_PATTERNS):
        m = re.search(pattern, text, flags=re.IGNORECASE)
        if m:
            found.append((m.start(), rank, name))
    return min(found)[2] if found else None


def clean_description(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """``text`` without HTML tags, control characters and runs of blank lines, at most
    ``limit`` characters (cut at a line end when one is near).
    """
    text = re.sub(r"<[^>\n]{1,200}>", "", text)
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in text)
    lines = [line.rstrip() for line in text.splitlines()]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if len(text) <= limit:
        return text
    cut = text.rfind("\n", 0, limit - 4)
    return text[: cut if cut > limit // 2 else limit - 4].rstrip() + "\n..."


def _clip(text: str, n: int = 60) -> str:
    text = "".join(ch if ch.isprintable() else "?" for ch in text)
    return text if len(text) <= n else text[: n - 3] + "..."


@frozen(kw_only=True)
class Hints:
    """What the raw folder and the user say the task is (every field may be empty).

    Args:
        sample_file: the raw sample submission's path.
        id_column: its first column (the answers' id).
        answer_columns: its other columns, in order.
        answer_format: ``"labels"`` (a predicted class), ``"values"`` (a number),
            ``"probability"`` (a score for the positive class of a binary target),
            ``"probabilities"`` (one column per class), ``"several"`` (several target
            columns) or ``""`` (no sample, or its columns match no table).
        target: the labelled column the answers predict (None when unknown).
        labelled_file: the table holding the target (the only one that is split).
        unlabeled_files: other tables with the id column and without the target (the given
            test file): never labelled data.
        description_file, description: the raw description's path and cleaned text.
        description_metric: the vetted metric the description names, or None.
        goal: the user's goal text; goal_target: a labelled column it names.
        metric: the metric asked for (``--metric``, else one the goal names), or None.
    """

    sample_file: str | None = None
    id_column: str | None = None
    answer_columns: tuple[str, ...] = ()
    answer_format: str = ""
    target: str | None = None
    labelled_file: str | None = None
    unlabeled_files: tuple[str, ...] = ()
    description_file: str | None = None
    description: str = ""
    description_metric: str | None = None
    goal: str = ""
    goal_target: str | None = None
    metric: str | None = None

    @property
    def empty(self) -> bool:
        """Whether nothing was found or asked."""
        return self == Hints()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "sample_file": self.sample_file,
            "id_column": self.id_column,
            "answer_columns": list(self.answer_columns),
            "answer_format": self.answer_format,
            "target": self.target,
            "labelled_file": self.labelled_file,
            "unlabeled_files": list(self.unlabeled_files),
            "description_file": self.description_file,
            "description": self.description,
            "description_metric": self.description_metric,
            "goal": self.goal,
            "goal_target": self.goal_target,
            "metric": self.metric,
        }

    def text(self) -> str:
        """Lines for the inventory text (empty when there is no hint)."""
        lines: list[str] = []
        if self.sample_file:
            cols = ", ".join(_clip(c) for c in self.answer_columns[:12])
            lines.append(
                f"sample submission {_clip(self.sample_file)}: id column "
                f"{_clip(self.id_column or '')}, answer columns [{cols}] "
                f"({self.answer_format or 'matching no table'})"
            )
        if self.labelled_file:
            lines.append(
                f"labelled table: {_clip(self.labelled_file)}, target {_clip(self.target or '')}"
            )
            if self.labelled_file.endswith("/"):
                lines.append(
                    "a per-class image folder: its images are the labelled rows (images "
                    "elsewhere, such as an unlabeled test/ folder, are not); with 'id_column' "
                    f"{_clip(self.id_column or '')!r} the ids are the copied images' neutral "
                    "file names"
                )
        if self.unlabeled_files:
            lines.append(
                "unlabeled test table(s), not labelled data: "
                + ", ".join(_clip(f) for f in self.unlabeled_files)
            )
        if self.description_metric:
            lines.append(f"the description names the metric {self.description_metric}")
        if self.goal:
            lines.append(f"the user's goal: {_clip(self.goal, MAX_GOAL_CHARS)}")
        if self.metric:
            lines.append(f"the metric asked for: {self.metric}")
        if self.description:
            lines.append("description:\n" + self.description)
        return "\n".join(lines)


_Table = tuple[list[str], list[list[str]]]


def _values(table: _Table, column: str) -> list[str]:
    header, rows = table
    j = header.index(column)
    return [r[j] for r in rows if r[j].strip() != ""]


def _float(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _classes(values: Sequence[str]) -> set[str] | None:
    distinct = set(values)
    if len(distinct) > _MAX_CLASSES:
        return None
    numbers = [_float(v) for v in distinct]
    if all(x is not None for x in numbers) and not all(
        x is not None and x.is_integer() for x in numbers
    ):
        return None  # real-valued: a regression target
    return distinct


def _format_one(sample: _Table, column: str, labelled: _Table) -> str:
    """The format of one answer column that the labelled table also holds."""
    truth = _values(labelled, column)
    guess = _values(sample, column)
    classes = _classes(truth)
    if classes is None:
        return "values"
    if not guess or set(guess) <= classes:
        return "labels"
    scores = [_float(v) for v in guess]
    if len(classes) == 2 and all(x is not None and 0.0 <= x <= 1.0 for x in scores):
        return "probability"
    return "labels"


def _sample_path(tables: dict[str, _Table]) -> str | None:
    """The sample submission: a table named ``*submission*`` whose first column another table
    holds (so a data table that happens to be named so is not taken for one).
    """

    def keyed(p: str) -> bool:
        header = tables[p][0]
        return len(header) >= 2 and any(header[0] in h for q, (h, _) in tables.items() if q != p)

    named = [p for p in tables if "submission" in Path(p).name.lower() and keyed(p)]
    named.sort(key=lambda p: ("sample" not in Path(p).name.lower(), p.count("/"), p))
    return named[0] if named else None


def _sample_hints(tables: dict[str, _Table]) -> dict[str, Any]:
    """The sample submission's id, answer columns, format, target and labelled table."""
    sample_file = _sample_path(tables)
    if sample_file is None:
        return {}
    header, _ = sample = tables[sample_file]
    idc, answers = header[0], tuple(header[1:])
    found: dict[str, Any] = {
        "sample_file": sample_file,
        "id_column": idc,
        "answer_columns": answers,
    }
    others = {p: t for p, t in tables.items() if p != sample_file}
    # A table holding every answer column: labels, values, a probability, or several targets.
    holding = sorted(
        (p for p, (h, _) in others.items() if all(a in h for a in answers)),
        key=lambda p: (idc not in others[p][0], -len(others[p][1]), p),
    )
    if holding:
        labelled = holding[0]
        fmt = "several" if len(answers) > 1 else _format_one(sample, answers[0], others[labelled])
        found.update(labelled_file=labelled, answer_format=fmt)
        if len(answers) == 1:
            found["target"] = answers[0]
    else:
        # One probability column per class: a column whose classes are the answer columns.
        want = set(answers)
        for p in sorted(others, key=lambda p: (-len(others[p][1]), p)):
            h = others[p][0]
            match = next(
                (c for c in h if c != idc and _classes(_values(others[p], c)) == want), None
            )
            if match is not None:
                found.update(labelled_file=p, target=match, answer_format="probabilities")
                break
    labelled_file = found.get("labelled_file")
    if labelled_file is not None:
        targets = set(answers) if "target" not in found else {found["target"]}
        found["unlabeled_files"] = tuple(
            p
            for p, (h, _) in sorted(others.items())
            if p != labelled_file and idc in h and not targets & set(h)
        )
    return found


def _class_sample_hints(
    tables: dict[str, _Table], class_rows: Mapping[str, Sequence[tuple[str, str]]]
) -> dict[str, Any]:
    """The hints of a sample submission beside a per-class image folder (plant-seedlings
    style: ``train/<class>/*.png``, an unlabeled ``test/*.png``, ``sample_submission.csv``
    with ``file,species``), which no table holds: its one answer column of class names is
    the folder's label (``"labels"``), or its answer columns are the classes
    (``"probabilities"``, the label column keeps its name ``label``).
    """
    named = [p for p in tables if "submission" in Path(p).name.lower() and len(tables[p][0]) >= 2]
    named.sort(key=lambda p: ("sample" not in Path(p).name.lower(), p.count("/"), p))
    for sample_file in named:
        header, _ = sample = tables[sample_file]
        idc, answers = header[0], tuple(header[1:])
        if len(set(header)) != len(header) or not idc.strip():
            continue
        for root, rows in sorted(class_rows.items()):
            classes = {label for _, label in rows}
            found: dict[str, Any] = {
                "sample_file": sample_file,
                "id_column": idc,
                "answer_columns": answers,
                "labelled_file": f"{root}/" if root else "./",
            }
            if set(answers) == classes and idc != CLASS_LABEL_COLUMN:
                return {**found, "target": CLASS_LABEL_COLUMN, "answer_format": "probabilities"}
            if len(answers) == 1 and set(_values(sample, answers[0])) <= classes:
                return {**found, "target": answers[0], "answer_format": "labels"}
    return {}


def _description(record: Intake) -> tuple[str | None, str]:
    for raw in record.files:
        if raw.path.lower() in DESCRIPTION_NAMES:
            try:
                data = (record.raw_dir / raw.path).read_bytes()[: 64 * 1024]
                text = data.decode("utf-8", "replace")
            except OSError:
                continue
            return raw.path, clean_description(text)
    return None, ""


_VERBS = re.compile(r"\b(predict|forecast|estimate|classify|target|label|regress)\w*\b", re.I)


def _goal_target(goal: str, tables: dict[str, _Table], labelled: str | None) -> str | None:
    """The column the goal names (of the labelled table, else any table): the first one after
    a verb such as "predict", else the first one named.
    """
    if not goal:
        return None
    order = [labelled] if labelled in tables else []
    order += [p for p in sorted(tables) if p != labelled and "submission" not in p.lower()]
    verbs = [m.end() for m in _VERBS.finditer(goal)]
    for p in order:
        hits: list[tuple[int, int, str]] = []
        for col in tables[p][0]:
            if not col.strip():
                continue
            pattern = r"(?<![\w])" + re.escape(col) + r"(?![\w])"
            m = re.search(pattern, goal, flags=re.IGNORECASE)
            if m:
                after_verb = any(0 <= m.start() - v <= 40 for v in verbs)
                hits.append((0 if after_verb else 1, m.start(), col))
        if hits:
            return min(hits)[2]
    return None


def read_hints(
    record: Intake,
    tables: dict[str, _Table],
    *,
    goal: str = "",
    metric: str | None = None,
    class_rows: Mapping[str, Sequence[tuple[str, str]]] | None = None,
) -> Hints:
    """The hints of a raw folder (``tables``: its readable tables by path; ``class_rows``:
    its per-class image folders, see :func:`openmle.builder._inventory.class_folders`) and a
    user's goal.

    ``metric`` (already checked against the vetted library) wins over one the goal names.
    """
    found = _sample_hints(tables)
    if not found.get("labelled_file") and class_rows:
        found = _class_sample_hints(tables, class_rows) or found
    description_file, description = _description(record)
    goal = clean_description(goal, MAX_GOAL_CHARS).replace("\n", " ")
    return Hints(
        sample_file=found.get("sample_file"),
        id_column=found.get("id_column"),
        answer_columns=found.get("answer_columns", ()),
        answer_format=found.get("answer_format", ""),
        target=found.get("target"),
        labelled_file=found.get("labelled_file"),
        unlabeled_files=found.get("unlabeled_files", ()),
        description_file=description_file,
        description=description,
        description_metric=metric_named(description) if description else None,
        goal=goal,
        goal_target=_goal_target(goal, tables, found.get("labelled_file")),
        metric=metric or (metric_named(goal) if goal else None),
    )
