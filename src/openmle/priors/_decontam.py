"""Decontamination: sources about an evaluation suite's tasks never become priors.

A source is refused when its id, its name or the hash of its data matches an excluded
task: MLE-bench Lite competitions (ids and names), NatureBench cases and the user's own
list (both passed as :class:`Exclusions`). Names are compared after normalisation (lower
case, runs of non-alphanumerics as one ``-``), and also searched for inside the source's
title and text, so a write-up called "1st place - Spooky Author Identification" is refused
like ``spooky-author-identification``.
"""

from __future__ import annotations

from collections.abc import Iterable

from attrs import frozen

from openmle.errors import InvalidArgument
from openmle.gym import Exclusions, load_exclusions, normalise_name
from openmle.priors._library import PriorLibrary

__all__ = [
    "ContaminatedTask",
    "Exclusions",
    "Refusal",
    "check_task_not_in_priors",
    "default_exclusions",
    "normalise_name",
]


def default_exclusions(*, extra: Exclusions | None = None) -> Exclusions:
    """The MLE-bench part of openmle's shipped decontamination list (the one the task builder
    uses): all 75 MLE-bench competitions by id, name and the MD5s of their data; plus
    ``extra``. The bundled tasks of the shipped list are left out (runs on them are what
    priors are made from).

    NatureBench case ids are not shipped with openmle: pass them (and any task you evaluate
    on) in ``extra``, e.g. ``Exclusions(ids=[...], suite="naturebench")``.
    """
    from openmle.gym import bundled_names

    shipped = load_exclusions()
    bundled = {normalise_name(n) for n in bundled_names()}
    suite = Exclusions(  # the MLE-bench part: runs on the bundled tasks may become priors
        ids=shipped.ids,
        names=shipped.names - bundled,
        data_hashes={h for h in shipped.data_hashes if h.startswith("md5:")},
        suite="mle-bench",
    )
    return suite | extra if extra is not None else suite


@frozen(kw_only=True)
class Refusal:
    """A source that was not distilled, and why."""

    source: str
    reason: str


class ContaminatedTask(InvalidArgument):
    """The task to evaluate appears in the provenance of the priors the run would use."""


def check_task_not_in_priors(
    library: PriorLibrary, *, task_id: str, names: Iterable[str] = (), data_hash: str = ""
) -> None:
    """For a benchmark runner: refuse to evaluate on a task the priors were made from.

    Raises:
        ContaminatedTask: ``task_id``, one of ``names`` or ``data_hash`` appears in a prior's
            ``source_ids`` (compared normalised).
    """
    known = {normalise_name(s) for s in library.source_ids()} | library.source_ids()
    for key in (task_id, *names, data_hash):
        if not key:
            continue
        for cand in (key.strip().lower(), normalise_name(key)):
            if cand and cand in known:
                hits = [p.prior_id for p in library.priors if _mentions(p.source_ids, cand)]
                raise ContaminatedTask(
                    f"task {task_id!r} appears in the provenance of {len(hits)} prior(s) "
                    f"({', '.join(hits[:5])}); evaluate it with a library built without it"
                )


def _mentions(ids: tuple[str, ...], cand: str) -> bool:
    return any(cand in (s.strip().lower(), normalise_name(s)) for s in ids)
