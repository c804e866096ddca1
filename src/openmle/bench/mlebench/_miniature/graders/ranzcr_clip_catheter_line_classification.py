"""ranzcr-clip-catheter-line-classification: mean ROC AUC over the nine scored labels
(MLE-bench scores nine of the eleven label columns; our grader).
"""

from __future__ import annotations

from typing import Any

from ._common import auroc_grade

CLASSES = (
    "ETT - Abnormal",
    "ETT - Borderline",
    "ETT - Normal",
    "NGT - Abnormal",
    "NGT - Borderline",
    "NGT - Incompletely Imaged",
    "NGT - Normal",
    "CVC - Abnormal",
    "CVC - Borderline",
)
"""The columns MLE-bench scores (its sample submission has these; the training labels also
have ``CVC - Normal`` and ``Swan Ganz Catheter Present``)."""


def grade(submission: Any, answers: Any) -> float:
    """Mean of each scored label's ROC AUC by StudyInstanceUID."""
    aucs = [
        auroc_grade(submission, answers, id_col="StudyInstanceUID", target_col=c) for c in CLASSES
    ]
    return sum(aucs) / len(aucs)
