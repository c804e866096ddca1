"""The sandbox job service: run candidate programs for remote clients over HTTP.

``openmle serve`` (or :func:`serve`) starts an ASGI app (starlette, run by uvicorn) that accepts
jobs on ``/api/v1/jobs``, schedules them on CPU and GPU pools over any
:class:`~openmle.Sandbox`, and keeps jobs and results in SQLite (WAL) so a crashed service
restarts knowing every job. :class:`openmle.backends.JobServiceSandbox` is its client.
Requires the ``service`` extra (``pip install 'openmle[service]'``).

Where we depart from the released system: it ships only clients of such a service; its timeouts
above a cap were silently clamped (bug B9) where ours are refused with 422; its clients
disagree on the status vocabulary (B8) where ours has exactly ``queued``, ``running``,
``completed`` (the sandbox returned a result, whatever the program did), ``failed`` (the
harness failed: the result, if any, is ``INFRA_ERROR``) and ``cancelled``; ``resource_type``
is honoured (B10) and ``priority`` is used (B7: 1 runs before 2).
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import socket
import sys
from collections.abc import Callable
from typing import Any

import anyio

from openmle._compat import require
from openmle._exports import publish
from openmle._protocols import Sandbox
from openmle.errors import InvalidArgument, SandboxError
from openmle.service._app import create_app, job_view, owning_app
from openmle.service._config import (
    API_KEYS_ENV,
    KeyLimits,
    ServiceConfig,
    load_api_keys,
    load_key_limits,
)
from openmle.service._core import JobRoots, current_job_roots, load_sandbox
from openmle.service._store import JobStore
from openmle.service._sweep import prepare_workdir

__all__ = [
    "API_KEYS_ENV",
    "JobRoots",
    "KeyLimits",
    "ServiceConfig",
    "create_app",
    "current_job_roots",
    "job_view",
    "load_api_keys",
    "load_key_limits",
    "load_sandbox",
    "serve",
]

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_STARTUP_FAILURE = 3  # uvicorn's exit status for a server that did not start


def serve(
    config: ServiceConfig,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "info",
    **uvicorn_kwargs: Any,
) -> None:
    """Run the job service in the foreground until SIGINT/SIGTERM (blocking).

    Args:
        config: the service settings.
        host: address to listen on; the default listens on loopback only.
        port: TCP port.
        log_level: uvicorn's log level.
        **uvicorn_kwargs: passed to ``uvicorn.Config`` (e.g. ``ssl_certfile``).

    Raises:
        InvalidArgument: no API keys while listening beyond loopback, a work directory
            that is not the service's own, a port outside 0-65535, or a sandbox spec that
            names no sandbox factory (or whose factory refuses its options).
        SandboxError: the sandbox cannot be built or its preflight fails (no engine answers);
            the database is in use by another service, not a database, or damaged;
            the host does not resolve, or the address is in use or cannot be bound.
        MissingDependency: uvicorn or starlette is not installed.
    """
    if config.allow_no_auth and not config.api_keys and host not in _LOOPBACK:
        raise InvalidArgument(
            f"refusing to serve without API keys on host={host!r}; give keys, or listen on "
            "127.0.0.1 when using --no-auth"
        )
    uvicorn = require("uvicorn", "service")
    # Refuse a broken or busy database, a foreign work directory, an unknown sandbox and an
    # address that cannot be listened on with one clear error before uvicorn starts (it
    # would print a traceback, or its own ERROR line, for a failed start-up).
    from openmle.backends import check_sandbox_spec

    check_sandbox_spec(config.sandbox)
    _check_listen(host, port)
    uvicorn_kwargs.setdefault("timeout_graceful_shutdown", 10)

    def server_of(app: Any) -> Any:
        options = {"host": host, "port": port, "log_level": log_level, **uvicorn_kwargs}
        servers.append(uvicorn.Server(uvicorn.Config(app, workers=1, **options)))
        return servers[-1]

    servers: list[Any] = []
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C ends it quietly
        anyio.run(_serve, config, server_of)
    if not (servers and servers[0].started):  # as uvicorn.run
        sys.exit(_STARTUP_FAILURE)


async def _serve(config: ServiceConfig, server_of: Callable[[Any], Any]) -> None:
    """Build the sandbox, check the database and the work directory, then serve the app on
    ``server_of(app)`` (a ``uvicorn.Server``). The app owns the sandbox: built once, in the
    loop its jobs run in, and closed once, by the app's lifespan or else here.

    Raises:
        InvalidArgument, SandboxError: what :func:`_built_sandbox`, :class:`JobStore` or
            :func:`prepare_workdir` raised.
    """
    sandbox = await _built_sandbox(config)  # before the database or the work directory is made
    app, close = owning_app(config, sandbox)
    try:
        await anyio.to_thread.run_sync(
            lambda: JobStore(config.db_path, durable=config.durable).close()
        )
        await anyio.to_thread.run_sync(prepare_workdir, config.run_dir)
        await server_of(app).serve()
    finally:
        await close()  # unless the app's lifespan did


async def _built_sandbox(config: ServiceConfig) -> Sandbox:
    """``config.sandbox`` built, its optional ``preflight()`` passed, so a sandbox that
    cannot be built (a factory that raises) or cannot run (no container engine answers at
    ``DOCKER_HOST``) is one error naming ``--sandbox`` before uvicorn starts (closed again
    when its preflight fails).

    Raises:
        InvalidArgument, SandboxError: what building or preflighting raised, prefixed with
            ``--sandbox SPEC:``.
    """
    try:
        sandbox = load_sandbox(
            config.sandbox, workdir=config.run_dir, options=config.sandbox_options
        )
        try:
            hook = getattr(sandbox, "preflight", None)
            answer = hook() if callable(hook) else None
            if inspect.isawaitable(answer):
                await answer
        except BaseException:
            with anyio.CancelScope(shield=True):
                await sandbox.aclose()
            raise
    except InvalidArgument as exc:
        raise InvalidArgument(f"--sandbox {config.sandbox}: {exc}") from None
    except SandboxError as exc:
        raise SandboxError(f"--sandbox {config.sandbox}: {exc}") from None
    return sandbox


def _check_listen(host: str, port: int) -> None:
    """Raise unless a TCP server could listen on ``host``:``port`` now (bound, then closed).

    Raises:
        InvalidArgument: ``port`` is not an integer in 0-65535.
        SandboxError: ``host`` does not resolve, or the address is in use or cannot be bound
            (not this machine's, or a privileged port); the message names ``--host``/``--port``.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65_535:
        raise InvalidArgument(f"--port must be a TCP port 0-65535; got {port!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise SandboxError(
            f"--host {host!r} does not resolve ({exc}); give an address of this machine "
            "such as 127.0.0.1 or 0.0.0.0"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                why = "is in use; stop what listens there or choose another --port"
            else:
                why = f"cannot be bound ({exc}); give an address of this machine and a port "
                why += "you may use (1024 or above)"
            raise SandboxError(f"--host {host} --port {port}: the address {why}") from None


publish(globals())
