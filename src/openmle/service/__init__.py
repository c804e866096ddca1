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

from typing import Any

from openmle._compat import require
from openmle._exports import publish
from openmle.errors import InvalidArgument
from openmle.service._app import create_app, job_view
from openmle.service._config import (
    API_KEYS_ENV,
    KeyLimits,
    ServiceConfig,
    load_api_keys,
    load_key_limits,
)
from openmle.service._core import load_sandbox
from openmle.service._store import JobStore
from openmle.service._sweep import prepare_workdir

__all__ = [
    "API_KEYS_ENV",
    "KeyLimits",
    "ServiceConfig",
    "create_app",
    "job_view",
    "load_api_keys",
    "load_key_limits",
    "load_sandbox",
    "serve",
]

_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})


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
        **uvicorn_kwargs: passed to ``uvicorn.run`` (e.g. ``ssl_certfile``).

    Raises:
        InvalidArgument: no API keys while listening beyond loopback, or a work directory
            that is not the service's own.
        SandboxError: the database is in use by another service, not a database, or damaged.
        MissingDependency: uvicorn or starlette is not installed.
    """
    if config.allow_no_auth and not config.api_keys and host not in _LOOPBACK:
        raise InvalidArgument(
            f"refusing to serve without API keys on host={host!r}; give keys, or listen on "
            "127.0.0.1 when using --no-auth"
        )
    uvicorn = require("uvicorn", "service")
    # Refuse a broken or busy database and a foreign work directory with one clear error
    # before uvicorn starts (it would print a traceback for a failed start-up).
    JobStore(config.db_path, durable=config.durable).close()
    prepare_workdir(config.run_dir)
    app = create_app(config)
    uvicorn_kwargs.setdefault("timeout_graceful_shutdown", 10)
    uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1, **uvicorn_kwargs)


publish(globals())
