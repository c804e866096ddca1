"""Prior libraries (a versioned JSONL file), and the priors one search shows.

:func:`priors_for_search` (or :meth:`PriorLibrary.for_search`) loads a library (or a path to
one), retrieves at most :data:`PRIORS_K` priors for the task with a :class:`Retriever` (default
:class:`LexicalRetriever`) and renders them under :data:`PRIORS_CHARS` characters into a
:class:`openmle.search.SearchPriors`, the frozen value :class:`openmle.search.SearchSpec` takes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Final

from attrs import field, frozen

from openmle._readback import read_back_text
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.priors._record import Prior, canonical_json
from openmle.priors._render import render_priors
from openmle.priors._retrieve import LexicalRetriever, Retriever, TaskProfile

if TYPE_CHECKING:
    from openmle.search import SearchPriors

__all__ = [
    "PRIORS_CHARS",
    "PRIORS_K",
    "PriorLibrary",
    "library_of",
    "load_library",
    "priors_for_search",
    "save_library",
]

PRIORS_K: Final = 5
"""Most priors retrieved for a run."""

PRIORS_CHARS: Final = 1500
"""Hard character budget of the priors block."""


def library_of(priors: PriorLibrary | str | Path) -> PriorLibrary:
    """``priors`` itself, or the library file it names, read and validated.

    Raises:
        InvalidArgument: an unreadable or malformed library file (names the line).
        InvalidArgumentType: neither a library nor a path.
    """
    if isinstance(priors, PriorLibrary):
        return priors
    if isinstance(priors, str | Path):
        return load_library(priors)
    raise InvalidArgumentType(
        f"Expected priors= a PriorLibrary or the path of a prior library file but got "
        f"{type(priors).__name__}"
    )


def priors_for_search(
    priors: PriorLibrary | str | Path,
    *,
    task: str,
    description: str,
    retriever: Retriever | None = None,
) -> SearchPriors:
    """The priors block a search of ``task`` shows, as :class:`openmle.search.SearchPriors`.

    Args:
        priors: a library, or the path of a library file.
        task: the task's name (the retrieval's ``TaskProfile.task_id``).
        description: the task's description (what the retriever matches against).
        retriever: ranks the library's priors; default :class:`LexicalRetriever`.

    Raises:
        InvalidArgument: an unreadable library file.
        InvalidArgumentType: ``priors`` or ``retriever`` of the wrong type.
    """
    from openmle.search import SearchPriors  # lazy: the search package is heavy

    library = library_of(priors)
    chosen = LexicalRetriever() if retriever is None else retriever
    if not isinstance(chosen, Retriever):
        raise InvalidArgumentType(
            f"Expected retriever= an openmle.priors.Retriever (retrieve(library, task, k=...)) "
            f"but got {type(chosen).__name__}"
        )
    profile = TaskProfile(task_id=task, description=description)
    found = list(chosen.retrieve(library, profile, k=PRIORS_K))[:PRIORS_K]
    rendered = render_priors(found, max_chars=PRIORS_CHARS)
    return SearchPriors(
        block=rendered.text,
        shown=rendered.shown,
        sha256=library.content_hash,
        n_priors=len(library),
        retriever=f"{type(chosen).__module__}.{type(chosen).__qualname__}",
        k=PRIORS_K,
        max_chars=PRIORS_CHARS,
    )


def _prior_tuple(value: Iterable[Prior]) -> tuple[Prior, ...]:
    return tuple(value)


@frozen
class PriorLibrary:
    """An ordered collection of priors with unique ids.

    Raises:
        InvalidArgument: two priors share an id.
    """

    priors: tuple[Prior, ...] = field(converter=_prior_tuple)

    def __attrs_post_init__(self) -> None:
        seen: set[str] = set()
        for p in self.priors:
            if not isinstance(p, Prior):
                raise InvalidArgument(f"PriorLibrary holds {type(p).__name__}; pass Prior values")
            if p.prior_id in seen:
                raise InvalidArgument(f"prior_id {p.prior_id!r} appears twice in the library")
            seen.add(p.prior_id)

    def __len__(self) -> int:
        return len(self.priors)

    @property
    def content_hash(self) -> str:
        """sha256 over the records' canonical JSON, in order: the library's identity (two runs
        with different hashes saw different priors and are not comparable).
        """
        h = hashlib.sha256()
        for p in self.priors:
            h.update(canonical_json(p).encode())
            h.update(b"\n")
        return h.hexdigest()

    def source_ids(self) -> frozenset[str]:
        """Every task id, name and data hash named in the priors' provenance (lower case)."""
        return frozenset(s.strip().lower() for p in self.priors for s in p.source_ids)

    def merged(self, other: PriorLibrary) -> PriorLibrary:
        """This library followed by ``other`` (ids must stay unique)."""
        return PriorLibrary(self.priors + other.priors)

    def for_search(
        self, *, task: str, description: str, retriever: Retriever | None = None
    ) -> SearchPriors:
        """:func:`openmle.priors.priors_for_search` of this library: the block a search of
        ``task`` shows, as a frozen :class:`openmle.search.SearchPriors`.
        """
        return priors_for_search(self, task=task, description=description, retriever=retriever)


def save_library(library: PriorLibrary, path: str | Path) -> str:
    """Write ``library`` as JSONL (one record per line, ``schema_version`` in every record;
    ``pandas.read_json(path, lines=True)`` reads it) and return its content hash.
    """
    text = "".join(canonical_json(p) + "\n" for p in library.priors)
    Path(path).write_text(text, encoding="utf-8")
    return library.content_hash


_LIBRARY_MAX_BYTES = 256 << 20
"""A prior library file is read only when it is a regular file of at most this many bytes."""


def load_library(path: str | Path) -> PriorLibrary:
    """Read and validate a prior library written by :func:`save_library` (blank lines skipped).

    Raises:
        InvalidArgument: the file cannot be read, or a line is not a valid record (the
            message names the file, the line number and the field).
    """
    p = Path(path)
    try:  # a regular file (a FIFO or -> /dev/zero is refused), at most _LIBRARY_MAX_BYTES
        raw = read_back_text(p, max_bytes=_LIBRARY_MAX_BYTES, follow=True)
    except OSError as exc:
        raise InvalidArgument(
            f"cannot read prior library {str(p)!r}: {exc.strerror or exc}; give a JSONL file "
            "written by `save_library` (at most 256 MiB)"
        ) from None
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"cannot read prior library {str(p)!r}: {exc}") from None
    priors: list[Prior] = []
    seen: set[str] = set()
    for i, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            prior = Prior.from_dict(data)
        except (ValueError, RecursionError, TypeError) as exc:
            raise InvalidArgument(f"{p}: line {i} is not a valid prior: {str(exc)[:300]}") from None
        if prior.prior_id in seen:
            raise InvalidArgument(f"{p}: line {i}: prior_id {prior.prior_id!r} appears twice")
        seen.add(prior.prior_id)
        priors.append(prior)
    return PriorLibrary(priors)
