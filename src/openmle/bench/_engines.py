"""The bench on the engines the search already has: Ray, a job service, any sandbox factory.

``openmle bench run --sandbox SPEC`` takes the spec grammar of ``openmle search --sandbox``
(:func:`openmle.backends.make_sandbox`): ``local``, ``docker``, ``ray``, ``service:URL``,
``module:callable`` or an ``openmle.sandboxes`` entry point. The search of each run stays in
the bench's process; each program run (a :class:`~openmle.Job`) goes to the engine, which
grades it with the competition's grader through the bench's task resolver:

- **Ray** (``ray``): the resolver shipped to the workers is :class:`BenchRefResolver`, which
  holds only the bench directory's path and opens the bench there on first use (the bench
  directory, the data and the registry must be at the same paths on every node). Each job asks
  Ray for its resources (``num_cpus``, ``num_gpus``, ``memory``), so a NatureBench case's GPUs
  and a bench's ``--cpus`` / ``--memory-mb`` are honoured by Ray's scheduler; runs at once
  default to the cluster's CPUs (:func:`engine_slots`).
- **A job service** (``service:URL``): the service resolves a job's task under its task roots,
  so each run's task is a directory ``BENCH_DIR/tasks/<competition>@seed-<k>/`` holding
  ``bench-task.json`` (the reference, nothing else); start the service with a task root that
  holds the bench directory and with the bench's sandbox,
  ``openmle serve --task-root DIR --sandbox openmle.bench:bench_task_sandbox`` (it opens the
  bench a task directory belongs to and grades there). Runs at once default to the service's
  slots (``GET /api/v1/workers/status``).

The bench directory stays the one record: a killed runner is finished with ``openmle bench
resume`` as on the local sandbox (a job the killed runner left on the service runs to its end;
its result is not used).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, final

import anyio
import attrs
from attrs import define, field

from openmle._compat import require
from openmle._readback import read_back_json
from openmle._types import Job, RunResult
from openmle.errors import InvalidArgument

__all__ = ["BenchRefResolver", "ServiceTasks", "TaskDirResolver", "engine_slots", "sandbox_factory"]

TASKS = "tasks"
"""The folder of a bench directory holding one task directory per run (job services)."""
MARKER = "bench-task.json"
_MARKER_MAX_BYTES = 4096
_REF = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,150}(@arm-[a-z0-9][a-z0-9_+-]{0,40})?@seed-\d{1,9}$"
)


def _is_ray(spec: str) -> bool:
    return spec == "ray" or spec.startswith("ray:")


def _is_service(spec: str) -> bool:
    return spec.startswith("service:")


def sandbox_factory(spec: str) -> Callable[[Any], Any]:
    """The bench's sandbox factory for ``spec`` (see :func:`openmle.bench.bench_sandbox`).

    Raises:
        InvalidArgument: the spec names no sandbox, or one that can neither take the bench's
            resolver nor run on a job service.
        MissingDependency: ``ray`` without Ray installed.
    """
    from openmle.backends import build_sandbox, check_sandbox_spec, sandbox_takes

    if _is_service(spec):
        check_sandbox_spec(spec)

        def service(resolver: Any) -> Any:
            inner = build_sandbox(spec, {}, {})
            return ServiceTasks(inner=inner, bench_dir=Path(resolver.run.path))

        return service
    if not sandbox_takes(spec, "resolver"):
        raise InvalidArgument(
            f"Expected --sandbox local, docker, ray, service:URL or a sandbox factory taking "
            f"resolver= for a bench but got {spec!r}: the bench grades with the competition's "
            "grader through its own task resolver"
        )
    if _is_ray(spec):
        if importlib.util.find_spec("ray") is None:  # found now, not at the first job
            require("ray", "ray")  # MissingDependency with the install line
        return lambda resolver: build_sandbox(
            spec,
            {
                "resolver": BenchRefResolver(
                    str(Path(resolver.run.path).resolve()), type(resolver).open
                )
            },
            {},
        )
    return lambda resolver: build_sandbox(spec, {"resolver": resolver}, {})


@final
@define(eq=False)
class BenchRefResolver:
    """A picklable task resolver for ``ID@seed-K`` references of the bench at ``bench_dir``:
    it carries only the path and ``opener`` (a module-level function, pickled by reference:
    the bench's task resolver of a bench directory) and opens the bench where it is called
    (a Ray worker), once.

    Raises (when called):
        InvalidArgument: not a bench directory, or a reference the bench does not hold.
    """

    bench_dir: str
    opener: Callable[[Path], Any]
    _inner: Any = field(default=None, init=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"bench_dir": self.bench_dir, "opener": self.opener}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.bench_dir = str(state["bench_dir"])
        self.opener = state["opener"]
        self._inner = None

    def __call__(self, ref: str) -> Any:
        if self._inner is None:
            self._inner = self.opener(Path(self.bench_dir))
        return self._inner(ref)


# ------------------------------------------------------------------------ job services


@final
@define(eq=False)
class ServiceTasks:
    """A job-service sandbox for a bench: each job's task becomes its run's task directory
    (``BENCH_DIR/tasks/<ref>/``, made on first use) before it is sent.
    """

    inner: Any
    bench_dir: Path
    _made: set[str] = field(factory=set, init=False)

    @property
    def base_url(self) -> str:
        return str(self.inner.base_url)

    def _task_dir(self, ref: str) -> Path:
        if not _REF.match(ref):
            raise InvalidArgument(f"Expected a bench task reference ID@seed-K but got {ref!r}")
        d = self.bench_dir.resolve() / TASKS / ref
        if ref not in self._made:
            d.mkdir(parents=True, exist_ok=True)
            marker = d / MARKER
            text = json.dumps({"kind": "openmle-bench-task", "ref": ref})
            if not marker.is_file() or marker.read_text(encoding="utf-8") != text:
                tmp = d / (MARKER + ".tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, marker)
            self._made.add(ref)
        return d

    async def run(self, job: Job) -> RunResult:
        """Send ``job`` with its task as the run's task directory; the service's result."""
        d = await anyio.to_thread.run_sync(self._task_dir, job.task)
        result: RunResult = await self.inner.run(attrs.evolve(job, task=str(d)))
        return result

    async def preflight(self) -> None:
        """The job-service client's check (one authenticated request), before any step: a
        wrong address or key stops the bench at once instead of failing every step of every
        run as an infrastructure error.

        Raises:
            SandboxError: no job service answers at the address.
            JobServiceError: the service refuses the key (HTTP 4xx).
        """
        check = getattr(self.inner, "preflight", None)
        if callable(check):
            await check()

    async def slots(self) -> int | None:
        """The service's slots (CPU pool plus GPU pool), or None when it does not say: asked
        by the job-service client, which reads the answer as untrusted (bounded in bytes and
        time, every pool's count an integer).
        """
        ask = getattr(self.inner, "slots", None)
        if not callable(ask):
            return None
        n = await ask()
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    async def aclose(self) -> None:
        await self.inner.aclose()


@final
@define(eq=False)
class TaskDirResolver:
    """The service side: a task directory ``BENCH_DIR/tasks/<ref>/`` to its bench's task.

    The directory's ``bench-task.json`` is read bounded and must name the directory's own
    reference; the bench opened is the directory two levels up (one per bench, cached).
    """

    opener: Callable[[Path], Any]
    _benches: dict[Path, Any] = field(factory=dict, init=False)

    def __getstate__(self) -> dict[str, Any]:
        return {"opener": self.opener}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.opener = state["opener"]
        self._benches = {}

    def __call__(self, task: str) -> Any:
        d = Path(task)
        if not d.is_absolute():
            raise InvalidArgument(
                f"Expected a bench task directory BENCH_DIR/{TASKS}/ID@seed-K but got {task!r}: "
                "this sandbox (openmle.bench:bench_task_sandbox) runs only `openmle bench` jobs"
            )
        try:
            marker = read_back_json(d / MARKER, max_bytes=_MARKER_MAX_BYTES)
        except (OSError, ValueError):
            marker = None
        ref = d.name
        if (
            not isinstance(marker, dict)
            or marker.get("kind") != "openmle-bench-task"
            or marker.get("ref") != ref
            or not _REF.match(ref)
            or d.parent.name != TASKS
        ):
            raise InvalidArgument(f"{task!r} is not an `openmle bench` task directory")
        bench_dir = d.parent.parent
        if bench_dir not in self._benches:
            self._benches[bench_dir] = self.opener(bench_dir)
        return self._benches[bench_dir](ref)


async def engine_slots(sandbox: Any) -> int:
    """Runs at once the engine behind ``sandbox`` serves: its ``max_concurrency`` (local,
    Docker), a Ray cluster's CPUs, a job service's slots; 1 when it does not say.
    """
    from openmle.backends import RaySandbox

    if isinstance(sandbox, ServiceTasks):
        return await sandbox.slots() or 1
    if isinstance(sandbox, RaySandbox):

        def cluster_cpus() -> int:
            ray = require("ray", "ray")
            if not ray.is_initialized():
                ray.init(address=sandbox.address, **dict(sandbox.init_options))
            cpus = ray.cluster_resources().get("CPU", 1)
            return max(1, math.floor(float(cpus)))

        return await anyio.to_thread.run_sync(cluster_cpus)
    n = getattr(sandbox, "max_concurrency", None)
    return int(n) if isinstance(n, int) and n > 0 else 1
