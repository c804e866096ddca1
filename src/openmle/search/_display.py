"""The default progress line of a search: one line per committed node.

:class:`ProgressLine` is what :func:`~openmle.search.run_search` prints to stderr when the caller
passes neither ``on_progress=`` nor ``quiet=True``, and what ``openmle search`` prints to
stdout.
"""

from __future__ import annotations

import time
from typing import TextIO, final

from openmle.search._driver import Progress

__all__ = ["ProgressLine"]


@final
class ProgressLine:
    """An ``on_progress`` callback writing one line per committed node to ``stream``: step,
    node id, operator, outcome, score, best so far, share of the budget used and seconds since
    the callback was made, e.g.
    ``[  3/20] n0002 improve   ok                   0.8123  best 0.8123    budget  15%     4.2s``.

    Args:
        stream: where the lines go (flushed after each line).
        total: the step cap, shown as ``/total`` and used as the steps fraction (None: the
            budget has no step cap).

    Snapshots without a new node (periodic ones) print nothing.
    """

    def __init__(self, stream: TextIO, total: int | None) -> None:
        self.stream = stream
        self.total = total
        self.t0 = time.monotonic()

    def __call__(self, progress: Progress) -> None:
        node = progress.last
        if node is None:
            return
        done = progress.steps_done
        of = f"/{self.total}" if self.total else ""
        score = "      —" if node.score is None else f"{node.score:9.5g}"
        best = "—" if progress.best_score is None else f"{progress.best_score:.5g}"
        fr = dict(progress.fractions)
        if "steps" in fr and self.total:
            fr["steps"] = done / self.total  # finished steps, not proposed ones
        used = max(fr.values()) if fr else 0.0
        self.stream.write(
            f"[{done:>3}{of}] {node.node_id} {node.operator.value:<9} "
            f"{('ok' if node.ok else node.outcome.value):<18} {score}  best {best:<9} "
            f"budget {100 * used:3.0f}%  {time.monotonic() - self.t0:6.1f}s\n"
        )
        self.stream.flush()
