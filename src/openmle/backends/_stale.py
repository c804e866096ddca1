"""The stale-run sweep of the backends: what the sandboxes of a killed process left behind.

A job service (or any long-lived owner of sandboxes) calls :func:`remove_stale_cgroups` for a
predecessor that died without cleaning up, and :func:`safe_rmtree` for its run directories;
both are offered upward in :mod:`openmle.backends`' public surface (its kit).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from openmle.backends._cgroup import Cgroup, _cgroup_mounts, _own_cgroups
from openmle.backends._procs import safe_rmtree

__all__ = ["remove_stale_cgroups", "safe_rmtree"]


def remove_stale_cgroups(pid: int) -> int:
    """Empty and remove the cgroups ``openmle-<pid>-*`` (made by the sandboxes of process
    ``pid``, now dead) next to this process's own; returns how many were removed.

    For a service that starts over a predecessor killed with ``kill -9`` (its sandboxes could
    not clean up). Blocking; every process left in such a cgroup is killed first.

    Raises:
        OSError: a cgroup that cannot be emptied or removed.
    """
    v1, v2 = _cgroup_mounts()
    own = _own_cgroups()
    bases: list[tuple[str, Path]] = [
        (ctrl, Path(mount) / own.get(ctrl, "/").lstrip("/")) for ctrl, mount in v1.items()
    ]
    if v2 is not None and "" in own:
        bases.append(("", Path(v2) / own[""].lstrip("/")))
    groups: dict[str, dict[str, Path]] = {}
    prefix = f"openmle-{pid}-"
    for ctrl, base in bases:
        with contextlib.suppress(OSError):
            for entry in os.scandir(base):
                if entry.name.startswith(prefix) and entry.is_dir(follow_symlinks=False):
                    groups.setdefault(entry.name, {})[ctrl] = Path(entry.path)
    for dirs in groups.values():
        cg = Cgroup(dirs=dirs, version=2 if "" in dirs else 1)
        cg.kill()
        cg.remove(wait_s=5.0)
    return len(groups)
