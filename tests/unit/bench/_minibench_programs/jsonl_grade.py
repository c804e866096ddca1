"""``grade.py`` of ``mini-jsonl``: accuracy against JSONL answers."""

from __future__ import annotations

from typing import Any

from mlebench.grade_helpers import InvalidSubmissionError


def grade(submission: Any, answers: list[dict[str, Any]]) -> float:
    """Accuracy of the submission (a pandas frame) against the answers' records."""
    truth = {a["id"]: a["label"] for a in answers}
    if "id" not in submission.columns or "label" not in submission.columns:
        raise InvalidSubmissionError("the submission needs columns id and label")
    got = {int(i): str(v) for i, v in zip(submission["id"], submission["label"], strict=True)}
    if set(got) != set(truth):
        raise InvalidSubmissionError("the submission's ids do not match the test ids")
    return sum(got[i] == str(truth[i]) for i in truth) / len(truth)
