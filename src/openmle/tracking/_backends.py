"""The trackers: local JSONL (no extra), a local MLflow store, W&B offline, TensorBoard.

The third-party libraries are imported when a tracker is made, never at import time; a missing
one raises :class:`~openmle.errors.MissingDependency` naming the extra to install.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from openmle._compat import require
from openmle.errors import InvalidArgument
from openmle.tracking._base import Tracker, TrackSpec, metric_values

__all__ = [
    "JSONL_FILE",
    "MLFLOW_DB",
    "JsonlTracker",
    "MlflowTracker",
    "TensorBoardTracker",
    "WandbTracker",
    "mlflow_uri",
    "open_tracker",
]

JSONL_FILE = "tracking.jsonl"
"""The file a :class:`JsonlTracker` appends to, in its run directory."""

_NAME_BAD = re.compile(r"[^A-Za-z0-9_.\-]")


def _run_name(name: str) -> str:
    clean = _NAME_BAD.sub("_", name).strip("._") or "run"
    return clean[:100]


def _fresh(parent: Path, name: str) -> Path:
    """``parent/name``, or ``parent/name-2``, ... : the first that does not exist yet."""
    path, n = parent / name, 1
    while path.exists() or path.is_symlink():
        n += 1
        path = parent / f"{name}-{n}"
    return path


def _mkdir(path: Path) -> Path:
    """Make the directory ``path`` (and its parents); one that cannot be made or is a file is
    an InvalidArgument naming it, not an OSError.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "it is a file" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise InvalidArgument(
            f"cannot use {str(path)!r} as a tracking directory ({why}); "
            "name a directory you can write to"
        ) from None
    return path


