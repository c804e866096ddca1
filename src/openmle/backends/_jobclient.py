"""A :class:`~openmle.Sandbox` that runs jobs on a remote job service (``/api/v1/jobs``).

Speaks the protocol of ``openmle serve`` (:mod:`openmle.service`) and of the released
OpenMLE sandbox routers. Uses ``httpx`` (a core dependency), so it needs no extra.

Where we depart from the released clients (reference section 4 and bugs B5, B8-B10):

- Infrastructure failures (submit retries exhausted, the service unreachable while polling,
  the wait deadline, a job the service failed or cancelled) come back as
  ``Outcome.INFRA_ERROR`` results, never as a program failure, a score or an HTTP-200 "terminal"
  body (B8). A 4xx answer (bad key, bad path, bad field) is the caller's mistake and raises
  :class:`~openmle.errors.JobServiceError` at once.
- One idempotency key per :meth:`JobServiceSandbox.run`, reused by every submit retry, so a
  retry after a lost answer returns the job already created instead of running it twice.
- ``resource_type`` follows the job's resources (B10) unless set; ``priority`` is sent (B7);
  timeouts are sent as given, never clamped (B9).
- Long-poll (``?wait=``) when the service advertises it (``X-Long-Poll``), so the client knows
  a job ended within a round trip instead of up to a poll interval later.
- Every request has a read timeout (E2B#1128: a hung call must not hang the search) and an
  overall deadline (a server trickling one byte at a time cannot stretch it), and a run never
  waits past ``wait_timeout_s`` by more than a second.
- Answers are untrusted (second security review): bodies are read with a byte cap
  (``max_response_bytes``, 8 MiB by default), parsed strictly by :mod:`openmle._wire` (types,
  finite and bounded scores, the task's metric range from ``task_meta``), and bound to their job
  id and split; a bad answer, and any 4xx while polling, is an ``INFRA_ERROR`` result, never a
  crash and never a score.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import time
import uuid
from collections.abc import Mapping
from typing import Any, final

import anyio
import httpx
from attrs import define, field

from openmle._exports import publish_one
from openmle._protocols import Sandbox
from openmle._types import Job, RunResult, TaskMeta
from openmle._validation import check_positive, fail, int_at_least
from openmle._wire import (
    WireError,
    check_job_id,
    decode_json,
    encode_submit,
    parse_job_view,
    retry_after_seconds,
    submit_body,
    view_result,
)
from openmle.backends._looppool import LoopPool
from openmle.errors import JobServiceError, SandboxError

__all__ = ["JobServiceSandbox"]

_TRANSIENT = frozenset({429, 500, 502, 503, 504})
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""Default cap on one answer of the job service (a job view carries at most ~2 x 128 KiB logs)."""


MAX_SLOTS = 1_000_000
"""The most slots :meth:`JobServiceSandbox.slots` believes one pool of a service has."""


class _TooLarge(Exception):
    """An answer passed ``max_response_bytes``."""


def _task_meta(value: Mapping[str, TaskMeta] | None) -> Mapping[str, TaskMeta]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, TaskMeta) for k, v in value.items()
    ):
        raise fail("a mapping of task to TaskMeta", "JobServiceSandbox.task_meta", value)
    return dict(value)


_WAITING = frozenset({"queued", "running"})
_TERMINAL = frozenset({"completed", "failed", "cancelled"})


