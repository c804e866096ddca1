"""Per-run cgroups (v1 or v2): process and memory limits, OOM detection, whole-tree kills."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time
import uuid
from pathlib import Path

from attrs import define, field

from openmle.backends._procs import kill_pids


def _cgroup_mounts() -> tuple[dict[str, str], str | None]:
    """(v1 controller -> mount point, v2 mount point) from /proc/self/mounts."""
    v1: dict[str, str] = {}
    v2: str | None = None
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return v1, v2
    for line in lines:
        parts = line.split()
        if len(parts) < 4:
            continue
        if parts[2] == "cgroup2" and v2 is None:
            v2 = parts[1]
        elif parts[2] == "cgroup":
            for opt in parts[3].split(","):
                if opt in ("pids", "memory", "cpu") and opt not in v1:
                    v1[opt] = parts[1]
    return v1, v2


def _own_cgroups() -> dict[str, str]:
    """Controller (or ``""`` for v2) -> this process's cgroup path."""
    out: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for ctrl in parts[1].split(",") if parts[1] else [""]:
            out[ctrl] = parts[2]
    return out


@define(eq=False)
class Cgroup:
    """A per-run cgroup (v1: one directory per controller; v2: one directory).

    Create with :meth:`create`; returns None where this process may not create cgroups.
    """

    dirs: dict[str, Path]
    version: int
    cpu: bool = False
    """v2: whether the cpu controller is enabled for it (v1: a ``cpu`` directory)."""
    _removed: bool = field(default=False, init=False)
    _written: dict[tuple[str, str], str] = field(factory=dict, init=False)
    """What :meth:`set_limits` last wrote to each file (the same value is not written again)."""

    @classmethod
    def create(
        cls, *, pids_max: int | None, memory_bytes: int | None, cpus: float | None
    ) -> Cgroup | None:
        """A fresh cgroup with the given limits, or None if cgroups are not writable here."""
        if not sys.platform.startswith("linux"):
            return None
        name = f"openmle-{os.getpid()}-{uuid.uuid4().hex[:12]}"
        v1, v2 = _cgroup_mounts()
        own = _own_cgroups()
        made: dict[str, Path] = {}
        try:
            if {"pids", "memory"} <= set(v1):
                for ctrl in ("pids", "memory", "cpu"):
                    if ctrl not in v1 or (ctrl == "cpu" and cpus is None):
                        continue  # each controller costs the program one cgroup move
                    d = Path(v1[ctrl]) / own.get(ctrl, "/").lstrip("/") / name
                    d.mkdir()
                    made[ctrl] = d
                cg = cls(dirs=made, version=1)
                cg.set_limits(pids_max=pids_max, memory_bytes=memory_bytes, cpus=cpus)
                return cg
            if v2 is not None and "" in own:
                parent = Path(v2) / own[""].lstrip("/")
                enabled = (parent / "cgroup.subtree_control").read_text().split()
                if not {"pids", "memory"} <= set(enabled):
                    return None
                d = parent / name
                d.mkdir()
                made[""] = d
                cg = cls(dirs=made, version=2, cpu="cpu" in enabled)
                cg.set_limits(pids_max=pids_max, memory_bytes=memory_bytes, cpus=cpus)
                return cg
        except OSError:
            for d in made.values():
                with contextlib.suppress(OSError):
                    d.rmdir()
            return None
        return None

    def set_limits(
        self, *, pids_max: int | None, memory_bytes: int | None, cpus: float | None
    ) -> None:
        """Write the limits (None: leave as is). Raises OSError where the kernel refuses one.

        A value already written is not written again (a spare's cgroup is made with the
        sandbox's defaults; a run with the same limits writes nothing). v1 keeps
        ``memory.memsw.limit_in_bytes`` (memory + swap) never below ``memory.limit_in_bytes``:
        a lower limit is written before the ``memsw`` one, a higher one after it.
        """
        if self.version == 1:
            if pids_max is not None:
                self._write("pids", "pids.max", str(pids_max))
            if memory_bytes is not None:
                value = str(memory_bytes)
                try:
                    self._write("memory", "memory.limit_in_bytes", value)
                except OSError:  # above the memsw limit: raise that first
                    with contextlib.suppress(OSError):
                        self._write("memory", "memory.memsw.limit_in_bytes", value)
                    self._write("memory", "memory.limit_in_bytes", value)
                with contextlib.suppress(OSError):
                    self._write("memory", "memory.memsw.limit_in_bytes", value)
            if cpus is not None and "cpu" in self.dirs:
                with contextlib.suppress(OSError):
                    self._write("cpu", "cpu.cfs_period_us", "100000")
                    self._write("cpu", "cpu.cfs_quota_us", str(max(1000, int(cpus * 100000))))
            return
        if pids_max is not None:
            self._write("", "pids.max", str(pids_max))
        if memory_bytes is not None:
            self._write("", "memory.max", str(memory_bytes))
            with contextlib.suppress(OSError):
                self._write("", "memory.swap.max", "0")
        if cpus is not None and self.cpu:
            self._write("", "cpu.max", f"{max(1000, int(cpus * 100000))} 100000")

    def _write(self, ctrl: str, name: str, value: str) -> None:
        if self._written.get((ctrl, name)) == value:
            return
        (self.dirs[ctrl] / name).write_text(value)
        self._written[ctrl, name] = value

    @property
    def procs_files(self) -> list[str]:
        """The files a *single-threaded* process writes ``0`` to, to join this cgroup.

        v1: each controller's ``tasks`` file, which moves the writing thread only: for a
        thread that moves itself the kernel (Linux >= 6.0) skips the global
        ``cgroup_threadgroup_rwsem`` write lock, whose RCU grace period (8-25 ms measured)
        ``cgroup.procs`` pays and during which every fork and exit on the host waits on the
        slow path. The joiners (the spare's ``/bin/sh`` or the launcher, before any thread)
        have one thread, so the whole process moves and every child it forks later is born
        inside. v2: ``cgroup.procs`` (``cgroup.threads`` needs a threaded cgroup).
        """
        name = "tasks" if self.version == 1 else "cgroup.procs"
        return [str(d / name) for d in self.dirs.values()]

    def pids(self) -> set[int]:
        """Every process currently in the cgroup."""
        out: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return out

    def members(self, pids: set[int]) -> set[int]:
        """Those of ``pids`` in the cgroup now (each member list read once, v1: until every
        one of ``pids`` is found).
        """
        found: set[int] = set()
        for d in self.dirs.values():
            if found == pids:
                break
            with contextlib.suppress(OSError):
                found.update(pids.intersection(map(int, (d / "cgroup.procs").read_text().split())))
        return found

    def _kill_members(self) -> None:
        """SIGKILL the processes in the cgroup, each checked a member once its pid is pinned
        (see :func:`kill_pids`: none that got a pid after it was listed).
        """
        kill_pids(self.pids(), signal.SIGKILL, self.members)

    def oom_killed(self) -> bool:
        """Whether the kernel OOM-killed a process of this cgroup."""
        ctrl, name = (
            ("memory", "memory.oom_control") if self.version == 1 else ("", "memory.events")
        )
        d = self.dirs.get(ctrl)
        if d is None:
            return False
        try:
            text = (d / name).read_text()
        except OSError:
            return False
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit() and int(value) > 0:
                return True
        return False

    def kill(self) -> None:
        """SIGKILL every process in the cgroup (v2: atomically via ``cgroup.kill``)."""
        if self.version == 2:
            with contextlib.suppress(OSError):
                (self.dirs[""] / "cgroup.kill").write_text("1")
        self._kill_members()

    def remove(self, *, wait_s: float = 5.0) -> None:
        """Remove the cgroup directories (after :meth:`kill`; idempotent, best effort).

        A killed process can keep a cgroup busy while it exits (longer on a loaded host), and
        one that was forking as :meth:`kill` ran can have left a child behind: a busy
        directory is retried for up to ``wait_s`` seconds, SIGKILLing whatever is still in
        the cgroup before each retry (blocking: call it off the loop). Returns at once where
        nothing is busy.
        """
        if self._removed:
            return
        deadline = time.monotonic() + wait_s
        for d in self.dirs.values():
            while True:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno == errno.EBUSY and time.monotonic() < deadline:
                        self._kill_members()
                        time.sleep(0.01)
                        continue
                    break
                break
        self._removed = True
