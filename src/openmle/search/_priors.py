"""Cross-task priors as the search sees them: one frozen, already-rendered value.

The search never loads or retrieves priors. The caller (the CLI, the bench, a script) makes a
:class:`SearchPriors` with :func:`openmle.priors.priors_for_search` (retrieve at most 5 priors
for the task, render them under 1,500 characters) and passes it in
:class:`~openmle.search.SearchSpec`. The search shows :attr:`SearchPriors.block` to every Draft
and Improve prompt and records :meth:`SearchPriors.to_manifest` in the run manifest
(``extra.priors``), so a resumed run shows the same block and refuses a different library
(:func:`check_resume_priors`).

Layering: :mod:`openmle.priors` sits above the search (it imports this value); this module
imports nothing from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, final

from attrs import field, frozen

from openmle._validation import str_tuple
from openmle.errors import InvalidArgument

__all__ = ["SearchPriors", "check_resume_priors"]


@final
@frozen(kw_only=True)
class SearchPriors:
    """The priors block a search shows, and where it came from.

    Args:
        block: the rendered text shown to Draft and Improve prompts (empty: nothing fit).
        shown: the ids of the priors in ``block``, in order.
        sha256: the library's content hash (a resumed run must use the same library).
        n_priors: how many priors the library holds.
        retriever: the retriever's class, ``module.QualName``.
        k: most priors retrieved. max_chars: the block's hard character budget.
    """

    block: str = field(converter=str)
    shown: tuple[str, ...] = field(converter=str_tuple)
    sha256: str = field(converter=str)
    n_priors: int = 0
    retriever: str = ""
    k: int = 0
    max_chars: int = 0

    def to_manifest(self) -> dict[str, Any]:
        """The run manifest's ``extra.priors`` entry (JSON-ready)."""
        return {
            "sha256": self.sha256,
            "n_priors": self.n_priors,
            "retriever": self.retriever,
            "k": self.k,
            "max_chars": self.max_chars,
            "shown": list(self.shown),
            "block": self.block,
        }


def check_resume_priors(run: str, recorded: object, sha256: str | None) -> None:
    """Refuse to resume ``run`` with a library other than the one it started with.

    Args:
        run: the run directory (for the message).
        recorded: the manifest's ``extra.priors`` entry (None: the run used no priors).
        sha256: the content hash of the library given to resume (None: no check).

    Raises:
        InvalidArgument: a library given to a run that used none, or one with a different
            content hash than the recorded one.
    """
    if sha256 is None:
        return
    if not isinstance(recorded, Mapping):
        raise InvalidArgument(
            f"{run} was started without priors; resume it without priors= (--priors), or "
            "start a new run with them (runs with different priors are not comparable)"
        )
    want = recorded.get("sha256")
    if sha256 != want:
        raise InvalidArgument(
            f"{run} was started with the prior library sha256 {str(want)[:16]}..., but the "
            f"library given to resume has sha256 {sha256[:16]}...; resume with the same library "
            "(or none: the run's manifest keeps the block it showed)"
        )
