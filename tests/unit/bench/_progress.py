"""A search's :class:`openmle.search.Progress` as the bench's progress lines receive it."""

from __future__ import annotations

from openmle.search import Progress


def progress(steps_done: int, best: float | None, steps_used: float) -> Progress:
    """One run in flight after ``steps_done`` committed steps, ``steps_used`` of its step cap
    used (a fraction), best validation score ``best``.
    """
    return Progress(
        steps_done=steps_done,
        in_flight=1,
        best_score=best,
        best_node=None,
        spent={},
        fractions={"steps": steps_used},
    )
