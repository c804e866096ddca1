"""Process isolation for the local sandbox: bubblewrap, Landlock, cgroups, rlimits, tree kills.

Two isolation modes, chosen once per :class:`~openmle.backends.LocalSandbox`:

- ``"bwrap"`` (preferred): the program runs under bubblewrap in fresh PID, network, IPC and UTS
  namespaces with every capability dropped. Its filesystem is a tmpfs root holding only the
  Python runtime (read-only), the public data (read-only, at ``/data``), its program
  (read-only, at ``/program``) and its workspace (read-write, at ``/workspace``). Private answer
  paths are never mounted; if one lies inside a mounted runtime directory an empty tmpfs is
  mounted over it.
- ``"landlock"`` (the weaker fallback, used where bubblewrap is missing or cannot create
  namespaces): the program runs as a plain child in its own session, with no capabilities
  (the launcher empties the bounding set when it runs as root). A Landlock ruleset
  (Linux >= 5.13) allows reads only beneath the runtime, a copied, symlink-free view of the
  public data and the program, its own ``/proc/<pid>`` and a few system-wide ``/proc`` files
  (not other processes' environments), writes only beneath the workspace and a private temp
  dir, and (Landlock ABI >= 4) no TCP connect or bind; with ABI >= 6 the program also cannot
  signal processes outside its domain. A seccomp filter (x86-64 and arm64) lets ``socket()``
  create only TCP sockets (none below ABI 4): no Unix sockets (Landlock cannot stop a
  ``connect`` to a host service's socket), no UDP, netlink or packet sockets. It shares the
  host's PID namespace.

In bwrap mode a ``/bin/sh`` one-liner joins the run's cgroups, reports on a status pipe and
``exec``s ``prlimit`` (util-linux) to set the rlimits, which ``exec``s bubblewrap, which
reports the sandbox's setup on the same pipe and ``exec``s the program: one Python start-up
per run. The Landlock mode (and bwrap mode without ``prlimit``) uses a small Python launcher
(standard library only) that joins the cgroups, sets rlimits, applies Landlock and ``exec``s
the program. Either way a launch failure is an infrastructure error, never blamed on the
program. The launch chain runs with a fixed environment (never ``job.env``, whose loader
variables would run code on the host before any isolation); the program's environment is
applied inside (``bwrap --clearenv --setenv``, or the launcher's ``execve``). The Landlock
launcher sets a parent-death signal and, where it may (root), unshares its mount namespace to
mount a private, size-limited ``/dev/shm`` (else the program gets none); bwrap mounts a sized
tmpfs on ``/dev/shm``. The run's workspace, ``/tmp`` and program live on a size- and
inode-limited tmpfs mounted on the host (:func:`mount_quota_tmpfs`) where we may mount.

Both modes load a seccomp filter (:func:`seccomp_program`): no new namespaces, mounts, kernel
keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd`` or io_uring; the weak mode also limits
``socket()`` to TCP and, as root, turns file-metadata calls into no-ops. The bwrap mode also
mounts ``/proc/sys`` and its kin read-only: a program runs as uid 0 when we do, and sysctls
check the uid, not capabilities.

Limits: a per-run cgroup (v1 or v2, where this process may create one) caps processes and
memory (and, when asked, CPU share) and reports OOM kills; without one, ``RLIMIT_NPROC`` (not
enforced for root) and ``RLIMIT_DATA`` (private writable memory, per process) stand in.
``RLIMIT_CPU``, ``RLIMIT_FSIZE`` and ``RLIMIT_CORE`` are always set, each clamped to the
current hard limit (an unprivileged process cannot raise one).

Peers: E2B's command timeout leaves the process running (E2B#500) and SWE-ReX/NeMo Gym kill the
client, not the process tree; here every way out of a run ends with the whole tree killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from attrs import define, field, frozen

from openmle.backends._workspace import remove_tree

__all__ = [
    "LAUNCHER",
    "Cgroup",
    "RuntimeInfo",
    "bwrap_argv",
    "bwrap_problem",
    "clamp_rlimits",
    "descendants",
    "kill_pids",
    "landlock_abi",
    "live_pids_with_env",
    "runtime_info",
    "safe_rmtree",
    "seccomp_bytes",
    "seccomp_program",
    "shell_chain",
    "symlink_free_copy",
]

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

# --------------------------------------------------------------------------------------------
# The launcher: runs inside the isolation, before the program. Standard library only; must stay
# importable with ``python -I -S``. argv[1] is a JSON config.

LAUNCHER = r"""
import json, os, sys
cfg = json.loads(sys.argv[1])
status = cfg["status_fd"]
def fail(msg):
    try:
        os.write(status, ("err:" + msg).encode()[:4000])
    finally:
        os._exit(125)
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    parent = cfg.get("parent")
    if parent is not None:
        # PR_SET_PDEATHSIG: SIGKILL when the process that started us dies (kept across exec).
        if libc.prctl(1, 9, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            fail("the sandbox's owner exited before the program started")
    for procs in cfg["procs"]:
        with open(procs, "w") as f:
            f.write("0")
    import resource
    for name, soft, hard in cfg["rlimits"]:
        resource.setrlimit(getattr(resource, name), (soft, hard))
    ll = cfg.get("landlock")
    if ll is not None:
        import struct
        rules = list(ll["rules"])
        shm = ll.get("shm")
        if shm is not None and libc.unshare(0x20000) == 0:
            # A private mount namespace with a fresh, size-limited, noexec /dev/shm; without
            # one (not root) the program gets no /dev/shm access at all.
            # (Mounts made private first, so nothing propagates to the host.)
            libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
            opts = f"size={int(shm)},mode=1777".encode()
            if (
                libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) == 0
                and libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", 2 | 4 | 8, opts) == 0
            ):
                rules.append(["/dev/shm", ll["shm_access"]])
        def sc(*args):
            r = libc.syscall(*args)
            if r < 0:
                raise OSError(ctypes.get_errno(), f"landlock syscall {args[0]} failed")
            return r
        abi = sc(444, None, 0, 1)
        fs_all = (1 << {1: 13, 2: 14, 3: 15, 4: 15}.get(abi, 16)) - 1
        net = 3 if abi >= 4 else 0
        scoped = 3 if abi >= 6 else 0
        if abi >= 6:
            attr = struct.pack("QQQ", fs_all, net, scoped)
        elif abi >= 4:
            attr = struct.pack("QQ", fs_all, net)
        else:
            attr = struct.pack("Q", fs_all)
        buf = ctypes.create_string_buffer(attr, len(attr))
        rs = sc(444, buf, len(attr), 0)
        file_bits = 1 | 2 | 4 | (1 << 14) | (1 << 15)
        for path, access in rules:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            import stat as st
            allowed = access & fs_all
            if not st.S_ISDIR(os.fstat(pfd).st_mode):
                allowed &= file_bits
            rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, pfd), 12)
            sc(445, rs, 1, rule, 0)
            os.close(pfd)
        if os.geteuid() == 0:
            # Empty the bounding set: root's exec then grants the program no capabilities.
            for cap in range(64):
                if libc.prctl(24, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
                    raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap}) failed")
        if libc.prctl(38, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        sc(446, rs, 0)
        os.close(rs)
        prog = cfg.get("seccomp")
        if prog is None:
            raise OSError(0, f"no seccomp filter for this architecture ({os.uname().machine})")
        class Filter(ctypes.Structure):
            _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte),
                        ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
        class Prog(ctypes.Structure):
            _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]
        filters = (Filter * len(prog))(*[Filter(*f) for f in prog])
        fprog = Prog(len(prog), filters)
        if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    os.write(status, b"ok")
    os.close(status)
    argv = cfg["argv"]
    env = cfg.get("env")
    if env is None:
        os.execv(argv[0], argv)
    os.execve(argv[0], argv, env)
