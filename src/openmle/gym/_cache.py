"""Where generated data lives, and how a directory is published atomically.

The cache root is ``$OPENMLE_CACHE`` if set, else ``~/.cache/openmle``. Every generated
directory (bundled tasks, validation views) is built in a temporary sibling and renamed into
place, so concurrent processes either see nothing or a complete directory; a process that loses
the race discards its copy and uses the winner's (both are byte-identical by construction).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

from openmle._trees import remove_tree

__all__ = ["cache_root", "publish_dir"]


def cache_root() -> Path:
    """``$OPENMLE_CACHE`` or ``~/.cache/openmle`` (not created here)."""
    env = os.environ.get("OPENMLE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "openmle"


def publish_dir(target: Path, build: Callable[[Path], None]) -> Path:
    """Return ``target``, building it first with ``build(tmp)`` if it does not exist yet.

    ``build`` writes the directory's content into the empty directory ``tmp``; ``tmp`` is then
    renamed to ``target`` in one step. On failure ``tmp`` is removed and the error propagates.
    """
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".tmp-{target.name}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        build(tmp)
        try:
            tmp.rename(target)
        except OSError:
            if not target.is_dir():
                raise
    finally:
        if tmp.exists():
            remove_tree(tmp)
    return target
