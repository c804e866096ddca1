"""A tracker that never stops the work it tracks: one worker thread, failures turn it off."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from openmle.tracking._base import Tracker, metric_values

__all__ = ["GuardedTracker"]

log = logging.getLogger("openmle.tracking")

CLOSE_TIMEOUT_S: Final = 60.0
"""How long :meth:`GuardedTracker.close` waits for the queued calls before giving up on them
(a tracker stuck on a full disk must not hang the end of a run)."""

_STOP = object()


class GuardedTracker:
    """Wrap a :class:`~openmle.tracking.Tracker` so tracking can neither block nor kill a run.

    Every call is queued (its arguments copied) and made by one daemon worker thread, in call
    order, so callers on an event loop never wait on a tracker's disk or network I/O. The first
    call that raises is logged once (logger ``openmle.tracking``, level WARNING, naming the
    tracker and the error) and every later call is dropped: a tracking failure never ends a
    search, a bench or a training run.

    Args:
        tracker: the tracker to call.
        owns: :meth:`close` also closes ``tracker`` (False: the caller closes it; the search
            wraps the tracker it is given with ``owns=False``).
        name: how the warning names the tracker (default: its class name).

    Use as a context manager or call :meth:`close`; either waits (up to
    :data:`CLOSE_TIMEOUT_S`) for the queued calls. Thread-safe.
    """

    def __init__(self, tracker: Tracker, *, owns: bool = True, name: str | None = None) -> None:
        self.tracker = tracker
        self.owns = owns
        self.name = name or type(tracker).__name__
        self.failed: BaseException | None = None
        self._queue: queue.Queue[Any] = queue.Queue()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._work, name=f"openmle-tracking-{self.name}", daemon=True
        )
        self._thread.start()

    # ------------------------------------------------------------------ the Tracker protocol

    def log_params(self, params: Mapping[str, str]) -> None:
        """Queue ``tracker.log_params`` (a copy of ``params``, values as strings)."""
        self._put(self.tracker.log_params, {str(k): str(v) for k, v in params.items()})

    def log_metrics(self, metrics: Mapping[str, float], *, step: int | None = None) -> None:
        """Queue ``tracker.log_metrics`` with the finite numeric values of ``metrics``."""
        values = metric_values(metrics)
        if values:
            self._put(lambda: self.tracker.log_metrics(values, step=step))

    def log_artifact(self, path: str | os.PathLike[str]) -> None:
        """Queue ``tracker.log_artifact(path)``."""
        self._put(self.tracker.log_artifact, Path(path))

    def close(self) -> None:
        """Wait for the queued calls, close the tracker when ``owns``, stop the thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.owns:
                self._queue.put((self.tracker.close, ()))
            self._queue.put(_STOP)
        self._thread.join(CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            self._fail(TimeoutError(f"calls still queued after {CLOSE_TIMEOUT_S:.0f} s"))

    def __enter__(self) -> GuardedTracker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ------------------------------------------------------------------------------ internals

    def _put(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            if self._closed or self.failed is not None:
                return
            self._queue.put((fn, args))

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            if self.failed is not None:
                continue
            fn, args = item
            try:
                fn(*args)
            except Exception as exc:  # tracking must never end the run it tracks
                self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if self.failed is None:
            self.failed = exc
            log.warning(
                "openmle: tracking to %s failed (%s: %s); tracking is off for the rest of this run",
                self.name,
                type(exc).__name__,
                exc,
            )
