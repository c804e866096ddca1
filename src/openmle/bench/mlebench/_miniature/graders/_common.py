"""Shared validation and metrics of the miniature registry's graders (our own code).

Every grader takes ``grade(submission, answers)`` as MLE-bench's do: two tables read from
CSV, a pandas ``DataFrame`` (``pd.read_csv(..., float_precision="round_trip")``, what
MLE-bench's harness passes) or, without pandas, the mapping ``{"columns": [...], "rows":
[[...], ...]}`` of strings that openmle's grading process passes. A submission that cannot
be graded raises :class:`InvalidSubmissionError` (the name MLE-bench's harness and openmle's
look for); broken answers raise ``ValueError``.

This file is copied next to each competition's ``grade.py`` in the miniature registry and
imported as ``from ._common import ...``; it needs only the standard library.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = [
    "InvalidSubmissionError",
    "Table",
    "accuracy",
    "aligned",
    "auroc",
    "key",
    "log_loss",
    "number",
    "quadratic_kappa",
    "rmse",
    "rmsle",
    "table",
]

_EPS = 2.220446049250313e-16  # float64 machine epsilon (scikit-learn's log-loss clip)


class InvalidSubmissionError(Exception):
    """A submission that cannot be graded (MLE-bench's exception name)."""


class Table:
    """Columns of a CSV: names in file order and each column's cells."""

    def __init__(self, columns: Sequence[str], cells: Mapping[str, list[Any]], n: int) -> None:
        self.columns = list(columns)
        self.cells = dict(cells)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def col(self, name: str) -> list[Any]:
        """The cells of column ``name`` (raises KeyError when absent)."""
        return self.cells[name]


def table(obj: Any) -> Table:
    """A :class:`Table` of a pandas DataFrame or of ``{"columns": [...], "rows": [...]}``."""
    if isinstance(obj, Table):
        return obj
    if isinstance(obj, Mapping) and "columns" in obj and "rows" in obj:
        cols = [str(c) for c in obj["columns"]]
        rows = [list(r) for r in obj["rows"]]
        cells = {c: [r[i] if i < len(r) else "" for r in rows] for i, c in enumerate(cols)}
        return Table(cols, cells, len(rows))
    columns = getattr(obj, "columns", None)
    if columns is None:
        raise InvalidSubmissionError(f"expected a table, got {type(obj).__name__}")
    cols = [str(c) for c in columns]
    cells = {}
    for i, c in enumerate(cols):
        cells.setdefault(c, obj.iloc[:, i].tolist())
    return Table(cols, cells, len(obj))


def number(v: Any, what: str) -> float:
    """``v`` as a finite float; InvalidSubmissionError otherwise."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise InvalidSubmissionError(f"{what}: {str(v)[:40]!r} is not a number") from None
    if not math.isfinite(x):
        raise InvalidSubmissionError(f"{what}: missing or non-finite value")
    return x


def key(v: Any) -> str:
    """An id cell as a comparable string (``7``, ``7.0`` and ``"7"`` are one id)."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, bool):
        return str(int(v))
    return str(v)


def require(t: Table, cols: Sequence[str], who: str = "Submission") -> None:
    """Raise InvalidSubmissionError naming the first missing column."""
    for c in cols:
        if c not in t.cells:
            raise InvalidSubmissionError(f"{who} is missing the column {c!r}")


def aligned(
    submission: Any, answers: Any, id_col: str, cols: Sequence[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Rows of submission and answers paired by id (answers' order).

    Raises:
        InvalidSubmissionError: a missing column, a different row count, duplicate ids or
            ids that differ from the answers'.
        ValueError: the answers lack a column (a broken task).
    """
    sub, ans = table(submission), table(answers)
    for c in (id_col, *cols):
        if c not in ans.cells:
            raise ValueError(f"the answers lack the column {c!r}")
    require(sub, (id_col, *cols))
    if len(sub) != len(ans):
        raise InvalidSubmissionError(
            f"expected {len(ans)} rows in the submission but got {len(sub)}"
        )
    sub_ids = [key(v) for v in sub.col(id_col)]
    by_id = {k: i for i, k in enumerate(sub_ids)}
    ans_ids = [key(v) for v in ans.col(id_col)]
    if len(by_id) != len(sub_ids) or set(by_id) != set(ans_ids):
        raise InvalidSubmissionError(f"the submission's {id_col!r} values differ from the test ids")
    s_rows, a_rows = [], []
    for j, k in enumerate(ans_ids):
        i = by_id[k]
        s_rows.append({c: sub.col(c)[i] for c in cols})
        a_rows.append({c: ans.col(c)[j] for c in cols})
    return s_rows, a_rows


def probabilities(rows: Sequence[Mapping[str, Any]], cols: Sequence[str]) -> list[list[float]]:
    """The numeric cells of ``cols``, each in [0, 1]; InvalidSubmissionError otherwise."""
    out = []
    for r in rows:
        vals = [number(r[c], c) for c in cols]
        if any(v < 0 or v > 1 for v in vals):
            raise InvalidSubmissionError("probabilities must lie between 0 and 1")
        out.append(vals)
    return out


# ---------------------------------------------------------------------------- metrics


def _ranks(xs: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def auroc(y_true: Sequence[float], y_score: Sequence[float]) -> float:
    """Area under the ROC curve (the Mann-Whitney statistic, ties counted half).

    Raises:
        ValueError: ``y_true`` holds one class only (the AUC is undefined).
    """
    pos = sum(1 for y in y_true if y == 1)
    neg = sum(1 for y in y_true if y == 0)
    if pos + neg != len(y_true) or not pos or not neg:
        raise ValueError("ROC AUC needs binary 0/1 answers with both classes")
    ranks = _ranks(y_score)
    rank_sum = sum(r for r, y in zip(ranks, y_true, strict=True) if y == 1)
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg)


def log_loss(y_true: Sequence[Sequence[float]], y_pred: Sequence[Sequence[float]]) -> float:
    """Mean cross-entropy of one-hot answers and predicted probabilities: each prediction
    clipped to [eps, 1 - eps] and its row renormalised to sum 1 (scikit-learn's rule).
    """
    total = 0.0
    for t, p in zip(y_true, y_pred, strict=True):
        clipped = [min(max(x, _EPS), 1 - _EPS) for x in p]
        s = sum(clipped)
        total -= sum(ti * math.log(pi / s) for ti, pi in zip(t, clipped, strict=True) if ti)
    return total / len(y_true)


def binary_log_loss(y_true: Sequence[float], p: Sequence[float]) -> float:
    """Log loss of 0/1 answers and the probability of class 1."""
    clipped = [min(max(x, _EPS), 1 - _EPS) for x in p]
    return log_loss([[1 - y, y] for y in y_true], [[1 - x, x] for x in clipped])


def rmse(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Root mean squared error."""
    n = len(y_true)
    return math.sqrt(sum((a - b) ** 2 for a, b in zip(y_true, y_pred, strict=True)) / n)


def rmsle(y_true: Sequence[float], y_pred: Sequence[float]) -> float:
    """Root mean squared logarithmic error (values must exceed -1)."""
    if any(v <= -1 for v in y_pred):
        raise InvalidSubmissionError("RMSLE needs predictions greater than -1")
    return rmse([math.log1p(v) for v in y_true], [math.log1p(v) for v in y_pred])


def accuracy(y_true: Sequence[Any], y_pred: Sequence[Any]) -> float:
    """The fraction of equal pairs."""
    return sum(bool(a == b) for a, b in zip(y_true, y_pred, strict=True)) / len(y_true)


def quadratic_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """Cohen's kappa with quadratic weights over the sorted union of labels (weights by
    label position, as scikit-learn's ``cohen_kappa_score(weights="quadratic")``).
    """
    labels = sorted(set(a) | set(b))
    idx = {v: i for i, v in enumerate(labels)}
    n = len(labels)
    conf = [[0.0] * n for _ in range(n)]
    for x, y in zip(a, b, strict=True):
        conf[idx[x]][idx[y]] += 1
    rows = [sum(r) for r in conf]
    cols = [sum(conf[i][j] for i in range(n)) for j in range(n)]
    total = sum(rows)
    num = sum((i - j) ** 2 * conf[i][j] for i in range(n) for j in range(n))
    den = sum((i - j) ** 2 * rows[i] * cols[j] / total for i in range(n) for j in range(n))
    if den == 0:
        raise ValueError("kappa is undefined: every answer and prediction is one label")
    return 1 - num / den


def auroc_grade(submission: Any, answers: Any, *, id_col: str, target_col: str) -> float:
    """MLE-bench's common AUC contract: id and target columns, as many rows as the answers,
    numeric probabilities in [0, 1], the answers' ids; then ROC AUC.
    """
    sub, ans = aligned(submission, answers, id_col, (target_col,))
    scores = [number(r[target_col], target_col) for r in sub]
    if any(s < 0 or s > 1 for s in scores):
        raise InvalidSubmissionError(f"{target_col} must hold probabilities between 0 and 1")
    return auroc([float(r[target_col]) for r in ans], scores)


def one_hot_log_loss(
    submission: Any,
    answers: Any,
    *,
    id_col: str,
    classes: Sequence[str],
    check: Callable[[Table], None] | None = None,
) -> float:
    """Multi-class log loss of a probability table against one-hot answers: every class
    column present, rows summing to 1 (within 1e-6), values in [0, 1], the answers' ids.
    """
    sub = table(submission)
    if check is not None:
        check(sub)
    require(sub, (id_col, *classes))
    if len(sub) != len(table(answers)):
        raise InvalidSubmissionError("the submission and the answers differ in length")
    s_rows, a_rows = aligned(sub, answers, id_col, classes)
    probs = probabilities(s_rows, classes)
    if any(abs(sum(p) - 1) > 1e-6 for p in probs):
        raise InvalidSubmissionError("each row's probabilities must sum to one")
    truth = [[number(r[c], "answers") for c in classes] for r in a_rows]
    return log_loss(truth, probs)
