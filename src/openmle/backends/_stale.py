"""The stale-run sweep of the backends: what the sandboxes of a killed process left behind.

A job service (or any long-lived owner of sandboxes) calls :func:`remove_stale_cgroups` for a
predecessor that died without cleaning up, :func:`kill_stale_programs` for the programs its
runs left, and :func:`safe_rmtree` for its run directories; all are offered upward in
:mod:`openmle.backends`' public surface (its kit).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from openmle.backends._cgroup import Cgroup, _cgroup_mounts, _own_cgroups
from openmle.backends._plan import RUN_ID_ENV
from openmle.backends._procs import kill_marked_under, kill_owned, safe_rmtree

__all__ = ["kill_own_programs", "kill_stale_programs", "remove_stale_cgroups", "safe_rmtree"]


def kill_own_programs() -> int:
    """SIGKILL, now, every program the sandboxes of this process started; how many processes
    the ``/proc`` scan signalled (cgroup members are killed with their cgroup, uncounted).

    For a process that must exit at once, with no time for its sandboxes' own cleanup (the
    command line's third Ctrl-C): the processes carrying a run marker (``OPENMLE_RUN_ID``)
    that names this process as its owner (a program, its children, a daemon that left the
    process tree but kept its environment), this process's descendants in its own session,
    and the members of its cgroups ``openmle-<pid>-*`` (which are removed). Not reached: a
    process that left the tree, cleared its environment and has no cgroup (see the isolation
    docs), and containers (a container's host-side watchdog, spared here, removes it at its
    deadline; the next run's stale sweep removes it once this process is gone). Blocking:
    scans ``/proc``; never raises for a process or cgroup it cannot reach.
    """
    killed = len(kill_owned(RUN_ID_ENV))
    with contextlib.suppress(OSError):
        remove_stale_cgroups(os.getpid())
    return killed


def kill_stale_programs(workdir: str | os.PathLike[str]) -> int:
    """SIGKILL the programs that sandbox runs left in ``workdir``; how many were killed.

    Those are the live processes carrying the run marker (``OPENMLE_RUN_ID``) whose working
    directory lies inside ``workdir``.

    For a service that starts over a predecessor killed with ``kill -9`` in the same work
    directory. Each process found is pinned by a pidfd and checked again (marker, working
    directory) before the signal, which goes through the pidfd: a pid that exited and was
    given to another process meanwhile is spared. Blocking: scans ``/proc``.
    """
    return len(kill_marked_under(RUN_ID_ENV, os.path.realpath(workdir)))


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
