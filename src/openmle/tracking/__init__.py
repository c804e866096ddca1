"""Experiment tracking: one small seam the search, the bench and the trainers report through.

- :class:`Tracker`: the protocol (``log_params``, ``log_metrics`` at a step, ``log_artifact``,
  ``close``); :class:`GuardedTracker` runs a tracker's calls in one worker thread and turns
  tracking off after its first failure, so tracking never blocks an event loop or ends a run.
- The trackers: :class:`JsonlTracker` (local JSON lines, no extra), :class:`MlflowTracker`
  (extra ``mlflow``, a local SQLite store), :class:`WandbTracker` (extra ``wandb``, offline mode),
  :class:`TensorBoardTracker` (extra ``tensorboard``); :func:`open_tracker` makes one from a
  ``--track`` value (:class:`TrackSpec`). The third-party libraries load only when a tracker is
  made; a missing one raises :class:`~openmle.errors.MissingDependency` naming the extra.

Off by default: nothing is tracked unless a tracker is passed (``track=`` in
:func:`openmle.search.run_search`, ``--track`` on the command line). What each caller logs:
``docs/how-to/track-experiments.md``.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.tracking._backends import (
    JSONL_FILE,
    MLFLOW_DB,
    JsonlTracker,
    MlflowTracker,
    TensorBoardTracker,
    WandbTracker,
    mlflow_uri,
    open_tracker,
)
from openmle.tracking._base import (
    DEFAULT_DIRS,
    TRACKERS,
    Tracker,
    TrackSpec,
    flatten_params,
    metric_values,
)
from openmle.tracking._guard import GuardedTracker

__all__ = [
    "DEFAULT_DIRS",
    "JSONL_FILE",
    "MLFLOW_DB",
    "TRACKERS",
    "GuardedTracker",
    "JsonlTracker",
    "MlflowTracker",
    "TensorBoardTracker",
    "TrackSpec",
    "Tracker",
    "WandbTracker",
    "flatten_params",
    "metric_values",
    "mlflow_uri",
    "open_tracker",
]

publish(globals())
