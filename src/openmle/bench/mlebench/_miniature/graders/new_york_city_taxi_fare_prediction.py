"""new-york-city-taxi-fare-prediction: RMSE of ``fare_amount`` by ``key`` (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import aligned, number, rmse


def grade(submission: Any, answers: Any) -> float:
    """RMSE of the predicted fares, matched to the answers by ``key``."""
    sub, ans = aligned(submission, answers, "key", ("fare_amount",))
    return rmse(
        [number(r["fare_amount"], "answers") for r in ans],
        [number(r["fare_amount"], "fare_amount") for r in sub],
    )
