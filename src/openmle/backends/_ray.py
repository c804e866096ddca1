"""``RaySandbox``: each job a Ray task, run on a worker by an inner sandbox.

A Ray cluster already schedules work across machines and GPUs; this sandbox only maps a
:class:`~openmle.Job` onto it. Each job becomes one Ray task that asks for the job's resources
(``num_cpus``, ``num_gpus``, ``memory``); on the worker an *inner* sandbox (the local or the
Docker sandbox, or any sandbox made by a picklable factory) runs and grades it, and the
:class:`~openmle.RunResult` comes back.

Task data reaches workers by a **shared path**: the job carries only the task reference, the
(picklable) resolver is shipped with the task, and the worker resolves the reference itself, so
the task directory must be readable at the same path on every node (NFS, a cluster file system,
or one machine). We chose this over shipping the data with each job because task data is often
gigabytes and identical across thousands of jobs; the hidden answers stay where they are and are
read only by the grader on the worker, never by the program.

Mapping onto Ray:

- the inner sandbox enforces the job's wall-clock limit (TIMEOUT); on top of that a Ray-level
  deadline of ``timeout_s + deadline_slack_s`` (queue wait included) catches a stuck worker:
  the task is cancelled and the result is INFRA_ERROR;
- cancelling ``run`` cancels the Ray task: first gracefully (``ray.cancel``, which interrupts
  the worker so the inner sandbox removes its process or container), then, after
  ``cancel_grace_s``, with ``force=True`` (the worker process is killed);
- a lost worker (process killed, node gone, or killed by Ray's memory monitor) is retried up to
  ``max_retries`` times, then gives INFRA_ERROR; a failing *program* is never retried (it is a
  result, not an error). The retries are ours, not Ray's: the task is submitted with Ray's
  ``max_retries=0``, because Ray retries a task its memory monitor killed *without bound* by
  default (``task_oom_retries`` is -1; Ray only skips OOM retries for a task whose
  ``max_retries`` is 0), so one program could otherwise start container after container.

Departures from the released system: the released search and RL scaled out through their own
HTTP job service with separate CPU and GPU queues; we rely on an existing distributed engine.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, final

import anyio
from attrs import define, field

from openmle._compat import require
from openmle._exports import publish_one
from openmle._protocols import Sandbox
from openmle._task_protocol import TaskResolver
from openmle._types import Job, RunResult
from openmle._validation import check_positive, fail
from openmle.backends._docker import _short
from openmle.errors import InvalidArgument, OpenMLEError, SandboxError

__all__ = ["RaySandbox"]

SandboxFactory = Callable[[], Sandbox]


def _make_inner(
    inner: str | SandboxFactory, options: Mapping[str, Any], resolver: TaskResolver | None
) -> Sandbox:
    if callable(inner):
        return inner()
    from openmle.backends._registry import build_sandbox

    # A named inner sandbox gets the resolver when its factory takes one.
    return build_sandbox(inner, options, {} if resolver is None else {"resolver": resolver})


def _run_on_worker(
    inner: str | SandboxFactory,
    options: Mapping[str, Any],
    resolver: TaskResolver | None,
    job: dict[str, Any],
) -> dict[str, Any]:
    """The body of the Ray task: run ``job`` with a fresh inner sandbox on this worker."""
    started = time.time()

    async def tick() -> None:
        # Ray cancels a running task by interrupting the worker's main thread; that interrupt
        # is only seen when Python code runs, so keep the event loop waking up.
        while True:  # noqa: ASYNC110 - a heartbeat, not a wait for a condition
            await anyio.sleep(0.1)

    async def main() -> RunResult:
        out: list[RunResult] = []
        failed: list[Exception] = []
        sandbox = _make_inner(inner, options, resolver)
        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            try:
                out.append(await sandbox.run(Job.from_dict(job)))
            except Exception as exc:  # re-raised below, outside the task group's wrapping
                failed.append(exc)
            finally:
                with anyio.CancelScope(shield=True):
                    await sandbox.aclose()
                tg.cancel_scope.cancel()
        if failed:
            raise failed[0]
        return out[0]

    result = anyio.run(main)
    return {"result": result.to_dict(), "started_at": started}


@final
@define(eq=False)
class RaySandbox(Sandbox):
    """Runs each job as a Ray task with the job's resources, on a worker's inner sandbox.

    Args:
        inner: a sandbox spec built on the worker by :func:`openmle.backends.make_sandbox`:
            ``"local"`` (:class:`openmle.backends.LocalSandbox`), ``"docker"``
            (:class:`openmle.backends.DockerSandbox`), ``"module:callable"`` or an
            ``openmle.sandboxes`` entry-point name (names registered with
            :func:`~openmle.backends.register_sandbox` exist only in the process that registered
            them); or a picklable zero-argument factory returning a sandbox (called on the
            worker).
        inner_options: keyword arguments for a named inner sandbox (picklable).
        resolver: the task resolver, shipped to workers (picklable); passed to a named inner
            sandbox as ``resolver``. None keeps the inner sandbox's default
            (``openmle.gym.resolve_task``). Task paths must be valid on every worker.
        address: Ray cluster address for ``ray.init`` when Ray is not initialised yet
            (None: ``RAY_ADDRESS`` or a new local cluster).
        init_options: more ``ray.init`` keyword arguments, used only when this sandbox starts
            Ray.
        max_retries: how many times a job whose worker was lost (killed, out of memory under
            Ray's memory monitor, node gone) is submitted again before INFRA_ERROR. Each
            attempt is a fresh Ray task (with Ray's own retries off) and has its own deadline.
        deadline_slack_s: seconds allowed beyond ``job.timeout_s`` (queue wait, container
            start, grading) before the Ray task is cancelled as stuck (INFRA_ERROR); None
            waits forever.
        cancel_grace_s: seconds a cancelled task gets to clean up before it is force-killed.

    GPUs: the task asks Ray for ``job.resources.gpu_count`` GPUs; Ray sets the worker's
    ``CUDA_VISIBLE_DEVICES`` to the ones it assigned, and the inner sandbox (local or Docker)
    maps the job's relative ``gpu_ids`` through that mask.
    """

    inner: str | SandboxFactory = "local"
    inner_options: Mapping[str, Any] = field(factory=dict)
    resolver: TaskResolver | None = None
    address: str | None = None
    init_options: Mapping[str, Any] = field(factory=dict)
    max_retries: int = 1
    deadline_slack_s: float | None = 300.0
    cancel_grace_s: float = 15.0
    _remote: Any = field(default=None, init=False)
    _closed: bool = field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        if isinstance(self.inner, str):
            from openmle.backends._registry import check_sandbox_spec

            if self.inner == "ray" or self.inner.startswith("ray:"):
                raise fail("a sandbox other than ray, or a factory", "RaySandbox.inner", self.inner)
            try:
                check_sandbox_spec(self.inner)
            except InvalidArgument as exc:
                raise InvalidArgument(f"RaySandbox.inner: {exc}") from None
        elif not callable(self.inner):
            raise fail("a sandbox name or a factory", "RaySandbox.inner", self.inner)
        if isinstance(self.max_retries, bool) or not isinstance(self.max_retries, int):
            raise fail("an integer >= 0", "RaySandbox.max_retries", self.max_retries)
        if self.max_retries < 0:
            raise fail("an integer >= 0", "RaySandbox.max_retries", self.max_retries)
        if self.deadline_slack_s is not None:
            check_positive(self.deadline_slack_s, "RaySandbox.deadline_slack_s", allow_zero=True)
        check_positive(self.cancel_grace_s, "RaySandbox.cancel_grace_s", allow_zero=True)

    async def preflight(self) -> None:
        """Check that Ray is installed and its cluster answers (``ray.init`` when Ray is not
        initialised yet), before a search spends any step.

        Raises:
            MissingDependency: Ray is not installed (the message gives the ``pip install`` line).
            SandboxError: no cluster answers at ``address`` (the message names it and the fix).
        """
        ray = require("ray", "ray")
        try:
            await anyio.to_thread.run_sync(self._task)
        except (ConnectionError, RuntimeError, ray.exceptions.RayError) as exc:
            where = self.address or os.environ.get("RAY_ADDRESS") or "a new local cluster"
            raise SandboxError(
                f"Ray cannot start or reach {where} ({_short(exc, 200)}); start the cluster "
                "(`ray start --head`) or pass RaySandbox(address=...) / set RAY_ADDRESS"
            ) from None

    def _task(self) -> Any:
        ray = require("ray", "ray")
        if not ray.is_initialized():
            ray.init(address=self.address, **dict(self.init_options))
        if self._remote is None:
            self._remote = ray.remote(_run_on_worker)
        return self._remote

    def task_options(self, job: Job) -> dict[str, Any]:
        """The Ray task options for ``job``: its resources and the retry policy."""
        res = job.resources
        options: dict[str, Any] = {
            "num_cpus": res.cpus,
            "num_gpus": res.gpu_count,
            # No retries by Ray: with max_retries=0 Ray also gives OOM kills no retry (its
            # OOM retries are separate and unbounded by default); ``run`` retries instead.
            "max_retries": 0,
            "retry_exceptions": False,
            "name": f"openmle:{job.name or job.task}",
        }
        if res.memory_mb is not None:
            options["memory"] = res.memory_mb * 1024 * 1024
        return options

    async def run(self, job: Job) -> RunResult:
        """Run ``job`` on the cluster and return the inner sandbox's result.

        Returns:
            The worker's result (``queue_s`` includes the wait for a Ray worker); INFRA_ERROR
            when the worker is lost beyond ``max_retries``, the task is stuck past its deadline,
            or Ray fails.

        Raises:
            SandboxError: the sandbox is closed.
            OpenMLEError: whatever the inner sandbox raised on the worker for bad input (an
                unknown task, GPU requests an engine cannot serve), re-raised here.
        """
        if not isinstance(job, Job):
            raise fail("a Job", "job", job)
        if self._closed:
            raise SandboxError("RaySandbox.run called after aclose()")
        ray = require("ray", "ray")
        lost = (
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.OutOfMemoryError,
            ray.exceptions.NodeDiedError,
        )
        failures: list[str] = []
        for _attempt in range(self.max_retries + 1):
            try:
                return await self._attempt(job)
            except lost as exc:  # the worker was lost; the program did not fail
                failures.append(_short(exc, 300))
        return RunResult.infra_error(
            f"the Ray worker was lost {len(failures)} time(s) (max_retries={self.max_retries}): "
            + " | ".join(failures),
            split=job.split,
        )

    async def _attempt(self, job: Job) -> RunResult:
        """One Ray task for ``job``; raises Ray's worker-loss errors for ``run`` to retry."""
        ray = require("ray", "ray")
        remote = await anyio.to_thread.run_sync(self._task)
        submitted = time.time()
        ref = remote.options(**self.task_options(job)).remote(
            self.inner, dict(self.inner_options), self.resolver, job.to_dict()
        )
        deadline = None if self.deadline_slack_s is None else job.timeout_s + self.deadline_slack_s
        try:
            out = await anyio.to_thread.run_sync(
                lambda: ray.get(ref, timeout=deadline), abandon_on_cancel=True
            )
        except ray.exceptions.GetTimeoutError:
            with anyio.CancelScope(shield=True):
                await self._cancel(ref)
            return RunResult.infra_error(
                f"the Ray task did not finish within timeout_s + {self.deadline_slack_s} s "
                "(queue wait included); it was cancelled",
                split=job.split,
            )
        except (
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.OutOfMemoryError,
            ray.exceptions.NodeDiedError,
        ):
            raise
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, OpenMLEError):
                raise cause from None
            return RunResult.infra_error(
                f"the inner sandbox failed on the worker: {_short(cause or exc)}", split=job.split
            )
        except (ray.exceptions.RayError, ConnectionError) as exc:
            return RunResult.infra_error(f"Ray failed: {_short(exc)}", split=job.split)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._cancel(ref)
            raise
        result = RunResult.from_dict(out["result"])
        ray_wait = max(0.0, float(out["started_at"]) - submitted)
        return RunResult.from_dict({**result.to_dict(), "queue_s": result.queue_s + ray_wait})

    async def _cancel(self, ref: Any) -> None:
        """Cancel gracefully, then force-kill the worker if it does not stop in time."""
        ray = require("ray", "ray")

        def graceful() -> bool:
            try:
                ray.cancel(ref, force=False)
            except Exception:  # already finished or the worker is gone
                return True
            ready, _ = ray.wait([ref], timeout=self.cancel_grace_s)
            return bool(ready)

        if not await anyio.to_thread.run_sync(graceful):
            # It may have finished between the two calls.
            with contextlib.suppress(Exception):
                await anyio.to_thread.run_sync(lambda: ray.cancel(ref, force=True))

    async def aclose(self) -> None:
        """Stop accepting jobs (idempotent). Ray itself is left running for its owner."""
        self._closed = True

    async def __aenter__(self) -> RaySandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


publish_one(RaySandbox, "openmle.backends")  # its repr names the public path
