"""Helpers shared by the benchmark scripts: a timer that reports the median of repeats."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["emit", "median_seconds"]


def median_seconds(fn: Callable[[], object], *, repeats: int = 5, warmup: int = 1) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def emit(name: str, figures: dict[str, Any]) -> None:
    """Print the final JSON line of a benchmark."""
    print(json.dumps({"benchmark": name, **figures}, sort_keys=True))
