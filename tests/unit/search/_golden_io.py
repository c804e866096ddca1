"""Read the golden vectors of the released code (``shared/golden/rewards.json``).

Same behaviour as the shared ``tests/_golden.py`` loader (the lead keeps one at merge):
``load_golden()`` reads the file once, ``records(kind)`` returns the unit records of a kind,
``decode(value)`` turns the strings ``"nan"``, ``"inf"`` and ``"-inf"`` into floats, recursively.
The file is ``<repo>/../shared/golden/rewards.json``; the environment variable
``OPENMLE_GOLDEN`` names another directory holding ``rewards.json``.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

__all__ = ["decode", "golden_path", "load_golden", "records"]

_REPO = Path(__file__).resolve().parents[3]


def golden_path() -> Path:
    """Where ``rewards.json`` is expected."""
    env = os.environ.get("OPENMLE_GOLDEN")
    base = Path(env) if env else _REPO.parent / "shared" / "golden"
    return base / "rewards.json"


@functools.cache
def load_golden() -> dict[str, Any]:
    """The whole golden file; a clear error when it is missing."""
    path = golden_path()
    if not path.is_file():
        raise FileNotFoundError(
            f"golden vectors not found at {path}; put shared/golden beside the clone or set "
            f"OPENMLE_GOLDEN to the directory holding rewards.json"
        )
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def records(kind: str) -> list[dict[str, Any]]:
    """The unit records of ``kind`` (e.g. ``"evo_parent_utilities"``), in file order."""
    found = [r for r in load_golden()["records"] if r["kind"] == kind]
    if not found:
        raise LookupError(f"no golden records of kind {kind!r} in {golden_path()}")
    return found


_SPECIAL = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def decode(value: Any) -> Any:
    """Replace ``"nan"``/``"inf"``/``"-inf"`` strings by floats, in lists and dicts too."""
    if isinstance(value, str) and value in _SPECIAL:
        return _SPECIAL[value]
    if isinstance(value, list):
        return [decode(v) for v in value]
    if isinstance(value, dict):
        return {k: decode(v) for k, v in value.items()}
    return value
