"""The tracking seam: the :class:`Tracker` protocol, the ``--track`` spec, parameter flattening."""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Protocol, final, runtime_checkable

from attrs import frozen

from openmle.errors import InvalidArgument

__all__ = ["DEFAULT_DIRS", "TRACKERS", "TrackSpec", "Tracker", "flatten_params", "metric_values"]

TRACKERS: Final = ("jsonl", "mlflow", "wandb", "tensorboard")
"""The tracker kinds ``--track`` accepts (``KIND`` or ``KIND:DIR``)."""

DEFAULT_DIRS: Final = {
    "jsonl": "openmle-tracking",
    "mlflow": "mlruns",
    "wandb": ".",
    "tensorboard": "runs",
}
"""Where each kind writes when ``--track`` names no directory (relative to the working
directory; each tool's own default: MLflow's ``mlruns``, W&B's ``.`` (it writes
``./wandb/offline-run-*``), TensorBoard's ``runs``)."""

MAX_PARAM_CHARS: Final = 500
"""A parameter value longer than this is cut (with ``...``): trackers cap values (MLflow at
6,000 characters) and a parameter is for comparing runs, not for storing documents."""

_KEY_BAD = re.compile(r"[^A-Za-z0-9_\-./ ]")


@runtime_checkable
class Tracker(Protocol):
    """Where a search, a bench or a trainer reports: parameters, metrics by step, files.

    Every method may do blocking I/O; callers on an event loop wrap the tracker in
    :class:`~openmle.tracking.GuardedTracker` (the search does), which runs the calls in one
    worker thread, in order, and turns off tracking after the first failure.

    Methods:
        log_params(params): flat ``name -> str`` pairs (see :func:`flatten_params`); a name
            logged twice must carry the same value (MLflow refuses a change).
        log_metrics(metrics, step=None): flat ``name -> float`` values at ``step`` (an
            integer >= 0: the search's node step, the trainer's optimiser step; None: the
            tracker's own counter). Names use ``/`` for groups (``node/score``).
        log_artifact(path): copy a regular file (a report) into the run's artifacts.
        close(): finish the run and release files; idempotent.
    """

    def log_params(self, params: Mapping[str, str]) -> None:
        """Record run parameters (flat strings)."""
        ...

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        """Record metric values at ``step``."""
        ...

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Copy the file at ``path`` into the run's artifacts."""
        ...

    def close(self) -> None:
        """Finish the run (idempotent)."""
        ...


@final
@frozen
class TrackSpec:
    """A parsed ``--track`` value: the tracker kind and where it writes.

    Args:
        kind: one of :data:`TRACKERS`.
        dir: the directory named after ``KIND:`` (None: the kind's default, see
            :data:`DEFAULT_DIRS`).

    Raises:
        InvalidArgument: an unknown kind (the message lists the kinds) or an empty directory.
    """

    kind: str
    dir: Path | None = None

    def __attrs_post_init__(self) -> None:
        if self.kind not in TRACKERS:
            raise InvalidArgument(
                f"--track: unknown tracker {self.kind!r}; use one of {', '.join(TRACKERS)} "
                "(optionally KIND:DIR, e.g. mlflow:./mlruns)"
            )

    @classmethod
    def parse(cls, text: str) -> TrackSpec:
        """``KIND`` or ``KIND:DIR`` (``jsonl``, ``mlflow:./mlruns``, ``tensorboard:/tmp/tb``)."""
        kind, sep, rest = str(text).strip().partition(":")
        if sep and not rest.strip():
            raise InvalidArgument(
                f"--track {text!r}: nothing after ':'; write KIND:DIR or just KIND"
            )
        return cls(kind.strip().lower(), Path(rest.strip()) if sep else None)

    @property
    def where(self) -> Path:
        """The directory this spec writes to (``dir`` or the kind's default)."""
        return self.dir if self.dir is not None else Path(DEFAULT_DIRS[self.kind])

    def trl_args(self) -> dict[str, Any]:
        """The Hugging Face ``TrainingArguments`` (TRL ``GRPOConfig``/``SFTConfig``) fields
        that send the TRL path's logs to the same tracker: ``report_to`` and, for TensorBoard,
        ``logging_dir``. Set :meth:`trl_env` in the environment too. ``jsonl`` has no
        ``transformers`` integration: ``report_to`` is ``[]`` (log the trainer's
        ``state.log_history`` with a :class:`~openmle.tracking.JsonlTracker` instead).
        """
        if self.kind == "jsonl":
            return {"report_to": []}
        out: dict[str, Any] = {"report_to": [self.kind]}
        if self.kind == "tensorboard":
            out["logging_dir"] = str(self.where)
        return out

    def trl_env(self) -> dict[str, str]:
        """The environment the ``transformers`` integrations read for this spec: the local
        MLflow store in ``dir`` (``sqlite:///DIR/mlflow.db``), W&B offline in ``dir`` (never
        the network).
        """
        if self.kind == "mlflow":
            db = (self.where.resolve() / "mlflow.db").as_posix()
            return {"MLFLOW_TRACKING_URI": f"sqlite:///{db}"}  # an absolute path: 4 slashes
        if self.kind == "wandb":
            return {"WANDB_MODE": "offline", "WANDB_DIR": str(self.where.resolve())}
        return {}


def flatten_params(params: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested JSON-like mapping as flat ``a.b.c -> str`` parameters.

    Nested mappings join their keys with ``.``; lists, tuples and other values become their
    JSON text (strings stay as they are); None becomes ``"null"``. Key characters outside
    ``[A-Za-z0-9_-./ ]`` become ``_`` (MLflow's rule); keys are cut at 250 characters and values
    at :data:`MAX_PARAM_CHARS`.
    """
    out: dict[str, str] = {}
    for key, value in params.items():
        name = _KEY_BAD.sub("_", f"{prefix}{key}")[:250]
        if isinstance(value, Mapping):
            out.update(flatten_params(value, f"{name}."))
            continue
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        if len(text) > MAX_PARAM_CHARS:
            text = text[: MAX_PARAM_CHARS - 3] + "..."
        out[name] = text
    return out


def metric_values(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numeric entries of ``metrics`` as floats (bools as 0/1; None, NaN, infinities
    and non-numbers dropped), so every tracker gets values it can plot.
    """
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, bool) or (isinstance(value, int | float) and math.isfinite(value)):
            out[str(key)] = float(value)
    return out
