"""The Python runtime a program needs, the host files it may see, and rlimits."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
from collections.abc import Iterable
from pathlib import Path

from attrs import frozen

# Files under /etc a Python program may reasonably need (dynamic loader, time zone, users,
# certificates, fonts). Everything else in /etc (shadow, ssh keys, credentials) stays hidden.
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/fonts",
    "/etc/group",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/passwd",
    "/etc/ssl",
)
# /proc entries the weak mode lets a program read (system-wide facts, no other process).
PROC_FILES = (
    "/proc/cpuinfo",
    "/proc/filesystems",
    "/proc/loadavg",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/sys",
    "/proc/uptime",
    "/proc/version",
)
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi")
_TOP_LEVEL = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
LAUNCHER = str(Path(__file__).with_name("_launcher.py"))
"""The launcher program (:mod:`openmle.backends._launcher`), run by path with ``python -I -S``."""


@frozen(kw_only=True)
class HostLayout:
    """What of the host's file layout a run's mounts and rules depend on (see :func:`host_layout`).

    ``top_level``: ``(path, symlink target)`` of each of ``/bin``, ``/lib``, ... that exists
    (target None for a directory); ``present``: which of :data:`ETC_FILES` and
    :data:`PROC_FILES` exist; ``gpu_devices``: ``/dev/nvidia*``; ``nvidia_proc``: whether
    ``/proc/driver/nvidia`` exists.
    """

    top_level: tuple[tuple[str, str | None], ...]
    present: frozenset[str]
    gpu_devices: tuple[str, ...] = ()
    nvidia_proc: bool = False


def host_layout() -> HostLayout:
    """This host's :class:`HostLayout` (reads the file system; cheap, a few ``stat`` calls)."""
    top: list[tuple[str, str | None]] = []
    for p in _TOP_LEVEL:
        if os.path.islink(p):
            top.append((p, os.readlink(p)))
        elif os.path.isdir(p):
            top.append((p, None))
    return HostLayout(
        top_level=tuple(top),
        present=frozenset(p for p in (*ETC_FILES, *PROC_FILES) if os.path.exists(p)),
        gpu_devices=tuple(str(d) for d in sorted(Path("/dev").glob("nvidia*"))),
        nvidia_proc=os.path.isdir("/proc/driver/nvidia"),
    )


@frozen(kw_only=True)
class RuntimeInfo:
    """Where an interpreter lives: directories the program must be able to read."""

    executable: str
    roots: tuple[str, ...]
    bin_dir: str


_PROBE = Path(__file__).with_name("_runtime_probe.py")
"""The probe program (a real module; its source is run with ``-c``: the interpreter may be
another Python, with a working directory of its own)."""


@functools.cache
def runtime_info(python: str) -> RuntimeInfo:
    """Ask ``python`` (isolated mode) where its prefixes and ``sys.path`` live.

    Raises:
        OSError: the interpreter cannot be started or answered nonsense.
    """
    proc = subprocess.run(
        [python, "-I", "-c", _PROBE.read_text(encoding="utf-8")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        raise OSError(f"cannot start Python interpreter {python!r}: {proc.stderr.strip()[-400:]}")
    data = json.loads(proc.stdout)
    candidates = sorted({os.path.realpath(x) for x in data["paths"]} | set(data["paths"]))
    roots = [
        p
        for p in candidates
        if os.path.isdir(p) and not p.startswith(("/usr/", "/proc", "/sys", "/dev")) and p != "/"
    ]
    # Keep only outermost directories.
    outer: list[str] = []
    for p in sorted(roots):
        if not any(p == o or p.startswith(o.rstrip("/") + "/") for o in outer):
            outer.append(p)
    exe = str(data["exe"])
    return RuntimeInfo(executable=exe, roots=tuple(outer), bin_dir=os.path.dirname(exe))


def is_within(path: str | Path, root: str | Path) -> bool:
    """Whether ``path`` equals or lies beneath ``root`` (lexically, after ``realpath``)."""
    p, r = os.path.realpath(path), os.path.realpath(root)
    return p == r or p.startswith(r.rstrip("/") + "/")


def clamp_rlimits(wanted: Iterable[tuple[str, int | None]]) -> list[tuple[str, int, int]]:
    """``(name, soft, hard)`` triples with each limit clamped to the current hard limit.

    ``None`` means "leave as is" and is dropped. An unprivileged process cannot raise a hard
    limit, so a wanted limit above it becomes the hard limit.
    """
    import resource

    out: list[tuple[str, int, int]] = []
    for name, value in wanted:
        if value is None:
            continue
        _, hard = resource.getrlimit(getattr(resource, name))
        v = value if hard == resource.RLIM_INFINITY else min(value, hard)
        out.append((name, v, v))
    return out


RLIMIT_NAMES = (
    "RLIMIT_AS",
    "RLIMIT_CORE",
    "RLIMIT_CPU",
    "RLIMIT_DATA",
    "RLIMIT_FSIZE",
    "RLIMIT_NOFILE",
    "RLIMIT_NPROC",
)


def hard_rlimits() -> dict[str, int]:
    """This process's hard limits by name (``RLIM_INFINITY`` is -1)."""
    import resource

    return {name: resource.getrlimit(getattr(resource, name))[1] for name in RLIMIT_NAMES}


def count_user_processes(uid: int) -> int:
    """How many processes ``uid`` owns (for a relative ``RLIMIT_NPROC``)."""
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    n += 1
    return n
