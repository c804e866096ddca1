"""Scheduling and running of jobs: CPU and GPU pools over one :class:`~openmle.Sandbox`.

Each pool has its own slot count; within a pool the next job is the queued one with the
smallest priority number (1 before 2), FIFO among equals. The claim is one SQLite statement,
so a job is started at most once per claim and the store is always the truth.

Restart rule (documented in ``docs/how-to/scale-out-with-the-job-service.md``): a job found
``running`` when the service starts was interrupted by a crash. It is re-queued (same priority
and place) while it has been started fewer than ``max_attempts`` times (default 2); otherwise it
ends ``failed`` with an ``INFRA_ERROR`` result. Programs are re-run from scratch in a fresh
workspace, so a re-run is safe; a program that kills the service every time stops after
``max_attempts`` starts. A graceful stop (SIGTERM/Ctrl-C) cancels the runs and puts their jobs
back in the queue without counting the interrupted start.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import anyio
import attrs
from anyio.abc import TaskGroup
from attrs import define, field, frozen

from openmle._protocols import Sandbox
from openmle._types import Job, RunResult
from openmle.service._config import ServiceConfig, key_id
from openmle.service._payload import PayloadError, SubmitRequest, confine
from openmle.service._store import JobRow, JobStore, Status

__all__ = ["JobRoots", "JobService", "cap_result", "current_job_roots", "load_sandbox"]

T = TypeVar("T")
log = logging.getLogger("openmle.service")
POOLS = ("cpu", "gpu")


def load_sandbox(
    spec: str, *, workdir: Path | None = None, options: Mapping[str, Any] | None = None
) -> Sandbox:
    """Build the sandbox named by ``spec`` through :func:`openmle.backends.make_sandbox`:
    ``"local"``, ``"module:callable"``, or any other spec it accepts, called with ``options``
    as keywords (``ServiceConfig.sandbox_options``, ``--sandbox-option NAME=VALUE``).

    With ``workdir``, ``"local"`` makes its run directories and data views there, and so does a
    factory that takes a ``workdir`` keyword (it is called with it); the job service passes its
    own work directory, which it sweeps at start after a crash.

    Raises:
        InvalidArgument: the spec names no sandbox factory, the factory does not take one of
            ``options``, or it returned something that is not a Sandbox.
    """
    from openmle.backends import build_sandbox

    optional: dict[str, Any] = {} if workdir is None else {"workdir": workdir}
    sandbox = build_sandbox(spec, dict(options or {}), optional)
    return sandbox


@frozen
class JobRoots:
    """The task roots around a job a job service runs (see :func:`current_job_roots`).

    Args:
        own: the roots the job's API key may name (its own, else the service-wide ones),
            resolved (links followed).
        every: every task root of the service (the service-wide ones and each key's own),
            resolved.
    """

    own: tuple[Path, ...]
    every: tuple[Path, ...]

    def reaches(self, path: str | os.PathLike[str]) -> bool:
        """Whether the job's key may reach ``path`` (resolved, links followed): it lies under
        one of its own roots, or under no task root of the service at all (a directory the
        operator keeps outside every key's roots). False for a path inside another key's
        roots only.
        """
        real = Path(os.path.realpath(path))
        if any(real.is_relative_to(r) for r in self.own):
            return True
        return not any(real.is_relative_to(r) for r in self.every)


def _real(roots: Iterable[Path]) -> tuple[Path, ...]:
    return tuple(sorted({Path(os.path.realpath(r)) for r in roots}))


_JOB_ROOTS: ContextVar[JobRoots | None] = ContextVar("openmle_service_job_roots", default=None)


def current_job_roots() -> JobRoots | None:
    """The task roots of the job being run here by a job service; None outside its runs.

    "Here" is the sandbox's ``run(job)`` and the worker threads it starts.

    A sandbox factory confining what a received directory names (the bench's: the
    benchmark's data) asks this for the job's API key, which the :class:`~openmle.Job`
    itself does not carry.
    """
    return _JOB_ROOTS.get()


@define(eq=False)
class JobService:
    """The state and the scheduler of one job service process."""

    config: ServiceConfig
    sandbox: Sandbox
    store: JobStore
    _db_lock: anyio.CapacityLimiter = field(factory=lambda: anyio.CapacityLimiter(1), init=False)
    _done: dict[str, anyio.Event] = field(factory=dict, init=False)
    _scopes: dict[str, anyio.CancelScope] = field(factory=dict, init=False)
    _ended: dict[str, anyio.Event] = field(factory=dict, init=False)
    _cancel_requested: set[str] = field(factory=set, init=False)
    _wake: dict[str, anyio.Event] = field(factory=dict, init=False)
    _busy: dict[str, dict[int, tuple[str, str] | None]] = field(factory=dict, init=False)
    started_at: float = field(factory=time.time, init=False)
    recovered: tuple[int, int] = field(default=(0, 0), init=False)
    _owner_roots: dict[str, tuple[Path, ...]] = field(init=False)

    @_owner_roots.default
    def _roots_by_owner(self) -> dict[str, tuple[Path, ...]]:
        """Each key's task roots by its owner id (the digest jobs are stored under)."""
        return {key_id(k): self.config.limits_for(k).task_roots or () for k in self.config.api_keys}

    def _job_roots(self, row: JobRow) -> JobRoots:
        """The task roots around ``row``'s job (see :func:`current_job_roots`)."""
        every = {*self.config.task_roots, *(r for rs in self._owner_roots.values() for r in rs)}
        own = self._owner_roots.get(row.owner, self.config.task_roots)
        return JobRoots(own=_real(own), every=_real(every))

    def _still_inside(self, row: JobRow, job: Job) -> str | None:
        """None when ``job``'s task is a bundled name or still lies under its owner's task
        roots, else why not (a key file changed across a restart: the job was queued under
        roots its key no longer has).
        """
        if not os.path.isabs(job.task):
            return None
        roots = self._owner_roots.get(row.owner, self.config.task_roots)
        try:
            confine(job.task, roots, field="task")
        except PayloadError as exc:
            return f"the job's task is not under its API key's task roots now: {exc.detail}"
        return None

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a store call in the worker thread (one at a time)."""
        return await anyio.to_thread.run_sync(lambda: fn(*args, **kwargs), limiter=self._db_lock)

    def slots(self, pool: str) -> int:
        """Slots of ``pool``."""
        return self.config.cpu_slots if pool == "cpu" else self.config.gpu_slots

    # ------------------------------------------------------------------------------------
    async def recover(self) -> None:
        """Apply the restart rule to jobs a crash left running."""
        requeued, exhausted = await self.db(
            self.store.recover, max_attempts=self.config.max_attempts
        )
        for row in exhausted:
            result = RunResult.infra_error(
                f"the service stopped while the job was running, {row.attempts} time(s); "
                f"not re-run (max_attempts={self.config.max_attempts})",
                split=row.spec["job"]["split"],
            )
            await self.db(
                self.store.finish, row.id, Status.FAILED, _result_body(result), result.detail
            )
        self.recovered = (requeued, len(exhausted))

    async def run(self, tg: TaskGroup) -> None:
        """Start one scheduler loop per pool with slots, and the retention sweep."""
        if self.config.retain_s is not None:
            tg.start_soon(self._sweep, self.config.retain_s)
        for pool in POOLS:
            n = self.slots(pool)
            if n:
                self._busy[pool] = dict.fromkeys(range(n))
                self._wake[pool] = anyio.Event()
                tg.start_soon(self._schedule, pool, tg)

    async def _sweep(self, retain_s: float) -> None:
        """Delete finished jobs older than ``retain_s``, every ``min(1 h, retain_s / 4)``."""
        while True:
            try:
                n = await self.db(self.store.purge, time.time() - retain_s)
                if n:
                    log.info("deleted %d finished jobs older than %.0f s", n, retain_s)
            except Exception:
                log.exception("the retention sweep failed; retrying later")
            await anyio.sleep(min(3600.0, retain_s / 4))

    def poke(self, pool: str) -> None:
        """Wake ``pool``'s scheduler after a submission."""
        ev = self._wake.get(pool)
        if ev is not None:
            ev.set()

    async def _schedule(self, pool: str, tg: TaskGroup) -> None:
        sem = anyio.Semaphore(self.slots(pool))
        while True:
            await sem.acquire()
            row = None
            try:
                self._wake[pool] = anyio.Event()
                row = await self.db(self.store.claim_next, pool, age_s=self.config.priority_age_s)
            except Exception:  # e.g. the disk is full: keep serving, retry shortly
                log.exception("could not claim the next %s job; retrying in 1 s", pool)
                await anyio.sleep(1.0)
            finally:
                if row is None:
                    sem.release()
            if row is None:
                await self._wake[pool].wait()
                continue
            slot = next(i for i, j in self._busy[pool].items() if j is None)
            self._busy[pool][slot] = (row.id, row.owner)
            tg.start_soon(self._execute, row, sem, pool, slot)

    async def _run_on_sandbox(self, row: JobRow, scope: anyio.CancelScope) -> RunResult | None:
        """The job's result, an INFRA_ERROR result, or None when it was cancelled."""
        split = row.spec.get("job", {}).get("split", "valid")
        try:
            job = Job.from_dict(row.spec["job"])
        except Exception as exc:
            return RunResult.infra_error(f"the stored job is unreadable: {exc}", split=split)
        outside = await anyio.to_thread.run_sync(self._still_inside, row, job)
        if outside is not None:
            return RunResult.infra_error(outside, split=job.split)
        roots = await anyio.to_thread.run_sync(self._job_roots, row)
        with scope:
            with anyio.move_on_after(job.timeout_s + self.config.grace_s) as deadline:
                token = _JOB_ROOTS.set(roots)  # this job's task only: each job is its own task
                try:
                    result = await self.sandbox.run(job)
                except Exception as exc:  # the sandbox broke, not the program
                    return RunResult.infra_error(
                        f"the sandbox raised {type(exc).__name__}: {exc}", split=job.split
                    )
                finally:
                    _JOB_ROOTS.reset(token)
                if not isinstance(result, RunResult):
                    return RunResult.infra_error(
                        f"the sandbox returned {type(result).__name__}, not a RunResult",
                        split=job.split,
                    )
                return result
            if deadline.cancelled_caught:
                return RunResult.infra_error(
                    f"the sandbox did not return within the job's timeout "
                    f"({job.timeout_s} s) plus {self.config.grace_s} s",
                    split=job.split,
                )
        return None

    async def _execute(self, row: JobRow, sem: anyio.Semaphore, pool: str, slot: int) -> None:
        scope = anyio.CancelScope()
        self._scopes[row.id] = scope
        self._ended[row.id] = anyio.Event()
        try:
            result = await self._run_on_sandbox(row, scope)
            queued = max(0.0, (row.started_at or time.time()) - row.created_at)
            with anyio.CancelScope(shield=True):
                try:
                    if row.id in self._cancel_requested or result is None:
                        await self.db(
                            self.store.finish,
                            row.id,
                            Status.CANCELLED,
                            None,
                            "cancelled while running",
                        )
                    else:
                        result = cap_result(
                            attrs.evolve(result, queue_s=result.queue_s + queued),
                            max_artifacts=self.config.max_result_artifacts,
                            max_log_bytes=self.config.max_result_log_bytes,
                        )
                        status = Status.FAILED if result.outcome.is_infra else Status.COMPLETED
                        await self.db(
                            self.store.finish, row.id, status, _result_body(result), result.detail
                        )
                except Exception:  # the job stays "running": the restart rule will see it
                    log.exception("could not record the end of job %s", row.id)
                self.notify(row.id)
        finally:
            self._scopes.pop(row.id, None)
            self._ended.pop(row.id).set()
            self._cancel_requested.discard(row.id)
            self._busy[pool][slot] = None
            sem.release()

    # ------------------------------------------------------------------------------------
    def notify(self, job_id: str) -> None:
        """Wake long-polls waiting on ``job_id``."""
        ev = self._done.pop(job_id, None)
        if ev is not None:
            ev.set()

    async def submit(
        self, req: SubmitRequest, *, owner: str = "", max_queued_per_owner: int | None = None
    ) -> tuple[JobRow | None, bool]:
        """Store a submission; ``(row, created)``, or ``(None, False)`` when the queue is full.

        Raises:
            QuotaExceeded: ``owner`` has ``max_queued_per_owner`` jobs queued already.
        """
        row, created = await self.db(
            self.store.insert,
            owner=owner,
            max_queued_per_owner=max_queued_per_owner,
            idempotency_key=req.idempotency_key,
            request_hash=req.request_hash(),
            name=req.job.name,
            pool=req.pool,
            priority=req.priority,
            spec=req.spec(),
            max_queued=self.config.max_queued,
        )
        if created:
            self.poke(req.pool)
        return row, created

    async def get(
        self, job_id: str, *, wait_s: float = 0.0, owner: str | None = None
    ) -> JobRow | None:
        """The job (``owner``'s only, when given), after waiting up to ``wait_s`` for its end."""
        row = await self.db(self.store.get, job_id, owner)
        if row is None or row.status in Status.TERMINAL or wait_s <= 0:
            return row
        ev = self._done.setdefault(job_id, anyio.Event())
        # Re-read: it may have ended between the read and the registration.
        row = await self.db(self.store.get, job_id, owner)
        if row is not None and row.status not in Status.TERMINAL:
            with anyio.move_on_after(wait_s):
                await ev.wait()
            row = await self.db(self.store.get, job_id, owner)
        return row

    async def cancel(self, job_id: str, *, owner: str | None = None) -> JobRow | None:
        """Cancel a queued or running job (``owner``'s only, when given); None if not found.

        A finished job is left as it is.
        """
        if await self.db(self.store.get, job_id, owner) is None:
            return None
        if await self.db(self.store.cancel_queued, job_id, owner):
            self.notify(job_id)
        else:
            scope = self._scopes.get(job_id)
            ended = self._ended.get(job_id)
            if scope is not None and ended is not None:
                self._cancel_requested.add(job_id)
                scope.cancel()
                with anyio.move_on_after(30):
                    await ended.wait()
        return await self.db(self.store.get, job_id)

    async def workers(self, *, owner: str | None = None) -> dict[str, Any]:
        """Per-slot and per-pool status (``workers_show`` as the released router shows it).

        With ``owner``, a busy slot shows its ``job_id`` only when the job is ``owner``'s
        (``null`` otherwise): clients never learn other clients' job ids.
        """
        counts = await self.db(self.store.counts)
        show = []
        pools: dict[str, Any] = {}
        for pool, busy in self._busy.items():
            for slot, held in busy.items():
                visible = held is not None and (owner is None or held[1] == owner)
                show.append(
                    {
                        "worker_id": f"{pool}-{slot}",
                        "resource_type": pool,
                        "status": "idle" if held is None else "busy",
                        "job_id": held[0] if visible and held is not None else None,
                    }
                )
            pools[pool] = {
                "slots": len(busy),
                "running": counts.get((pool, Status.RUNNING), 0),
                "queued": counts.get((pool, Status.QUEUED), 0),
            }
        return {"workers_show": show, "pools": pools}


def _result_body(result: RunResult) -> dict[str, Any]:
    return result.to_dict()


_MAX_PATH_CHARS = 1024
_MAX_LINE_CHARS = 8192


def _cut_text(text: str, limit: int) -> tuple[str, int]:
    """``text`` within ``limit`` UTF-8 bytes, head and tail kept; (text, bytes dropped)."""
    raw = text.encode("utf-8", errors="replace")
    if len(raw) <= limit:
        return text, 0
    note_room = 80
    half = max(0, (limit - note_room) // 2)
    dropped = len(raw) - 2 * half
    head = raw[:half].decode("utf-8", errors="ignore")
    tail = raw[len(raw) - half :].decode("utf-8", errors="ignore")
    return f"{head}\n[... {dropped} bytes cut by the job service ...]\n{tail}", dropped


def cap_result(result: RunResult, *, max_artifacts: int, max_log_bytes: int) -> RunResult:
    """``result`` cut to what the service stores and returns on every GET.

    Keeps at most ``max_artifacts`` artifact paths (each cut to 1,024 characters), the head and
    tail of the logs within ``max_log_bytes`` (``logs_dropped_bytes`` grows by what is cut),
    and at most 8 KiB of ``detail`` and ``error_signature``; says in ``detail`` what was cut.
    Whatever the sandbox already capped, this bounds what one job can put in the database.
    """
    notes: list[str] = []
    artifacts = result.artifacts
    if len(artifacts) > max_artifacts:
        notes.append(f"{len(artifacts) - max_artifacts} of {len(artifacts)} artifact paths dropped")
        artifacts = artifacts[:max_artifacts]
    if any(len(a) > _MAX_PATH_CHARS for a in artifacts):
        artifacts = tuple(a[:_MAX_PATH_CHARS] for a in artifacts)
        notes.append(f"artifact paths cut to {_MAX_PATH_CHARS} characters")
    logs, dropped = _cut_text(result.logs, max_log_bytes)
    signature = result.error_signature
    if signature is not None and len(signature) > _MAX_LINE_CHARS:
        signature = signature[:_MAX_LINE_CHARS]
    detail, _ = _cut_text(result.detail, _MAX_LINE_CHARS)
    if notes:
        detail = f"{detail} [job service: {'; '.join(notes)}]".strip()
    if (
        artifacts is result.artifacts
        and not dropped
        and signature is result.error_signature
        and detail == result.detail
    ):
        return result
    return attrs.evolve(
        result,
        artifacts=artifacts,
        logs=logs,
        logs_dropped_bytes=result.logs_dropped_bytes + dropped,
        error_signature=signature,
        detail=detail,
    )