def _regular(path: str | os.PathLike[str]) -> Path:
    """``path`` if it is a regular file (no symbolic link); else InvalidArgument."""
    p = Path(path)
    try:
        st = p.lstat()
    except OSError as exc:
        raise InvalidArgument(f"cannot log artifact {p}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidArgument(f"cannot log artifact {p}: not a regular file")
    return p


class JsonlTracker:
    """Local JSON lines, no extra: ``DIR/RUN/tracking.jsonl`` and ``DIR/RUN/artifacts/``.

    One object per line, appended and flushed as it is logged::

        {"kind": "params", "params": {"task": "...", ...}, "time": 1764680000.0}
        {"kind": "metrics", "step": 3, "metrics": {"node/score": 0.91}, "time": ...}
        {"kind": "artifact", "name": "report.html", "path": "artifacts/report.html", "time": ...}
        {"kind": "close", "time": ...}

    Args:
        dir: the tracking directory (made if missing).
        run_name: the run's folder under ``dir``; characters outside ``[A-Za-z0-9_.-]`` become
            ``_``; when taken, ``-2``, ``-3``, ... is appended.

    Attributes:
        path: the run's folder; ``path / "tracking.jsonl"`` is the file.
    """

    def __init__(self, dir: str | os.PathLike[str], *, run_name: str = "run") -> None:
        base = _mkdir(Path(dir))
        self.path = _fresh(base, _run_name(run_name))
        self.path.mkdir()
        self._file: IO[str] | None = (self.path / JSONL_FILE).open("a", encoding="utf-8")

    def _write(self, record: dict[str, Any]) -> None:
        if self._file is None:
            raise InvalidArgument(f"the JSONL tracker at {self.path} is closed")
        self._file.write(json.dumps({**record, "time": time.time()}, sort_keys=True) + "\n")
        self._file.flush()

    def log_params(self, params: Mapping[str, str]) -> None:
        """Append a ``params`` line."""
        self._write({"kind": "params", "params": {str(k): str(v) for k, v in params.items()}})

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        """Append a ``metrics`` line (finite numbers only)."""
        self._write({"kind": "metrics", "step": step, "metrics": metric_values(metrics)})

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Copy the regular file at ``path`` to ``artifacts/`` and append an ``artifact`` line."""
        src = _regular(path)
        arts = self.path / "artifacts"
        arts.mkdir(exist_ok=True)
        dest = _fresh(arts, src.name)
        shutil.copyfile(src, dest, follow_symlinks=False)
        self._write({"kind": "artifact", "name": src.name, "path": f"artifacts/{dest.name}"})

    def close(self) -> None:
        """Append a ``close`` line and close the file (idempotent)."""
        if self._file is not None:
            self._write({"kind": "close"})
            self._file.close()
            self._file = None


MLFLOW_DB = "mlflow.db"
"""The SQLite file of the local MLflow store ``--track mlflow:DIR`` writes (``DIR/mlflow.db``,
artifacts under ``DIR/artifacts``)."""


def mlflow_uri(dir: str | os.PathLike[str]) -> str:
    """The tracking URI of the local MLflow store in ``dir``: ``sqlite:///DIR/mlflow.db``
    (MLflow's local backend; its ``file:`` store is in maintenance mode and refused by default
    since MLflow 3.7).
    """
    return f"sqlite:///{(Path(dir).resolve() / MLFLOW_DB).as_posix()}"  # 4 slashes: absolute


class MlflowTracker:
    """One MLflow run (extra ``mlflow``), through ``MlflowClient`` (no global active run, so
    several trackers can be open at once).

    Args:
        tracking_uri: the store: :func:`mlflow_uri` of a directory for a local store (what
            ``--track mlflow:DIR`` uses); a server URL works too but ``--track`` never uses one.
        experiment: the experiment's name (made when missing, its artifacts under
            ``artifact_root/EXPERIMENT`` when ``artifact_root`` is given).
        run_name: the run's name.
        artifact_root: where a new experiment keeps its artifacts (None: the store's default).

    Raises:
        MissingDependency: ``mlflow`` is not installed (``pip install 'openmle[mlflow]'``).
    """

    def __init__(
        self,
        tracking_uri: str,
        *,
        experiment: str = "openmle",
        run_name: str = "run",
        artifact_root: str | os.PathLike[str] | None = None,
    ):
        require("mlflow", "mlflow")
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=tracking_uri)
        found = self.client.get_experiment_by_name(experiment)
        if found is not None:
            exp_id = found.experiment_id
        else:
            where = None
            if artifact_root is not None:
                where = (Path(artifact_root).resolve() / _run_name(experiment)).as_uri()
            exp_id = self.client.create_experiment(experiment, artifact_location=where)
        self.run_id: str = self.client.create_run(exp_id, run_name=run_name).info.run_id
        self._closed = False

    def log_params(self, params: Mapping[str, str]) -> None:
        """Log the parameters (in batches of 100, MLflow's limit)."""
        from mlflow.entities import Param

        items = [Param(str(k), str(v)) for k, v in params.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i : i + 100])

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        """Log the metrics at ``step`` (0 when None)."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(k, v, now, step or 0) for k, v in metric_values(metrics).items()]
        for i in range(0, len(items), 1000):
            self.client.log_batch(self.run_id, metrics=items[i : i + 1000])

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Copy the file into the run's artifacts."""
        self.client.log_artifact(self.run_id, str(_regular(path)))

    def close(self) -> None:
        """Mark the run finished (idempotent)."""
        if not self._closed:
            self._closed = True
            self.client.set_terminated(self.run_id)


class WandbTracker:
    """One Weights & Biases run in offline mode (extra ``wandb``): written under
    ``DIR/wandb/offline-run-*``, never sent anywhere (``wandb sync`` uploads it later).

    Args:
        dir: the directory W&B writes its ``wandb/`` folder in.
        project: the W&B project name; run_name: the run's name.

    Raises:
        MissingDependency: ``wandb`` is not installed (``pip install 'openmle[wandb]'``).
    """

    def __init__(
        self, dir: str | os.PathLike[str], *, project: str = "openmle", run_name: str = "run"
    ) -> None:
        wandb: Any = require("wandb", "wandb")
        _mkdir(Path(dir))
        self.run: Any = wandb.init(
            project=project,
            name=run_name,
            dir=str(dir),
            mode="offline",
            settings=wandb.Settings(silent=True, disable_git=True, console="off"),
            reinit="create_new",
        )
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        self._closed = False

    @property
    def path(self) -> Path:
        """The run's offline directory (``.../wandb/offline-run-...``)."""
        return Path(self.run.dir).parent

    def log_params(self, params: Mapping[str, str]) -> None:
        """Add the parameters to the run's config."""
        self.run.config.update(dict(params), allow_val_change=True)

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        """Log the metrics with ``step`` as the ``step`` metric (W&B's own step stays
        monotonic, so out-of-order steps of a concurrent search are kept).
        """
        values = metric_values(metrics)
        if step is not None:
            values["step"] = float(step)
        self.run.log(values)

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Save the file with the run (its ``files/``)."""
        src = _regular(path).resolve()
        self.run.save(str(src), base_path=str(src.parent), policy="now")

    def close(self) -> None:
        """Finish the run and, when no other W&B run is active in this process, shut down W&B's
        service (``wandb.teardown``): only that writes the offline run's file out in full
        before ``close`` returns (idempotent).
        """
        if not self._closed:
            self._closed = True
            self.run.finish()
            wandb: Any = require("wandb", "wandb")
            if wandb.run is None:
                wandb.teardown()


class TensorBoardTracker:
    """TensorBoard event files (extra ``tensorboard``) in ``DIR/RUN/``, written with
    TensorBoard's own event writer: every metric is a scalar (``tensorboard --logdir DIR``
    plots it; ``EventAccumulator.Scalars`` reads it). Parameters go to ``DIR/RUN/params.json``
    (TensorBoard has no parameter store); artifacts are copied to ``DIR/RUN/artifacts/``.

    Args:
        dir: the log directory.
        run_name: the run's folder under ``dir`` (``-2``, ... appended when taken).

    Raises:
        MissingDependency: ``tensorboard`` is not installed
            (``pip install 'openmle[tensorboard]'``).
    """

    def __init__(self, dir: str | os.PathLike[str], *, run_name: str = "run") -> None:
        require("tensorboard", "tensorboard")
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        base = _mkdir(Path(dir))
        self.path = _fresh(base, _run_name(run_name))
        self.path.mkdir()
        self._event: Any = Event
        self._summary: Any = Summary
        self.writer: Any = EventFileWriter(str(self.path))
        self._step = 0
        self._params: dict[str, str] = {}
        self._closed = False

    def log_params(self, params: Mapping[str, str]) -> None:
        """Write ``params.json`` (with what was logged before)."""
        self._params.update({str(k): str(v) for k, v in params.items()})
        text = json.dumps(self._params, indent=2, sort_keys=True)
        (self.path / "params.json").write_text(text + "\n", encoding="utf-8")

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        """One scalar per metric at ``step`` (the tracker's own counter when None)."""
        at = self._step if step is None else step
        self._step = max(self._step, at) + 1
        values = [
            self._summary.Value(tag=k, simple_value=v) for k, v in metric_values(metrics).items()
        ]
        if values:
            self.writer.add_event(
                self._event(wall_time=time.time(), step=at, summary=self._summary(value=values))
            )
            self.writer.flush()

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Copy the file to ``artifacts/``."""
        src = _regular(path)
        arts = self.path / "artifacts"
        arts.mkdir(exist_ok=True)
        shutil.copyfile(src, _fresh(arts, src.name), follow_symlinks=False)

    def close(self) -> None:
        """Flush and close the event file (idempotent)."""
        if not self._closed:
            self._closed = True
            self.writer.close()


def open_tracker(
    spec: str | TrackSpec,
    *,
    run_name: str,
    experiment: str = "openmle",
) -> Tracker:
    """Make the tracker a ``--track`` value names (``KIND`` or ``KIND:DIR``).

    Local only: MLflow writes a local SQLite store (``DIR/mlflow.db`` and ``DIR/artifacts``,
    default ``mlruns``; :func:`mlflow_uri`), W&B runs offline (``DIR/wandb/offline-run-*``,
    default DIR ``.``: ``./wandb/offline-run-*``), TensorBoard writes event files
    (``DIR/RUN``, default ``runs``), JSONL writes ``DIR/RUN/tracking.jsonl`` (default
    ``openmle-tracking``).

    Args:
        spec: the ``--track`` value or a parsed :class:`TrackSpec`.
        run_name: the run's name (the run directory's name, the bench directory's name).
        experiment: the MLflow experiment / W&B project.

    Returns:
        A tracker the caller closes (wrap it in :class:`GuardedTracker` to keep tracking
        failures and blocking I/O away from the run).

    Raises:
        InvalidArgument: an unknown kind (naming ``--track`` and the kinds); a directory that
            cannot be made or is a file.
        MissingDependency: the kind's extra is not installed (naming it).
    """
    s = spec if isinstance(spec, TrackSpec) else TrackSpec.parse(spec)
    where = s.where
    if s.kind == "mlflow":
        require("mlflow", "mlflow")
        _mkdir(where)
        return MlflowTracker(
            mlflow_uri(where),
            experiment=experiment,
            run_name=run_name,
            artifact_root=where / "artifacts",
        )
    if s.kind == "wandb":
        return WandbTracker(where, project=experiment, run_name=run_name)
    if s.kind == "tensorboard":
        return TensorBoardTracker(where, run_name=run_name)
    return JsonlTracker(where, run_name=run_name)
