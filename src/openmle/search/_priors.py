"""Cross-task priors in the search: retrieved once per run, shown to Draft and Improve.

:func:`priors_for_run` loads a :class:`~openmle.priors.PriorLibrary` (or a path to one),
retrieves at most :data:`PRIORS_K` priors for the task with a
:class:`~openmle.priors.Retriever` (default :class:`~openmle.priors.LexicalRetriever`) and
renders them under :data:`PRIORS_CHARS` characters. The result goes into the run manifest
(``extra.priors``: the library's content hash, the retriever, the ids shown and the block
itself), so a resumed run shows the same block and refuses a different library
(:func:`check_resume_priors`).

Layering: the search sits below :mod:`openmle.priors`; this module imports only its leaf
modules (records, retrieval, rendering), lazily, which import nothing from the search.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from openmle.errors import InvalidArgument, InvalidArgumentType

__all__ = ["PRIORS_CHARS", "PRIORS_K", "check_resume_priors", "library_hash", "priors_for_run"]

PRIORS_K: Final = 5
"""Most priors retrieved for a run."""

PRIORS_CHARS: Final = 1500
"""Hard character budget of the priors block."""


def _load(priors: object) -> Any:
    from openmle.priors._record import PriorLibrary, load_library

    if isinstance(priors, PriorLibrary):
        return priors
    if isinstance(priors, str | Path):
        return load_library(priors)
    raise InvalidArgumentType(
        f"Expected priors= a PriorLibrary or the path of a prior library file but got "
        f"{type(priors).__name__}"
    )


def library_hash(priors: object) -> str:
    """The content hash of ``priors`` (a library or a path to one)."""
    return str(_load(priors).content_hash)


def priors_for_run(
    priors: object, retriever: object | None, *, task: str, description: str
) -> dict[str, Any]:
    """The manifest entry for a run with ``priors``: ``sha256``, ``n_priors``, ``retriever``,
    ``k``, ``max_chars``, ``shown`` (ids, in order) and ``block`` (the rendered text).

    Raises:
        InvalidArgument: an unreadable library file.
        InvalidArgumentType: ``priors`` or ``retriever`` of the wrong type.
    """
    from openmle.priors._render import render_priors
    from openmle.priors._retrieve import LexicalRetriever, Retriever, TaskProfile

    library = _load(priors)
    chosen = LexicalRetriever() if retriever is None else retriever
    if not isinstance(chosen, Retriever):
        raise InvalidArgumentType(
            f"Expected retriever= an openmle.priors.Retriever (retrieve(library, task, k=...)) "
            f"but got {type(chosen).__name__}"
        )
    profile = TaskProfile(task_id=task, description=description)
    found = list(chosen.retrieve(library, profile, k=PRIORS_K))[:PRIORS_K]
    rendered = render_priors(found, max_chars=PRIORS_CHARS)
    return {
        "sha256": library.content_hash,
        "n_priors": len(library),
        "retriever": f"{type(chosen).__module__}.{type(chosen).__qualname__}",
        "k": PRIORS_K,
        "max_chars": PRIORS_CHARS,
        "shown": list(rendered.shown),
        "block": rendered.text,
    }


def check_resume_priors(run: str, recorded: object, priors: object | None) -> None:
    """Refuse to resume ``run`` with a library other than the one it started with.

    Raises:
        InvalidArgument: ``priors`` given to a run that used none, or with a different
            content hash than the recorded one.
    """
    if priors is None:
        return
    if not isinstance(recorded, Mapping):
        raise InvalidArgument(
            f"{run} was started without priors; resume it without priors= (--priors), or "
            "start a new run with them (runs with different priors are not comparable)"
        )
    got = library_hash(priors)
    want = recorded.get("sha256")
    if got != want:
        raise InvalidArgument(
            f"{run} was started with the prior library sha256 {str(want)[:16]}..., but the "
            f"library given to resume has sha256 {got[:16]}...; resume with the same library "
            "(or none: the run's manifest keeps the block it showed)"
        )
