"""The committed golden vectors equal the team's shared copy, where that copy is present.

A user's clone has only ``tests/golden/``; the developers' checkout also has the shared design
folder beside the repository, and there the two files must be byte-identical (and match the
checksum recorded in ``tests/golden/PROVENANCE``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tests._golden import GOLDEN_FILE, REPO_GOLDEN

_SHARED = REPO_GOLDEN.parents[2] / "shared" / "golden" / GOLDEN_FILE


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_committed_copy_matches_its_recorded_checksum() -> None:
    """The copy has not been edited since it was taken (the checksum in PROVENANCE)."""
    provenance = (REPO_GOLDEN / "PROVENANCE").read_text(encoding="utf-8").split()
    recorded = provenance[provenance.index("sha256") + 1]
    assert _sha256(REPO_GOLDEN / GOLDEN_FILE) == recorded


@pytest.mark.skipif(not _SHARED.is_file(), reason="no shared golden folder beside the repository")
def test_committed_copy_equals_the_shared_copy() -> None:
    """Where the shared vectors exist, the committed copy is the same bytes."""
    assert _sha256(REPO_GOLDEN / GOLDEN_FILE) == _sha256(_SHARED)
