"""The MLE-bench grading process: ``python -I -m openmle.bench.mlebench.child CONFIG``.

Started by :func:`openmle.gym.run_child` (fixed environment, own session, killed at its
deadline; forked by a reused grading server that has imported this module and
:data:`PRELOAD`, or a fresh process, with the same ``main``); it confines itself
(:func:`openmle.gym.confine_child`: parent-death signal, ``RLIMIT_AS``, ``RLIMIT_CPU``) before
it imports anything of the registry, then runs one of:

- ``mode: "grade"``: the competition's ``grade_fn(submission_df, answers)`` from the registry
  (pandas reads the CSV with ``float_precision="round_trip"`` and the answers as CSV or JSONL,
  as MLE-bench does), its value rounded as MLE-bench's grader rounds it unless
  ``mlebench_round`` is false (a validation grade);
- ``mode: "view"``: :func:`openmle.bench.mlebench.build_validation_view` into ``out``.

It writes one JSON object to ``config["result"]``: ``{"score", "reason"}`` (grade),
``{"view": {...}}`` (view) or ``{"error": text}`` (the task is broken), plus ``"limit"`` when a
limit ended it. Reasons are raw here; the host masks them before a model sees them.
"""

from __future__ import annotations

import importlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["PRELOAD", "check_format", "grade", "main", "view"]

PRELOAD = ("pandas", "sklearn.metrics", "openmle.gym")
"""Modules a reused grading server imports once before it forks the grades' children (see
:func:`openmle.gym.run_child`): libraries and openmle only, never a registry's code (the
competition's ``grade.py`` and the ``mlebench`` package are imported in the child, after
:func:`openmle.gym.confine_child`). ``sklearn.metrics`` (skipped where scikit-learn is not
installed): most of MLE-bench's ``grade.py`` files import it, 0.6 s a grade otherwise."""


def _scored(score: Any, mlebench_round: bool = True) -> dict[str, Any]:
    """A grader's return value as a result: a finite number, else no score with the reason.

    With ``mlebench_round`` (a test grade) the score is rounded as MLE-bench's
    ``Grader.__call__`` rounds it, ``round(score, 5)`` on the value the grader returned,
    *before* it becomes a Python float: a NumPy scalar rounds by NumPy's rule (scale, round
    half to even, unscale), so ``np.float64(0.500005)`` gives 0.5 where Python's
    ``round(0.500005, 5)`` gives 0.50001, and the medal can differ. Without (a validation
    grade, which search selects on) the value is kept as the grader returned it.
    """
    try:
        value = float(round(score, 5) if mlebench_round else score)
    except (TypeError, ValueError, OverflowError):
        return {"score": None, "reason": "the grader returned no number"}
    if not math.isfinite(value):
        return {"score": None, "reason": "the grader returned a non-finite score"}
    return {"score": value, "reason": ""}


def grade(config: dict[str, Any]) -> dict[str, Any]:
    """Grade ``config["submission"]`` against ``config["answers"]`` with ``grade_fn``."""
    sub_path = Path(config["submission"])
    max_bytes = config.get("max_bytes")
    size = sub_path.stat().st_size
    if max_bytes and size > int(max_bytes):
        return {
            "score": None,
            "reason": f"the submission is {size} bytes, over the grading limit of "
            f"{int(max_bytes)} bytes (max_bytes); write a smaller submission",
            "limit": "size",
        }
    sys.path.insert(0, str(config["repo_root"]))
    try:
        import pandas as pd
    except ImportError:
        return _grade_without_pandas(config, sub_path)
    fn, why = _import_grader(config)
    if fn is None:
        return {"error": why}
    try:
        sub = pd.read_csv(sub_path, float_precision="round_trip")
    except pd.errors.EmptyDataError:
        sub = pd.DataFrame()
    except MemoryError:
        raise
    except Exception as exc:
        return _unreadable(exc)
    ans = str(config["answers"])
    if ans.endswith(".csv"):
        answers: Any = pd.read_csv(ans, float_precision="round_trip")
    elif ans.endswith(".jsonl"):
        with open(ans, encoding="utf-8") as fh:
            answers = [json.loads(line) for line in fh if line.strip()]
    else:
        return {"error": f"unsupported answers format: {Path(ans).name}"}
    return _graded(
        fn,
        sub,
        answers,
        lambda exc: {
            "score": None,
            "reason": f"the grader raised {type(exc).__name__} on this submission",
        },
        bool(config.get("mlebench_round", True)),
    )


def _import_grader(config: dict[str, Any]) -> tuple[Callable[[Any, Any], Any] | None, str]:
    """The competition's grade function (``grade_fn``, ``module:name``) and "", or None and why
    it cannot be imported.
    """
    spec = str(config["grade_fn"])
    mod, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), name), ""
    except MemoryError:
        raise
    except Exception as exc:
        return None, f"cannot import the grader {spec}: {type(exc).__name__}: {exc}"[:500]


def _unreadable(exc: BaseException) -> dict[str, Any]:
    return {"score": None, "reason": f"the submission is not a readable CSV ({type(exc).__name__})"}