@final
@define(eq=False)
class JobServiceSandbox(Sandbox):
    """Runs each job on a job service over HTTP and waits for its result.

    Args:
        base_url: the service root, e.g. ``"http://127.0.0.1:8000"``.
        api_key: the ``X-API-Key``; None reads ``$<api_key_env>``.
        api_key_env: environment variable holding the key.
        resource_type: ``"cpu"`` or ``"gpu"``; None picks ``"gpu"`` for jobs that ask for GPUs.
        priority: 1 (runs first) or 2.
        poll_interval_s: seconds between polls when the service has no long-poll.
        long_poll_s: seconds each poll may wait on the service for the job to end (0: never).
        wait_timeout_s: give up waiting after this many seconds from submission; None means
            the job's timeout plus one hour. The job is then cancelled on the service and the
            result is ``INFRA_ERROR``.
        max_submit_attempts: submissions tried on 429/5xx answers and transport errors.
        max_poll_failures: consecutive failed polls tolerated (the count resets on success).
        backoff_s: base of the exponential backoff (``backoff_s * 1.5**n`` plus jitter).
        max_backoff_s: cap on any wait, a server's ``Retry-After`` included (30 s).
        request_timeout_s: read/write timeout of one request (a long-poll adds its wait).
        max_connections: HTTP connections kept to the service.
        verify_tls: verify the service's certificate (https).
        max_response_bytes: cap on the bytes of one answer (8 MiB); a longer one is cut there
            and the run's result is ``INFRA_ERROR``.
        task_meta: metric bounds by :attr:`Job.task`; a score outside a task's
            ``theoretical_min`` / ``theoretical_max`` is ``INFRA_ERROR``, never a score. Scores
            beyond 1e100 in magnitude are refused for every task.

    ``run`` raises :class:`~openmle.errors.JobServiceError` for a 4xx answer to the submission
    (bad key, a path outside the task roots, a malformed field), and
    :class:`~openmle.errors.SandboxError` after :meth:`aclose`; everything else, a 4xx while
    polling and any malformed answer included, comes back as a :class:`~openmle.RunResult`.
    """

    base_url: str = field()
    api_key: str | None = field(default=None, repr=False)
    api_key_env: str = "OPENMLE_SERVICE_API_KEY"
    resource_type: str | None = None
    priority: int = 1
    poll_interval_s: float = 10.0
    long_poll_s: float = 30.0
    wait_timeout_s: float | None = None
    max_submit_attempts: int = field(
        default=50, validator=int_at_least(1, "JobServiceSandbox.max_submit_attempts")
    )
    max_poll_failures: int = field(
        default=20, validator=int_at_least(0, "JobServiceSandbox.max_poll_failures")
    )
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    request_timeout_s: float = 30.0
    max_connections: int = field(
        default=64, validator=int_at_least(1, "JobServiceSandbox.max_connections")
    )
    verify_tls: bool = True
    max_response_bytes: int = field(
        default=DEFAULT_MAX_RESPONSE_BYTES,
        validator=int_at_least(1024, "JobServiceSandbox.max_response_bytes"),
    )
    task_meta: Mapping[str, TaskMeta] = field(factory=dict, converter=_task_meta)
    _closed: bool = field(default=False, init=False, repr=False)
    # One connection pool per event loop, each closed by its own loop (see _looppool).
    _pool: LoopPool[httpx.AsyncClient] = field(init=False, repr=False)

    @base_url.validator
    def _check_url(self, attribute: Any, value: object) -> None:
        if not isinstance(value, str) or not value.startswith(("http://", "https://")):
            raise fail("an http:// or https:// URL", "JobServiceSandbox.base_url", value)

    def __attrs_post_init__(self) -> None:
        if self.resource_type not in (None, "cpu", "gpu"):
            raise fail(
                "'cpu', 'gpu' or None", "JobServiceSandbox.resource_type", self.resource_type
            )
        if self.priority not in (1, 2) or isinstance(self.priority, bool):
            raise fail("1 or 2", "JobServiceSandbox.priority", self.priority)
        check_positive(self.poll_interval_s, "JobServiceSandbox.poll_interval_s")
        check_positive(self.long_poll_s, "JobServiceSandbox.long_poll_s", allow_zero=True)
        check_positive(self.backoff_s, "JobServiceSandbox.backoff_s", allow_zero=True)
        check_positive(self.max_backoff_s, "JobServiceSandbox.max_backoff_s", allow_zero=True)
        check_positive(self.request_timeout_s, "JobServiceSandbox.request_timeout_s")
        if self.wait_timeout_s is not None:
            check_positive(self.wait_timeout_s, "JobServiceSandbox.wait_timeout_s")
        self._pool = LoopPool(self._new_client, httpx.AsyncClient.aclose)

    # ------------------------------------------------------------------------------------
    def _new_client(self) -> httpx.AsyncClient:
        key = self.api_key or os.environ.get(self.api_key_env, "")
        return httpx.AsyncClient(
            base_url=self.base_url.rstrip("/"),
            headers={"X-API-Key": key} if key else {},
            # pool=None: with more runs than connections, a run waits for a free one (each
            # long-poll frees its connection within long_poll_s) instead of failing.
            timeout=httpx.Timeout(self.request_timeout_s, connect=10.0, pool=None),
            limits=httpx.Limits(
                max_connections=self.max_connections,
                max_keepalive_connections=self.max_connections,
            ),
            trust_env=False,
            verify=self.verify_tls,
        )

    async def aclose(self) -> None:
        """Close this event loop's connection pool (idempotent); ``run`` afterwards raises
        ``SandboxError``. A pool opened under another event loop is closed by that loop, at
        the latest when it ends.
        """
        self._closed = True
        await self._pool.aclose()

    def _backoff(self, attempt: int) -> float:
        return min(
            self.max_backoff_s, self.backoff_s * 1.5**attempt + random.random() * self.backoff_s
        )

    def _body(self, job: Job, key: str) -> dict[str, Any]:
        return encode_submit(
            submit_body(
                job, resource_type=self.resource_type, priority=self.priority, idempotency_key=key
            )
        )

    async def run(self, job: Job) -> RunResult:
        """Submit ``job``, wait for it to end and return its result (see the class docstring)."""
        if self._closed:
            raise SandboxError("JobServiceSandbox.run called after aclose()")
        if not isinstance(job, Job):
            raise fail("a Job", "job", job)
        client = self._pool.get()
        key = uuid.uuid4().hex
        t0 = time.monotonic()
        wait_total = (
            self.wait_timeout_s if self.wait_timeout_s is not None else job.timeout_s + 3600
        )
        deadline = t0 + wait_total
        job_id: str | None = None
        try:
            submitted = await self._submit(client, self._body(job, key), job, deadline)
            if isinstance(submitted, RunResult):
                return submitted
            job_id = str(submitted["job_id"])  # checked by _submit
            result = await self._wait(client, job_id, job, deadline, submitted)
            if result is None:
                await self._cancel_quietly(client, job_id)
                return RunResult.infra_error(
                    f"job {job_id} did not end within wait_timeout_s={wait_total} s; "
                    "it was cancelled on the service",
                    split=job.split,
                )
            if result.outcome.is_infra:  # a bad answer or a lost job: do not leave it running
                await self._cancel_quietly(client, job_id)
            return result
        except anyio.get_cancelled_exc_class():
            if job_id is not None:
                with anyio.CancelScope(shield=True):
                    await self._cancel_quietly(client, job_id)
            raise

    async def preflight(self) -> None:
        """Check that the service answers and takes this client's key (one authenticated
        ``GET /api/v1/workers/status``, within ``request_timeout_s``), before a search spends
        any step: a wrong address or key would otherwise fail every step.

        Raises:
            SandboxError: nothing answers at ``base_url`` in time, or it answers 5xx or with
                no JSON (the message names the address and the fix).
            JobServiceError: the service refuses the request (HTTP 4xx: a missing or unknown
                key, with the fix).
        """
        if self._closed:
            raise SandboxError("JobServiceSandbox.preflight called after aclose()")
        client = self._pool.get()
        try:
            status, _, raw = await self._request(
                client, "GET", "/api/v1/workers/status", limit_s=self.request_timeout_s
            )
        except (httpx.HTTPError, TimeoutError, OSError, _TooLarge) as exc:
            raise SandboxError(
                f"no job service answers at {self.base_url} ({type(exc).__name__}: "
                f"{str(exc)[:200]}); start it (openmle serve) or fix the address"
            ) from None
        if 400 <= status < 500:
            raise self._refused("take this client's requests", status, raw)
        try:
            if status >= 500:
                raise WireError(f"HTTP {status}")
            decode_json(raw)
        except WireError as exc:
            raise SandboxError(
                f"the job service at {self.base_url} gave no usable answer ({exc}); is it an "
                "openmle job service (openmle serve)?"
            ) from None

    async def slots(self) -> int | None:
        """Jobs the service runs at once: the sum of its pools' ``slots`` in
        ``GET /api/v1/workers/status``, an answer read as every other (at most
        ``max_response_bytes``, within ``request_timeout_s`` overall).

        Returns:
            The slots; None when the service does not answer in time, answers an error, or
            does not say (every pool's ``slots`` must be an integer from 0 to
            :data:`MAX_SLOTS`, and one at least positive).
        """
        if self._closed:
            raise SandboxError("JobServiceSandbox.slots called after aclose()")
        try:
            status, _, raw = await self._request(
                self._pool.get(), "GET", "/api/v1/workers/status", limit_s=self.request_timeout_s
            )
            data = decode_json(raw) if status == 200 else None
        except (httpx.HTTPError, TimeoutError, OSError, _TooLarge, WireError):
            return None
        pools = data.get("pools") if isinstance(data, dict) else None
        if not isinstance(pools, dict) or not pools:
            return None
        counts = [p.get("slots") if isinstance(p, dict) else None for p in pools.values()]
        if not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_SLOTS for n in counts
        ):
            return None
        total = sum(n for n in counts if isinstance(n, int))
        return total if total > 0 else None

    async def _cancel_quietly(self, client: httpx.AsyncClient, job_id: str) -> None:
        """``DELETE`` the job, its answer read under the same caps and ignored (10 s at most)."""
        with contextlib.suppress(httpx.HTTPError, TimeoutError, OSError, _TooLarge):
            await self._request(client, "DELETE", f"/api/v1/jobs/{job_id}", limit_s=10.0)

    def _refused(self, what: str, status: int, raw: bytes) -> JobServiceError:
        try:
            detail: Any = decode_json(raw)
        except WireError:
            detail = raw[:500].decode("utf-8", "replace")
        said = detail.get("detail", detail) if isinstance(detail, Mapping) else detail
        said = " ".join(str(said).split())[:500]
        hint = ""
        if status == 401:
            hint = f"; pass JobServiceSandbox(api_key=...) or set ${self.api_key_env}"
        return JobServiceError(
            f"the job service at {self.base_url} refused to {what} (HTTP {status}: {said}){hint}",
            status=status,
            detail=detail,
        )

    async def _request(
        self,
        client: httpx.AsyncClient,
        method: str,
        url: str,
        *,
        limit_s: float,
        **kw: Any,
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request under an overall deadline, its body read up to ``max_response_bytes``.

        Raises ``TimeoutError`` past ``limit_s`` (a server trickling bytes never trips a read
        timeout), :class:`_TooLarge` and ``httpx.HTTPError``.
        """
        with anyio.fail_after(max(0.05, limit_s)):
            async with client.stream(method, url, **kw) as resp:
                declared = resp.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_response_bytes:
                    raise _TooLarge(f"Content-Length {declared}")
                buf = bytearray()
                async for chunk in resp.aiter_bytes():
                    buf += chunk
                    if len(buf) > self.max_response_bytes:
                        raise _TooLarge(f"more than {self.max_response_bytes} bytes")
                return resp.status_code, resp.headers, bytes(buf)

    def _too_large(self, what: str, exc: _TooLarge, job: Job) -> RunResult:
        return RunResult.infra_error(
            f"the job service at {self.base_url} sent {what} over max_response_bytes="
            f"{self.max_response_bytes} ({exc}); raise JobServiceSandbox(max_response_bytes=...) "
            "if such answers are expected",
            split=job.split,
        )

    async def _submit(
        self, client: httpx.AsyncClient, body: dict[str, Any], job: Job, deadline: float
    ) -> dict[str, Any] | RunResult:
        last = ""
        # ASCII JSON: a lone surrogate in the program is sent escaped instead of crashing.
        payload = json.dumps(body).encode()
        headers = {"X-Trace-ID": body["idempotency_key"], "Content-Type": "application/json"}
        for attempt in range(self.max_submit_attempts):
            wait: float | None = None
            try:
                status, resp_headers, raw = await self._request(
                    client,
                    "POST",
                    "/api/v1/jobs",
                    limit_s=self.request_timeout_s + 10.0,
                    content=payload,
                    headers=headers,
                )
            except (httpx.HTTPError, TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            except _TooLarge as exc:
                return self._too_large("an answer to the submission", exc, job)
            else:
                if status in _TRANSIENT:
                    last = f"HTTP {status}"
                    wait = retry_after_seconds(resp_headers)
                elif status >= 400:
                    raise self._refused("accept the job", status, raw)
                else:
                    try:
                        data = parse_job_view(decode_json(raw))
                        check_job_id(data.get("job_id"))
                    except WireError as exc:
                        return RunResult.infra_error(
                            f"the job service answered the submission with no usable job: {exc}",
                            split=job.split,
                        )
                    return {**data, "job_id": check_job_id(data["job_id"])}
            if attempt + 1 == self.max_submit_attempts:
                break
            delay = self._backoff(attempt) if wait is None else max(0.0, wait)
            delay = min(delay, self.max_backoff_s, max(0.0, deadline - time.monotonic()))
            if delay <= 0 and time.monotonic() >= deadline:
                break
            await anyio.sleep(delay)
        return RunResult.infra_error(
            f"could not submit to the job service at {self.base_url} after "
            f"{self.max_submit_attempts} attempts; last error: {last}",
            split=job.split,
        )

    async def _wait(
        self,
        client: httpx.AsyncClient,
        job_id: str,
        job: Job,
        deadline: float,
        first: dict[str, Any],
    ) -> RunResult | None:
        data: dict[str, Any] | None = first
        supports_long_poll = True  # until an answer without X-Long-Poll says otherwise
        failures = 0
        last = ""
        odd = 0
        while True:
            if data is not None:
                status = data.get("status")
                if status in _TERMINAL:
                    return self._to_result(data, job)
                if status not in _WAITING:
                    odd += 1
                    if odd > 3:
                        return RunResult.infra_error(
                            f"the job service reported an unknown status {status!r} for job "
                            f"{job_id}",
                            split=job.split,
                        )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if data is not None and not (supports_long_poll and self.long_poll_s > 0):
                pause = self.poll_interval_s + random.random() * min(
                    0.5, 0.05 * self.poll_interval_s
                )
                await anyio.sleep(min(pause, remaining))
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
            wait = min(self.long_poll_s, remaining) if self.long_poll_s > 0 else 0.0
            data = None
            polled = await self._poll(client, job_id, job, wait, remaining)
            if isinstance(polled, RunResult):
                return polled
            if isinstance(polled, tuple):
                data, supports_long_poll = polled
                failures = 0
                continue
            last = polled
            failures += 1
            if failures > self.max_poll_failures:
                return RunResult.infra_error(
                    f"lost contact with the job service while waiting for job {job_id}: "
                    f"{failures} failed polls in a row; last error: {last}",
                    split=job.split,
                )
            pause = (
                min(5.0, self.backoff_s * (1 + 0.25 * failures))
                + random.random() * 0.5 * self.backoff_s
            )
            await anyio.sleep(min(pause, max(0.0, deadline - time.monotonic())))

    async def _poll(
        self, client: httpx.AsyncClient, job_id: str, job: Job, wait: float, remaining: float
    ) -> RunResult | tuple[dict[str, Any], bool] | str:
        """One status request: a final result, (the job view, whether the service long-polls),
        or the text of a transient failure (retried by the caller).
        """
        # The whole poll, body included, ends by the wait's deadline (plus a second), so a
        # server trickling bytes cannot stretch wait_timeout_s.
        limit = min(self.request_timeout_s + wait, remaining + 1.0)
        try:
            status, headers, raw = await self._request(
                client,
                "GET",
                f"/api/v1/jobs/{job_id}",
                limit_s=limit,
                params={"wait": f"{wait:.3f}"} if wait > 0 else None,
                timeout=httpx.Timeout(self.request_timeout_s + wait, connect=10.0, pool=None),
            )
        except (httpx.HTTPError, TimeoutError) as exc:
            return f"{type(exc).__name__}: {exc}"
        except _TooLarge as exc:
            return self._too_large(f"an answer about job {job_id}", exc, job)
        if status in _TRANSIENT:
            return f"HTTP {status}"
        if status == 404:
            return RunResult.infra_error(
                f"the job service no longer knows job {job_id} (HTTP 404)", split=job.split
            )
        if status < 200 or status >= 300:
            refused = self._refused(f"report job {job_id}", status, raw)
            return RunResult.infra_error(str(refused), split=job.split)
        try:
            data = dict(parse_job_view(decode_json(raw), job_id=job_id))
        except WireError as exc:
            return self._bad_answer(job_id, exc, job)
        return data, "x-long-poll" in headers

    def _bad_answer(self, job_id: str, exc: Exception, job: Job) -> RunResult:
        return RunResult.infra_error(
            f"the job service at {self.base_url} gave a malformed answer about job {job_id}: {exc}",
            split=job.split,
        )

    def _to_result(self, data: Mapping[str, Any], job: Job) -> RunResult:
        job_id = str(data.get("job_id", "?"))
        try:
            return view_result(data, split=job.split, meta=self.task_meta.get(job.task))
        except WireError as exc:
            return self._bad_answer(job_id, exc, job)


publish_one(JobServiceSandbox, "openmle.backends")  # its repr names the public path
