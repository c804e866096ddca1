"""Golden vectors from the released OpenRSI code (``tests/golden/rewards.json``), shared by tests.

The file is committed in ``tests/golden/`` (a copy of the team's shared vectors, provenance in
``tests/golden/PROVENANCE``), so a clone of the repository alone runs every test.
``OPENMLE_GOLDEN`` (a directory) points the tests at another copy. A missing file is an error,
never a silent skip.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["GOLDEN_FILE", "REPO_GOLDEN", "decode", "golden_path", "load_golden", "records"]

GOLDEN_FILE = "rewards.json"
REPO_GOLDEN = Path(__file__).resolve().parent / "golden"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def golden_path() -> Path:
    """The golden file: ``$OPENMLE_GOLDEN/rewards.json`` or the committed ``tests/golden/`` copy."""
    env = os.environ.get("OPENMLE_GOLDEN")
    path = Path(env) / GOLDEN_FILE if env else REPO_GOLDEN / GOLDEN_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"golden vectors not found at {path}; unset OPENMLE_GOLDEN to use the committed "
            f"copy in {REPO_GOLDEN}, or point it at a directory holding {GOLDEN_FILE}"
        )
    return path


@functools.cache
def load_golden() -> dict[str, Any]:
    """The whole golden file, parsed once per process."""
    with golden_path().open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def records(kind: str) -> list[dict[str, Any]]:
    """Unit records of one ``kind`` (e.g. ``"static_bounds"``); fails if there are none."""
    out = [r for r in load_golden()["records"] if r["kind"] == kind]
    if not out:
        raise LookupError(f"no golden records of kind {kind!r}")
    return out


def decode(value: Any) -> Any:
    """Turn the strings ``"nan"``, ``"inf"``, ``"-inf"`` into floats, recursively."""
    if isinstance(value, str) and value in _NON_FINITE:
        return _NON_FINITE[value]
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value
