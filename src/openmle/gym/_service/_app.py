"""The HTTP face of the job service: a starlette app (run it with uvicorn).

Endpoints (JSON in and out; everything but ``/health`` needs ``X-API-Key``):

- ``POST /api/v1/jobs``: submit; 200 with the job (the same job again for a repeated
  ``idempotency_key``), 409 when a key is reused for a different job, 422 naming a bad field,
  400 for a path outside the task roots, 429 with ``Retry-After`` when the queue is full.
- ``GET /api/v1/jobs/{id}[?wait=SECONDS]``: the job; with ``wait`` the answer comes as soon as
  the job ends (or after ``wait`` seconds, capped by the service). The ``X-Long-Poll`` header
  tells clients the service supports it.
- ``DELETE /api/v1/jobs/{id}``: cancel a queued or running job (a finished one is unchanged).
- ``GET /api/v1/workers/status``: slots per pool (``workers_show[*].status`` idle/busy).
- ``GET /health``: liveness, no key needed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
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
from openmle.gym._service._config import ServiceConfig
from openmle.gym._service._core import JobService, load_sandbox
from openmle.gym._service._payload import PayloadError, parse_submit
from openmle.gym._service._store import JobRow, JobStore

__all__ = ["create_app", "job_view"]

_MAX_BODY = 8 * 1024 * 1024


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    stamp = dt.datetime.fromtimestamp(t, tz=dt.UTC).isoformat(timespec="microseconds")
    return stamp.replace("+00:00", "Z")


def job_view(row: JobRow) -> dict[str, Any]:
    """The wire form of a job (the released clients' field names, plus ``run_result``)."""
    job = row.spec["job"]
    result: dict[str, Any] | None = None
    if row.result is not None:
        r = row.result
        split = r.get("split", job["split"])
        score = r.get("score")
        result = {
            "result": r["outcome"],
            "outcome": r["outcome"],
            "score": score,
            "valid_score": score if split == "valid" else None,
            "validation_score": score if split == "valid" else None,
            "test_score": score if split == "test" else None,
            "scores_by_split": {split: score},
            "eval_split": split,
            "run_log": r.get("logs", ""),
            "detail": r.get("detail", ""),
            "run_result": dict(r),
        }
    return {
        "job_id": row.id,
        "name": row.name,
        "status": row.status,
        "priority": row.priority,
        "resource_type": row.pool,
        "task": row.spec.get("task_ref"),
        "timeout": job["timeout_s"],
        "eval_split": job["split"],
        "idempotency_key": row.idempotency_key,
        "attempts": row.attempts,
        "created_at": _iso(row.created_at),
        "started_at": _iso(row.started_at),
        "completed_at": _iso(row.completed_at),
        "detail": row.detail,
        "result": result,
    }


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

    keys = tuple(k.encode() for k in config.api_keys)
    state: dict[str, JobService] = {}

    def err(status: int, error: str, detail: str, **extra: Any) -> Response:
        headers = extra.pop("headers", None)
        return JSONResponse({"error": error, "detail": detail, **extra}, status, headers)

    def authorised(request: Request) -> bool:
        if config.allow_no_auth and not keys:
            return True
        given = request.headers.get("x-api-key", "").encode()
        ok = False
        for k in keys:  # compare with every key, in constant time, whatever matches
            ok |= hmac.compare_digest(given, k)
        return ok

    def unauthorised() -> Response:
        return err(401, "unauthorized", "missing or unknown X-API-Key header")

    def service() -> JobService:
        return state["service"]

    async def submit(request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        declared = request.headers.get("content-length", "0")
        if declared.isdigit() and int(declared) > _MAX_BODY:
            return err(413, "payload_too_large", f"the body is over {_MAX_BODY} bytes")
        raw = await request.body()
        if len(raw) > _MAX_BODY:
            return err(413, "payload_too_large", f"the body is over {_MAX_BODY} bytes")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            return err(422, "invalid_payload", f"the body is not JSON: {exc}", field="body")
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
                )
            )
        except PayloadError as exc:
            return JSONResponse(exc.body(), exc.status)
        row, created = await service().submit(req)
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
                job_id=row.id,
            )
        return JSONResponse(job_view(row), 200)

    async def get_job(request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        raw_wait = request.query_params.get("wait", "0")
        try:
            wait = float(raw_wait)
        except ValueError:
            wait = math.nan
        if not math.isfinite(wait) or wait < 0:
            return err(422, "invalid_query", f"wait={raw_wait!r} is not seconds >= 0", field="wait")
        row = await service().get(
            request.path_params["job_id"], wait_s=min(wait, config.max_wait_s)
        )
        if row is None:
            return err(404, "not_found", "no such job")
        return JSONResponse(job_view(row), headers={"X-Long-Poll": str(config.max_wait_s)})

    async def delete_job(request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        row = await service().cancel(request.path_params["job_id"])
        if row is None:
            return err(404, "not_found", "no such job")
        return JSONResponse(job_view(row))

    async def workers(request: Request) -> Response:
        if not authorised(request):
            return unauthorised()
        return JSONResponse(await service().workers())

    async def health(request: Request) -> Response:
        svc = state.get("service")
        return JSONResponse(
            {
                "status": "ok" if svc is not None else "starting",
                "version": __version__,
                "recovered": None
                if svc is None
                else {"requeued": svc.recovered[0], "failed": svc.recovered[1]},
            }
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Mapping[str, Any]]:
        store = await anyio.to_thread.run_sync(
            lambda: JobStore(config.db_path, durable=config.durable)
        )
        owned = sandbox is None
        sb = load_sandbox(config.sandbox) if sandbox is None else sandbox
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
