"""``grade.py`` of ``mini-tabular``: accuracy of ``label`` by ``id``."""

from __future__ import annotations

from typing import Any

from mlebench.grade_helpers import InvalidSubmissionError


def grade(submission: Any, answers: Any) -> float:
    """Accuracy of the submission's labels (pandas frames)."""
    if "id" not in submission.columns or "label" not in submission.columns:
        raise InvalidSubmissionError("the submission needs columns id and label")
    if len(submission) != len(answers):
        raise InvalidSubmissionError("the submission has the wrong number of rows")
    merged = answers.merge(submission, on="id", suffixes=("", "_pred"))
    if len(merged) != len(answers):
        raise InvalidSubmissionError("the submission's ids do not match the test ids")
    return float((merged["label"].astype(str) == merged["label_pred"].astype(str)).mean())
