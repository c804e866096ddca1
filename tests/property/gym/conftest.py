"""A private cache for the gym property tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def gym_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point ``$OPENMLE_CACHE`` at a per-session directory (validation views)."""
    root = tmp_path_factory.mktemp("openmle-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENMLE_CACHE", str(root))
        yield root
