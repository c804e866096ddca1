"""The grading child process: CSV checks, built-in metrics and the released metric contract.

This module is self-contained on purpose (standard library only; pandas is imported only in
the child, and only for metric classes written for the released system):
:mod:`openmle.gym._grader` runs its *source* with ``python -I -c`` (a grading server,
``--serve``, that forks one child per grade, or a fresh process), so the metric reads the
hidden answers only there, never in the caller's process and never inside the candidate's
sandbox. Leaving numpy out keeps a grading process to the interpreter's start-up time. A
server for another program module (``--serve MODULE``, see :func:`_load_program`) imports
that module and its ``PRELOAD`` too (openmle and libraries, never task code). The parent
imports the same module for its pure helpers (CSV reading, built-in metrics), so both sides
share one implementation.

Every reason this module produces names the problem and the fix, and never contains an answer
value: it speaks of columns, row counts and ids (ids are public, they are in ``test.csv``).

Departure from the released system: submissions are checked against the sample submission's
columns and ids before any metric runs, and rows are aligned to the answers by id, so a
correctly formatted submission in another row order grades the same.
"""

from __future__ import annotations

import collections
import csv
import importlib.util
import io
import json
import math
import numbers
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

Rows = list[list[str]]

MAX_CSV_BYTES = 512 * 1024 * 1024
"""Largest CSV the grader reads (bytes); a larger submission is invalid, not a crash."""
MAX_ROWS = 10_000_000
"""Most data rows the grader reads from one CSV."""
MAX_COLUMNS = 10_000
"""Most columns the grader reads from one CSV."""
MAX_LINE_BYTES = 8 * 1024 * 1024
"""Longest line (bytes) the grader reads."""
MAX_REASON_CHARS = 1000
"""Longest reason a grade carries; longer ones are cut (see :func:`clip`)."""

_PROB_EPS = 1e-15


class CsvError(Exception):
    """A CSV cannot be used; the message names the problem and the fix (no cell values)."""


class Table:
    """A parsed CSV: a header and rows of strings, every row as wide as the header."""

    __slots__ = ("header", "rows")

    def __init__(self, header: list[str], rows: Rows) -> None:
        self.header = header
        self.rows = rows

    def column(self, name: str) -> list[str]:
        """The cells of column ``name``."""
        i = self.header.index(name)
        return [r[i] for r in self.rows]


def clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """``text`` cut to ``limit`` characters (an ellipsis and the cut length mark a cut)."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 40)
    return f"{text[:keep]}... [{len(text) - keep} more characters]"


def names(items: Sequence[str], *, limit: int = 8, width: int = 40) -> str:
    """A bounded listing of column names or ids for a message: at most ``limit`` items, each
    cut to ``width`` characters, and how many more there are.
    """
    shown = [repr(x if len(x) <= width else x[:width] + "...") for x in items[:limit]]
    more = f", ... (+{len(items) - limit} more)" if len(items) > limit else ""
    return "[" + ", ".join(shown) + more + "]"


def _scan(path: Path, label: str, *, max_rows: int, max_line_bytes: int) -> None:
    """One streaming pass over the raw bytes: NUL bytes, the number of lines and the longest
    line, checked before any parsing (memory stays at one chunk).
    """
    lines = 0
    run = 0  # bytes of the current line so far
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                if b"\x00" in chunk:
                    raise CsvError(f"{label} contains NUL bytes; save it as a plain UTF-8 CSV")
                parts = chunk.split(b"\n")
                lines += len(parts) - 1
                if len(parts) == 1:
                    run += len(parts[0])
                else:
                    run = max(run + len(parts[0]), max(map(len, parts[1:-1]), default=0))
                    if run > max_line_bytes:
                        break
                    run = len(parts[-1])
                if run > max_line_bytes:
                    break
                if lines > max_rows + 1:
                    raise CsvError(
                        f"{label} has more than {max_rows + 1} lines, above the limit of "
                        f"{max_rows} rows; predict only the test rows"
                    )
    except OSError as exc:
        raise CsvError(f"{label} cannot be read ({type(exc).__name__}); check it") from None
    if run > max_line_bytes:
        raise CsvError(
            f"{label} has a line longer than {max_line_bytes} bytes; write one row per line"
        )


def read_csv(
    path: Path,
    *,
    label: str,
    max_bytes: int = MAX_CSV_BYTES,
    max_rows: int = MAX_ROWS,
    max_columns: int = MAX_COLUMNS,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Table:
    """Read ``path`` as a CSV with a header, streaming, within size and shape limits.

    The size, the number of lines and the longest line are checked on the raw bytes before
    parsing; the header's width before any row is read; every check is linear in the input.

    Raises:
        CsvError: missing or unreadable file, above a limit, not UTF-8, no header, blank or
            duplicate column names, or a row whose width differs from the header's. The
            message names ``label`` and stays short (column names are listed, bounded).
    """
    try:
        size = path.stat().st_size
    except OSError:
        raise CsvError(f"{label} does not exist; write it as a CSV file with a header") from None
    if not path.is_file():
        raise CsvError(f"{label} is not a regular file; write a CSV file there")
    if size > max_bytes:
        raise CsvError(f"{label} is {size} bytes, above the {max_bytes}-byte limit; shrink it")
    _scan(path, label, max_rows=max_rows, max_line_bytes=max_line_bytes)
    header: list[str] | None = None
    rows: Rows = []
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            for record in csv.reader(fh):
                if not record:
                    continue  # blank lines carry no data
                if header is None:
                    if len(record) > max_columns:
                        raise CsvError(
                            f"{label} has {len(record)} columns, above the limit of "
                            f"{max_columns}; write the sample submission's columns"
                        )
                    header = [h.strip() for h in record]
                    continue
                if len(record) != len(header):
                    raise CsvError(
                        f"{label} line {len(rows) + 2} has {len(record)} fields but the header "
                        f"has {len(header)}; give every row one value per column"
                    )
                if len(rows) >= max_rows:
                    raise CsvError(
                        f"{label} has more than {max_rows} rows, above the limit; predict "
                        "only the test rows"
                    )
                rows.append(record)
    except OSError as exc:
        raise CsvError(f"{label} cannot be read ({type(exc).__name__}); check it") from None
    except UnicodeDecodeError:
        raise CsvError(f"{label} is not UTF-8 text; save it as a UTF-8 CSV") from None
    except csv.Error as exc:
        raise CsvError(
            f"{label} is not a valid CSV ({clip(str(exc), 200)}); fix its quoting"
        ) from None
    return Table(_check_header(header, label), rows)


def _check_header(header: list[str] | None, label: str) -> list[str]:
    """``header``, checked: :class:`CsvError` when missing, with a blank or a repeated name."""
    if header is None:
        raise CsvError(f"{label} is empty; it needs a header row")
    if any(h == "" for h in header):
        raise CsvError(f"{label} has a blank column name in its header; name every column")
    counts = collections.Counter(header)
    dupes = sorted(h for h, n in counts.items() if n > 1)
    if dupes:
        raise CsvError(f"{label} repeats the column(s) {names(dupes)}; give each column one name")
    return header


def to_floats(cells: Sequence[str], *, label: str, column: str) -> list[float]:
    """Parse ``cells`` as finite floats.

    Raises:
        CsvError: a cell is empty, not a number, NaN or infinite (the message counts them).
    """
    out: list[float] = []
    bad = 0
    for c in cells:
        try:
            v = float(c)
        except ValueError:
            bad += 1
            continue
        if not math.isfinite(v):
            bad += 1
            continue
        out.append(v)
    if bad:
        raise CsvError(
            f"{label} column {column!r} has {bad} value(s) that are empty, not numbers, NaN or "
            "infinite; write a finite number in every row"
        )
    return out


def id_key(cell: str) -> str:
    """An id as a matching key: stripped, and ``"7.0"`` read as ``"7"`` (integral numbers)."""
    key = cell.strip()
    if key and (key[0].isdigit() or key[0] in "+-") and "." in key:
        try:
            v = float(key)
        except ValueError:
            return key
        if v.is_integer() and abs(v) < 2**53:
            return str(int(v))
    return key


def align_submission(
    sub: Table,
    *,
    expected_columns: Sequence[str],
    id_column: str | None,
    answer_ids: Sequence[str] | None,
    n_rows: int,
    label: str = "the submission",
) -> Table:
    """Check ``sub`` against the expected format and return it in the answers' row order.

    Args:
        sub: the parsed submission.
        expected_columns: the sample submission's header.
        id_column: the id column, or None when rows are matched by position.
        answer_ids: the ids of the answer rows in order (None when ``id_column`` is None).
        n_rows: the number of answer rows.
        label: how to name the submission in messages.

    Raises:
        CsvError: wrong columns, wrong row count, duplicate, missing or unknown ids.
    """
    if sorted(sub.header) != sorted(expected_columns):
        have, want = set(sub.header), set(expected_columns)
        missing = [c for c in expected_columns if c not in have]
        extra = [c for c in sub.header if c not in want]
        raise CsvError(
            f"{label} has {len(sub.header)} columns {names(sub.header)} but the task expects "
            f"{names(list(expected_columns))} (missing {names(missing)}, unexpected "
            f"{names(extra)}); write exactly the sample submission's columns"
        )
    if len(sub.rows) != n_rows:
        raise CsvError(
            f"{label} has {len(sub.rows)} rows but the task expects {n_rows} (one per row of "
            "test.csv); predict every test row once"
        )
    position = {c: i for i, c in enumerate(sub.header)}
    order = [position[c] for c in expected_columns]
    rows = [[r[i] for i in order] for r in sub.rows]
    if id_column is None or answer_ids is None:
        return Table(list(expected_columns), rows)
    k = list(expected_columns).index(id_column)
    by_id: dict[str, list[str]] = {}
    dupes = 0
    for r in rows:
        key = id_key(r[k])
        if key in by_id:
            dupes += 1
        by_id[key] = r
    if dupes:
        raise CsvError(
            f"{label} repeats {dupes} id(s) in column {id_column!r}; write each test id once"
        )
    wanted = [id_key(a) for a in answer_ids]
    missing_ids = [a for a in wanted if a not in by_id]
    if missing_ids:
        raise CsvError(
            f"{label} lacks {len(missing_ids)} test id(s) in column {id_column!r} (e.g. "
            f"{names(missing_ids, limit=3)}); use the ids of test.csv / the sample submission"
        )
    return Table(list(expected_columns), [by_id[a] for a in wanted])


# --------------------------------------------------------------------------------------------
# Built-in metrics: (answer targets, submission targets) -> float.


def _same_label(a: str, b: str) -> bool:
    a, b = a.strip(), b.strip()
    if a == b:
        return True
    try:
        return float(a) == float(b)
    except ValueError:
        return a.lower() == b.lower()


def accuracy(y_true: Sequence[str], y_pred: Sequence[str]) -> float:
    """Share of rows whose predicted label equals the answer (``"1"`` equals ``"1.0"``)."""
    if not y_true:
        raise CsvError("accuracy needs at least one row")
    return sum(_same_label(a, b) for a, b in zip(y_true, y_pred, strict=True)) / len(y_true)


def average_ranks(x: Sequence[float]) -> list[float]:
    """1-based ranks of ``x`` with ties given their average rank."""
    order = sorted(range(len(x)), key=x.__getitem__)
    ranks = [0.0] * len(x)
    i, n = 0, len(x)
    while i < n:
        j = i
        while j + 1 < n and x[order[j + 1]] == x[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        i = j + 1
    return ranks


def positive_labels(y_true: Sequence[str]) -> list[bool]:
    """Binary labels as booleans: ``1``/``true``/``yes`` or the larger of two numeric labels."""
    vals = [v.strip().lower() for v in y_true]
    kinds = sorted(set(vals))
    if len(kinds) > 2:
        raise CsvError(f"AUC needs a binary target but the answers hold {len(kinds)} labels")
    truthy = {"1", "1.0", "true", "yes", "y", "t"}
    if any(k in truthy for k in kinds):
        return [v in truthy for v in vals]
    try:
        hi = max(float(k) for k in kinds)
        return [float(v) == hi for v in vals]
    except ValueError:
        return [v == kinds[-1] for v in vals]


def roc_auc(y_true: Sequence[str], scores: Sequence[float]) -> float:
    """Area under the ROC curve (Mann-Whitney U with average ranks for ties)."""
    pos = positive_labels(y_true)
    n_pos = sum(pos)
    n_neg = len(pos) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise CsvError("AUC needs both classes among the answers; the task's answers lack one")
    ranks = average_ranks(scores)
    rank_sum = math.fsum(r for r, p in zip(ranks, pos, strict=True) if p)
    return (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def _check_rows(y_true: Sequence[float], y_pred: Sequence[float]) -> int:
    if len(y_true) != len(y_pred) or not y_true:
        raise CsvError("the metric needs the same, non-zero number of answers and predictions")
    return len(y_true)


def rmse(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Root mean squared error."""
    n = _check_rows(y_true, y_pred)
    return math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(y_true, y_pred, strict=True)) / n)


