"""Decontamination: refuse raw data that matches an evaluation benchmark.

A blocklist is a small text file, one entry a line (``#`` starts a comment):

- ``sha256:<64 hex>``: a data file's SHA-256 (any raw file with these bytes matches);
- ``name:<text>``: a benchmark id or dataset name (matches the raw directory's name, the
  provenance source or a raw file's stem, case-insensitive).

openmle ships one (``blocklist.txt`` next to this module) with the ids of the bundled tasks'
data; users add their evaluation sets' hashes and names with ``--blocklist FILE`` (several
allowed), so training tasks never leak evaluation tasks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle.builder._intake import Intake
from openmle.errors import InvalidArgument

__all__ = ["Blocklist", "DecontamResult", "check_contamination", "load_blocklist"]

SHIPPED = Path(__file__).with_name("blocklist.txt")
_HEX = re.compile(r"^[0-9a-f]{64}$")


@frozen(kw_only=True)
class Blocklist:
    """Hashes and names of evaluation data (see the module doc for the file format)."""

    hashes: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()

    def __or__(self, other: Blocklist) -> Blocklist:
        return Blocklist(hashes=self.hashes | other.hashes, names=self.names | other.names)


def load_blocklist(paths: Iterable[Path | str] = (), *, shipped: bool = True) -> Blocklist:
    """Read blocklist files (the shipped one first when ``shipped``).

    Raises:
        InvalidArgument: a line that is not ``sha256:<hex>`` or ``name:<text>`` (names the file
            and line).
    """
    files = ([SHIPPED] if shipped else []) + [Path(p) for p in paths]
    hashes: set[str] = set()
    names: set[str] = set()
    for path in files:
        for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            kind, _, value = line.partition(":")
            value = value.strip().lower()
            if kind == "sha256" and _HEX.match(value):
                hashes.add(value)
            elif kind == "name" and value:
                names.add(value)
            else:
                raise InvalidArgument(
                    f"{path}:{n}: expected 'sha256:<64 hex digits>' or 'name:<text>'; fix the line"
                )
    return Blocklist(hashes=frozenset(hashes), names=frozenset(names))


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
    """Match the raw files' hashes and the data's names against ``blocklist``."""
    matches = [f"sha256 of {f.path}" for f in record.files if f.sha256 in blocklist.hashes]
    names = {record.raw_dir.name.lower(), record.source.strip().lower()}
    names |= {Path(f.path).stem.lower() for f in record.files}
    matches += [f"name {n!r}" for n in sorted(names & blocklist.names)]
    return DecontamResult(matches=tuple(matches))
