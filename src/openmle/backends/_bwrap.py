"""The bubblewrap mode: its command line and the ``sh`` + ``prlimit`` launch chain."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from openmle.backends._runtime import (
    _PROC_READ_ONLY,
    ETC_FILES,
    LAUNCHER,
    HostLayout,
    RuntimeInfo,
    host_layout,
    is_within,
    runtime_info,
)

__all__ = [
    "LAUNCHER_IN_SANDBOX",
    "bwrap_argv",
    "bwrap_problem",
    "shell_chain",
    "spare_chain",
]

LAUNCHER_IN_SANDBOX = "/run/openmle/launcher.py"
"""Where bwrap binds the launcher (read-only) when it runs one."""


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
    procs_files: Sequence[str],
    extra_ro: Sequence[Path],
    gpu: bool,
    info_fd: int | None,
    seccomp_fd: int | None = None,
    launcher_cfg: dict[str, object] | None = None,
    command: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    shm_bytes: int | None = None,
    tmp_dir: Path | None = None,
    layout: HostLayout | None = None,
) -> list[str]:
    """The bubblewrap command line for one run (see the module docstring for the layout).

    Runs ``command`` directly when ``launcher_cfg`` is None (limits and cgroups were set
    outside, by :func:`shell_chain`); else runs the Python launcher inside, with each of
    ``procs_files`` (host ``cgroup.procs`` files) bound at ``/run/openmle/cgN``. bubblewrap
    writes ``{"child-pid": ...}`` to ``info_fd`` once the sandbox is set up. ``env`` is the
    program's whole environment (bubblewrap clears its own first); ``tmp_dir`` is bound at
    ``/tmp`` instead of a ``tmp_bytes`` tmpfs; ``shm_bytes`` caps ``/dev/shm``.
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
    inner_procs = []
    for i, f in enumerate(procs_files if launcher_cfg is not None else ()):
        dest = f"/run/openmle/cg{i}"
        args += ["--bind", f, dest]
        inner_procs.append(dest)
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
    if launcher_cfg is None:
        return [*args, "--", *command]
    cfg = dict(launcher_cfg)
    cfg["procs"] = inner_procs
    args += ["--ro-bind", LAUNCHER, LAUNCHER_IN_SANDBOX, "--"]
    args += [info.executable, "-I", "-S", LAUNCHER_IN_SANDBOX, json.dumps(cfg)]
    return args


def shell_chain(
    *,
    procs_files: Sequence[str],
    rlimits: Sequence[tuple[str, int, int]],
    status_fd: int,
    prlimit: str,
    argv: Sequence[str],
) -> list[str]:
    """``/bin/sh`` joins the cgroups, reports ``ok`` on ``status_fd``, then ``exec``s
    ``prlimit`` (exact rlimits in bytes and seconds), which ``exec``s ``argv``.

    Costs about two small ``exec``s instead of a second Python start-up.
    """
    q = shlex.quote
    status = f"/proc/self/fd/{status_fd}"  # dash redirects only fds 0-9 by number
    lines = ["set -u"]
    lines += [
        f"echo 0 > {q(f)} || {{ printf %s {q('err:cannot join cgroup ' + f)} > {status}; "
        "exit 125; }"
        for f in procs_files
    ]
    lines.append(f"printf ok > {status}")
    flags = [f"--{_PRLIMIT_FLAGS[name]}={soft}:{hard}" for name, soft, hard in rlimits]
    lines.append("exec " + " ".join(q(a) for a in (prlimit, *flags, "--", *argv)))
    return ["/bin/sh", "-c", "\n".join(lines)]


def spare_chain(*, procs_files: Sequence[str], status_fd: int) -> list[str]:
    """A launch chain started before its run: ``/bin/sh`` joins the cgroups at once, then
    waits for its script on stdin (EOF with nothing: it exits) and ``eval``s it with stdin
    on ``/dev/null``.

    Joining a cgroup (v1 and v2 alike) waits for an RCU grace period, 10-15 ms; a spare
    started when the previous run ends pays it while nothing waits for it.
    """
    q = shlex.quote
    status = f"/proc/self/fd/{status_fd}"
    lines = ["set -u"]
    lines += [
        f"echo 0 > {q(f)} || {{ printf %s {q('err:cannot join cgroup ' + f)} > {status}; "
        "exit 125; }"
        for f in procs_files
    ]
    lines += [
        "script=$(cat) || exit 125",
        "exec </dev/null",
        '[ -n "$script" ] || exit 0',
        'eval "$script"',
    ]
    return ["/bin/sh", "-c", "\n".join(lines)]


_PRLIMIT_FLAGS = {
    "RLIMIT_AS": "as",
    "RLIMIT_CORE": "core",
    "RLIMIT_CPU": "cpu",
    "RLIMIT_DATA": "data",
    "RLIMIT_FSIZE": "fsize",
    "RLIMIT_NOFILE": "nofile",
    "RLIMIT_NPROC": "nproc",
}
