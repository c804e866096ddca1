"""Decontamination: refuse raw data that matches an evaluation benchmark.

The behaviour is the one shared with the priors (:mod:`openmle.gym._decontam`): the raw files'
SHA-256 hashes against the excluded data hashes, and the data's names (the raw directory's
name, the provenance source, each raw file's stem) against the excluded ids and names, equal
or mentioned as whole words, all compared normalised. A blocklist file holds one entry a line
(``#`` starts a comment): ``sha256:<64 hex>``, ``md5:<32 hex>``, ``table:<64 hex>`` (a
table's content, the same for a renamed and re-saved copy: :mod:`openmle.builder._fingerprint`),
``name:<text>`` or ``id:<text>``; ``openmle task blocklist PATH`` prints them for data a user
holds.

openmle ships one (``openmle/gym/exclusions.txt``: the bundled tasks' data hashes and names,
all 75 MLE-bench competitions by id, name and MD5, and the 90 NatureBench release cases by
case id and task name: their data are not public in one place, so their hashes come from a
user's ``--blocklist``); users add their evaluation sets'
hashes and names with ``--blocklist FILE`` (several allowed), so training tasks never leak
evaluation tasks.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle.builder._fingerprint import TABLE_SUFFIXES, table_fingerprint
from openmle.builder._intake import Intake
from openmle.gym import SHIPPED, Exclusions, load_exclusions

__all__ = ["SHIPPED", "Blocklist", "DecontamResult", "check_contamination", "load_blocklist"]

Blocklist = Exclusions
"""The builder's name for :class:`openmle.priors.Exclusions` (one shared implementation)."""


def load_blocklist(paths: Iterable[Path | str] = (), *, shipped: bool = True) -> Blocklist:
    """Read blocklist files (the shipped one first when ``shipped``).

    Raises:
        InvalidArgument: a line that is not ``sha256:<hex>``, ``name:<text>`` or ``id:<text>``
            (names the file and line).
    """
    return load_exclusions(paths, shipped=shipped)


@frozen(kw_only=True)
class DecontamResult:
    """The decontamination stage's record: every match (empty when the data is clean)."""

    matches: tuple[str, ...]

    @property
    def clean(self) -> bool:
        """Whether nothing matched."""
        return not self.matches

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"clean": self.clean, "matches": list(self.matches)}


def check_contamination(record: Intake, blocklist: Blocklist) -> DecontamResult:
    """Match the raw files' hashes (SHA-256, and MD5 against ``md5:`` entries such as the
    shipped MLE-bench checksums), their tables' content fingerprints (when ``blocklist`` holds
    ``table:`` entries; :func:`~openmle.builder.table_fingerprint`) and the data's names
    against ``blocklist``. Reads the raw tables: call it off the event loop.
    """
    matches = [f"sha256 of {f.path}" for f in record.files if f.sha256 in blocklist.data_hashes]
    matches += [
        f"md5 of {f.path}"
        for f in record.files
        if f.md5
        and f"md5:{f.md5}" in blocklist.data_hashes
        and f.sha256 not in blocklist.data_hashes
    ]
    if any(h.startswith("table:") for h in blocklist.data_hashes):
        for f in record.files:
            if Path(f.path).suffix.lower() not in TABLE_SUFFIXES or any(
                m.endswith(f" of {f.path}") for m in matches
            ):
                continue
            table = table_fingerprint(record.raw_dir / f.path)
            if table is not None and f"table:{table}" in blocklist.data_hashes:
                matches.append(f"table fingerprint of {f.path}")
    names = {record.raw_dir.name, record.source.strip()}
    names |= {Path(f.path).stem for f in record.files}
    for name in sorted(n for n in names if n):
        why = blocklist.match(name=name)
        if why is not None and why not in matches:
            matches.append(why)
    return DecontamResult(matches=tuple(matches))
