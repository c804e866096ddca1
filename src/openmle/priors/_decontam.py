"""Decontamination: sources about an evaluation suite's tasks never become priors.

A source is refused when its id, its name or the hash of its data matches an excluded
task: MLE-bench Lite competitions (ids and names), NatureBench cases and the user's own
list (both passed as :class:`Exclusions`). Names are compared after normalisation (lower
case, runs of non-alphanumerics as one ``-``), and also searched for inside the source's
title and text, so a write-up called "1st place - Spooky Author Identification" is refused
like ``spooky-author-identification``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from attrs import field, frozen

from openmle.errors import InvalidArgument
from openmle.priors._record import PriorLibrary

__all__ = [
    "ContaminatedTask",
    "Exclusions",
    "Refusal",
    "check_task_not_in_priors",
    "default_exclusions",
    "normalise_name",
]


def normalise_name(name: str) -> str:
    """``name`` in lower case with every run of non-alphanumerics as one ``-`` (stripped)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _norm_all(values: Iterable[str], what: str) -> frozenset[str]:
    if isinstance(values, str):
        raise InvalidArgument(f"Exclusions.{what} must be a list of strings, not one string")
    out: set[str] = set()
    for v in values:
        if not isinstance(v, str):
            raise InvalidArgument(f"Exclusions.{what} holds {v!r}; pass strings")
        n = normalise_name(v) if what != "data_hashes" else v.strip().lower()
        if n:
            out.add(n)
    return frozenset(out)


def _ids(v: Iterable[str]) -> frozenset[str]:
    return _norm_all(v, "ids")


def _names(v: Iterable[str]) -> frozenset[str]:
    return _norm_all(v, "names")


def _hashes(v: Iterable[str]) -> frozenset[str]:
    return _norm_all(v, "data_hashes")


@frozen(kw_only=True)
class Exclusions:
    """What may not become a prior: task ids, task names and data hashes (all normalised).

    Combine with ``|``: ``default_exclusions() | Exclusions(ids=["my-holdout"])``.
    """

    ids: frozenset[str] = field(default=frozenset(), converter=_ids)
    names: frozenset[str] = field(default=frozenset(), converter=_names)
    data_hashes: frozenset[str] = field(default=frozenset(), converter=_hashes)
    suite: str = "user"

    def __or__(self, other: Exclusions) -> Exclusions:
        return Exclusions(
            ids=self.ids | other.ids,
            names=self.names | other.names,
            data_hashes=self.data_hashes | other.data_hashes,
            suite=f"{self.suite}+{other.suite}",
        )

    def match(
        self,
        *,
        source_id: str = "",
        name: str = "",
        text: str = "",
        data_hashes: Iterable[str] = (),
        related_ids: Iterable[str] = (),
    ) -> str | None:
        """Why a source is excluded (``"id 'x'"``, ``"name 'y' in text"``...), or None."""
        for sid in (source_id, *related_ids):
            n = normalise_name(sid)
            if n and (n in self.ids or n in self.names):
                return f"id {n!r}"
        for h in data_hashes:
            if h.strip().lower() in self.data_hashes:
                return f"data hash {h.strip().lower()!r}"
        nname = normalise_name(name)
        if nname and (nname in self.ids or nname in self.names):
            return f"name {nname!r}"
        haystack = f"-{normalise_name(name + ' ' + text)}-"
        for key in sorted(self.ids | self.names):
            if f"-{key}-" in haystack:
                return f"{key!r} mentioned in the source"
        return None


def default_exclusions(*, extra: Exclusions | None = None) -> Exclusions:
    """The MLE-bench Lite competitions (:data:`openmle.bench.LITE_IDS`), plus ``extra``.

    NatureBench case ids are not shipped with openmle: pass them (and any task you evaluate
    on) in ``extra``, e.g. ``Exclusions(ids=[...], suite="naturebench")``.
    """
    from openmle.bench import LITE_IDS  # lazy: the bench package pulls in numpy

    suite = Exclusions(ids=LITE_IDS, suite="mle-bench-lite")
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
