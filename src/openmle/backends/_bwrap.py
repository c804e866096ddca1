"""The bubblewrap mode: its command line (the launcher ``exec``s it with the run's rlimits set)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from openmle.backends._runtime import (
    _PROC_READ_ONLY,
    ETC_FILES,
    HostLayout,
    RuntimeInfo,
    host_layout,
    is_within,
    runtime_info,
)

__all__ = ["LAUNCHER_IN_SANDBOX", "bwrap_argv", "bwrap_problem"]

LAUNCHER_IN_SANDBOX = "/run/openmle/launcher.py"
"""Where bwrap binds the launcher (read-only) that waits for the run inside the sandbox."""


def bwrap_problem(bwrap: str | None, python: str) -> str | None:
    """Why bubblewrap cannot isolate ``python`` here, or None when a probe sandbox works."""
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed; on Debian/Ubuntu: apt-get install bubblewrap"
    try:
        info = runtime_info(python)
    except OSError as exc:
        return str(exc)
    argv = [
        bwrap,
        *_bwrap_base(info),
        "--",
        info.executable,
        "-I",
        "-S",
        "-c",
        "pass",
    ]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if proc.returncode != 0:
        return f"bwrap cannot create a sandbox here: {proc.stderr.strip()[-400:]}"
    return None


def _bwrap_base(
    info: RuntimeInfo,
    tmp_bytes: int | None = None,
    *,
    shm_bytes: int | None = None,
    tmp_dir: Path | None = None,
    layout: HostLayout | None = None,
) -> list[str]:
    """Namespaces, /proc, /dev (with a ``shm_bytes`` tmpfs at /dev/shm), a private /tmp (a
    ``tmp_bytes`` tmpfs, or ``tmp_dir`` bound), then the read-only runtime (the probe and every
    run share it, so a runtime the probe can start is one every run can start).
    """
    args = [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--proc",
        "/proc",
    ]
    # A program runs as uid 0 when we do; sysctls check the uid, not capabilities, so cover
    # the writable corners of /proc read-only (as container engines do).
    for sub in _PROC_READ_ONLY:
        args += ["--ro-bind-try", f"/proc/{sub}", f"/proc/{sub}"]
    args += ["--dev", "/dev"]
    if shm_bytes is not None:
        # bwrap's /dev/shm lives in its unlimited /dev tmpfs: cap it (shared memory that a
        # per-process RLIMIT_DATA does not count).
        args += ["--size", str(shm_bytes), "--tmpfs", "/dev/shm"]
    if tmp_dir is not None:
        args += ["--bind", str(tmp_dir), "/tmp"]
    else:
        if tmp_bytes is not None:
            args += ["--size", str(tmp_bytes)]
        args += ["--tmpfs", "/tmp"]
    args += ["--ro-bind", "/usr", "/usr"]
    for top, target in (layout or host_layout()).top_level:
        if target is not None:
            args += ["--symlink", target, top]
        else:
            args += ["--ro-bind", top, top]
    for etc in ETC_FILES:
        args += ["--ro-bind-try", etc, etc]
    for root in info.roots:
        args += ["--ro-bind", root, root]
    return args


def bwrap_argv(
    *,
    bwrap: str,
    info: RuntimeInfo,
    data_dir: Path,
    workspace: Path,
    program_dir: Path,
    tmp_bytes: int,
    private_paths: Sequence[Path],
    extra_ro: Sequence[Path],
    gpu: bool,
    info_fd: int | None,
    seccomp_fd: int | None = None,
    command: Sequence[str] = (),
    launcher: str | None = None,
    env: Mapping[str, str] | None = None,
    shm_bytes: int | None = None,
    tmp_dir: Path | None = None,
    layout: HostLayout | None = None,
) -> list[str]:
    """The bubblewrap command line for one run (see the module docstring for the layout).

    Runs ``command`` (cgroups were joined outside, by the launcher that ``exec``s bubblewrap);
    ``launcher`` (a host path) is bound read-only at :data:`LAUNCHER_IN_SANDBOX` for a
    ``command`` that runs it. bubblewrap writes ``{"child-pid": ...}`` to ``info_fd`` (when
    given) once the sandbox is set up. ``env`` is bubblewrap's child's whole environment
    (bubblewrap clears its own first); ``tmp_dir`` is bound at ``/tmp`` instead of a
    ``tmp_bytes`` tmpfs; ``shm_bytes`` caps ``/dev/shm``.
    """
    layout = layout or host_layout()
    args = [
        bwrap,
        *_bwrap_base(info, tmp_bytes, shm_bytes=shm_bytes, tmp_dir=tmp_dir, layout=layout),
    ]
    for p in extra_ro:
        args += ["--ro-bind", str(p), str(p)]
    args += ["--ro-bind", str(data_dir), "/data"]
    args += ["--ro-bind", str(program_dir), "/program"]
    args += ["--bind", str(workspace), "/workspace"]
    if gpu:
        for dev in layout.gpu_devices:
            args += ["--dev-bind", dev, dev]
        args += ["--ro-bind-try", "/sys", "/sys"]
    # Hide private paths that happen to sit inside a mounted runtime or extra directory.
    mounted = [*info.roots, *map(str, extra_ro)]
    for priv in private_paths:
        if any(is_within(priv, m) for m in mounted) and os.path.exists(priv):
            real = os.path.realpath(priv)
            if os.path.isdir(real):
                args += ["--tmpfs", real, "--remount-ro", real]
            else:
                args += ["--ro-bind", "/dev/null", real]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if env is not None:
        args.append("--clearenv")
        for key, value in env.items():
            args += ["--setenv", key, value]
    args += ["--chdir", "/workspace"]
    if launcher is not None:
        args += ["--ro-bind", launcher, LAUNCHER_IN_SANDBOX]
    return [*args, "--", *command]
