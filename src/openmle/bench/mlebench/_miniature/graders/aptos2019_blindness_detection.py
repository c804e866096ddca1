"""aptos2019-blindness-detection: quadratic weighted kappa of ``diagnosis`` (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import InvalidSubmissionError, aligned, number, quadratic_kappa, table


def grade(submission: Any, answers: Any) -> float:
    """Quadratic weighted kappa of the predicted grades against the answers by id_code."""
    sub = table(submission)
    if "diagnosis" not in sub.cells:
        raise InvalidSubmissionError("the submission needs the column 'diagnosis'")
    if not len(sub):
        raise InvalidSubmissionError("the submission is empty")
    s_rows, a_rows = aligned(sub, answers, "id_code", ("diagnosis",))
    pred = [number(r["diagnosis"], "diagnosis") for r in s_rows]
    truth = [number(r["diagnosis"], "answers") for r in a_rows]
    return quadratic_kappa(pred, truth)
