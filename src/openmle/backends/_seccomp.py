"""The seccomp filter both modes load (classic BPF, x86-64 and arm64)."""

from __future__ import annotations

import errno
import struct
from collections.abc import Sequence
from typing import Literal

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_NR_SOCKET = {"x86_64": 41, "aarch64": 198}
# Syscalls that change a file's metadata by path (or O_PATH fd). Landlock does not cover them,
# and a program owns every file of its user (as root: every root-owned file; otherwise the
# service user's own, ~/.ssh and ~/.bashrc among them); in weak mode they become no-ops.
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
# ioctl commands that change a file's attributes through any descriptor, a read-only one too
# (FS_IOC_SETFLAGS: sync, noatime, nodump, ...; FS_IOC_FSSETXATTR; FS_IOC_SETVERSION; the
# 32-bit encodings of the first and the last). Ownership is their only check.
_NR_IOCTL = {"x86_64": 16, "aarch64": 29}
_IOCTL_SET_ATTRIBUTES = (0x40086602, 0x40046602, 0x401C5820, 0x40087602, 0x40047602)
# TIOCSETD: a terminal's line discipline (bwrap's /dev has a pty master, /dev/ptmx); one not
# loaded makes the kernel run modprobe as root on the host (tty-ldisc-N: n_hdlc, ...) where
# dev.tty.ldisc_autoload is 1, its default.
_TIOCSETD = 0x5423
# unshare, setns, mount family, keyrings, bpf, perf_event_open, userfaultfd, and io_uring
# (setup, enter, register: its operations, IORING_OP_SOCKET among them, bypass this filter).
_NR_IO_URING = (425, 426, 427)
# syslog (klogctl): the host's kernel log is not namespaced, and where kernel.dmesg_restrict
# is 0 anyone may read it.
_NR_SYSLOG = {"x86_64": 103, "aarch64": 116}
_NR_DENIED = {
    "x86_64": (
        *(272, 308, 165, 166, 155, 428, 429, 430, 431, 432, 442, 248, 249, 250, 321, 298, 323),
        *_NR_IO_URING,
        _NR_SYSLOG["x86_64"],
    ),
    "aarch64": (
        *(97, 268, 40, 39, 41, 428, 429, 430, 431, 432, 442, 217, 218, 219, 280, 241, 282),
        *_NR_IO_URING,
        _NR_SYSLOG["aarch64"],
    ),
}
# System V IPC: shmget/shmat/shmctl/shmdt, semget/semop/semctl/semtimedop,
# msgget/msgsnd/msgrcv/msgctl. Its objects live in the IPC namespace, not in a filesystem
# Landlock covers: in the host's namespace they outlive the run (memory past every limit) and
# are shared with the host's processes.
_NR_SYSV_IPC = {
    "x86_64": (29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71),
    "aarch64": (194, 196, 195, 197, 190, 193, 191, 192, 186, 189, 188, 187),
}
# TCP calls that Landlock's network rules (ABI >= 4: connect and bind) do not see: listen()
# on an unbound socket binds it to an ephemeral port on every interface, and sendto/sendmsg/
# sendmmsg with MSG_FASTOPEN connect (TCP Fast Open) without connect().
_NR_LISTEN = {"x86_64": 50, "aarch64": 201}
_NR_SEND_FLAGS_ARG2 = {"x86_64": (46,), "aarch64": (211,)}  # sendmsg
_NR_SEND_FLAGS_ARG3 = {"x86_64": (44, 307), "aarch64": (206, 269)}  # sendto, sendmmsg
_MSG_FASTOPEN = 0x20000000
# prlimit64: its permission check is the uid alone (Landlock does not see it), so a program
# sharing the host's PID namespace as root could set the limits of any process (RLIMIT_CPU of
# the service, of init); allowed on pid 0 (itself) only.
_NR_PRLIMIT64 = {"x86_64": 302, "aarch64": 261}
# setrlimit, and prlimit64 with a new limit, of RLIMIT_CORE: the run's core limit is 1 byte,
# the kernel's sign to skip a piped core_pattern (systemd-coredump, apport: a helper the host
# runs as root, outside the run's cgroup, for every crash); a program that lowered its soft
# limit to 0 would have each of its crashes start that helper again.
_NR_SETRLIMIT = {"x86_64": 160, "aarch64": 164}
# Calls that change another process's scheduling: their check is the uid (and, for root,
# that the target has no capability the caller lacks), which Landlock does not see. Sharing
# the host's PID namespace, a program of a service that is not root could renice, idle or pin
# every process of the service's user (setpriority(PRIO_USER), SCHED_IDLE, one CPU): the
# service itself, the user's session. Allowed on the caller (pid 0) only, setpriority and
# ioprio_set on its own process or process group.
_NR_SCHED_PID = {  # sched_setparam, sched_setscheduler, sched_setaffinity, sched_setattr
    "x86_64": (142, 144, 203, 314),
    "aarch64": (118, 119, 122, 274),
}
_NR_SETPRIORITY = {"x86_64": 141, "aarch64": 140}  # which: PRIO_PROCESS 0, PRIO_PGRP 1
_NR_IOPRIO_SET = {"x86_64": 251, "aarch64": 30}  # which: IOPRIO_WHO_PROCESS 1, _PGRP 2
_RLIMIT_CORE = 4
# truncate(2) by path: Landlock checks it only from ABI 3 (LANDLOCK_ACCESS_FS_TRUNCATE).
_NR_TRUNCATE = {"x86_64": 76, "aarch64": 45}
_NR_CLONE = {"x86_64": 56, "aarch64": 220}
_NR_CLONE3 = 435
_CLONE_NAMESPACES = 0x7E020080  # CLONE_NEW{NS,CGROUP,UTS,IPC,USER,PID,NET,TIME}
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_AF_INET, _AF_INET6, _SOCK_STREAM, _IPPROTO_TCP = 2, 10, 1, 6
# Socket families and protocols: creating one the kernel does not have yet makes it load its
# module (``request_module``: modprobe run as root on the host), whatever the caller's
# rights, which widens the host kernel's attack surface (TIPC, RDS, SCTP, DCCP, AF_ALG and
# netlink's crypto_user are the usual first step of a kernel exploit). ``sockets="ip"``
# allows only what programs use and every kernel has built in.
_NR_SOCKETPAIR = {"x86_64": 53, "aarch64": 199}
_AF_UNIX, _AF_NETLINK = 1, 16
_IP_TYPES = (1, 2, 3)  # SOCK_STREAM, SOCK_DGRAM, SOCK_RAW (which needs CAP_NET_RAW)
_IP_PROTOCOLS = (0, 1, 6, 17, 58)  # the type's default, ICMP, TCP, UDP, ICMPv6
_NETLINK_PROTOCOLS = (0, 15)  # NETLINK_ROUTE (getifaddrs, AI_ADDRCONFIG), KOBJECT_UEVENT


