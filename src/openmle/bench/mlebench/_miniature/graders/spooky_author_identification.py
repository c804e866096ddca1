"""spooky-author-identification: multi-class log loss over EAP, HPL, MWS (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import InvalidSubmissionError, Table, one_hot_log_loss, table

AUTHORS = ("EAP", "HPL", "MWS")


def grade(submission: Any, answers: Any) -> float:
    """Log loss of ``id`` plus one probability column per author (exactly 4 columns)."""
    n = len(table(answers))

    def shape(sub: Table) -> None:
        if (len(sub), len(sub.columns)) != (n, len(AUTHORS) + 1):
            raise InvalidSubmissionError(
                f"expected a submission of shape ({n}, {len(AUTHORS) + 1}) but got "
                f"({len(sub)}, {len(sub.columns)})"
            )

    return one_hot_log_loss(submission, answers, id_col="id", classes=AUTHORS, check=shape)
