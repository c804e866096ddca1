"""This process's open sockets, read from ``/proc`` (Linux), for tests that check for leaks."""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

__all__ = ["describe_sockets", "peer_commands", "socket_fds", "tcp_sockets_to"]

_TCP_STATES = {"01": "ESTABLISHED", "06": "TIME_WAIT", "08": "CLOSE_WAIT", "0A": "LISTEN"}


def socket_fds() -> dict[int, str]:
    """This process's open socket file descriptors: fd -> ``"socket:[INODE]"`` (empty where
    ``/proc/self/fd`` does not exist)."""
    found: dict[int, str] = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed since the listing (the listing's own fd, among others)
            continue
        if target.startswith("socket:"):
            found[int(name)] = target
    return found


def _address(hex_address: str) -> tuple[str, int]:
    host, port = hex_address.rsplit(":", 1)
    # IPv4: one 32-bit word, IPv6: four, each in host byte order (little-endian here)
    words = [int(host[i : i + 8], 16) for i in range(0, len(host), 8)]
    family = socket.AF_INET if len(words) == 1 else socket.AF_INET6
    return socket.inet_ntop(family, struct.pack(f"<{len(words)}I", *words)), int(port, 16)


def _inet_rows() -> Iterator[tuple[str, str, tuple[str, int], tuple[str, int], str]]:
    """(table, inode, local, remote, state) of every row of this process's inet tables."""
    for table in ("tcp", "tcp6", "udp", "udp6"):
        try:
            lines = Path(f"/proc/self/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            yield table, cols[9], _address(cols[1]), _address(cols[2]), cols[3]


def tcp_sockets_to(port: int) -> list[str]:
    """This process's open TCP sockets whose remote port is ``port`` (the client ends of
    connections to a server on that port), described as by :func:`describe_sockets`."""
    inodes = {
        inode
        for table, inode, _, remote, _ in _inet_rows()
        if table.startswith("tcp") and remote[1] == port
    }
    return describe_sockets({fd: s for fd, s in socket_fds().items() if s[8:-1] in inodes})


def describe_sockets(fds: dict[int, str]) -> list[str]:
    """``"fd N: tcp 127.0.0.1:PORT -> 127.0.0.1:PORT ESTABLISHED"`` for each socket of ``fds``
    (as :func:`socket_fds` lists them); a socket of no inet table (unix, netlink) by inode."""
    rows = {
        inode: f"{table} {lhost}:{lport} -> {rhost}:{rport} {_TCP_STATES.get(state, state)}"
        for table, inode, (lhost, lport), (rhost, rport), state in _inet_rows()
    }
    return [f"fd {fd}: {rows.get(link[8:-1], link)}" for fd, link in sorted(fds.items())]


def peer_commands(fds: dict[int, str]) -> dict[int, str]:
    """fd -> the command line of the local process that listens on the remote port of that TCP
    socket of ``fds`` (for a connection to a server of this host; fds whose peer is not a
    local listener, or not TCP, are left out). Scans ``/proc/*/fd``: call it rarely.
    """
    inode_of = {link[8:-1]: fd for fd, link in fds.items()}
    peer_port = {
        inode_of[inode]: remote[1]
        for table, inode, _, remote, _ in _inet_rows()
        if table.startswith("tcp") and inode in inode_of
    }
    listening = {
        inode: local[1]
        for table, inode, local, _, state in _inet_rows()
        if table.startswith("tcp") and state == "0A" and local[1] in set(peer_port.values())
    }
    command_of_port: dict[int, str] = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            links = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone, or not ours to read
            continue
        for inode, port in listening.items():
            if f"socket:[{inode}]" in links:
                command_of_port[port] = cmdline
    return {fd: command_of_port[port] for fd, port in peer_port.items() if port in command_of_port}