_Op = tuple[str, int, str | None, str | None]
"""One step of a filter being built: ``(op, k, true label, false label)``."""


def seccomp_program(
    machine: str,
    *,
    sockets: Literal["tcp", "ip", "none", "any"],
    noop_metadata: bool,
    sysv_ipc: bool = False,
    truncate: bool = True,
    prlimit_others: bool = False,
    core_limit: bool = True,
) -> list[tuple[int, int, int, int]] | None:
    """A classic-BPF seccomp filter for a program, or None for an unknown architecture.

    Always: new namespaces (``unshare``, ``setns``, ``clone`` with namespace flags), mounts,
    kernel keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``syslog`` and io_uring
    (``io_uring_setup``/``enter``/``register``) fail with EPERM;
    ``clone3`` fails with ENOSYS (its flags are out of a filter's reach; libc falls back to
    ``clone``); syscalls of a foreign ABI (x32, 32-bit) fail. ``sockets="tcp"``: ``socket()``
    may create only TCP sockets (protocol 0 or ``IPPROTO_TCP``, never MPTCP or SCTP, which
    Landlock's TCP rules do not cover), so no Unix socket of a host service can be reached,
    and ``listen`` (which binds an unbound socket) and sending with ``MSG_FASTOPEN`` (which
    connects) fail, as Landlock refuses TCP ``connect`` and ``bind``; ``"ip"`` (the bwrap mode:
    its own network namespace): Unix sockets, netlink's route and uevent protocols, and IPv4
    and IPv6 stream, datagram and raw sockets of TCP, UDP, ICMP and ICMPv6 only (any other
    family or protocol would make the kernel load its module on the host); ``"none"``: no
    sockets at all; ``"any"``: unrestricted. ``socketpair`` is limited to Unix sockets unless
    ``"any"``. With ``noop_metadata`` the
    chmod/chown/utime/xattr family succeeds without effect, and the ``ioctl`` commands that
    set a file's attributes (``FS_IOC_SETFLAGS``, ``FS_IOC_FSSETXATTR``,
    ``FS_IOC_SETVERSION``) fail with EPERM. Setting a terminal's line discipline
    (``TIOCSETD``, which can make the kernel load a module) fails with EPERM. System V IPC
    (``shmget``, ``semget``, ``msgget`` and the calls on their objects) fails with EPERM unless
    ``sysv_ipc`` (the bwrap mode: a private IPC namespace, gone with the run). Without
    ``truncate``, ``truncate(2)`` by path fails with EPERM (``ftruncate`` works): Landlock
    below ABI 3 does not check it, so any file the program can name could be emptied.
    ``prlimit64`` on a process other than the caller (pid 0) fails with EPERM unless
    ``prlimit_others`` (the bwrap mode: its PID namespace holds only the run); so do, then,
    the calls that change another process's scheduling (``sched_setaffinity``,
    ``sched_setscheduler``, ``sched_setparam``, ``sched_setattr``: pid 0 only;
    ``setpriority`` and ``ioprio_set``: the caller's process or process group only). With
    ``core_limit``, setting ``RLIMIT_CORE`` (``setrlimit``, ``prlimit64`` with a new limit)
    fails with EPERM: the run's core limit stays at 1 byte, which no core file fits and at
    which the kernel does not run a piped ``core_pattern``'s helper; reading it works. The
    bwrap mode leaves it out (bubblewrap loads the filter before the launcher inside could
    set the limit) and its launcher loads :func:`core_limit_program` once it has.
    """
    arch = _AUDIT_ARCH.get(machine)
    if arch is None:
        return None
    ops: list[_Op] = [
        ("ld", 4, None, None),
        ("jeq", arch, None, "foreign"),
        ("ld", 0, None, None),
    ]
    if machine == "x86_64":
        ops.append(("jset", 0x40000000, "foreign", None))  # x32 syscalls
    ops += [("jeq", nr, "deny", None) for nr in _NR_DENIED[machine]]
    if not sysv_ipc:
        ops += [("jeq", nr, "deny", None) for nr in _NR_SYSV_IPC[machine]]
    if not truncate:
        ops.append(("jeq", _NR_TRUNCATE[machine], "deny", None))
    if core_limit:
        ops += _core_checks(machine)
    elif not prlimit_others:
        ops.append(("jeq", _NR_PRLIMIT64[machine], "pid", None))
    if not prlimit_others:
        ops += [("jeq", nr, "pid", None) for nr in _NR_SCHED_PID[machine]]
        ops.append(("jeq", _NR_SETPRIORITY[machine], "prio", None))
        ops.append(("jeq", _NR_IOPRIO_SET[machine], "ioprio", None))
    ops.append(("jeq", _NR_CLONE3, "nosys", None))
    ops.append(("jeq", _NR_CLONE[machine], "clone", None))
    if sockets != "any":
        ops.append(("jeq", _NR_SOCKET[machine], "socket", None))
        ops.append(("jeq", _NR_SOCKETPAIR[machine], "socketpair", None))
    if sockets == "tcp":
        ops.append(("jeq", _NR_LISTEN[machine], "deny", None))
        ops += [("jeq", nr, "flags2", None) for nr in _NR_SEND_FLAGS_ARG2[machine]]
        ops += [("jeq", nr, "flags3", None) for nr in _NR_SEND_FLAGS_ARG3[machine]]
    if noop_metadata:
        ops += [("jeq", nr, "noop", None) for nr in _NR_METADATA[machine]]
    ops.append(("jeq", _NR_IOCTL[machine], "ioctl", None))
    ops += _handlers(sockets, prlimit_others=prlimit_others, noop_metadata=noop_metadata)
    return _assemble(ops)


