"""One resource (an HTTP connection pool) per event loop, closed by the loop that opened it.

An ``httpx.AsyncClient`` and its connections belong to the event loop that opened them: a
client cached on an object that is then used under another loop (a second ``anyio.run``, a
sync wrapper making one loop per call, another thread) can be neither used nor closed there,
and its sockets stay open until the garbage collector finds them (``ResourceWarning:
unclosed transport``). :class:`LoopPool` keeps one resource per running loop instead, keyed
weakly by the loop, and closes each one in its own loop: when that loop's users call
:meth:`LoopPool.aclose`, or else when the loop finishes (``anyio.run``, ``asyncio.run`` and
``asyncio.Runner`` finalize the loop's async generators before closing it; a guard async
generator per resource closes it then).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

import anyio
import anyio.lowlevel

__all__ = ["LoopPool"]

T = TypeVar("T")


class LoopPool(Generic[T]):
    """Hands out one ``T`` per running event loop, made by ``make`` on first use in that loop
    and closed by ``close`` in that same loop.

    Thread-safe: loops in several threads each get their own resource. A loop that ends
    (through ``anyio.run``/``asyncio.run``) closes its resource as it shuts down; one closed
    without finalizing its async generators (a bare ``loop.close()``) leaves its resource to
    the garbage collector, and the pool forgets it at its next use.
    """

    def __init__(self, make: Callable[[], T], close: Callable[[T], Awaitable[None]]) -> None:
        self._make = make
        self._close = close
        self._lock = threading.RLock()
        # loop -> (resource, the guard async generator whose ``finally`` closes it)
        self._by_loop: weakref.WeakKeyDictionary[object, tuple[T, AsyncGenerator[None]]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> T:
        """The current event loop's resource, made on its first use in this loop (call it
        from a task of that loop).
        """
        loop = anyio.lowlevel.current_token().native_token
        with self._lock:
            self._forget_closed_loops()
            entry = self._by_loop.get(loop)
            if entry is not None:
                return entry[0]
            resource = self._make()
            guard = self._guard(weakref.ref(loop), resource)
            self._by_loop[loop] = (resource, guard)
        _start(guard)
        return resource

    async def aclose(self) -> None:
        """Close the current event loop's resource (idempotent; shielded from cancellation).

        Resources of other loops are closed by their own loops (see the class docstring); a
        later :meth:`get` makes a new one.
        """
        loop = anyio.lowlevel.current_token().native_token
        with self._lock:
            self._forget_closed_loops()
            entry = self._by_loop.get(loop)
        if entry is not None:
            with anyio.CancelScope(shield=True):
                await entry[1].aclose()

    def __reduce__(self) -> tuple[object, ...]:
        # A copy (pickle, deepcopy) starts empty: resources belong to this process's loops.
        return (LoopPool, (self._make, self._close))

    async def _guard(self, loop_ref: weakref.ref[object], resource: T) -> AsyncGenerator[None]:
        try:
            yield
        finally:
            with self._lock:
                loop = loop_ref()
                entry = None if loop is None else self._by_loop.get(loop)
                if loop is not None and entry is not None and entry[0] is resource:
                    del self._by_loop[loop]
            await self._close(resource)

    def _forget_closed_loops(self) -> None:
        # Caller holds the lock. A loop closed without finalizing its async generators can
        # neither close its resource nor be collected while the resource's connections refer
        # to it: forget it.
        for loop in [lp for lp in self._by_loop if _is_closed(lp)]:
            del self._by_loop[loop]


def _start(guard: AsyncGenerator[None]) -> None:
    """Run ``guard`` to its ``yield`` now, as ``await guard.asend(None)`` would from a task of
    the running loop: making the step registers the guard with that loop (its async
    generator hooks, which finalize it as the loop ends), and the body reaches its ``yield``
    without awaiting anything, so the step ends at its first ``send``.
    """
    step = guard.asend(None)
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()  # pragma: no cover - the guard awaits nothing before its yield
    raise RuntimeError("LoopPool guard suspended before its yield")  # pragma: no cover


def _is_closed(loop: object) -> bool:
    is_closed = getattr(loop, "is_closed", None)
    return bool(is_closed()) if callable(is_closed) else False
