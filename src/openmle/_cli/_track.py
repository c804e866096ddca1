"""``--track KIND[:DIR]`` for ``search``, ``demo``, ``resume``, ``bench run|resume`` and
``train sft``: one flag, one way to open, feed and close the tracker (:mod:`openmle.tracking`).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from openmle.errors import InvalidArgument, OpenMLEError

__all__ = [
    "TRACK_HELP",
    "add_track_flag",
    "close_track",
    "closing_on_error",
    "finish_track",
    "open_track",
    "track_bench_dir",
    "track_steps",
]

log = logging.getLogger("openmle.tracking")

TRACK_HELP = (
    "report to an experiment tracker: jsonl, mlflow (a local store), wandb (offline) or "
    "tensorboard, as KIND or KIND:DIR (default DIR: openmle-tracking, mlruns, ./wandb, runs; "
    "extras mlflow, wandb, tensorboard); default: off"
)


def _spec(text: str) -> str:
    """An argparse type: a valid ``--track`` value whose extra is installed."""
    from openmle.tracking import TrackSpec

    try:
        kind = TrackSpec.parse(text).kind
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if kind != "jsonl" and importlib.util.find_spec(kind) is None:
        raise argparse.ArgumentTypeError(
            f"--track {kind} needs the {kind} extra: pip install 'openmle[{kind}]'"
        )
    return text


def add_track_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--track KIND[:DIR]`` (a bad kind or a missing extra exits 2, naming the fix)."""
    parser.add_argument("--track", metavar="KIND[:DIR]", type=_spec, default=None, help=TRACK_HELP)


def open_track(args: argparse.Namespace, run_name: str, experiment: str = "openmle") -> Any:
    """The :class:`~openmle.tracking.GuardedTracker` that ``--track`` asks for (it owns the
    tracker), or None without ``--track``.

    Raises:
        MissingDependency: the tracker's extra is not installed (naming it).
    """
    spec = getattr(args, "track", None)
    if spec is None:
        return None
    from openmle.tracking import GuardedTracker, open_tracker

    return GuardedTracker(open_tracker(spec, run_name=run_name, experiment=experiment))


def close_track(tracker: Any) -> None:
    """Close ``tracker`` (None: nothing): waits for its queued calls."""
    if tracker is not None:
        tracker.close()


def finish_track(tracker: Any, artifacts: Iterable[str | os.PathLike[str] | None]) -> None:
    """Log the files in ``artifacts`` that exist (None skipped), then close ``tracker``."""
    if tracker is None:
        return
    for path in artifacts:
        if path is not None and os.path.isfile(path):
            tracker.log_artifact(path)
    tracker.close()


@contextlib.contextmanager
def closing_on_error(tracker: Any) -> Iterator[None]:
    """Close ``tracker`` when the block raises (an interruption included), then re-raise."""
    try:
        yield
    except BaseException:
        close_track(tracker)
        raise


def track_bench_dir(tracker: Any, out: Path, paths: Mapping[str, Any]) -> None:
    """Report the finished bench at ``out`` (:func:`openmle.bench.track_bench`) with the
    report files in ``paths`` (Markdown, HTML, JSON) as artifacts, then close ``tracker``. A
    bench directory the report cannot read is a warning: tracking never fails the command.
    """
    if tracker is None:
        return
    from openmle.bench import track_bench

    try:
        files = [paths[k] for k in ("markdown", "html", "json") if k in paths]
        track_bench(tracker, out, artifacts=[f for f in files if os.path.isfile(f)])
    except OpenMLEError as exc:
        log.warning("openmle: tracking the bench at %s failed: %s", out, exc)
    finally:
        tracker.close()


def track_steps(tracker: Any) -> Callable[[Mapping[str, Any]], None]:
    """The trainer's ``on_step`` for ``tracker`` (:class:`openmle.train.StepTracker`; a
    no-op without ``--track``).
    """
    if tracker is None:
        return lambda _m: None
    from openmle.train import StepTracker

    step_tracker: Callable[[Mapping[str, Any]], None] = StepTracker(tracker)
    return step_tracker
