"""Process trees, signals, the per-run quota tmpfs and removing what a run leaves."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from openmle._trees import remove_tree
from openmle.backends._launcher import MNT_DETACH, MS_NODEV, MS_NOSUID


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
    rewrote its environment is not found (see the isolation docs). Each is killed through
    :func:`kill_pids`, its marker read again once its pid is pinned. Blocking: scans ``/proc``.
    """
    prefix = f"{key}=".encode()
    owners: dict[tuple[int, int], bool] = {}

    def orphaned(env: list[bytes]) -> bool:
        owner = _marker_owner(env, prefix)
        if owner is None:
            return False
        if owner not in owners:
            owners[owner] = start_time(owner[0]) == owner[1]
        return not owners[owner]

    def still(pids: set[int]) -> set[int]:
        return {pid for pid in pids if orphaned(_environ(pid) or [])}

    killed: set[int] = set()
    for _ in range(rounds):
        found = {pid for pid, env in _environments() if pid != os.getpid() and orphaned(env)}
        if not found:
            break
        killed |= kill_pids(found, signal.SIGKILL, still)
    return killed


def kill_owned(key: str) -> set[int]:
    """SIGKILL, now, every process whose ``key`` variable is a marker (:func:`owned_marker`)
    naming this process as its owner, and every descendant of this process in its own
    session; the pids signalled (each pinned and checked again first, :func:`kill_pids`).

    For an owner that must exit at once (the command line's third Ctrl-C): the programs its
    sandboxes started and the children they made, also those that left the process tree
    but kept their environment. A descendant in a session of its own (a container's
    host-side watchdog) is spared: it removes its container once this process is gone.
    Blocking: scans ``/proc``.
    """
    prefix = f"{key}=".encode()
    me = (os.getpid(), start_time(os.getpid()))
    session = os.getsid(0)

    def owned(pid: int) -> bool:
        if _marker_owner(_environ(pid) or [], prefix) == me:
            return True
        try:
            return _descends_from(pid, me[0]) and os.getsid(pid) == session
        except OSError:
            return False

    return kill_pids({pid for pid in _all_pids() if owned(pid)}, signal.SIGKILL,
                     lambda pids: set(filter(owned, pids)))  # fmt: skip


def _marker_owner(env: list[bytes], prefix: bytes) -> tuple[int, int] | None:
    """``(pid, start time)`` of the owner named by the first ``prefix`` entry of ``env``
    (a marker of :func:`owned_marker`), or None (no such entry, or a malformed one).
    """
    for item in env:
        if item.startswith(prefix):
            parts = item[len(prefix) :].split(b".")
            if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
                return None
            return int(parts[0]), int(parts[1])
    return None


def kill_marked_under(key: str, root: str) -> set[int]:
    """SIGKILL every process whose environment has a ``key`` entry (any value) and whose
    working directory is ``root`` (a real path) or lies below it; the pids signalled, each
    pinned and checked again first (:func:`kill_pids`). Blocking: scans ``/proc``.
    """
    prefix = f"{key}=".encode()

    def under(pid: int) -> bool:
        env = _environ(pid)
        if env is None or not any(item.startswith(prefix) for item in env):
            return False
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            return False
        return cwd == root or cwd.startswith(root + os.sep)

    found = {pid for pid in _all_pids() if under(pid)}
    return kill_pids(found, signal.SIGKILL, lambda pids: set(filter(under, pids)))


def live_pids_with_env(key: str, value: str) -> set[int]:
    """Live (non-zombie) processes whose environment holds ``key=value`` (readable ones only)."""
    needle = f"{key}={value}".encode()
    return {pid for pid, env in _environments() if needle in env and _live(pid)}


def live_pids_in_mount_ns(namespace: tuple[int, int]) -> set[int]:
    """Live (non-zombie) processes in the mount namespace ``namespace``, ``(st_dev,
    st_ino)`` of its ``/proc/PID/ns/mnt`` (only those this process may inspect). Blocking:
    scans ``/proc``.

    The caller holds the namespace open (a descriptor on it) while it looks: the kernel gives
    a freed namespace's number to the next namespace made, at once, so a number alone may
    name an unrelated later namespace.
    """
    return {pid for pid in _all_pids() if _in_mount_ns(pid, namespace) and _live(pid)}


def matching(
    pids: set[int],
    *,
    root: int | None = None,
    env: tuple[str, str] | None = None,
    namespace: tuple[int, int] | None = None,
) -> set[int]:
    """Those of ``pids`` that are, now, descendants of ``root`` (their parent chain reaches
    it), or carry ``env`` (``key, value``) in their environment, or are in the mount
    ``namespace`` (held open by the caller, see :func:`live_pids_in_mount_ns`): the
    criteria of :func:`descendants`, :func:`live_pids_with_env` and
    :func:`live_pids_in_mount_ns`, checked per pid (the re-check of :func:`kill_pids`).
    """
    needle = None if env is None else f"{env[0]}={env[1]}".encode()
    out: set[int] = set()
    for pid in pids:
        if (
            (root is not None and _descends_from(pid, root))
            or (needle is not None and needle in (_environ(pid) or []))
            or (namespace is not None and _in_mount_ns(pid, namespace))
        ):
            out.add(pid)
    return out


def _live(pid: int) -> bool:
    st = _stat_fields(pid)
    return st is not None and st[0] != "Z"


def _descends_from(pid: int, root: int) -> bool:
    """Whether ``root`` is among ``pid``'s ancestors (its parent chain read now)."""
    seen: set[int] = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        st = _stat_fields(pid)
        if st is None:
            return False
        pid = st[1]
        if pid == root:
            return True
    return False


def _in_mount_ns(pid: int, namespace: tuple[int, int]) -> bool:
    try:
        st = os.stat(f"/proc/{pid}/ns/mnt")
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == namespace


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
        env = _environ(pid)
        if env is not None:
            yield pid, env


def _environ(pid: int) -> list[bytes] | None:
    """``pid``'s environment's NUL-separated entries, or None where it cannot be read."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None


def kill_pids(pids: Iterable[int], sig: int, still: Callable[[set[int]], set[int]]) -> set[int]:
    """Send ``sig`` to those of ``pids`` that ``still`` confirms, and never to a process that
    took one of the pids after it was read; the pids signalled.

    A pid read from a list (a cgroup's members, a ``/proc`` scan) may have exited, been
    reaped and been given to an unrelated process by the time it is signalled (``kill(2)``
    would hit that one). So each pid is first pinned by a pidfd (one already gone, or that
    cannot be pinned, is skipped); then ``still`` gets the pinned pids, once, and returns
    those that match, read anew, the criterion they were found by; the signal goes through
    the pidfd, so only to the pinned process, and not at all if it was reaped meanwhile
    (``still`` may then have looked at a later process with its pid). This process and pid
    1 are never signalled.
    """
    fds: dict[int, int] = {}
    try:
        for pid in pids:
            if pid <= 1 or pid == os.getpid() or pid in fds:
                continue
            with contextlib.suppress(OSError):  # gone (ESRCH), or not a process (a thread)
                fds[pid] = os.pidfd_open(pid)
        sent: set[int] = set()
        if not fds:
            return sent
        for pid in still(set(fds)) & fds.keys():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                signal.pidfd_send_signal(fds[pid], sig)
                sent.add(pid)
        return sent
    finally:
        for fd in fds.values():
            os.close(fd)


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
    :func:`openmle._trees.remove_tree`; never raises.
    """
    for point in mounts_under(path):
        unmount(Path(point))
    remove_tree(path)
