"""tabular-playground-series-dec-2021: accuracy of ``Cover_Type`` by ``Id`` (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import accuracy, aligned, number


def grade(submission: Any, answers: Any) -> float:
    """The fraction of test rows whose predicted cover type equals the answer."""
    sub, ans = aligned(submission, answers, "Id", ("Cover_Type",))
    return accuracy(
        [number(r["Cover_Type"], "answers") for r in ans],
        [number(r["Cover_Type"], "Cover_Type") for r in sub],  # a class label, numeric
    )
