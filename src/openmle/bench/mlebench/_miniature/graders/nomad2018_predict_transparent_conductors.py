"""nomad2018-predict-transparent-conductors: mean column-wise RMSLE (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import InvalidSubmissionError, number, require, rmsle, table

TARGETS = ("formation_energy_ev_natom", "bandgap_energy_ev")


def grade(submission: Any, answers: Any) -> float:
    """Mean of the two targets' RMSLE. Rows are compared in file order, as MLE-bench's
    grader does (it does not match ids).
    """
    sub, ans = table(submission), table(answers)
    require(sub, TARGETS)
    if len(sub) != len(ans):
        raise InvalidSubmissionError(
            f"expected {len(ans)} rows in the submission but got {len(sub)}"
        )
    return sum(
        rmsle([number(v, "answers") for v in ans.col(t)], [number(v, t) for v in sub.col(t)])
        for t in TARGETS
    ) / len(TARGETS)