def core_limit_program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """A filter that only refuses setting ``RLIMIT_CORE`` (EPERM; everything else is left
    to the filter already loaded), or None for an unknown architecture: what the bwrap mode's
    launcher stacks on bubblewrap's filter once it has set the core limit.
    """
    arch = _AUDIT_ARCH.get(machine)
    if arch is None:
        return None
    ops: list[_Op] = [
        ("ld", 4, None, None),
        ("jeq", arch, None, "allow"),  # a foreign ABI: bubblewrap's filter refuses it
        ("ld", 0, None, None),
        *_core_checks(machine),
        ("ret", _RET_ALLOW, None, None),
        *_core_handlers(then="allow"),
        ("label", 0, "allow", None),
        ("ret", _RET_ALLOW, None, None),
        ("label", 0, "deny", None),
        ("ret", _RET_ERRNO | errno.EPERM, None, None),
    ]
    return _assemble(ops)


def _core_checks(machine: str) -> list[_Op]:
    """With the syscall number loaded: jump to the ``RLIMIT_CORE`` checks of
    :func:`_core_handlers` for ``setrlimit`` and ``prlimit64``.
    """
    return [
        ("jeq", _NR_SETRLIMIT[machine], "setrlimit", None),
        ("jeq", _NR_PRLIMIT64[machine], "prlimit", None),
    ]


