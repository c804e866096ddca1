"""siim-isic-melanoma-classification: ROC AUC of ``target`` by ``image_name``
(our grader for MLE-bench's answers format).
"""

from __future__ import annotations

from typing import Any

from ._common import auroc_grade


def grade(submission: Any, answers: Any) -> float:
    """ROC AUC; InvalidSubmissionError for a submission MLE-bench's grader refuses."""
    return auroc_grade(submission, answers, id_col="image_name", target_col="target")
