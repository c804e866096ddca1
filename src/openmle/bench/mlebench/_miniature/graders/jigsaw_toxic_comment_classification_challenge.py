"""jigsaw-toxic-comment-classification-challenge: mean column-wise ROC AUC (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import aligned, auroc, number, probabilities

CLASSES = ("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate")


def grade(submission: Any, answers: Any) -> float:
    """Mean ROC AUC over the six labels; answer rows marked -1 (not scored) are skipped."""
    sub, ans = aligned(submission, answers, "id", CLASSES)
    probs = probabilities(sub, CLASSES)
    truth = [[number(r[c], "answers") for c in CLASSES] for r in ans]
    keep = [i for i, t in enumerate(truth) if sum(t) >= 0]
    aucs = [
        auroc([truth[i][k] for i in keep], [probs[i][k] for i in keep]) for k in range(len(CLASSES))
    ]
    return sum(aucs) / len(aucs)
