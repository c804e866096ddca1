"""Process trees, signals, the per-run quota tmpfs and removing what a run leaves."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from openmle.backends._launcher import MNT_DETACH, MS_NODEV, MS_NOSUID
from openmle.backends._workspace import remove_tree


def _stat_fields(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of ``pid``, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[1])


def descendants(root: int) -> set[int]:
    """Live (non-zombie) descendants of ``root`` (excluding ``root``), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        st = _stat_fields(int(entry.name))
        if st is not None and st[0] != "Z":
            children.setdefault(st[1], []).append(int(entry.name))
    out: set[int] = set()
    stack = [root]
    while stack:
        for c in children.get(stack.pop(), ()):
            if c not in out:
                out.add(c)
                stack.append(c)
    return out


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/PID/stat``), or None if it is gone.

    A pid and its start time name one process for good (a reused pid starts later).
    """
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    return int(rest[19]) if len(rest) > 19 and rest[19].isdigit() else None


def owned_marker(token: str) -> str:
    """A run marker naming this process as its owner: ``PID.START.token``."""
    return f"{os.getpid()}.{start_time(os.getpid())}.{token}"


def sweep_orphans(key: str, *, rounds: int = 5) -> set[int]:
    """SIGKILL every live process whose ``key`` variable is a marker (:func:`owned_marker`)
    of an owner that is gone (its pid dead, or reused by a later process); the killed pids.

    What a sandbox whose owner was killed (``kill -9``) left behind: the programs' own
    children, which the parent-death signal does not reach. A process that cleared or
    rewrote its environment is not found (see the isolation docs). Blocking: scans ``/proc``.
    """
    prefix = f"{key}=".encode()
    owners: dict[tuple[int, int], bool] = {}
    killed: set[int] = set()
    for _ in range(rounds):
        found = set()
        for pid, env in _environments():
            for item in env:
                if not item.startswith(prefix):
                    continue
                parts = item[len(prefix) :].split(b".")
                if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
                    break
                owner = (int(parts[0]), int(parts[1]))
                if owner not in owners:
                    owners[owner] = start_time(owner[0]) == owner[1]
                if not owners[owner] and pid != os.getpid():
                    found.add(pid)
                break
        if not found:
            break
        kill_pids(found, signal.SIGKILL)
        killed |= found
    return killed


def live_pids_with_env(key: str, value: str) -> set[int]:
    """Live (non-zombie) processes whose environment holds ``key=value`` (readable ones only)."""
    needle = f"{key}={value}".encode()
    out: set[int] = set()
    for pid, env in _environments():
        if needle in env:
            st = _stat_fields(pid)
            if st is not None and st[0] != "Z":
                out.add(pid)
    return out


def live_pids_in_mount_ns(namespace: tuple[int, int]) -> set[int]:
    """Live (non-zombie) processes in the mount namespace ``namespace``, ``(st_dev,
    st_ino)`` of its ``/proc/PID/ns/mnt`` (only those this process may inspect). Blocking:
    scans ``/proc``.

    The caller holds the namespace open (a descriptor on it) while it looks: the kernel gives
    a freed namespace's number to the next namespace made, at once, so a number alone may
    name an unrelated later namespace.
    """
    out: set[int] = set()
    for pid in _all_pids():
        try:
            st = os.stat(f"/proc/{pid}/ns/mnt")
        except OSError:
            continue
        if (st.st_dev, st.st_ino) == namespace:
            fields = _stat_fields(pid)
            if fields is not None and fields[0] != "Z":
                out.add(pid)
    return out


def _all_pids() -> Iterator[int]:
    """Every pid in ``/proc`` (some may be gone by the time they are looked at)."""
    with os.scandir("/proc") as entries:
        for entry in entries:
            if entry.name.isdigit():
                yield int(entry.name)


def _environments() -> Iterator[tuple[int, list[bytes]]]:
    """``(pid, its environment's NUL-separated entries)`` of every process in ``/proc`` whose
    environment this process may read (the others are skipped). Blocking.
    """
    for pid in _all_pids():
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        yield pid, env.split(b"\0")


def kill_pids(pids: Iterable[int], sig: int) -> None:
    """Send ``sig`` to each pid, ignoring ones already gone."""
    for pid in pids:
        if pid <= 1 or pid == os.getpid():
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def kill_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``, ignoring an empty group."""
    if pgid <= 1:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def mount_quota_tmpfs(path: Path, *, max_bytes: int, max_files: int) -> bool:
    """Mount a tmpfs of ``max_bytes`` and ``max_files`` inodes on directory ``path``.

    The per-run workspace quota: a program that fills it gets ``ENOSPC``. Needs the right to
    mount (root in this mount namespace); False where that is refused (nothing is changed).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        opts = f"size={max_bytes},nr_inodes={max_files},mode=0755".encode()
        r = libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, opts)
    except (OSError, AttributeError, TypeError):
        return False
    return int(r) == 0


def unmount(path: Path) -> None:
    """Detach the mount at ``path`` (lazily, so open files cannot keep it); best effort."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.umount2(os.fsencode(path), MNT_DETACH)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or beneath ``path`` (deepest first), from ``/proc/self/mountinfo``."""
    root = os.path.realpath(path)
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split(" ")
        if len(parts) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), parts[4])
        if point == root or point.startswith(root.rstrip("/") + "/"):
            found.append(point)
    return sorted(set(found), key=len, reverse=True)


def safe_rmtree(path: Path) -> None:
    """Remove ``path`` whatever the program left there (any depth, names or permissions).

    Detaches the quota tmpfs (or any mount) beneath it first, so a run directory left mounted
    by a killed process is removable too. See
    :func:`openmle.backends._workspace.remove_tree`; never raises.
    """
    for point in mounts_under(path):
        unmount(Path(point))
    remove_tree(path)
