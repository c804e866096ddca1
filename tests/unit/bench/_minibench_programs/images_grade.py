"""``grade.py`` of ``mini-images``: mean absolute error of ``bright``."""

from __future__ import annotations

from typing import Any

from mlebench.grade_helpers import InvalidSubmissionError


def grade(submission: Any, answers: Any) -> float:
    """Mean absolute error of the submission (pandas frames)."""
    if list(submission.columns) != ["id", "bright"]:
        raise InvalidSubmissionError("the submission needs exactly the columns id, bright")
    merged = answers.merge(submission, on="id", suffixes=("", "_pred"))
    if len(merged) != len(answers) or len(submission) != len(answers):
        raise InvalidSubmissionError("the submission's ids do not match the test ids")
    return float((merged["bright"] - merged["bright_pred"].astype(float)).abs().mean())