def _graded(
    fn: Callable[[Any, Any], Any],
    sub: Any,
    answers: Any,
    otherwise: Callable[[Exception], dict[str, Any]],
    mlebench_round: bool = True,
) -> dict[str, Any]:
    """The grader's score of ``sub``; an ``InvalidSubmissionError`` (by name, as MLE-bench's
    harness looks for it) makes an invalid submission, any other exception ``otherwise(exc)``.
    """
    try:
        score = fn(sub, answers)
    except MemoryError:
        raise
    except Exception as exc:
        if type(exc).__name__ == "InvalidSubmissionError":
            return {"score": None, "reason": f"invalid submission: {str(exc)[:500]}"}
        return otherwise(exc)
    return _scored(score, mlebench_round)


def _csv_table(path: Path) -> dict[str, Any]:
    """A CSV as ``{"columns": [...], "rows": [[...], ...]}`` of strings."""
    import csv

    csv.field_size_limit(2**31 - 1)
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return {"columns": rows[0] if rows else [], "rows": rows[1:]}


def _grade_without_pandas(config: dict[str, Any], sub_path: Path) -> dict[str, Any]:
    """Without pandas: the grader gets plain tables (openmle's own graders, e.g. the
    miniature's, accept them); a grader that needs pandas gives the install hint.
    """
    need = {"error": "pandas is needed to grade MLE-bench competitions: pip install pandas"}
    fn, _why = _import_grader(config)
    if fn is None:
        return need
    ans = Path(str(config["answers"]))
    if ans.suffix != ".csv":
        return need
    try:
        sub = _csv_table(sub_path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return _unreadable(exc)
    # the answers are read inside the grader's try, as a grader's failure
    return _graded(
        lambda s, a: fn(s, _csv_table(a)),
        sub,
        ans,
        lambda _exc: need,
        bool(config.get("mlebench_round", True)),
    )


def _ids(path: Path, max_bytes: int | None) -> tuple[list[str], int, set[str]]:
    import csv

    csv.field_size_limit(2**31 - 1)
    if max_bytes and path.stat().st_size > max_bytes:
        raise ValueError(f"over the grading limit of {max_bytes} bytes (max_bytes)")
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        rows, ids = 0, set()
        for row in reader:
            rows += 1
            if row:
                ids.add(row[0])
    return header, rows, ids


def check_format(config: dict[str, Any]) -> dict[str, Any]:
    """``mode: "format"``: the submission has the sample submission's columns, row count and
    ids (first column); no answers are read (the ``--validation self`` protocol).
    """
    limit = config.get("max_bytes")
    try:
        s_head, s_rows, s_ids = _ids(Path(config["sample"]), None)
    except (OSError, UnicodeDecodeError) as exc:
        return {"error": f"cannot read the sample submission ({type(exc).__name__})"}
    try:
        head, rows, ids = _ids(Path(config["submission"]), int(limit) if limit else None)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return {"score": None, "reason": f"the submission is not a readable CSV ({exc})"}
    if set(head) != set(s_head):
        return {
            "score": None,
            "reason": f"the submission's columns differ from the sample submission's "
            f"({len(head)} vs {len(s_head)} columns); use its header",
        }
    if rows != s_rows or ids != s_ids:
        return {
            "score": None,
            "reason": "the submission's rows differ from the sample submission's (row count or "
            "ids in the first column); write one row per sample row",
        }
    return {"format_ok": True}


def view(config: dict[str, Any]) -> dict[str, Any]:
    """Build the validation view (see :func:`openmle.bench.mlebench.build_validation_view`)."""
    from openmle.bench.mlebench._views import build_validation_view
    from openmle.errors import TaskPackageError

    try:
        info = build_validation_view(
            str(config["competition"]),
            Path(config["public"]),
            Path(config["out"]),
            answers=str(config.get("answers") or "test.csv"),
            sample=str(config.get("sample") or "sample_submission.csv"),
            answer_header=config.get("answer_header"),
        )
    except TaskPackageError as exc:
        return {"error": str(exc)}
    except (OSError, ValueError, KeyError, ImportError) as exc:
        return {"error": f"building the validation view failed ({type(exc).__name__}: {exc})"[:600]}
    return {"view": info}


def main(argv: list[str]) -> int:
    """Entry point: read the configuration, confine, run the mode, write the result."""
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    from openmle.gym import confine_child

    confine_child(config)
    out = Path(config["result"])
    try:
        mode = config.get("mode")
        result = (
            view(config)
            if mode == "view"
            else check_format(config)
            if mode == "format"
            else grade(config)
        )
    except MemoryError:
        result = {
            "score": None,
            "reason": f"grading ran out of memory (the limit is {config.get('memory_mb')} MiB, "
            "memory_mb); shrink the submission",
            "limit": "memory",
        }
        if config.get("mode") == "view":
            result = {
                "error": "building the validation view ran out of memory (the limit is "
                f"{config.get('memory_mb')} MiB)",
                "limit": "memory",
            }
    out.write_text(json.dumps(result), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
