"""plant-pathology-2020-fgvc7: mean column-wise ROC AUC over four classes (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import InvalidSubmissionError, aligned, auroc, number, table

CLASSES = ("healthy", "multiple_diseases", "rust", "scab")


def grade(submission: Any, answers: Any) -> float:
    """Mean ROC AUC of the four class columns (exactly ``image_id`` plus the classes)."""
    sub = table(submission)
    if set(sub.columns) != {"image_id", *CLASSES}:
        raise InvalidSubmissionError(
            f"the submission needs exactly the columns image_id, {', '.join(CLASSES)}"
        )
    s_rows, a_rows = aligned(sub, answers, "image_id", CLASSES)
    return sum(
        auroc([number(r[c], "answers") for r in a_rows], [number(r[c], c) for r in s_rows])
        for c in CLASSES
    ) / len(CLASSES)
