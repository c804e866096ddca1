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
a job that does not exist, and sees no job ids in ``/workers/status``.
"""

from __future__ import annotations

import contextlib
import functools
import hmac
import json
import math
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio

from openmle._compat import require
from openmle._protocols import Sandbox
from openmle._version import __version__
from openmle._wire import encode_job_view
from openmle.service._config import ServiceConfig, key_id
from openmle.service._core import JobService, load_sandbox
from openmle.service._payload import Limits, PayloadError, parse_submit
from openmle.service._store import JobRow, JobStore, QuotaExceeded
from openmle.service._sweep import Swept, prepare_workdir, sweep

__all__ = ["create_app", "job_view"]

_MAX_BODY = 8 * 1024 * 1024


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
    require("starlette", "service")
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    keys = tuple((k.encode(), k) for k in config.api_keys)
    owners = {k: key_id(k) for k in config.api_keys}
    state: dict[str, Any] = {}

    def err(status: int, error: str, detail: str, **extra: Any) -> Response:
        headers = extra.pop("headers", None)
        return JSONResponse({"error": error, "detail": detail, **extra}, status, headers)

    def caller(request: Request) -> str | None:
        """The API key of the request ("" in no-auth mode), or None when not authorised."""
        if config.allow_no_auth and not keys:
            return ""
        given = request.headers.get("x-api-key", "").encode()
        found: str | None = None
        for raw, k in keys:  # compare with every key, in constant time, whatever matches
            if hmac.compare_digest(given, raw):
                found = k
        return found

    def owner_of(key: str) -> str:
        return owners.get(key, "")

    def unauthorised() -> Response:
        return err(401, "unauthorized", "missing or unknown X-API-Key header")

    def service() -> JobService:
        svc: JobService = state["service"]
        return svc

    def too_large() -> Response:
        # The rest of the body is never read: the connection is closed after this answer.
        return err(
            413,
            "payload_too_large",
            f"the body is over {_MAX_BODY} bytes",
            headers={"Connection": "close"},
        )

    async def submit(request: Request) -> Response:
        key = caller(request)
        if key is None:
            return unauthorised()
        declared = request.headers.get("content-length", "0")
        if declared.isdigit() and int(declared) > _MAX_BODY:
            return too_large()
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():  # counted as it arrives (chunked bodies too)
            size += len(chunk)
            if size > _MAX_BODY:
                return too_large()
            chunks.append(chunk)
        raw = b"".join(chunks)
        del chunks
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return err(422, "invalid_payload", f"the body is not JSON: {exc}", field="body")
        except RecursionError:
            return err(422, "invalid_payload", "the body is nested too deeply", field="body")
        limits = config.limits_for(key if keys else None)
        try:
            # Path checks touch the file system (task roots may be on NFS): off the loop.
            req = await anyio.to_thread.run_sync(
                functools.partial(
                    parse_submit,
                    body,
                    roots=config.task_roots,
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
        except PayloadError as exc:
            return JSONResponse(exc.body(), exc.status)
        except RecursionError:
            return err(422, "invalid_payload", "the body is nested too deeply", field="body")
        try:
            row, created = await service().submit(
                req, owner=owner_of(key), max_queued_per_owner=limits.max_queued
            )
        except QuotaExceeded as exc:
            return err(
                429,
                "key_quota",
                f"this API key has {exc.queued} jobs queued, its limit; retry when some have "
                "started",
                headers={"Retry-After": str(config.retry_after_s)},
            )
        if row is None:
            return err(
                429,
                "queue_full",
                f"the queue holds {config.max_queued} jobs; retry later",
                headers={"Retry-After": str(config.retry_after_s)},
            )
        if not created and row.request_hash != req.request_hash():
            return err(
                409,
                "idempotency_conflict",
                "this idempotency_key was used for a different job; use a fresh key",
                field="idempotency_key",
                job_id=row.id,  # the caller's own job: keys are scoped per API key
            )
        return JSONResponse(job_view(row), 200)

    async def get_job(request: Request) -> Response:
        key = caller(request)
        if key is None:
            return unauthorised()
        raw_wait = request.query_params.get("wait", "0")
        try:
            wait = float(raw_wait)
        except ValueError:
            wait = math.nan
        if not math.isfinite(wait) or wait < 0:
            return err(422, "invalid_query", f"wait={raw_wait!r} is not seconds >= 0", field="wait")
        row = await service().get(
            request.path_params["job_id"],
            wait_s=min(wait, config.max_wait_s),
            owner=owner_of(key),
        )
        if row is None:
            return err(404, "not_found", "no such job")
        return JSONResponse(job_view(row), headers={"X-Long-Poll": str(config.max_wait_s)})

    async def delete_job(request: Request) -> Response:
        key = caller(request)
        if key is None:
            return unauthorised()
        row = await service().cancel(request.path_params["job_id"], owner=owner_of(key))
        if row is None:
            return err(404, "not_found", "no such job")
        return JSONResponse(job_view(row))

    async def workers(request: Request) -> Response:
        key = caller(request)
        if key is None:
            return unauthorised()
        return JSONResponse(await service().workers(owner=owner_of(key)))

    async def health(request: Request) -> Response:
        svc = state.get("service")
        return JSONResponse(
            {
                "status": "ok" if svc is not None else "starting",
                "version": __version__,
                "recovered": None
                if svc is None
                else {"requeued": svc.recovered[0], "failed": svc.recovered[1]},
                "swept": state["swept"].to_dict() if "swept" in state else None,
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Mapping[str, Any]]:
        store = await anyio.to_thread.run_sync(
            lambda: JobStore(config.db_path, durable=config.durable)
        )
        owned = sandbox is None
        try:
            # With the store's lock held, no other service uses the work directory: what is
            # in it was left by a killed predecessor. Removed before any job is re-queued.
            await anyio.to_thread.run_sync(prepare_workdir, config.run_dir)
            swept: Swept = await anyio.to_thread.run_sync(sweep, config.run_dir)
            state["swept"] = swept
            sb = load_sandbox(config.sandbox, workdir=config.run_dir) if owned else sandbox
            if sb is None:
                raise AssertionError("internal invariant broken: sb is not None")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(store.close)
            raise
        svc = JobService(config=config, sandbox=sb, store=store)
        try:
            await svc.recover()
            async with anyio.create_task_group() as tg:
                await svc.run(tg)
                state["service"] = svc
                try:
                    yield {}
                finally:
                    state.pop("service", None)
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                # A graceful stop is not the job's fault: its start does not count.
                await anyio.to_thread.run_sync(store.release_running)
                if owned:
                    await sb.aclose()
                await anyio.to_thread.run_sync(store.close)

    routes = [
        Route("/api/v1/jobs", submit, methods=["POST"]),
        Route("/api/v1/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/api/v1/jobs/{job_id}", delete_job, methods=["DELETE"]),
        Route("/api/v1/workers/status", workers, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