def mae(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Mean absolute error."""
    n = _check_rows(y_true, y_pred)
    return math.fsum(abs(a - b) for a, b in zip(y_true, y_pred, strict=True)) / n


def log_loss(
    labels: Sequence[str], classes: Sequence[str], probs: Sequence[Sequence[float]]
) -> float:
    """Multiclass log loss (Kaggle's: rows renormalised, probabilities clipped to 1e-15).

    Args:
        labels: the true class of each row.
        classes: the class names, one per column of ``probs``.
        probs: one row per label, one non-negative number per class.
    """
    index = {c.strip(): j for j, c in enumerate(classes)}
    total = []
    for lab, row in zip(labels, probs, strict=True):
        if any(p < 0 for p in row):
            raise CsvError(
                "the submission has negative probabilities; write probabilities in [0, 1]"
            )
        mass = math.fsum(row)
        if mass <= 0:
            raise CsvError(
                "the submission has rows whose probabilities sum to 0; give every row positive mass"
            )
        try:
            j = index[lab.strip()]
        except KeyError:
            raise CsvError(
                "the answers hold a class with no column in the sample submission; fix the task"
            ) from None
        p = min(max(row[j] / mass, _PROB_EPS), 1 - _PROB_EPS)
        total.append(-math.log(p))
    if not total:
        raise CsvError("log loss needs at least one row")
    return math.fsum(total) / len(total)


def rmsle(y_true: Sequence[float], y_pred: Sequence[float], *, columns: tuple[str, str]) -> float:
    """Root mean squared logarithmic error: ``sqrt(mean((log(1 + p) - log(1 + a)) ** 2))``.

    Args:
        y_true: the answers (every value >= 0).
        y_pred: the predictions (every value >= 0).
        columns: the answers' and the submission's column names, for the error message.

    Raises:
        CsvError: a negative value (the message names the column and counts the rows).
    """
    n = _check_rows(y_true, y_pred)
    for label, values, column in (
        ("the answers", y_true, columns[0]),
        ("the submission", y_pred, columns[1]),
    ):
        negative = sum(v < 0 for v in values)
        if negative:
            raise CsvError(
                f"RMSLE needs values >= 0 but {label} column {column!r} has {negative} "
                "negative value(s); predict values >= 0 (clip at 0)"
            )
    return math.sqrt(
        math.fsum((math.log1p(b) - math.log1p(a)) ** 2 for a, b in zip(y_true, y_pred, strict=True))
        / n
    )


def label_key(value: str) -> str:
    """The class a label names, as :func:`accuracy` compares them: numbers by value
    (``"1"`` and ``"1.0"`` are one class), other text stripped and case-folded.
    """
    v = value.strip()
    try:
        f = float(v)
    except ValueError:
        return "s:" + v.lower()
    return "s:" + v.lower() if math.isnan(f) else "n:" + repr(f + 0.0)


def macro_f1(y_true: Sequence[str], y_pred: Sequence[str]) -> float:
    """Macro-averaged F1: the unweighted mean over classes of ``2TP / (2TP + FP + FN)``.

    The classes are every label among the answers or the predictions (scikit-learn's
    ``f1_score(average="macro")``), compared as :func:`accuracy` compares them; a predicted
    label that is no class of the answers is a class of its own with F1 0.

    Raises:
        CsvError: no rows.
    """
    if not y_true:
        raise CsvError("macro-F1 needs at least one row")
    tp: collections.Counter[str] = collections.Counter()
    fp: collections.Counter[str] = collections.Counter()
    fn: collections.Counter[str] = collections.Counter()
    for a, b in zip(y_true, y_pred, strict=True):
        ka, kb = label_key(a), label_key(b)
        if ka == kb:
            tp[ka] += 1
        else:
            fn[ka] += 1
            fp[kb] += 1
    classes = set(tp) | set(fp) | set(fn)
    return math.fsum(2 * tp[c] / (2 * tp[c] + fp[c] + fn[c]) for c in classes) / len(classes)


MAX_MAP_K = 100
"""Largest ``k`` of ``map@k``."""


def map_at_k(y_true: Sequence[str], y_pred: Sequence[str], k: int) -> float:
    """Mean average precision at ``k`` (Kaggle's MAP@k).

    Each answer cell holds one or more relevant labels, each prediction cell up to ``k``
    labels, both separated by spaces, best guess first. For one row, with ``P(i)`` the share of
    relevant labels among the first ``i`` predictions and ``rel(i)`` 1 when the ``i``-th
    prediction is relevant and not predicted earlier in the row::

        AP@k = sum(P(i) * rel(i) for i in 1..min(k, len(predictions))) / min(k, len(relevant))

    MAP@k is the mean of AP@k over rows. Labels compare as in :func:`accuracy`. Only the first
    ``k`` predictions of a row count; a row with no prediction scores 0.

    Raises:
        CsvError: ``k`` outside ``[1, MAX_MAP_K]``, no rows, or an answer row without a label.
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_MAP_K:
        raise CsvError(f"map@k needs an integer k in [1, {MAX_MAP_K}] but got {k!r}")
    if not y_true:
        raise CsvError("map@k needs at least one row")
    total = []
    for a, b in zip(y_true, y_pred, strict=True):
        relevant = {label_key(x) for x in a.split()}
        if not relevant:
            raise CsvError("the answers have a row without a label; fix the task")
        seen: set[str] = set()
        hits, score = 0, 0.0
        for i, x in enumerate(b.split()[:k], start=1):
            key = label_key(x)
            if key in relevant and key not in seen:
                hits += 1
                score += hits / i
            seen.add(key)
        total.append(score / min(k, len(relevant)))
    return math.fsum(total) / len(total)


BUILTIN_METRICS: dict[str, bool] = {
    "accuracy": True,
    "auc": True,
    "log_loss": False,
    "macro_f1": True,
    "mae": False,
    "map@k": True,
    "rmse": False,
    "rmsle": False,
}
"""Built-in metric names and whether higher is better (``map@k`` is a family: ``map@5`` etc.)."""

_MAP_AT = re.compile(r"map@([1-9][0-9]{0,2})")


def parse_metric(name: str) -> tuple[str, int | None]:
    """``(family, k)`` of a built-in metric name: ``"map@5"`` -> ``("map@k", 5)``,
    ``"rmse"`` -> ``("rmse", None)``.

    Raises:
        CsvError: not a built-in metric, or ``map@k`` with ``k`` outside ``[1, MAX_MAP_K]``.
    """
    m = _MAP_AT.fullmatch(name)
    if m:
        k = int(m.group(1))
        if not 1 <= k <= MAX_MAP_K:
            raise CsvError(f"map@k needs k in [1, {MAX_MAP_K}] but got {name!r}; e.g. map@5")
        return "map@k", k
    if name not in BUILTIN_METRICS or name == "map@k":
        raise CsvError(
            f"{name!r} is not a built-in metric; use one of {sorted(BUILTIN_METRICS)} "
            "(map@k with a number, e.g. map@5)"
        )
    return name, None


def builtin_direction(name: str) -> bool | None:
    """Whether higher is better for a built-in metric name, or None when it is not one."""
    try:
        return BUILTIN_METRICS[parse_metric(name)[0]]
    except CsvError:
        return None


def builtin_score(name: str, answers: Table, sub: Table, id_column: str | None) -> float:
    """Score an aligned submission with a built-in metric.

    Raises:
        CsvError: bad values in the submission (the message says which column and the fix).
    """
    family, k = parse_metric(name)
    targets = [c for c in answers.header if c != id_column]
    pred_cols = [c for c in sub.header if c != id_column]
    if family == "log_loss":
        cols = [to_floats(sub.column(c), label="the submission", column=c) for c in pred_cols]
        probs = [list(row) for row in zip(*cols, strict=True)] if cols else []
        return log_loss(answers.column(targets[0]), pred_cols, probs)
    if len(targets) != 1 or len(pred_cols) != 1:
        raise CsvError(f"metric {name!r} needs one target column; the task has {targets}")
    t, c = targets[0], pred_cols[0]
    if family == "accuracy":
        return accuracy(answers.column(t), sub.column(c))
    if family == "macro_f1":
        return macro_f1(answers.column(t), sub.column(c))
    if family == "map@k" and k is not None:
        return map_at_k(answers.column(t), sub.column(c), k)
    pred = to_floats(sub.column(c), label="the submission", column=c)
    if family == "auc":
        return roc_auc(answers.column(t), pred)
    truth = to_floats(answers.column(t), label="the answers", column=t)
    if family == "rmsle":
        return rmsle(truth, pred, columns=(t, c))
    return rmse(truth, pred) if family == "rmse" else mae(truth, pred)


# --------------------------------------------------------------------------------------------
# Metric classes written for the released system.


def _import_file(name: str, path: Path) -> ModuleType | None:
    """Import the source file ``path`` as module ``name``, its folder first on ``sys.path`` (it
    may import its neighbours); None when it cannot be loaded as a module. What the module
    raises while it runs propagates.
    """
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_metric_class(metric_py: Path) -> Any:
    """Import ``metric_py`` and return its one class whose name ends in ``Metrics``.

    Raises:
        CsvError: no such class, or more than one.
    """
    module = _import_file("_openmle_task_metric", metric_py)
    if module is None:
        raise CsvError(f"{metric_py.name} cannot be imported; make it a Python module")
    found = [
        v
        for k, v in vars(module).items()
        if k.endswith("Metrics") and isinstance(v, type) and v.__module__ == module.__name__
    ]
    if len(found) != 1:
        names = sorted(v.__name__ for v in found)
        raise CsvError(
            f"utils/metric.py must define exactly one class whose name ends in 'Metrics' "
            f"(found {names}); define one such class"
        )
    return found[0]


def _class_score(metric_py: Path, answers_path: Path, sub: Table, id_column: str | None) -> float:
    import pandas as pd

    metric = load_metric_class(metric_py)()
    y_true = pd.read_csv(answers_path)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(sub.header)
    w.writerows(sub.rows)
    buf.seek(0)
    y_pred = pd.read_csv(buf)
    if hasattr(metric, "validate_submission"):
        try:
            metric.validate_submission(y_pred, y_true)
        except Exception as exc:
            # Numbers are masked: a task's message might quote answer values.
            msg = re.sub(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", "<n>", str(exc))
            msg = msg.splitlines()[0][:200] if msg else ""
            raise CsvError(
                f"the task's validate_submission rejected the submission ({type(exc).__name__}: "
                f"{msg}); follow the format in description.txt"
            ) from None
    value = metric.evaluate(y_true, y_pred)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise CsvError(
            f"the task's metric returned {type(value).__name__}, not a number; fix utils/metric.py"
        )
    return float(value)


# --------------------------------------------------------------------------------------------
# The child process entry point.


def grade_files(config: dict[str, Any]) -> dict[str, Any]:
    """Grade one submission; returns ``{"score", "valid", "reason"}`` (never raises CsvError).

    ``config`` keys: ``answers``, ``sample``, ``submission`` (paths), ``id_column`` (str or
    None), ``metric`` (a built-in name or None), ``metric_py`` (path or None).
    """

    def bad(reason: str) -> dict[str, Any]:
        return {"score": None, "valid": False, "reason": reason}

    shape = {k: int(config[k]) for k in _SHAPE_KEYS if config.get(k) is not None}
    try:
        answers = read_csv(Path(config["answers"]), label="the answers file", **shape)
        sample = read_csv(Path(config["sample"]), label="sample_submission.csv", **shape)
    except CsvError as exc:
        return bad(f"the task is broken: {exc}")
    id_column = config.get("id_column")
    if id_column is not None and (
        id_column not in answers.header or id_column not in sample.header
    ):
        id_column = None
    try:
        sub = read_csv(Path(config["submission"]), label="the submission", **shape)
        aligned = align_submission(
            sub,
            expected_columns=sample.header,
            id_column=id_column,
            answer_ids=answers.column(id_column) if id_column else None,
            n_rows=len(answers.rows),
        )
        if config.get("metric"):
            score = builtin_score(str(config["metric"]), answers, aligned, id_column)
        else:
            score = _class_score(
                Path(config["metric_py"]), Path(config["answers"]), aligned, id_column
            )
    except CsvError as exc:
        return bad(clip(str(exc)))
    if not math.isfinite(score):
        return bad(f"the metric gave a non-finite score ({score}); check the predicted values")
    return {"score": score, "valid": True, "reason": ""}


def inspect_metric(metric_py: Path) -> dict[str, Any]:
    """``{"name", "higher_is_better"}`` of the metric class, or ``{"error"}`` saying the fix."""
    try:
        cls = load_metric_class(metric_py)
        obj = cls()
    except CsvError as exc:
        return {"error": str(exc)}
    except Exception as exc:
        return {
            "error": f"importing or constructing the metric class raised {type(exc).__name__}"
            f" ({str(exc)[:200]}); make it import cleanly and construct with no arguments"
        }
    hib = getattr(obj, "higher_is_better", None)
    return {
        "name": cls.__name__,
        # numpy's bool_ is accepted without importing numpy here.
        "higher_is_better": bool(hib)
        if isinstance(hib, bool) or type(hib).__name__ == "bool_"
        else None,
    }


_SHAPE_KEYS = ("max_bytes", "max_rows", "max_columns", "max_line_bytes")
_PR_SET_PDEATHSIG = 1


def confine(config: dict[str, Any]) -> None:
    """Put this process under its limits before any task code runs.

    Dies with the parent (``PR_SET_PDEATHSIG``; exits at once when the parent is already
    gone), and sets ``RLIMIT_AS`` (``memory_mb``), ``RLIMIT_CPU`` (``cpu_s``), when given
    ``RLIMIT_FSIZE`` (``max_file_mb``, the prepare mode's), and ``RLIMIT_CORE`` to 1 byte
    (no core dump, piped or not; left alone where the hard limit is 0). Linux only
    for the parent-death signal; the limits are set wherever ``resource`` exists.
    """
    import os
    import signal

    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's kill is the only bound
        pass
    parent = config.get("parent_pid")
    if parent is not None and os.getppid() != int(parent):
        os._exit(70)  # the parent died before the death signal was armed
    import resource

    memory_mb = config.get("memory_mb")
    if memory_mb:
        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    cpu_s = config.get("cpu_s")
    if cpu_s:
        soft = max(1, math.ceil(float(cpu_s)))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))
    file_mb = config.get("max_file_mb")
    if file_mb:
        limit = int(file_mb) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    # No core dump: 1 byte (no file fits, and the kernel skips a piped core_pattern, whose
    # helper the host would run as root with this process's memory, the answers included).
    _, core_hard = resource.getrlimit(resource.RLIMIT_CORE)
    if core_hard == resource.RLIM_INFINITY or core_hard >= 1:
        resource.setrlimit(resource.RLIMIT_CORE, (1, 1))


def run_package_prepare(config: dict[str, Any]) -> dict[str, Any]:
    """A task package's ``utils/prepare.py``: ``prepare(raw, public, private)``, with Python's
    and numpy's global generators seeded with 0. Returns ``{"ok": True}`` or ``{"error": text}``
    (the exception's type, message and the last lines of its traceback, bounded).
    """
    import random

    random.seed(0)
    try:
        import numpy

        numpy.random.seed(0)
    except ImportError:
        pass
    prepare_py = Path(config["prepare_py"])
    try:
        module = _import_file("_openmle_task_prepare", prepare_py)
        if module is None:
            return {"error": "utils/prepare.py cannot be loaded; make it a Python module"}
        fn = getattr(module, "prepare", None)
        if not callable(fn):
            return {"error": "utils/prepare.py defines no function prepare(raw, public, private)"}
        fn(Path(config["raw"]), Path(config["public"]), Path(config["private"]))
    except MemoryError:
        raise
    except BaseException as exc:
        tail = traceback.format_exception(type(exc), exc, exc.__traceback__)[-5:]
        return {"error": clip("".join(tail).strip(), 4000)}
    return {"ok": True}


def _run_config(config: dict[str, Any]) -> int:
    """Confine this process, run ``config``'s mode and write its JSON result."""
    confine(config)
    out = Path(config["result"])
    if config.get("mode") == "prepare":
        try:
            found = run_package_prepare(config)
        except MemoryError:
            found = {"error": "prepare ran out of memory", "limit": "memory"}
        out.write_text(json.dumps(found))
        return 0
    if config.get("mode") == "inspect":
        try:
            found = inspect_metric(Path(config["metric_py"]))
        except MemoryError:
            found = {"error": "importing the metric class ran out of memory"}
        out.write_text(json.dumps(found))
        return 0
    try:
        result = grade_files(config)
    except MemoryError:
        result = {
            "score": None,
            "valid": False,
            "reason": f"grading ran out of memory (limit {config.get('memory_mb')} MB); "
            "shrink the submission",
            "limit": "memory",
        }
    except Exception as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
        result = {
            "score": None,
            "valid": False,
            "reason": f"the metric raised {type(exc).__name__}{where}; check the submission "
            "format against description.txt",
            "metric_error": True,
        }
    out.write_text(json.dumps(result))
    return 0


# --------------------------------------------------------------------------------------------
# The grading server: one interpreter start for many grades, each in a forked, confined child.

SERVE_FLAG = "--serve"
"""``argv[1]`` that starts the grading server instead of one grade (``argv[2]``, when given,
is the program module it serves, see :func:`_load_program`)."""
SERVER_ONLY_ENV = {"JE_ARROW_MALLOC_CONF": "background_thread:false"}
"""Variables a server gets on top of the fixed environment and a grade's child drops again:
pyarrow's allocator (pandas imports pyarrow) starts no helper thread, so the server stays
single-threaded and safe to fork."""
_MAX_REQUEST_BYTES = 1 << 20

Program = tuple[str, Callable[[list[str]], Any]]
"""A served program module: its name and its ``main(argv)``."""


class _Lines:
    """Newline-delimited JSON requests read from a file descriptor (bounded)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def ready(self) -> bool:
        """Whether a whole request is buffered already."""
        return b"\n" in self.buf

    def read(self) -> dict[str, Any] | None:
        """The next request (blocking), or None at end of input."""
        import os

        while b"\n" not in self.buf:
            chunk = os.read(self.fd, 65536)
            if not chunk or len(self.buf) > _MAX_REQUEST_BYTES:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        request = json.loads(line)
        return request if isinstance(request, dict) else {}


def _load_program(name: str) -> Program | str:
    """Import the program module ``name`` and then its ``PRELOAD`` (a tuple of module names
    imported once here when installed; one that fails to import is skipped): the program and
    its ``main``, or why it cannot be served.

    The rule for ``PRELOAD`` and the program's top level: the standard library, openmle and
    libraries only, never a task's or a benchmark's code (a registry's ``grade.py``, the
    ``mlebench`` package, an ``evaluator.py``): those are imported by ``main`` in the grade's
    child, after it has confined itself, exactly as in a fresh process.
    """
    import importlib

    try:
        module = importlib.import_module(name)
    except Exception as exc:
        return f"cannot import {name}: {type(exc).__name__}"
    main = getattr(module, "main", None)
    if not callable(main):
        return f"{name} has no main(argv)"
    preload = getattr(module, "PRELOAD", ())
    for extra in preload if isinstance(preload, tuple) else ():
        try:
            importlib.import_module(str(extra))
        except Exception:  # not installed (or broken): the child imports it itself, or fails
            continue
    return name, main


def _run_request(request: dict[str, Any], server: int, program: Program | None) -> int:
    """Run one grade in its child (confined first, by :func:`_run_config` or by the program's
    ``main``); its exit status.
    """
    if program is None:
        config = json.loads(Path(request["config"]).read_text())
        config["parent_pid"] = server  # confine(): die with the server
        return _run_config(config)
    name, main = program
    sys.argv = [name, str(request["config"])]  # as ``python -m name CONFIG`` has it
    try:
        code = main(list(sys.argv))
    except SystemExit as exc:
        code = exc.code
    except BaseException:
        return 1  # an uncaught exception, as a fresh interpreter ends on it
    return code if isinstance(code, int) else (0 if code is None else 1)


def _grade_child(
    request: dict[str, Any], server: int, program: Program | None, reply_fd: int
) -> None:
    """In the forked child: its own session, no inherited output (nor the server's reply
    pipe), the fixed environment, the grade's home and working directory, then
    :func:`_run_request`. Never returns.
    """
    import os

    code = 70
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        os.close(reply_fd)
        for key in SERVER_ONLY_ENV:
            os.environ.pop(key, None)
        os.environ["HOME"] = os.environ["TMPDIR"] = str(request["home"])
        os.chdir(str(request["cwd"]))
        code = _run_request(request, server, program)
    finally:
        os._exit(code)


def _kill_child(pid: int) -> None:
    """SIGKILL an unreaped child's process group (or the child, before its ``setsid``)."""
    import os
    import signal

    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
            return
        except OSError:
            continue


def _send(fd: int, message: dict[str, Any]) -> None:
    import os

    data = (json.dumps(message) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _threads() -> int:
    """How many threads this process has (a fork copies one; the others' locks stay held)."""
    import os
    import threading

    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _serve(module: str | None) -> int:
    """Serve grades until stdin ends: for each ``{"config", "home", "cwd"}`` request, fork a
    child that grades it (:func:`_grade_child`) and report ``{"pid"}``, then ``{"exit"}`` (its
    exit status, ``-signal`` when killed) once it and its process group are gone. A
    ``{"kill": true}`` while it runs kills its group; the end of stdin (the caller died) kills
    it and ends the server. ``module`` (a program module, see :func:`_load_program`) is run by
    its ``main`` in each child instead of gym's grading; a request it cannot take (the module
    cannot be served, or the server has helper threads, which make a fork unsafe) gets
    ``{"refused": why}``. Task code runs in the children only. Replies go through a private
    copy of stdout; the server's own stdout is its stderr, so nothing an import prints can
    reach them.
    """
    import ctypes  # noqa: F401 - what confine() imports, loaded once here, not per grade
    import os
    import resource  # noqa: F401
    import select

    reply = os.dup(1)
    os.dup2(2, 1)
    program = _load_program(module) if module else None
    server = os.getpid()
    lines = _Lines(0)
    while True:
        request = lines.read()
        if request is None:
            return 0
        if "config" not in request:
            continue  # a kill that came after its grade ended
        refused = program if isinstance(program, str) else None
        if refused is None and _threads() > 1:
            refused = "the server has helper threads (a fork would be unsafe)"
        if refused is not None:
            _send(reply, {"refused": refused})
            continue
        served = program if isinstance(program, tuple) else None
        pid = os.fork()
        if pid == 0:
            _grade_child(request, server, served, reply)
        pidfd = os.pidfd_open(pid)
        _send(reply, {"pid": pid})
        ended = False
        while True:
            if not lines.ready():
                readable, _, _ = select.select([pidfd, 0], [], [])
                if pidfd in readable:
                    break
            follow = lines.read()
            if follow is None:
                ended = True
                break
            if follow.get("kill"):
                _kill_child(pid)
        # The child has exited (or must die now) but is not reaped: its group id is still its.
        _kill_child(pid)
        _, status = os.waitpid(pid, 0)
        os.close(pidfd)
        if ended:
            return 0
        _send(reply, {"exit": os.waitstatus_to_exitcode(status)})


def _main(argv: Sequence[str]) -> int:
    if len(argv) > 1 and argv[1] == SERVE_FLAG:
        return _serve(argv[2] if len(argv) > 2 else None)
    return _run_config(json.loads(Path(argv[1]).read_text()))


if __name__ == "__main__":
    sys.exit(_main(sys.argv))
