"""What a search reports to a :class:`~openmle.tracking.Tracker` (``track=`` of the entry points).

- at the start: the manifest as parameters (``manifest.json`` flattened; without a run
  directory, the task, budget, config and workers);
- after every committed node, at the node's step: ``node/*`` (``ok``, ``score``,
  ``valid_score``, ``reward``, ``fitness``, ``tokens``, ``prompt_tokens``,
  ``completion_tokens``, ``seconds`` (the expansion's wall seconds), ``sandbox_s``,
  ``model_s``, ``elapsed_s``), ``best/score`` (the best selection score so far), and running
  counts ``outcome/<outcome>`` and ``operator/<operator>`` (the counter that moved names the
  node's outcome and operator);
- at the end, at the step after the last node: ``run/*`` (``nodes``, ``best_valid_score``,
  ``test_score``, ``spent/<quantity>``) and the parameters ``result.stop_reason`` and
  ``result.best_node``.

Every call goes through a :class:`~openmle.tracking.GuardedTracker` (one worker thread, off the
event loop; the first failure is logged once and turns tracking off), which the search stops
(shielded) before it returns; the caller closes the tracker it passed.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from attrs import define, field

from openmle._types import ModelRequest, RunResult
from openmle.search._loop import Node, Proposal
from openmle.tracking import GuardedTracker, Tracker, flatten_params

if TYPE_CHECKING:
    from openmle.search._driver import Recorder, SearchResult

__all__ = ["TrackingRecorder", "log_summary", "node_metrics", "summary_metrics", "tracking"]


def node_metrics(node: Node) -> dict[str, float]:
    """The ``node/*`` metrics of one committed node (absent values left out)."""
    u = node.used
    m: dict[str, Any] = {
        "node/ok": node.score is not None,
        "node/score": node.score,
        "node/valid_score": node.valid_score,
        "node/reward": None if node.card is None else node.card.reward,
        "node/fitness": None if node.card is None else node.card.fitness,
        "node/tokens": u.prompt_tokens + u.completion_tokens,
        "node/prompt_tokens": u.prompt_tokens,
        "node/completion_tokens": u.completion_tokens,
        "node/seconds": u.wall_s,
        "node/sandbox_s": u.sandbox_s,
        "node/model_s": u.model_s,
        "node/elapsed_s": node.elapsed_s,
    }
    return {k: float(v) for k, v in m.items() if v is not None}


def summary_metrics(result: SearchResult) -> dict[str, float]:
    """The ``run/*`` metrics of a finished search."""
    m: dict[str, float] = {"run/nodes": float(len(result.nodes))}
    if result.best_valid_score is not None:
        m["run/best_valid_score"] = float(result.best_valid_score)
    if result.test_score is not None:
        m["run/test_score"] = float(result.test_score)
    for k, v in result.spent.items():
        m[f"run/spent/{k}"] = float(v)
    return m


@define(eq=False)
class TrackingRecorder:
    """A :class:`~openmle.search.Recorder` that forwards to ``inner`` and then reports each
    committed node and the final test run to ``tracker``.

    Args:
        inner: the run directory (or the null recorder).
        tracker: where to report (a :class:`GuardedTracker`: calls never block).
        higher_is_better: the metric's direction (for ``best/score``).
    """

    inner: Recorder
    tracker: Tracker
    higher_is_better: bool
    best: float | None = None
    counts: dict[str, int] = field(factory=dict)

    def proposal(self, proposal: Proposal, rng_state: Mapping[str, Any]) -> None:
        """Forward."""
        self.inner.proposal(proposal, rng_state)

    def node(self, node: Node, logs: str, *, request: ModelRequest | None = None) -> None:
        """Forward, then report the node's metrics at its step."""
        self.inner.node(node, logs, request=request)
        if node.score is not None and (
            self.best is None
            or (node.score > self.best if self.higher_is_better else node.score < self.best)
        ):
            self.best = node.score
        outcome = "success" if node.score is not None else node.outcome.value
        for key in (f"outcome/{outcome}", f"operator/{node.operator.value}"):
            self.counts[key] = self.counts.get(key, 0) + 1
        m = node_metrics(node)
        if self.best is not None:
            m["best/score"] = self.best
        self.tracker.log_metrics({**m, **self.counts}, step=node.step)

    def cancel(self, step: int, reason: str, *, elapsed_s: float = 0.0) -> None:
        """Forward, and count it (``outcome/cancelled``)."""
        self.inner.cancel(step, reason, elapsed_s=elapsed_s)
        self.counts["outcome/cancelled"] = self.counts.get("outcome/cancelled", 0) + 1
        self.tracker.log_metrics({"outcome/cancelled": self.counts["outcome/cancelled"]}, step=step)

    def final(self, node: Node, result: RunResult) -> None:
        """Forward, then report ``test/score`` and ``test/ok``."""
        self.inner.final(node, result)
        m: dict[str, float] = {"test/ok": float(result.score is not None)}
        if result.score is not None:
            m["test/score"] = float(result.score)
        self.tracker.log_metrics(m, step=node.step)


@contextlib.asynccontextmanager
async def tracking(
    tracker: Tracker | None, params: Mapping[str, Any]
) -> AsyncIterator[GuardedTracker | None]:
    """Guard ``tracker`` for the block (None: nothing), logging ``params`` (flattened) first;
    on leaving, wait (shielded, in a worker thread) for the queued calls.
    """
    if tracker is None:
        yield None
        return
    guard = GuardedTracker(tracker, owns=False)
    guard.log_params(flatten_params(params))
    try:
        yield guard
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(guard.close)


def log_summary(guard: GuardedTracker | None, result: SearchResult) -> None:
    """Report the finished search (``run/*`` metrics, ``result.*`` parameters)."""
    if guard is None:
        return
    guard.log_metrics(summary_metrics(result), step=len(result.nodes))
    guard.log_params(
        {
            "result.stop_reason": str(result.stop_reason),
            "result.best_node": str(None if result.best is None else result.best.node_id),
        }
    )
