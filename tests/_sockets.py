"""This process's open sockets, read from ``/proc`` (Linux), for tests that check for leaks."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["socket_fds", "tcp_sockets_to"]


def socket_fds() -> dict[int, str]:
    """This process's open socket file descriptors: fd -> ``"socket:[INODE]"``."""
    found: dict[int, str] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed since the listing (the listing's own fd, among others)
            continue
        if target.startswith("socket:"):
            found[int(name)] = target
    return found


def tcp_sockets_to(port: int) -> list[str]:
    """This process's open TCP sockets whose remote port is ``port`` (the client ends of
    connections to a server on that port), each as ``"fd N: local -> remote (state S)"``."""
    by_inode: dict[str, str] = {}
    for table in ("tcp", "tcp6"):
        path = Path(f"/proc/self/net/{table}")
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            cols = line.split()
            local, remote, state, inode = cols[1], cols[2], cols[3], cols[9]
            if int(remote.rsplit(":", 1)[1], 16) == port:
                by_inode[inode] = f"{local} -> {remote} (state {state})"
    return [
        f"fd {fd}: {by_inode[link[8:-1]]}"
        for fd, link in sorted(socket_fds().items())
        if link[8:-1] in by_inode
    ]
