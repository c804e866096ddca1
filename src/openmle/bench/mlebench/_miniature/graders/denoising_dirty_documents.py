"""denoising-dirty-documents: RMSE of pixel intensities by pixel id (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import aligned, number, rmse


def grade(submission: Any, answers: Any) -> float:
    """RMSE of ``value`` (0..1 intensity) over the ``id`` values ``<image>_<row>_<col>``."""
    sub, ans = aligned(submission, answers, "id", ("value",))
    return rmse(
        [number(r["value"], "answers") for r in ans], [number(r["value"], "value") for r in sub]
    )
