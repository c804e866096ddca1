"""Retrieval: which priors a task sees, behind a small protocol."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from attrs import field, frozen

from openmle.errors import InvalidArgument
from openmle.priors._record import ANY, Prior

if TYPE_CHECKING:
    from openmle.priors._library import PriorLibrary

__all__ = ["LexicalRetriever", "Retriever", "TaskProfile", "applies", "bm25_scores"]

_APPLY = ("task_type", "modality", "metric_family", "size_band")


def _label(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"TaskProfile labels must be strings, got {value!r}")
    return value.strip().lower() or ANY


@frozen(kw_only=True)
class TaskProfile:
    """What retrieval knows about the task being searched.

    Args:
        task_id: the task's id (never matched against priors: see
            :func:`openmle.priors.check_task_not_in_priors`).
        description: the task description (for lexical similarity).
        task_type, modality, metric_family, size_band: labels as in :class:`Prior`;
            ``"any"`` when unknown (then that field does not filter).
    """

    task_id: str = ""
    description: str = ""
    task_type: str = field(default=ANY, converter=_label)
    modality: str = field(default=ANY, converter=_label)
    metric_family: str = field(default=ANY, converter=_label)
    size_band: str = field(default=ANY, converter=_label)


@runtime_checkable
class Retriever(Protocol):
    """Ranks a library's priors for a task; plug in embeddings by implementing this."""

    def retrieve(self, library: PriorLibrary, task: TaskProfile, *, k: int) -> list[Prior]:
        """At most ``k`` priors, best first; the same inputs must give the same list."""
        ...


_TOKEN = re.compile(r"[a-z0-9]+")


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if len(t) > 1]


def bm25_scores(
    query: str, documents: Sequence[str], *, k1: float = 1.5, b: float = 0.75
) -> list[float]:
    """Okapi BM25 score of each document for ``query`` (non-negative IDF variant)."""
    docs = [_tokens(d) for d in documents]
    n = len(docs)
    if n == 0:
        return []
    avg = sum(len(d) for d in docs) / n or 1.0
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(d))
    q = sorted(set(_tokens(query)))
    out: list[float] = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in q:
            f = tf.get(t, 0)
            if not f:
                continue
            idf = math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5))
            s += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


@frozen(kw_only=True)
class LexicalRetriever:
    """The default retriever: metadata filter, then metadata match and BM25 similarity.

    A prior is eligible when each of its applicability labels is ``"any"``, or the task's
    label is ``"any"``, or the two are equal. Eligible priors are ranked by the number of
    labels that match exactly (times ``metadata_weight``) plus the BM25 similarity of the
    task description to the prior's text; ties break by prior id. Deterministic.
    """

    metadata_weight: float = 2.0

    def retrieve(self, library: PriorLibrary, task: TaskProfile, *, k: int) -> list[Prior]:
        """At most ``k`` eligible priors, best first."""
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidArgument(f"k must be an integer >= 0, got {k!r}")
        eligible = [p for p in library.priors if applies(p, task)]
        if not eligible or k == 0:
            return []
        lexical = bm25_scores(task.description, [f"{p.text} {p.family} {p.kind}" for p in eligible])
        scored = []
        for p, lex in zip(eligible, lexical, strict=True):
            exact = sum(
                1 for a in _APPLY if getattr(p, a) != ANY and getattr(p, a) == getattr(task, a)
            )
            scored.append((-(self.metadata_weight * exact + lex), p.prior_id, p))
        scored.sort(key=lambda x: (x[0], x[1]))
        return [p for _, _, p in scored[:k]]


def applies(prior: Prior, task: TaskProfile) -> bool:
    """Whether ``prior``'s labels are compatible with ``task``'s."""
    for a in _APPLY:
        mine, theirs = getattr(prior, a), getattr(task, a)
        if mine != ANY and theirs != ANY and mine != theirs:
            return False
    return True
