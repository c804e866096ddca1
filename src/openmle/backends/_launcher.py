"""The launcher: a small program started before its run that becomes the candidate program.

Run by path, ``python -I -S _launcher.py START_JSON`` (never imported there): standard library
only, and nothing from :mod:`openmle` at run time, since ``-S`` leaves site-packages off the
path and the Landlock mode runs it under the program's own rules.

The sandbox starts it ahead of its run (a *spare*, see ``LocalSandbox``): it sets a
parent-death signal (and exits at once when the sandbox is already gone), joins the run's
cgroups (cgroup v1: the ``tasks`` files, which move the one thread it has without the RCU
grace period of a ``cgroup.procs`` move; v2: ``cgroup.procs``, paid while no run waits); in
the Landlock mode it then makes the run's own mount namespace where it may (root) and reports
it on the status fd (a line: ``mnt:[N]``, or empty without one), so
the sandbox can hold that namespace open before the run starts; then it blocks reading its
run's configuration from stdin. In bwrap mode the
sandbox is made ahead too (bubblewrap, started by a ``/bin/sh`` that joined the cgroups), and
the launcher, bound read-only into it, waits for the run there (stdin and the status fd pass
through bubblewrap).

End of file with nothing read: it exits 0 (the sandbox discarded it). Else it moves stdin to
``/dev/null``, changes to the run's directory, sets the rlimits (``setrlimit``: exact bytes
and seconds, no ``prlimit`` or shell), and in the Landlock mode mounts a private ``/dev/shm``
in its own mount namespace where it has one, applies the Landlock ruleset, drops the
capability bounding set (as root), sets ``no_new_privs`` and loads the seccomp filter; then
it reports ``ok`` on the status fd, closes
it, closes every other descriptor above 2 (the sandbox's process may hold some without
close-on-exec) and ``exec``s the program, with the program's environment when the
configuration carries one. So a run pays no interpreter start and no extra ``exec`` before
its program. Any failure is reported as ``err:<message>`` with exit status 125, which the
sandbox turns into an infrastructure error.

The start configuration (JSON, argv): ``status_fd``, ``procs`` (files to write ``0`` to),
``parent`` (a pid: die with it, or null), optional ``mount_ns`` (true: make and report the
run's own mount namespace), ``subreaper`` (true: stay as the run's child subreaper, the
program a forked child, see :func:`_subreap`) and ``core_filter`` (bwrap mode: set the core
limit to 1 byte, then load this filter, ``[code, jt, jf, k]`` instructions, which refuses
changing it).
The run configuration (JSON, stdin): ``cwd``, ``rlimits`` (``[name, soft, hard]``),
``argv``, optional ``env``, ``landlock`` (``rules``: ``[path, access]``, ``shm``: bytes or
null, ``shm_access``) and ``seccomp`` (``[code, jt, jf, k]`` instructions, loaded when
``landlock`` is given).

The constants below are the single source of these numbers:
:mod:`openmle.backends._landlock` and :mod:`openmle.backends._procs` import them from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import stat
import struct
import sys
from typing import Any

# Syscall numbers shared by every architecture this runs on (x86-64 and arm64 alike: the
# syscalls added since Linux 5.1 have one number everywhere).
NR_LANDLOCK_CREATE_RULESET = 444
NR_LANDLOCK_ADD_RULE = 445
NR_LANDLOCK_RESTRICT_SELF = 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1

# Landlock filesystem access bits (linux/landlock.h).
LL_EXECUTE = 1 << 0
LL_WRITE_FILE = 1 << 1
LL_READ_FILE = 1 << 2
LL_READ_DIR = 1 << 3
LL_TRUNCATE = 1 << 14
LL_IOCTL_DEV = 1 << 15
LL_READ_ONLY = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
LL_DEVICE = LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LL_ALL = (1 << 16) - 1
# The access rights a rule on a file (not a directory) may carry.
LL_FILE_BITS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
# Highest filesystem access bit + 1 per Landlock ABI (newer ABIs know all 16).
LL_FS_BITS = {1: 13, 2: 14, 3: 15, 4: 15}
LL_NET_ALL = 3  # LANDLOCK_ACCESS_NET_{BIND,CONNECT}_TCP (ABI >= 4)
LL_SCOPE_ALL = 3  # LANDLOCK_SCOPE_{ABSTRACT_UNIX_SOCKET,SIGNAL} (ABI >= 6)

# prctl(2) options.
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
SECCOMP_MODE_FILTER = 2
SIGKILL = 9
EINVAL = 22

# mount(2) and unshare(2) flags.
CLONE_NEWNS = 0x00020000
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 2

EXIT_LAUNCH_FAILED = 125
MAX_FD = 1 << 30
"""Above every descriptor number (``os.closerange(3, MAX_FD)`` is one ``close_range`` call)."""


def _fail(status: int, msg: str) -> None:
    try:
        os.write(status, ("err:" + msg).encode()[:4000])
    finally:
        os._exit(EXIT_LAUNCH_FAILED)


def _mount_namespace(libc: Any) -> tuple[str, bool]:
    """Make this process (and so the run) a mount namespace of its own, which no process of
    the run can leave (seccomp refuses ``setns`` and ``unshare``): its name (``mnt:[N]``) or
    ``""`` where that is refused (not root), and whether its mounts were made private (so a
    mount in it never propagates to the host).
    """
    import ctypes

    if libc.unshare(CLONE_NEWNS) != 0:
        return "", False
    libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    private = libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0
    return os.readlink("/proc/self/ns/mnt"), private


def _landlock(libc: Any, ll: dict[str, Any], *, private_mounts: bool) -> None:
    """Apply the Landlock ruleset of ``ll`` (and its private ``/dev/shm`` where this process
    has a mount namespace of its own with ``private_mounts``) to this process.
    """
    import ctypes

    rules = list(ll["rules"])
    shm = ll.get("shm")
    if shm is not None and private_mounts:
        # A fresh, size-limited, noexec /dev/shm; without a private mount namespace (not
        # root) the program gets no /dev/shm access at all.
        opts = f"size={int(shm)},mode=1777".encode()
        if libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) == 0:
            rules.append(["/dev/shm", ll["shm_access"]])

    def sc(*args: object) -> int:
        r = int(libc.syscall(*args))
        if r < 0:
            raise OSError(ctypes.get_errno(), f"landlock syscall {args[0]} failed")
        return r

    abi = sc(NR_LANDLOCK_CREATE_RULESET, None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    fs_all = (1 << LL_FS_BITS.get(abi, 16)) - 1
    net = LL_NET_ALL if abi >= 4 else 0
    if abi >= 6:
        attr = struct.pack("QQQ", fs_all, net, LL_SCOPE_ALL)
    elif abi >= 4:
        attr = struct.pack("QQ", fs_all, net)
    else:
        attr = struct.pack("Q", fs_all)
    buf = ctypes.create_string_buffer(attr, len(attr))
    rs = sc(NR_LANDLOCK_CREATE_RULESET, buf, len(attr), 0)
    for path, access in rules:
        try:
            pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        allowed = access & fs_all
        if not stat.S_ISDIR(os.fstat(pfd).st_mode):
            allowed &= LL_FILE_BITS
        rule = ctypes.create_string_buffer(struct.pack("=Qi", allowed, pfd), 12)
        sc(NR_LANDLOCK_ADD_RULE, rs, LANDLOCK_RULE_PATH_BENEATH, rule, 0)
        os.close(pfd)
    if os.geteuid() == 0:
        # Empty the bounding set: root's exec then grants the program no capabilities.
        for cap in range(64):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != EINVAL:
                raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap}) failed")
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    sc(NR_LANDLOCK_RESTRICT_SELF, rs, 0)
    os.close(rs)


def _seccomp(libc: Any, prog: list[list[int]] | None) -> None:
    import ctypes

    class _Filter(ctypes.Structure):
        _fields_ = (
            ("code", ctypes.c_ushort),
            ("jt", ctypes.c_ubyte),
            ("jf", ctypes.c_ubyte),
            ("k", ctypes.c_uint),
        )

    class _Prog(ctypes.Structure):
        _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter)))

    if prog is None:
        raise OSError(0, f"no seccomp filter for this architecture ({os.uname().machine})")
    filters = (_Filter * len(prog))(*[_Filter(*f) for f in prog])
    fprog = _Prog(len(prog), filters)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")


MAX_RUN_CONFIG_BYTES = 64 * 1024 * 1024
"""Largest run configuration read from stdin (the sandbox writes a few KiB)."""


def _start(cfg: dict[str, Any], libc: Any, status: int) -> bool:
    """Die with the sandbox's process, join the run's cgroups and, with ``mount_ns``, make
    and report the run's mount namespace (before the run comes); whether this process now has
    a mount namespace of its own with private mounts.
    """
    parent = cfg.get("parent")
    if parent is not None:
        # SIGKILL when the process that started us dies (kept across exec).
        if libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0:
            import ctypes

            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            _fail(status, "the sandbox's owner exited before the program started")
    for procs in cfg["procs"]:
        try:
            with open(procs, "w") as f:
                f.write("0")
        except OSError:
            _fail(status, f"cannot join cgroup {procs}")
    core_filter = cfg.get("core_filter")
    if core_filter is not None:
        _core_limit(libc, core_filter)
    if not cfg.get("mount_ns"):
        return False
    namespace, private = _mount_namespace(libc)
    # Before the run: the sandbox opens the namespace now, so that its number names no later
    # namespace while the sandbox looks for the run's processes by it.
    os.write(status, f"{namespace}\n".encode())
    return private


def _core_limit(libc: Any, core_filter: list[list[int]]) -> None:
    """In bwrap mode, before the run: the core limit at 1 byte (no core file, no piped
    ``core_pattern`` helper; left where the hard limit is lower), then ``core_filter``, which
    refuses setting it, stacked on bubblewrap's seccomp filter.
    """
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == resource.RLIM_INFINITY or hard >= 1:
        resource.setrlimit(resource.RLIMIT_CORE, (1, 1))
    import ctypes

    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # bubblewrap has set it already
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    _seccomp(libc, core_filter)


def _read_run() -> bytes:
    """Stdin to its end (the run's configuration), then stdin on ``/dev/null``."""
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(0, 1 << 16):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_RUN_CONFIG_BYTES:
            raise OSError(0, "run configuration too large")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return b"".join(chunks)


def _launch(cfg: dict[str, Any], libc: Any, status: int, *, private_mounts: bool) -> None:
    """Set the run's limits and isolation, report ``ok`` and ``exec`` its program."""
    os.chdir(cfg["cwd"])
    for name, soft, hard in cfg["rlimits"]:
        which = getattr(resource, name)
        # One already in place is left (bwrap mode: the core limit, which _core_limit set
        # ahead of the run and then refused to set again, by the filter it stacked).
        if resource.getrlimit(which) != (soft, hard):
            resource.setrlimit(which, (soft, hard))
    ll = cfg.get("landlock")
    if ll is not None:
        _landlock(libc, ll, private_mounts=private_mounts)
        _seccomp(libc, cfg.get("seccomp"))
    os.write(status, b"ok")
    # Every descriptor above stderr goes: the status pipe, and any the sandbox's process held
    # without close-on-exec (a directory fd there would reach the host's whole filesystem).
    os.closerange(3, MAX_FD)
    args = cfg["argv"]
    env = cfg.get("env")
    if env is None:
        os.execv(args[0], args)
    os.execve(args[0], args, env)


def _subreap(libc: Any, status: int) -> None:
    """Become the run's child subreaper and fork: the child returns (it becomes the program);
    this process stays, outside the program's Landlock domain and seccomp filter, and never
    returns.

    Every process the program orphans (a double ``fork``, ``setsid``) is reparented to this
    one instead of the host's init, so it stays a descendant of the process the sandbox
    started and is found, and killed, by the process tree even when it cleared its
    environment (the run marker) and no cgroup or mount namespace holds the run (the Landlock
    mode of a user without root). The program cannot kill it: Landlock scopes signals to the
    program's own domain (ABI 6, Linux 6.12); on older kernels it can (see the isolation
    docs). It ignores the signals the sandbox sends the run's process group, waits for the
    program, then SIGKILLs what is left under it until nothing is, and exits with the
    program's status (dies of its signal, without a core).
    """
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        import ctypes

        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    me = os.getpid()
    main = os.fork()
    if main == 0:  # the program: dies with this process, as this one dies with the sandbox
        if libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 or os.getppid() != me:
            _fail(status, "the run's subreaper is gone")
        return
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.closerange(3, MAX_FD)  # the status pipe, the log's write end: the program's alone
    code = _reap(main)
    if code < 0:
        resource.setrlimit(resource.RLIMIT_CORE, (1, 1))  # no core, no core_pattern helper
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
        code = 128 - code
    os._exit(code)


def _reap(main: int) -> int:
    """Reap children until none is left; once ``main`` has ended, SIGKILL every child after
    each reap (an orphan's own children come to this process as it dies). ``main``'s exit
    status (``-N``: killed by signal N).
    """
    status: int | None = None
    while True:
        if status is not None:
            for pid in _children():
                with contextlib.suppress(OSError):
                    os.kill(pid, SIGKILL)
        try:
            pid, got = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == main:
            status = got
    return EXIT_LAUNCH_FAILED if status is None else os.waitstatus_to_exitcode(status)


def _children() -> list[int]:
    """This process's children (``/proc/self/task/*/children``: it has one thread)."""
    pid = os.getpid()
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _libc() -> Any:
    """The C library through ctypes (imported only where needed: it costs a few ms)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return libc


def main(argv: list[str]) -> None:
    """Start with ``argv[1]`` (JSON), then run the configuration read from stdin (never
    returns).
    """
    cfg = json.loads(argv[1])
    status = int(cfg["status_fd"])
    try:
        wants_libc = any(cfg.get(k) for k in ("parent", "mount_ns", "core_filter", "subreaper"))
        libc = _libc() if wants_libc else None
        private_mounts = _start(cfg, libc, status)
        data = _read_run()
        if not data.strip():
            os._exit(0)  # discarded before a run
        run = json.loads(data)
        if libc is None and (run.get("landlock") is not None or cfg.get("subreaper")):
            libc = _libc()
        if cfg.get("subreaper"):
            _subreap(libc, status)  # returns in the child, which becomes the program
        _launch(run, libc, status, private_mounts=private_mounts)
    except BaseException as exc:
        _fail(status, f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main(sys.argv)
