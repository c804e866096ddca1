"""A listener the network tests aim their probes at: on the host's loopback, started by the
test, so no probe ever targets an outside address."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

__all__ = ["unreached_listener"]


@contextlib.contextmanager
def unreached_listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1; yields its port. When the block ends normally, nothing
    may have connected to it (checked for 0.1 s); it is closed either way."""
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        yield listener.getsockname()[1]
        listener.settimeout(0.1)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing reached the host's listener
    finally:
        listener.close()