def _core_handlers(*, then: str) -> list[_Op]:
    """``setrlimit`` of ``RLIMIT_CORE`` and ``prlimit64`` setting it go to ``deny``; the
    rest of ``setrlimit`` to ``allow``, of ``prlimit64`` to ``then``.
    """
    return [
        ("label", 0, "setrlimit", None),
        ("ld", 16, None, None),  # args[0]: the resource
        ("jeq", _RLIMIT_CORE, "deny", "allow"),
        ("label", 0, "prlimit", None),
        ("ld", 24, None, None),  # args[1]: the resource
        ("jeq", _RLIMIT_CORE, None, then),
        ("ld", 32, None, None),  # args[2]: the new limit (a pointer: NULL only reads)
        ("jeq", 0, None, "deny"),
        ("ld", 36, None, None),
        ("jeq", 0, then, "deny"),
    ]


def _ip_sockets() -> list[_Op]:
    """``sockets="ip"``, with the family loaded: allow a Unix socket, the allowed netlink
    protocols and IP types and protocols; deny the rest.
    """
    return [
        ("jeq", _AF_UNIX, "allow", None),
        ("jeq", _AF_NETLINK, "nl_protocol", None),
        ("jeq", _AF_INET, "ip_type", None),
        ("jeq", _AF_INET6, "ip_type", "deny"),
        ("label", 0, "ip_type", None),
        ("ld", 24, None, None),  # args[1]: the type (and its SOCK_NONBLOCK/CLOEXEC flags)
        ("and", 0xF, None, None),
        *[("jeq", t, "ip_protocol", None) for t in _IP_TYPES],
        ("ret", _RET_ERRNO | errno.EPERM, None, None),
        ("label", 0, "ip_protocol", None),
        ("ld", 32, None, None),  # args[2]: the protocol
        *[("jeq", p, "allow", None) for p in _IP_PROTOCOLS],
        ("ret", _RET_ERRNO | errno.EPERM, None, None),
        ("label", 0, "nl_protocol", None),
        ("ld", 32, None, None),
        *[("jeq", p, "allow", None) for p in _NETLINK_PROTOCOLS],
        ("ret", _RET_ERRNO | errno.EPERM, None, None),
    ]


