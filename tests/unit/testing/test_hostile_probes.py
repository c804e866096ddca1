"""The hostile battery's probes stay on this host.

Run against a backend without network isolation (a plain subprocess), every connection the
battery's programs attempt must go to the listener the battery starts on the host's loopback,
never to an outside address (and no name is looked up). Each program body is executed here
with the socket layer replaced by a recorder that refuses every connection.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import pytest

from openmle.testing import HOSTILE_PROGRAMS

PORT = 9  # what the battery would pass; the recorder never connects anywhere


def _run_recorded(body: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    seen: list[tuple[str, Any]] = []

    def connect(self: socket.socket, address: Any) -> None:
        seen.append(("connect", address))
        raise ConnectionRefusedError("recorded, not connected")

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        seen.append(("connect", address))
        raise ConnectionRefusedError("recorded, not connected")

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> list[Any]:
        seen.append(("lookup", host))
        raise socket.gaierror("recorded, not looked up")

    def sendto(self: socket.socket, data: bytes, *args: Any) -> int:
        seen.append(("sendto", args[-1]))
        raise OSError("recorded, not sent")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect)
    monkeypatch.setattr(socket.socket, "sendto", sendto)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "gethostbyname", getaddrinfo)
    namespace = {"PORT": PORT, "__name__": "hostile_probe"}
    exec(compile(body, "network-probe", "exec"), namespace)
    return seen


def test_the_network_probe_targets_only_the_batterys_loopback_listener(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (program,) = [p for p in HOSTILE_PROGRAMS if p.name == "network"]
    seen = _run_recorded(program.body, monkeypatch)
    assert "NETWORK-TRIED" in capsys.readouterr().out
    assert seen, "the probe tried nothing"
    for kind, address in seen:
        assert kind == "connect", (kind, address)  # no name lookups, no datagrams
        host, port = address[0], address[1]
        assert ipaddress.ip_address(host).is_loopback and port == PORT, address


def test_no_battery_program_names_an_outside_address() -> None:
    """Every IP literal in any program's source is a loopback address."""
    import re

    for program in HOSTILE_PROGRAMS:
        for literal in re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", program.body):
            assert ipaddress.ip_address(literal).is_loopback, (program.name, literal)
