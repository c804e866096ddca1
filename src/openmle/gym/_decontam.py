"""Decontamination, shared by the task builder and the priors: evaluation tasks never leak into
training tasks or priors.

One behaviour for both (:class:`Exclusions`): a thing is excluded when

- an id of it (a source id, a related id) equals an excluded id or name;
- a data hash of it (SHA-256 of a data file, or ``md5:<hex>``: an MD5 such as MLE-bench's
  ``checksums.yaml`` records) is an excluded hash;
- its name equals an excluded id or name;
- an excluded id or name is mentioned in its name or text, as whole words
  ("1st place - Spooky Author Identification" matches ``spooky-author-identification``;
  ``myleaf classificationx`` does not match ``leaf-classification``).

Ids and names are compared normalised (:func:`normalise_name`: lower case, every run of
non-alphanumerics one ``-``), hashes in lower case.

The shipped list (``exclusions.txt`` next to this module) holds the bundled tasks' data hashes
and names and all 75 MLE-bench competitions (low, medium and high splits): each id, its
``config.yaml`` name and the MD5s of its ``checksums.yaml`` (source commit in the file). A
user's exclusion list is a text file in the same format, one entry a line (``#`` starts a
comment): ``sha256:<64 hex>``, ``md5:<32 hex>`` (kept as ``md5:<hex>`` among the data hashes, so
an MD5 never equals a SHA-256), ``table:<64 hex>`` (a table's content fingerprint, kept as
``table:<hex>``: :func:`openmle.builder.table_fingerprint`), ``name:<text>`` or ``id:<text>``
(:func:`load_exclusions`), or
:class:`Exclusions` values combined with ``|``.

Public faces: :class:`openmle.builder.Blocklist` / :func:`openmle.builder.load_blocklist` /
:func:`openmle.builder.check_contamination`, and :class:`openmle.priors.Exclusions` /
:func:`openmle.priors.normalise_name`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from attrs import field, frozen

from openmle._exports import publish_one
from openmle.errors import InvalidArgument

__all__ = ["SHIPPED", "Exclusions", "load_exclusions", "normalise_name"]

SHIPPED = Path(__file__).with_name("exclusions.txt")
"""openmle's shipped exclusion list."""


_HEX = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}$")


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
    """What may not become a training task or a prior: ids, names and data hashes (all
    normalised), and the name of the suite(s) they come from.

    Combine with ``|``: ``load_exclusions() | Exclusions(ids=["my-holdout"])``.
    """

    ids: frozenset[str] = field(default=frozenset(), converter=_ids)
    names: frozenset[str] = field(default=frozenset(), converter=_names)
    data_hashes: frozenset[str] = field(default=frozenset(), converter=_hashes)
    suite: str = "user"

    @property
    def hashes(self) -> frozenset[str]:
        """The data hashes (the task builder's name for :attr:`data_hashes`)."""
        return self.data_hashes

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
        """Why a thing is excluded (``"id 'x'"``, ``"name 'y'"``, ``"data hash 'h'"``,
        ``"'k' mentioned in the source"``), or None.
        """
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


def load_exclusions(
    paths: Iterable[Path | str] = (), *, shipped: bool = True, suite: str | None = None
) -> Exclusions:
    """Read exclusion-list files (the shipped one first when ``shipped``).

    Args:
        paths: the user's lists.
        shipped: include :data:`SHIPPED`.
        suite: the result's suite name (default: ``"openmle"`` for the shipped list, plus
            ``"user"`` when ``paths`` are given).

    Raises:
        InvalidArgument: a line that is not ``sha256:<hex>``, ``md5:<hex>``, ``table:<hex>``,
            ``name:<text>`` or ``id:<text>`` (names the file and line).
    """
    user = [Path(p) for p in paths]
    files = ([SHIPPED] if shipped else []) + user
    ids: set[str] = set()
    names: set[str] = set()
    hashes: set[str] = set()
    for path in files:
        for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            kind, _, value = line.partition(":")
            value = value.strip()
            if kind == "sha256" and _HEX.match(value.lower()):
                hashes.add(value.lower())
            elif kind == "md5" and _MD5.match(value.lower()):
                hashes.add(f"md5:{value.lower()}")
            elif kind == "table" and _HEX.match(value.lower()):
                hashes.add(f"table:{value.lower()}")
            elif kind in ("name", "id") and normalise_name(value):
                (names if kind == "name" else ids).add(value)
            else:
                raise InvalidArgument(
                    f"{path}:{n}: expected 'sha256:<64 hex digits>', 'md5:<32 hex digits>', "
                    "'table:<64 hex digits>', 'name:<text>' or 'id:<text>'; fix the line"
                )
    if suite is None:
        suite = "+".join((["openmle"] if shipped else []) + (["user"] if user else [])) or "none"
    return Exclusions(ids=ids, names=names, data_hashes=hashes, suite=suite)


# The public home of the shared objects (reprs, docs and pickles name it, never this module).
for _obj in (Exclusions, normalise_name):
    publish_one(_obj, "openmle.priors", private=(__name__,))
