"""What a killed job service leaves behind, found and removed at the next start.

A service stopped by ``kill -9`` (or a power loss) cannot clean up: its programs' run
directories and data views stay on disk, its per-run cgroups (``openmle-<pid>-*``) stay in the
cgroup tree, and programs that outlived it may still be running. At start, before any job is
re-queued, the service removes exactly what belongs to it and nothing else:

- its **work directory** (``ServiceConfig.run_dir``) carries a mark file; only a directory with
  the mark (or a new or empty one, which gets it) is used. Inside it, leftover ``openmle-run-*``
  and ``openmle-views-*`` entries are deleted, and live program processes (they carry
  ``OPENMLE_RUN_ID`` in their environment) whose working directory lies inside it are killed.
- the mark file lists the process ids (with their start times) of every service that used the
  directory. Cgroups named ``openmle-<pid>-*`` of a listed process that is no longer alive are
  emptied (SIGKILL to their members) and removed. A listed pid now held by another process is
  left alone (and kept on the list for a later start).

The store's file lock is held while this runs, so no other service shares the directory.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from attrs import frozen

from openmle.errors import InvalidArgument

__all__ = ["MARK", "Swept", "prepare_workdir", "sweep"]

log = logging.getLogger("openmle.service")

MARK = ".openmle-job-service"
"""The mark file of a job service's work directory (holds ``pid starttime`` lines)."""

_PREFIXES = ("openmle-run-", "openmle-views-")


@frozen(kw_only=True)
class Swept:
    """What a start-up sweep removed."""

    dirs: int = 0
    cgroups: int = 0
    processes: int = 0

    def to_dict(self) -> dict[str, int]:
        """A JSON-ready dict."""
        return {"dirs": self.dirs, "cgroups": self.cgroups, "processes": self.processes}


def prepare_workdir(path: Path) -> None:
    """Create ``path`` with the mark, or check that an existing one carries it.

    Raises:
        InvalidArgument: ``path`` exists, is not empty and has no mark (it is not this
            service's to clean), or is not a directory.
    """
    if path.exists() and not path.is_dir():
        raise InvalidArgument(f"the service work directory {str(path)!r} is not a directory")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mark = path / MARK
    if mark.is_file() and not mark.is_symlink():
        return
    if any(path.iterdir()):
        raise InvalidArgument(
            f"the service work directory {str(path)!r} is not empty and was not made by a job "
            f"service (no {MARK} file); give the service a directory of its own (--work-dir)"
        )
    mark.write_text("")


def _start_time(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def sweep(workdir: Path) -> Swept:
    """Remove what killed predecessors left in ``workdir`` and their cgroups (blocking).

    Then records this process in the mark file. Call it with the store's lock held, after
    :func:`prepare_workdir` and before the sandbox is built.
    """
    from openmle.backends import kill_stale_programs, remove_stale_cgroups, safe_rmtree

    mark = workdir / MARK
    keep: list[str] = []
    cgroups = 0
    for line in mark.read_text().splitlines():
        words = line.split()
        if len(words) != 2 or not words[0].isdigit():
            continue
        pid, started = int(words[0]), words[1]
        now = _start_time(pid)
        if pid == os.getpid():
            if now == started:
                continue
            # A predecessor had our pid (common in containers); we made no cgroup yet.
        elif now is not None:  # alive: that service still, or the pid was reused; leave it
            keep.append(line)
            continue
        try:
            cgroups += remove_stale_cgroups(pid)
        except Exception:  # never stop the service from starting over a leftover
            log.exception("could not remove the cgroups of an earlier service (pid %d)", pid)
            keep.append(line)
    processes = kill_stale_programs(workdir)
    dirs = 0
    for entry in os.scandir(workdir):
        if entry.name.startswith(_PREFIXES):
            path = Path(entry.path)
            if entry.is_dir(follow_symlinks=False):
                safe_rmtree(path)
            else:
                with contextlib.suppress(OSError):
                    path.unlink()
            dirs += 1
    keep.append(f"{os.getpid()} {_start_time(os.getpid())}")
    tmp = workdir / f"{MARK}.tmp"
    tmp.write_text("".join(f"{ln}\n" for ln in keep))
    tmp.replace(mark)
    swept = Swept(dirs=dirs, cgroups=cgroups, processes=processes)
    if dirs or cgroups or processes:
        log.warning(
            "removed what an earlier service left: %d run directories or views, %d cgroups, "
            "%d program processes",
            dirs,
            cgroups,
            processes,
        )
    return swept
