"""A program that asks for socket families and protocols whose modules a kernel loads on
demand (modprobe on the host), and for the sockets programs use, printing what each call
gave: ``NAME ok`` or ``NAME ERRNO``. Shared by the local and the Docker sandbox's tests.
"""

from __future__ import annotations

__all__ = ["LOADING", "SOCKETS_PROGRAM", "USUAL", "results"]

SOCKETS_PROGRAM = """
import errno, socket
def tried(make):
    try:
        make().close()
        return "ok"
    except OSError as exc:
        return errno.errorcode.get(exc.errno, str(exc.errno))
print("tipc", tried(lambda: socket.socket(30, socket.SOCK_SEQPACKET)))
print("alg", tried(lambda: socket.socket(38, socket.SOCK_SEQPACKET)))
print("sctp", tried(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)))
print("crypto_user", tried(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 21)))
print("pair_tipc", tried(lambda: socket.socketpair(30, socket.SOCK_SEQPACKET)[0]))
print("pair_unix", tried(lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)[0]))
print("unix", tried(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)))
print("udp", tried(lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)))
print("route", tried(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)))
"""

LOADING = ("tipc", "alg", "sctp", "crypto_user", "pair_tipc")
"""The calls that would make the kernel look for a module: a sandbox refuses them."""

USUAL = ("unix", "udp", "route")
"""Sockets programs use (Unix, UDP, netlink route): allowed where the run has its own network."""


def results(logs: str) -> dict[str, str]:
    """``NAME -> ok or ERRNO`` from the program's output."""
    return dict(line.split() for line in logs.splitlines() if len(line.split()) == 2)
