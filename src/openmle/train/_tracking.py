"""Trainer steps to a :class:`~openmle.tracking.Tracker`: the ``on_step`` callback of
:meth:`SFTTrainer.fit` and :func:`train_on_policy`, and the CLI's training loop.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from openmle.tracking import Tracker, metric_values

__all__ = ["StepTracker"]


class StepTracker:
    """Report every trainer step to ``tracker``: use it as ``on_step``.

    Takes what the trainers hand ``on_step``: a step's metrics mapping (``SFTTrainer.step`` /
    ``GSPOTrainer.step``: ``loss``, ``grad_norm``, ``lr``, ``step``, ...) or a
    :class:`RolloutStep` (:func:`train_on_policy`: its ``metrics`` plus ``reward``, the mean
    reward of its groups, and ``staleness``, the largest policy lag). Each finite value is
    logged as ``PREFIX + name`` at the step: the mapping's ``step`` entry (the optimiser steps
    taken, 1-based), the rollout step's ``step``, else a counter of the calls; a step with no
    finite value logs nothing.

    Args:
        tracker: where to report (wrap it in :class:`~openmle.tracking.GuardedTracker` so a
            tracking failure cannot stop the training).
        prefix: the metric names' prefix (default ``"train/"``).
    """

    def __init__(self, tracker: Tracker, *, prefix: str = "train/") -> None:
        self.tracker = tracker
        self.prefix = prefix
        self.calls = 0

    def __call__(self, step: Mapping[str, Any] | Any) -> None:
        """Log one step (see the class)."""
        self.calls += 1
        if isinstance(step, Mapping):
            values = metric_values(step)
            at = values.pop("step", float(self.calls))
        else:
            values = metric_values(getattr(step, "metrics", {}))
            values.pop("step", None)
            reward = getattr(step, "mean_reward", math.nan)
            if isinstance(reward, int | float) and math.isfinite(reward):
                values["reward"] = float(reward)
            lag = tuple(getattr(step, "staleness", ()))
            if lag:
                values["staleness"] = float(max(lag))
            at = float(getattr(step, "step", self.calls))
        if values:
            named = {f"{self.prefix}{k}": v for k, v in values.items()}
            self.tracker.log_metrics(named, step=int(at))
