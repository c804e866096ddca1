"""The Landlock (weak) mode: the kernel's ABI, the allow-list of paths, the data view."""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from openmle.backends._launcher import (
    LANDLOCK_CREATE_RULESET_VERSION,
    LL_ALL,
    LL_DEVICE,
    LL_READ_ONLY,
    NR_LANDLOCK_CREATE_RULESET,
)
from openmle.backends._runtime import (
    ETC_FILES,
    PROC_FILES,
    HostLayout,
    RuntimeInfo,
    host_layout,
    is_within,
)


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        r = int(libc.syscall(NR_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(r, 0)


def symlink_free_copy(src: Path, dst: Path, *, deny: Sequence[Path]) -> None:
    """Copy ``src`` to ``dst`` resolving symlinks that stay inside ``src``; drop all others.

    Symlinks pointing outside ``src`` (or into any of ``deny``) are skipped, so the copy holds
    no path to the private answers. ``dst`` is left read-only.
    """
    src_real = os.path.realpath(src)

    def ok(target: str) -> bool:
        return is_within(target, src_real) and not any(is_within(target, d) for d in deny)

    for dirpath, dirnames, filenames in os.walk(src_real, followlinks=False):
        rel = os.path.relpath(dirpath, src_real)
        out = dst / rel if rel != "." else dst
        out.mkdir(parents=True, exist_ok=True)
        for d in list(dirnames):
            full = os.path.join(dirpath, d)
            if os.path.islink(full):
                dirnames.remove(d)
                target = os.path.realpath(full)
                if ok(target):
                    shutil.copytree(target, out / d, symlinks=False, dirs_exist_ok=True)
        for name in filenames:
            full = os.path.join(dirpath, name)
            target = os.path.realpath(full)
            if os.path.islink(full) and not ok(target):
                continue
            if os.path.isfile(target):
                shutil.copyfile(target, out / name)
    for dirpath, _, filenames in os.walk(dst):
        for name in filenames:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)


def landlock_rules(
    *,
    info: RuntimeInfo,
    data_dir: Path,
    program_dir: Path,
    workspace: Path,
    tmp_dir: Path,
    extra_ro: Sequence[Path],
    gpu: bool,
    layout: HostLayout | None = None,
) -> list[tuple[str, int]]:
    """Landlock ``(path, access)`` rules for the weak mode (read-only runtime, rw workspace)."""
    rules: list[tuple[str, int]] = [("/usr", LL_READ_ONLY)]
    layout = layout or host_layout()
    rules += [(p, LL_READ_ONLY) for p, _ in layout.top_level]
    rules += [(p, LL_READ_ONLY) for p in ETC_FILES if p in layout.present]
    rules += [(p, LL_READ_ONLY) for p in info.roots]
    rules += [(str(p), LL_READ_ONLY) for p in extra_ro]
    # Not all of /proc: Landlock does not stop reading the environment or command line of
    # other processes of the same user (the host's API keys). "/proc/self" is opened by the
    # launcher, so it names the program's own directory (exec keeps the pid).
    rules += [(p, LL_READ_ONLY) for p in PROC_FILES if p in layout.present]
    rules += [("/proc/self", LL_READ_ONLY), ("/sys", LL_READ_ONLY)]
    for dev in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"):
        rules.append((dev, LL_DEVICE))
    if gpu:
        rules += [(d, LL_DEVICE) for d in layout.gpu_devices]
        if layout.nvidia_proc:
            rules.append(("/proc/driver/nvidia", LL_READ_ONLY))
    rules += [(str(data_dir), LL_READ_ONLY), (str(program_dir), LL_READ_ONLY)]
    rules += [(str(workspace), LL_ALL), (str(tmp_dir), LL_ALL)]
    return rules
