"""mlsp-2013-birds: ROC AUC of ``Probability`` by ``Id``
(our grader for MLE-bench's answers format).
"""

from __future__ import annotations

from typing import Any

from ._common import auroc_grade


def grade(submission: Any, answers: Any) -> float:
    """ROC AUC; InvalidSubmissionError for a submission MLE-bench's grader refuses."""
    return auroc_grade(submission, answers, id_col="Id", target_col="Probability")
