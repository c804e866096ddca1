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

from openmle.errors import InvalidArgument, MissingDependency, OpenMLEError

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
    "tensorboard, as KIND or KIND:DIR (default DIR: openmle-tracking, mlruns, . (W&B writes "
    "DIR/wandb/offline-run-*), runs; "
    "extras mlflow, wandb, tensorboard); default: off"
)


def _spec(text: str) -> str:
    """An argparse type: a valid ``--track`` value whose directory can be made (tried here and
    removed again, so a bad one exits 2 before the run header rather than failing after it,
    and a command that fails before its tracker opens leaves no empty directory behind; the
    tracker makes it when it opens).
    """
    from openmle.tracking import TrackSpec

    try:
        spec = TrackSpec.parse(text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    try:
        _try_mkdir(spec.where)
    except OSError as exc:
        why = "it is a file" if isinstance(exc, FileExistsError) else exc.strerror or str(exc)
        raise argparse.ArgumentTypeError(
            f"--track {text}: cannot use {str(spec.where)!r} as the tracking directory ({why}); "
            "name a directory you can write to"
        ) from None
    return text


def _try_mkdir(where: Path) -> None:
    """Make ``where`` (and its missing parents), then remove the directories made here again.

    Raises:
        OSError: ``where`` cannot be made (a file in the way, no permission, a read-only or
            special file system).
    """
    made = []
    path = where.absolute()
    while not path.exists() and path != path.parent:
        made.append(path)
        path = path.parent
    where.mkdir(parents=True, exist_ok=True)
    for path in made:  # deepest first; what another process put there meanwhile stays
        try:
            path.rmdir()
        except OSError:
            break


class _TrackAction(argparse.Action):
    """Store ``--track``; when its extra is missing, the command's handler becomes one that
    raises :class:`~openmle.errors.MissingDependency` (exit 1, naming the extra) before the
    command starts.
    """

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from openmle.tracking import TrackSpec

        setattr(namespace, self.dest, values)
        kind = TrackSpec.parse(str(values)).kind
        if kind != "jsonl" and importlib.util.find_spec(kind) is None:

            def missing(_args: argparse.Namespace) -> int:
                raise MissingDependency(
                    f"--track {kind} needs the {kind} extra: pip install 'openmle[{kind}]'"
                )

            namespace.handler = missing


def add_track_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--track KIND[:DIR]`` (a bad kind or a directory that cannot be made exits 2, a
    missing extra exits 1, naming the fix, before the command starts).
    """
    parser.add_argument(
        "--track",
        metavar="KIND[:DIR]",
        type=_spec,
        action=_TrackAction,
        default=None,
        help=TRACK_HELP,
    )


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