except BaseException as exc:
    fail(f"{type(exc).__name__}: {exc}")
"""

# Landlock access bits (see linux/landlock.h).
LL_EXECUTE = 1 << 0
LL_WRITE_FILE = 1 << 1
LL_READ_FILE = 1 << 2
LL_READ_DIR = 1 << 3
LL_READ_ONLY = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
LL_DEVICE = LL_READ_FILE | LL_WRITE_FILE | (1 << 14) | (1 << 15)
LL_ALL = (1 << 16) - 1


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 when Landlock is unavailable."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        r = int(libc.syscall(444, None, 0, 1))
    except (OSError, AttributeError):
        return 0
    return max(r, 0)


# --------------------------------------------------------------------------------------------
# The Python runtime a program needs


@frozen(kw_only=True)
class RuntimeInfo:
    """Where an interpreter lives: directories the program must be able to read."""

    executable: str
    roots: tuple[str, ...]
    bin_dir: str


_PROBE = (
    "import json, os, site, sys\n"
    "paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}\n"
    "paths.update(p for p in sys.path if p)\n"
    "paths.update(site.getsitepackages())\n"
    "exe = os.path.abspath(sys.executable)\n"
    "paths.add(os.path.dirname(exe))\n"
    "paths.add(os.path.dirname(os.path.dirname(os.path.realpath(exe))))\n"
    "print(json.dumps({'exe': exe, 'paths': sorted(paths)}))\n"
)


@functools.cache
def runtime_info(python: str) -> RuntimeInfo:
    """Ask ``python`` (isolated mode) where its prefixes and ``sys.path`` live.

    Raises:
        OSError: the interpreter cannot be started or answered nonsense.
    """
    proc = subprocess.run(
        [python, "-I", "-c", _PROBE], capture_output=True, text=True, timeout=60, check=False
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


# --------------------------------------------------------------------------------------------
# bubblewrap


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
    for top in _TOP_LEVEL:
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
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
) -> list[str]:
    """The bubblewrap command line for one run (see the module docstring for the layout).

    Runs ``command`` directly when ``launcher_cfg`` is None (limits and cgroups were set
    outside, by :func:`shell_chain`); else runs the Python launcher inside, with each of
    ``procs_files`` (host ``cgroup.procs`` files) bound at ``/run/openmle/cgN``. bubblewrap
    writes ``{"child-pid": ...}`` to ``info_fd`` once the sandbox is set up. ``env`` is the
    program's whole environment (bubblewrap clears its own first); ``tmp_dir`` is bound at
    ``/tmp`` instead of a ``tmp_bytes`` tmpfs; ``shm_bytes`` caps ``/dev/shm``.
    """
    args = [bwrap, *_bwrap_base(info, tmp_bytes, shm_bytes=shm_bytes, tmp_dir=tmp_dir)]
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
        for dev in sorted(Path("/dev").glob("nvidia*")):
            args += ["--dev-bind", str(dev), str(dev)]
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
    args += ["--chdir", "/workspace", "--"]
    if launcher_cfg is None:
        return [*args, *command]
    cfg = dict(launcher_cfg)
    cfg["procs"] = inner_procs
    args += [info.executable, "-I", "-S", "-c", LAUNCHER, json.dumps(cfg)]
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


_PRLIMIT_FLAGS = {
    "RLIMIT_AS": "as",
    "RLIMIT_CORE": "core",
    "RLIMIT_CPU": "cpu",
    "RLIMIT_DATA": "data",
    "RLIMIT_FSIZE": "fsize",
    "RLIMIT_NOFILE": "nofile",
    "RLIMIT_NPROC": "nproc",
}


# --------------------------------------------------------------------------------------------
# Weak mode helpers


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
) -> list[tuple[str, int]]:
    """Landlock ``(path, access)`` rules for the weak mode (read-only runtime, rw workspace)."""
    rules: list[tuple[str, int]] = [("/usr", LL_READ_ONLY)]
    rules += [(p, LL_READ_ONLY) for p in _TOP_LEVEL if os.path.exists(p)]
    rules += [(p, LL_READ_ONLY) for p in ETC_FILES if os.path.exists(p)]
    rules += [(p, LL_READ_ONLY) for p in info.roots]
    rules += [(str(p), LL_READ_ONLY) for p in extra_ro]
    # Not all of /proc: Landlock does not stop reading the environment or command line of
    # other processes of the same user (the host's API keys). "/proc/self" is opened by the
    # launcher, so it names the program's own directory (exec keeps the pid).
    rules += [(p, LL_READ_ONLY) for p in PROC_FILES if os.path.exists(p)]
    rules += [("/proc/self", LL_READ_ONLY), ("/sys", LL_READ_ONLY)]
    for dev in ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"):
        rules.append((dev, LL_DEVICE))
    if gpu:
        rules += [(str(d), LL_DEVICE) for d in sorted(Path("/dev").glob("nvidia*"))]
        if os.path.isdir("/proc/driver/nvidia"):
            rules.append(("/proc/driver/nvidia", LL_READ_ONLY))
    rules += [(str(data_dir), LL_READ_ONLY), (str(program_dir), LL_READ_ONLY)]
    rules += [(str(workspace), LL_ALL), (str(tmp_dir), LL_ALL)]
    return rules


# --------------------------------------------------------------------------------------------
# seccomp (weak mode)

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR_SOCKET = {"x86_64": 41, "aarch64": 198}
# Syscalls that change a file's metadata by path (or O_PATH fd). Landlock does not cover them,
# and a root program owns every root-owned file; in weak mode as root they become no-ops.
_NR_METADATA = {
    "x86_64": (
        90,
        91,
        92,
        93,
        94,
        132,
        188,
        189,
        190,
        197,
        198,
        199,
        235,
        260,
        261,
        268,
        280,
        452,
        463,
        466,
    ),
    "aarch64": (5, 6, 7, 14, 15, 16, 52, 53, 54, 55, 88, 452, 463, 466),
}
# unshare, setns, mount family, keyrings, bpf, perf_event_open, userfaultfd, and io_uring
# (setup, enter, register: its operations, IORING_OP_SOCKET among them, bypass this filter).
_NR_IO_URING = (425, 426, 427)
_NR_DENIED = {
    "x86_64": (
        *(272, 308, 165, 166, 155, 428, 429, 430, 431, 432, 442, 248, 249, 250, 321, 298, 323),
        *_NR_IO_URING,
    ),
    "aarch64": (
        *(97, 268, 40, 39, 41, 428, 429, 430, 431, 432, 442, 217, 218, 219, 280, 241, 282),
        *_NR_IO_URING,
    ),
}
_NR_CLONE = {"x86_64": 56, "aarch64": 220}
_NR_CLONE3 = 435
_CLONE_NAMESPACES = 0x7E020080  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET,TIME}
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_AF_INET, _AF_INET6, _SOCK_STREAM = 2, 10, 1


def seccomp_program(
    machine: str, *, sockets: Literal["tcp", "none", "any"], noop_metadata: bool
) -> list[tuple[int, int, int, int]] | None:
    """A classic-BPF seccomp filter for a program, or None for an unknown architecture.

    Always: new namespaces (``unshare``, ``setns``, ``clone`` with namespace flags), mounts,
    kernel keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd`` and io_uring
    (``io_uring_setup``/``enter``/``register``) fail with EPERM;
    ``clone3`` fails with ENOSYS (its flags are out of a filter's reach; libc falls back to
    ``clone``); syscalls of a foreign ABI (x32, 32-bit) fail. ``sockets="tcp"``: ``socket()``
    may create only TCP sockets, so no Unix socket of a host service can be reached;
    ``"none"``: no sockets at all (``socketpair`` still works); ``"any"``: unrestricted (the
    bwrap mode has its own network namespace). With ``noop_metadata`` the
    chmod/chown/utime/xattr family succeeds without effect.
    """
    arch = _AUDIT_ARCH.get(machine)
    if arch is None:
        return None
    ops: list[tuple[str, int, str | None, str | None]] = [
        ("ld", 4, None, None),
        ("jeq", arch, None, "foreign"),
        ("ld", 0, None, None),
    ]
    if machine == "x86_64":
        ops.append(("jset", 0x40000000, "foreign", None))  # x32 syscalls
    ops += [("jeq", nr, "deny", None) for nr in _NR_DENIED[machine]]
    ops.append(("jeq", _NR_CLONE3, "nosys", None))
    ops.append(("jeq", _NR_CLONE[machine], "clone", None))
    if sockets != "any":
        ops.append(("jeq", _NR_SOCKET[machine], "socket", None))
    if noop_metadata:
        ops += [("jeq", nr, "noop", None) for nr in _NR_METADATA[machine]]
    ops += [
        ("ret", _RET_ALLOW, None, None),
        ("label", 0, "clone", None),
        ("ld", 16, None, None),
        ("jset", _CLONE_NAMESPACES, "deny", "allow"),
        ("label", 0, "socket", None),
        ("ld", 16, None, None),
        ("jeq", _AF_INET, "type" if sockets == "tcp" else "deny", None),
        ("jeq", _AF_INET6, "type" if sockets == "tcp" else "deny", "deny"),
        ("label", 0, "type", None),
        ("ld", 24, None, None),
        ("and", 0xF, None, None),
        ("jeq", _SOCK_STREAM, "allow", "deny"),
        ("label", 0, "allow", None),
        ("ret", _RET_ALLOW, None, None),
        ("label", 0, "noop", None),
        ("ret", _RET_ERRNO | 0, None, None),
        ("label", 0, "nosys", None),
        ("ret", _RET_ERRNO | errno.ENOSYS, None, None),
        ("label", 0, "deny", None),
        ("ret", _RET_ERRNO | errno.EPERM, None, None),
        ("label", 0, "foreign", None),
        ("ret", _RET_ERRNO | errno.EPERM, None, None),
    ]
    labels: dict[str, int] = {}
    n = 0
    for op, _, name, _ in ops:
        if op == "label":
            if name is None:
                raise AssertionError("internal invariant broken: name is not None")
            labels[name] = n
        else:
            n += 1
    codes = {"ld": 0x20, "jeq": 0x15, "jset": 0x45, "and": 0x54, "ret": 0x06}
    out: list[tuple[int, int, int, int]] = []
    for op, k, t, f in ops:
        if op == "label":
            continue
        here = len(out)
        jt = labels[t] - here - 1 if op in ("jeq", "jset") and t else 0
        jf = labels[f] - here - 1 if op in ("jeq", "jset") and f else 0
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise AssertionError("internal invariant broken: 0 <= jt < 256 and 0 <= jf < 256")
        out.append((codes[op], jt, jf, k))
    return out


def seccomp_bytes(program: Sequence[tuple[int, int, int, int]]) -> bytes:
    """``program`` as an array of ``struct sock_filter`` (what ``bwrap --seccomp`` reads)."""
    return b"".join(struct.pack("=HBBI", *ins) for ins in program)


# --------------------------------------------------------------------------------------------
# rlimits


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


def count_user_processes(uid: int) -> int:
    """How many processes ``uid`` owns (for a relative ``RLIMIT_NPROC``)."""
    n = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    n += 1
    return n


# --------------------------------------------------------------------------------------------
# cgroups


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
    _removed: bool = field(default=False, init=False)

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
                if pids_max is not None:
                    cg._write("pids", "pids.max", str(pids_max))
                if memory_bytes is not None:
                    cg._write("memory", "memory.limit_in_bytes", str(memory_bytes))
                    with contextlib.suppress(OSError):
                        cg._write("memory", "memory.memsw.limit_in_bytes", str(memory_bytes))
                if cpus is not None and "cpu" in made:
                    with contextlib.suppress(OSError):
                        cg._write("cpu", "cpu.cfs_period_us", "100000")
                        cg._write("cpu", "cpu.cfs_quota_us", str(max(1000, int(cpus * 100000))))
                return cg
            if v2 is not None and "" in own:
                parent = Path(v2) / own[""].lstrip("/")
                enabled = (parent / "cgroup.subtree_control").read_text().split()
                if not {"pids", "memory"} <= set(enabled):
                    return None
                d = parent / name
                d.mkdir()
                made[""] = d
                cg = cls(dirs=made, version=2)
                if pids_max is not None:
                    cg._write("", "pids.max", str(pids_max))
                if memory_bytes is not None:
                    cg._write("", "memory.max", str(memory_bytes))
                    with contextlib.suppress(OSError):
                        cg._write("", "memory.swap.max", "0")
                if cpus is not None and "cpu" in enabled:
                    cg._write("", "cpu.max", f"{max(1000, int(cpus * 100000))} 100000")
                return cg
        except OSError:
            for d in made.values():
                with contextlib.suppress(OSError):
                    d.rmdir()
            return None
        return None

    def _write(self, ctrl: str, name: str, value: str) -> None:
        (self.dirs[ctrl] / name).write_text(value)

    @property
    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes ``0`` to, to join this cgroup."""
        return [str(d / "cgroup.procs") for d in self.dirs.values()]

    def pids(self) -> set[int]:
        """Every process currently in the cgroup."""
        out: set[int] = set()
        for d in self.dirs.values():
            with contextlib.suppress(OSError):
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
        return out

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
                self._write("", "cgroup.kill", "1")
        kill_pids(self.pids(), signal.SIGKILL)

    def remove(self, *, wait_s: float = 2.0) -> None:
        """Remove the cgroup directories (after :meth:`kill`; idempotent, best effort).

        A process that has just been reaped can keep a cgroup busy for a moment, so a busy
        directory is retried for up to ``wait_s`` seconds (blocking: call it off the loop).
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
                        time.sleep(0.01)
                        continue
                    break
                break
        self._removed = True


# --------------------------------------------------------------------------------------------
# Process trees


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


def live_pids_with_env(key: str, value: str) -> set[int]:
    """Live (non-zombie) processes whose environment holds ``key=value`` (readable ones only)."""
    needle = f"{key}={value}".encode()
    out: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            st = _stat_fields(pid)
            if st is not None and st[0] != "Z":
                out.add(pid)
    return out


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


_MNT_DETACH = 2
_MS_NOSUID, _MS_NODEV = 2, 4


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
        r = libc.mount(b"tmpfs", os.fsencode(path), b"tmpfs", _MS_NOSUID | _MS_NODEV, opts)
    except (OSError, AttributeError, TypeError):
        return False
    return int(r) == 0


def unmount(path: Path) -> None:
    """Detach the mount at ``path`` (lazily, so open files cannot keep it); best effort."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.umount2(os.fsencode(path), _MNT_DETACH)


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


def errno_name(code: int) -> str:
    """``errno`` symbolic name for messages."""
    return errno.errorcode.get(code, str(code))
