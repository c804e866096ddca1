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
    """Copy ``src`` to ``dst`` with no symbolic link in the copy: a link whose target stays
    inside ``src`` (and out of every ``deny``) is copied as what it points to, any other link
    is dropped, at every depth, inside linked directories too (the private answers are never
    reached through a link in a linked directory).

    Iterative (any depth). A link to a directory that is already being copied above it (a
    cycle) is dropped. ``dst`` is left read-only.
    """
    src_real = os.path.realpath(src)

    def ok(target: str) -> bool:
        return is_within(target, src_real) and not any(is_within(target, d) for d in deny)

    # (real directory, its copy, the chain of directories above it: (dev, ino), parent chain)
    stack: list[tuple[str, Path, _Chain | None]] = [(src_real, dst, None)]
    made: list[Path] = []
    while stack:
        here, out, above = stack.pop()
        st = os.stat(here)
        chain: _Chain = ((st.st_dev, st.st_ino), above)
        out.mkdir(parents=True, exist_ok=True)
        made.append(out)
        with os.scandir(here) as it:
            entries = [(e.name, e.path, e.is_symlink()) for e in it]
        for name, path, link in entries:
            if link:
                path = os.path.realpath(path)
                if not ok(path):
                    continue
            if os.path.isdir(path):
                if link and _in_chain(os.stat(path), chain):
                    continue
                stack.append((path, out / name, chain))
            elif os.path.isfile(path):
                shutil.copyfile(path, out / name, follow_symlinks=False)
                os.chmod(out / name, 0o444)
    for d in reversed(made):
        os.chmod(d, 0o555)


_Chain = tuple[tuple[int, int], "_Chain | None"]


def _in_chain(st: os.stat_result, chain: _Chain | None) -> bool:
    key = (st.st_dev, st.st_ino)
    while chain is not None:
        if chain[0] == key:
            return True
        chain = chain[1]
    return False


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
