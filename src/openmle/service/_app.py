"""The HTTP face of the job service: a starlette app (run it with uvicorn).

Endpoints (JSON in and out; everything but ``/health`` needs ``X-API-Key``):

- ``POST /api/v1/jobs``: submit; 200 with the job (the same job again for a repeated
  ``idempotency_key``), 409 when a key is reused for a different job, 422 naming a bad field,
  400 for a path outside the task roots, 413 as soon as the body passes 8 MiB (counted on the
  stream, whatever ``Content-Length`` says), 429 with ``Retry-After`` when the queue (or the
  API key's share of it) is full.
- ``GET /api/v1/jobs/{id}[?wait=SECONDS]``: the job; with ``wait`` the answer comes as soon as
  the job ends (or after ``wait`` seconds, capped by the service). The ``X-Long-Poll`` header
  tells clients the service supports it.
- ``DELETE /api/v1/jobs/{id}``: cancel a queued or running job (a finished one is unchanged).
- ``GET /api/v1/workers/status``: slots per pool (``workers_show[*].status`` idle/busy).
- ``GET /health``: liveness, no key needed.

Jobs belong to the API key that submitted them: another key gets 404 for them, exactly as for
a job that does not exist, and sees no job ids in ``/workers/status``. A key with task roots of
its own (``task_root=`` in the key file) names tasks only under them (400 ``bad_path``
elsewhere); keys without share the service-wide roots, and the lifespan logs a warning per
group of keys whose roots meet (:func:`openmle.service._config.shared_roots`).
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio

from openmle._compat import require
from openmle._protocols import Sandbox
from openmle._version import __version__
from openmle._wire import encode_job_view
from openmle.service._config import KeyLimits, ServiceConfig, key_id, shared_roots
from openmle.service._core import JobService, load_sandbox
from openmle.service._payload import Limits, PayloadError, parse_submit
from openmle.service._store import JobRow, JobStore, QuotaExceeded
from openmle.service._sweep import Swept, prepare_workdir, sweep

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["create_app", "job_view"]

_MAX_BODY = 8 * 1024 * 1024
log = logging.getLogger("openmle.service")


def job_view(row: JobRow) -> dict[str, Any]:
    """The wire form of a job (the released clients' field names, plus ``run_result``)."""
    job = row.spec["job"]
    return encode_job_view(
        job_id=row.id,
        status=row.status,
        split=job["split"],
        run_result=row.result,
        detail=row.detail,
        name=row.name,
        priority=row.priority,
        resource_type=row.pool,
        task=row.spec.get("task_ref"),
        timeout_s=job["timeout_s"],
        idempotency_key=row.idempotency_key,
        attempts=row.attempts,
        created_at=row.created_at,
        started_at=row.started_at,
        completed_at=row.completed_at,
    )


class _Api:
    """The route handlers and lifespan of one app (state shared through the instance)."""

    def __init__(self, config: ServiceConfig, sandbox: Sandbox | None, *, owned: bool) -> None:
        self.config = config
        self.sandbox = sandbox
        # The sandbox this app still has to close: an owned one, given or built by _open.
        self.to_close: Sandbox | None = sandbox if owned else None
        self.keys = tuple((k.encode(), k) for k in config.api_keys)
        self.owners = {k: key_id(k) for k in config.api_keys}
        self.state: dict[str, Any] = {}

    # -- helpers --------------------------------------------------------------------------

    def caller(self, request: Request) -> str | None:
        """The API key of the request ("" in no-auth mode), or None when not authorised."""
        if self.config.allow_no_auth and not self.keys:
            return ""
        given = request.headers.get("x-api-key", "").encode()
        found: str | None = None
        for raw, k in self.keys:  # compare with every key, in constant time, whatever matches
            if hmac.compare_digest(given, raw):
                found = k
        return found

    def owner_of(self, key: str) -> str:
        return self.owners.get(key, "")

    def service(self) -> JobService:
        svc: JobService = self.state["service"]
        return svc

    async def read_body(self, request: Request) -> bytes | None:
        """The body, or None as soon as it passes ``_MAX_BODY`` (declared or streamed)."""
        declared = request.headers.get("content-length", "0")
        if declared.isdigit() and int(declared) > _MAX_BODY:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():  # counted as it arrives (chunked bodies too)
            size += len(chunk)
            if size > _MAX_BODY:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    async def parse(self, request: Request, body: Any, limits: KeyLimits) -> Any:
        """``body`` validated against the caller's ``limits`` (its task roots: its own, or
        the service-wide ones).
        """
        config = self.config
        # Path checks touch the file system (task roots may be on NFS): off the loop.
        return await anyio.to_thread.run_sync(
            functools.partial(
                parse_submit,
                body,
                roots=limits.task_roots or (),
                default_timeout_s=config.default_timeout_s,
                max_timeout_s=config.max_job_timeout_s,
                max_code_bytes=config.max_code_bytes,
                gpu_slots=config.gpu_slots,
                header_key=request.headers.get("idempotency-key"),
                limits=Limits(
                    max_cpus=config.max_cpus,
                    max_memory_mb=config.max_memory_mb,
                    max_gpus=config.max_gpus,
                    top_priority=limits.top_priority or 1,
                ),
            )
        )

    # -- routes ---------------------------------------------------------------------------

    async def submit(self, request: Request) -> Response:
        key = self.caller(request)
        if key is None:
            return _unauthorised()
        raw = await self.read_body(request)
        if raw is None:
            return _too_large()
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return _err(422, "invalid_payload", f"the body is not JSON: {exc}", field="body")
        except RecursionError:
            return _err(422, "invalid_payload", "the body is nested too deeply", field="body")
        del raw
        config = self.config
        limits = config.limits_for(key if self.keys else None)
        try:
            req = await self.parse(request, body, limits)
        except PayloadError as exc:
            return _json(exc.body(), exc.status)
        except RecursionError:
            return _err(422, "invalid_payload", "the body is nested too deeply", field="body")
        retry = {"Retry-After": str(config.retry_after_s)}
        try:
            row, created = await self.service().submit(
                req, owner=self.owner_of(key), max_queued_per_owner=limits.max_queued
            )
        except QuotaExceeded as exc:
            return _err(
                429,
                "key_quota",
                f"this API key has {exc.queued} jobs queued, its limit; retry when some have "
                "started",
                headers=retry,
            )
        if row is None:
            return _err(
                429,
                "queue_full",
                f"the queue holds {config.max_queued} jobs; retry later",
                headers=retry,
            )
        if not created and row.request_hash != req.request_hash():
            return _err(
                409,
                "idempotency_conflict",
                "this idempotency_key was used for a different job; use a fresh key",
                field="idempotency_key",
                job_id=row.id,  # the caller's own job: keys are scoped per API key
            )
        return _json(job_view(row), 200)

    async def get_job(self, request: Request) -> Response:
        key = self.caller(request)
        if key is None:
            return _unauthorised()
        raw_wait = request.query_params.get("wait", "0")
        try:
            wait = float(raw_wait)
        except ValueError:
            wait = math.nan
        if not math.isfinite(wait) or wait < 0:
            return _err(
                422, "invalid_query", f"wait={raw_wait!r} is not seconds >= 0", field="wait"
            )
        max_wait = self.config.max_wait_s
        row = await self.service().get(
            request.path_params["job_id"], wait_s=min(wait, max_wait), owner=self.owner_of(key)
        )
        if row is None:
            return _err(404, "not_found", "no such job")
        return _json(job_view(row), 200, {"X-Long-Poll": str(max_wait)})

    async def delete_job(self, request: Request) -> Response:
        key = self.caller(request)
        if key is None:
            return _unauthorised()
        row = await self.service().cancel(request.path_params["job_id"], owner=self.owner_of(key))
        if row is None:
            return _err(404, "not_found", "no such job")
        return _json(job_view(row))

    async def workers(self, request: Request) -> Response:
        key = self.caller(request)
        if key is None:
            return _unauthorised()
        return _json(await self.service().workers(owner=self.owner_of(key)))

    async def health(self, request: Request) -> Response:
        svc = self.state.get("service")
        return _json(
            {
                "status": "ok" if svc is not None else "starting",
                "version": __version__,
                "recovered": None
                if svc is None
                else {"requeued": svc.recovered[0], "failed": svc.recovered[1]},
                "swept": self.state["swept"].to_dict() if "swept" in self.state else None,
            }
        )

    # -- lifespan -------------------------------------------------------------------------

    async def _open(self, store: JobStore) -> Sandbox:
        """Clean the work directory and build the sandbox (the store is open)."""
        config = self.config
        # With the store's lock held, no other service uses the work directory: what is
        # in it was left by a killed predecessor. Removed before any job is re-queued.
        await anyio.to_thread.run_sync(prepare_workdir, config.run_dir)
        swept: Swept = await anyio.to_thread.run_sync(sweep, config.run_dir)
        self.state["swept"] = swept
        if self.sandbox is not None:
            return self.sandbox
        self.to_close = load_sandbox(
            config.sandbox, workdir=config.run_dir, options=config.sandbox_options
        )
        return self.to_close

    async def close_sandbox(self) -> None:
        """Close the sandbox this app owns, once whoever calls (shielded from cancellation)."""
        sandbox, self.to_close = self.to_close, None
        if sandbox is not None:
            with anyio.CancelScope(shield=True):
                await sandbox.aclose()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[Mapping[str, Any]]:
        config = self.config
        for line in shared_roots(config):  # keys that can reach each other's tasks
            log.warning("job service: %s", line)
        async with contextlib.AsyncExitStack() as stack:
            # Undone in reverse, each step shielded and run whatever the one after raised:
            # a graceful stop's release of running jobs, the sandbox, the store.
            store = await anyio.to_thread.run_sync(
                lambda: JobStore(config.db_path, durable=config.durable)
            )
            stack.push_async_callback(_shielded, store.close)
            stack.push_async_callback(self.close_sandbox)
            sb = await self._open(store)
            svc = JobService(config=config, sandbox=sb, store=store)
            # A graceful stop is not the job's fault: its start does not count.
            stack.push_async_callback(_shielded, store.release_running)
            await svc.recover()
            async with anyio.create_task_group() as tg:
                await svc.run(tg)
                self.state["service"] = svc
                try:
                    yield {}
                finally:
                    self.state.pop("service", None)
                    tg.cancel_scope.cancel()


async def _shielded(call: Callable[[], object]) -> None:
    """``call()`` in a worker thread, shielded from cancellation."""
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(call)


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse(body, status, dict(headers) if headers else None)


def _err(status: int, error: str, detail: str, **extra: Any) -> Response:
    headers = extra.pop("headers", None)
    return _json({"error": error, "detail": detail, **extra}, status, headers)


def _unauthorised() -> Response:
    return _err(401, "unauthorized", "missing or unknown X-API-Key header")


def _too_large() -> Response:
    # The rest of the body is never read: the connection is closed after this answer.
    return _err(
        413,
        "payload_too_large",
        f"the body is over {_MAX_BODY} bytes",
        headers={"Connection": "close"},
    )


def create_app(config: ServiceConfig, *, sandbox: Sandbox | None = None) -> Any:
    """Build the ASGI app of a job service.

    Args:
        config: the service settings.
        sandbox: run jobs on this sandbox instead of building ``config.sandbox`` (the app
            then does not close it on shutdown).

    Returns:
        A ``starlette.applications.Starlette`` app; its lifespan opens the store, applies the
        restart rule, starts the schedulers, and on shutdown stops them and closes the
        sandbox. Serve it with uvicorn (one process per database file).

    Raises:
        MissingDependency: starlette is not installed (``pip install 'openmle[service]'``).
    """
    return _starlette(_Api(config, sandbox, owned=sandbox is None))


def owning_app(
    config: ServiceConfig, sandbox: Sandbox
) -> tuple[Any, Callable[[], Awaitable[None]]]:
    """The app :func:`openmle.service.serve` runs on the ``sandbox`` it built, with the app's
    close of it: the app owns ``sandbox`` (its lifespan closes it on shutdown, also when its
    start fails); the close, for a server whose lifespan never ran, closes it unless the
    lifespan did (once in all, shielded from cancellation).

    Raises:
        MissingDependency: starlette is not installed (``pip install 'openmle[service]'``).
    """
    api = _Api(config, sandbox, owned=True)
    return _starlette(api), api.close_sandbox


def _starlette(api: _Api) -> Any:
    """The starlette app serving ``api``'s routes and lifespan."""
    require("starlette", "service")
    from starlette.applications import Starlette
    from starlette.routing import Route

    routes = [
        Route("/api/v1/jobs", api.submit, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}", api.get_job, methods=["GET"]),
        Route("/api/v1/jobs/{job_id}", api.delete_job, methods=["DELETE"]),
        Route("/api/v1/workers/status", api.workers, methods=["GET"]),
        Route("/health", api.health, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=api.lifespan)