def _handlers(sockets: str, *, prlimit_others: bool, noop_metadata: bool) -> list[_Op]:
    """The filter's tail: ``allow`` for what fell through, then each labelled check and
    verdict the syscall tests above jump to.
    """
    tcp = sockets == "tcp"
    return [
        ("ret", _RET_ALLOW, None, None),
        ("label", 0, "clone", None),
        ("ld", 16, None, None),
        ("jset", _CLONE_NAMESPACES, "deny", "allow"),
        ("label", 0, "socketpair", None),
        ("ld", 16, None, None),  # args[0]: the family
        ("jeq", _AF_UNIX, "allow", "deny"),
        ("label", 0, "socket", None),
        ("ld", 16, None, None),
        *(
            _ip_sockets()
            if sockets == "ip"
            else [
                ("jeq", _AF_INET, "type" if tcp else "deny", None),
                ("jeq", _AF_INET6, "type" if tcp else "deny", "deny"),
            ]
        ),
        ("label", 0, "type", None),
        ("ld", 24, None, None),
        ("and", 0xF, None, None),
        ("jeq", _SOCK_STREAM, "protocol", "deny"),
        # Landlock's TCP rules cover TCP only: MPTCP and SCTP are stream sockets it lets connect.
        ("label", 0, "protocol", None),
        ("ld", 32, None, None),
        ("jeq", 0, "allow", None),
        ("jeq", _IPPROTO_TCP, "allow", "deny"),
        ("label", 0, "flags2", None),
        ("ld", 32, None, None),  # args[2]: sendmsg's flags
        ("jset", _MSG_FASTOPEN, "deny", "allow"),
        ("label", 0, "flags3", None),
        ("ld", 40, None, None),  # args[3]: sendto's and sendmmsg's flags
        ("jset", _MSG_FASTOPEN, "deny", "allow"),
        *_core_handlers(then="pid"),
        ("label", 0, "pid", None),
        *(
            [("ret", _RET_ALLOW, None, None)]
            if prlimit_others
            else [("ld", 16, None, None), ("jeq", 0, "allow", "deny")]  # args[0]: the pid
        ),
        # setpriority/ioprio_set(which, who): who 0 of the caller's process or group
        ("label", 0, "prio", None),
        ("ld", 16, None, None),  # args[0]: which
        ("jeq", 0, "who", None),  # PRIO_PROCESS
        ("jeq", 1, "who", "deny"),  # PRIO_PGRP
        ("label", 0, "ioprio", None),
        ("ld", 16, None, None),
        ("jeq", 1, "who", None),  # IOPRIO_WHO_PROCESS
        ("jeq", 2, "who", "deny"),  # IOPRIO_WHO_PGRP
        ("label", 0, "who", None),
        ("ld", 24, None, None),  # args[1]: who
        ("jeq", 0, "allow", "deny"),
        ("label", 0, "ioctl", None),
        ("ld", 24, None, None),  # args[1]: the command
        ("jeq", _TIOCSETD, "deny", None),
        *[("jeq", cmd, "deny", None) for cmd in _IOCTL_SET_ATTRIBUTES if noop_metadata],
        ("ret", _RET_ALLOW, None, None),
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


def _assemble(ops: Sequence[_Op]) -> list[tuple[int, int, int, int]]:
    """Classic-BPF instructions from ``(op, k, true label, false label)`` steps and
    ``("label", 0, name, None)`` marks (jumps resolved to relative offsets).
    """
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
