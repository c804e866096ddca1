"""Golden vectors from the released OpenRSI code (``shared/golden/rewards.json``), shared by tests.

The file sits in ``shared/golden/`` beside the repository (``<repo>/../shared/golden``); the
nearest ``shared/golden`` found walking up from the repository root is used, and
``OPENMLE_GOLDEN`` (a directory) overrides the search. A
missing file is an error, never a silent skip.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path
from typing import Any

__all__ = ["GOLDEN_FILE", "decode", "golden_path", "load_golden", "records"]

GOLDEN_FILE = "rewards.json"
_REPO = Path(__file__).resolve().parents[1]
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def golden_path() -> Path:
    """The golden file: ``$OPENMLE_GOLDEN/rewards.json`` or the nearest ``shared/golden/``."""
    env = os.environ.get("OPENMLE_GOLDEN")
    candidates = (
        [Path(env) / GOLDEN_FILE]
        if env
        else [d / "shared" / "golden" / GOLDEN_FILE for d in (_REPO, *_REPO.parents)]
    )
    for path in candidates:
        if path.is_file():
            return path
    tried = ", ".join(str(p) for p in candidates)
    raise FileNotFoundError(
        f"golden vectors not found (tried {tried}); put shared/golden/ beside the repository "
        f"or set OPENMLE_GOLDEN to the directory holding {GOLDEN_FILE}"
    )


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
