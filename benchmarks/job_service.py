"""Job service overhead and notification delay, side by side in one run.

1. Throughput of trivial jobs (the toy task's solution: read the data, write a submission,
   graded out of process) through ``openmle serve`` on a loopback port, against the same
   sandbox called directly with the same concurrency. Target: service >= 0.8 of direct.
2. The delay between a job ending on the service (its ``completed_at``) and the client knowing
   it (``JobServiceSandbox.run`` returning): long-poll against 10-second polling.

Run: ``python benchmarks/job_service.py [--sandbox SPEC] [--jobs 60] [--slots 4]``. The sandbox
defaults to ``service_sandbox:make_local`` (``openmle.backends.LocalSandbox`` over the toy task)
when LocalSandbox is installed, else to the integration tests' ``service_sandbox:make`` (a
child process per program, same grading). Both sides always use the same sandbox.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src"), str(ROOT / "tests" / "integration" / "service")]

from benchmarks._common import emit  # noqa: E402

from openmle import Job, Outcome, RunResult  # noqa: E402
from openmle.backends import JobServiceSandbox  # noqa: E402
from openmle.service import load_sandbox  # noqa: E402
from openmle.testing import TOY_SOLUTION, ToyTask  # noqa: E402

KEY = "benchmark-key-0123456789"


def _default_sandbox() -> str:
    """``LocalSandbox`` over the toy task when it is installed, else the tests' process sandbox."""
    try:
        backends = importlib.import_module("openmle.backends")
        backends.LocalSandbox  # noqa: B018 - probe the lazy registry
    except (AttributeError, ImportError):
        return "service_sandbox:make"
    return "service_sandbox:make_local"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    tmp: Path, roots: Path, sandbox: str, slots: int
) -> tuple[subprocess.Popen[bytes], str]:
    """``openmle serve`` in a child process; returns it and its URL once healthy."""
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests/integration/service")]),
        "OPENMLE_SERVICE_API_KEYS": KEY,
    }
    cmd = [sys.executable, "-m", "openmle", "serve", "--db", str(tmp / "jobs.db")]
    cmd += ["--task-root", str(roots), "--sandbox", sandbox, "--port", str(port)]
    cmd += ["--cpu-slots", str(slots), "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the job service did not start")


def _job(task: Path, name: str, code: str = TOY_SOLUTION) -> Job:
    return Job(code=code, task=str(task), name=name, timeout_s=300)


async def _many(run: object, jobs: list[Job], slots: int) -> tuple[float, list[RunResult]]:
    limiter = anyio.CapacityLimiter(slots)
    results: list[RunResult] = []

    async def one(job: Job) -> None:
        async with limiter:
            results.append(await run(job))  # type: ignore[operator]

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for job in jobs:
            tg.start_soon(one, job)
    return time.perf_counter() - t0, results


async def throughput(
    url: str, task: Path, sandbox: str, n: int, slots: int, rounds: int
) -> dict[str, float]:
    """Median jobs per second over ``rounds`` alternating runs, direct and through the service.

    Same jobs, same number running at once (the service runs ``slots``; its client keeps twice
    that in flight so the service's queue never idles on a round trip).
    """
    direct = load_sandbox(sandbox)
    client = JobServiceSandbox(url, api_key=KEY)
    await _many(direct.run, [_job(task, f"warm-d{i}") for i in range(slots)], slots)
    await _many(client.run, [_job(task, f"warm-s{i}") for i in range(slots)], slots)
    rates: dict[str, list[float]] = {"direct": [], "service": []}
    for r in range(rounds):
        for side, run, width in (("direct", direct.run, slots), ("service", client.run, 2 * slots)):
            jobs = [_job(task, f"{side}{r}-{i}") for i in range(n)]
            elapsed, results = await _many(run, jobs, width)
            bad = [x for x in results if x.outcome is not Outcome.SUCCESS]
            assert not bad, f"benchmark jobs failed: {bad[0]}"
            rates[side].append(n / elapsed)
    await direct.aclose()
    await client.aclose()
    return {
        "direct_jobs_per_s": statistics.median(rates["direct"]),
        "service_jobs_per_s": statistics.median(rates["service"]),
    }


async def notify_delay(url: str, db: Path, task: Path, *, long_poll: bool, n: int) -> list[float]:
    """Seconds between each job's ``completed_at`` on the service and ``run`` returning."""
    client = JobServiceSandbox(
        url, api_key=KEY, long_poll_s=30.0 if long_poll else 0.0, poll_interval_s=10.0
    )
    known: dict[str, float] = {}
    tag = "lp" if long_poll else "poll"

    async def one(i: int) -> None:
        # Jobs of different lengths, so they end at different points of the poll cycle.
        code = f"import time; time.sleep({0.4 + 1.3 * i})\n{TOY_SOLUTION}"
        result = await client.run(_job(task, f"{tag}{i}", code))
        known[f"{tag}{i}"] = time.time()
        assert result.outcome is Outcome.SUCCESS, result

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    await client.aclose()
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        ended = dict(
            con.execute("SELECT name, completed_at FROM jobs WHERE name LIKE ?", (f"{tag}%",))
        )
    finally:
        con.close()
    return [known[name] - ended[name] for name in known]


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="openmle-bench-") as tmp_s:
        tmp = Path(tmp_s)
        roots = tmp / "tasks"
        task = ToyTask.create(roots / "toy").root
        proc, url = start_server(tmp, roots, args.sandbox, args.slots)
        try:
            tp = await throughput(url, task, args.sandbox, args.jobs, args.slots, args.rounds)
            lp = await notify_delay(url, tmp / "jobs.db", task, long_poll=True, n=args.delay_jobs)
            pl = await notify_delay(url, tmp / "jobs.db", task, long_poll=False, n=args.delay_jobs)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
    ratio = tp["service_jobs_per_s"] / tp["direct_jobs_per_s"]
    lp_med, pl_med = statistics.median(lp), statistics.median(pl)
    print(
        f"sandbox: {args.sandbox}; {args.jobs} trivial jobs x {args.rounds} rounds, "
        f"{args.slots} slots"
    )
    print(f"throughput direct : {tp['direct_jobs_per_s']:.2f} jobs/s")
    print(f"throughput service: {tp['service_jobs_per_s']:.2f} jobs/s")
    print(f"ratio service/direct: {ratio:.3f} (target >= 0.8)")
    print(f"end-to-known delay, long-poll      : median {lp_med:.3f} s, max {max(lp):.3f} s")
    print(f"end-to-known delay, 10-second polls: median {pl_med:.3f} s, max {max(pl):.3f} s")
    print(f"polling / long-poll delay ratio: {pl_med / max(lp_med, 1e-6):.1f}x")
    emit(
        "job_service",
        {
            "sandbox": args.sandbox,
            "jobs": args.jobs,
            "rounds": args.rounds,
            "slots": args.slots,
            "direct_jobs_per_s": round(tp["direct_jobs_per_s"], 3),
            "service_jobs_per_s": round(tp["service_jobs_per_s"], 3),
            "throughput_ratio": round(ratio, 3),
            "throughput_target": 0.8,
            "notify_delay_long_poll_median_s": round(lp_med, 4),
            "notify_delay_long_poll_max_s": round(max(lp), 4),
            "notify_delay_poll10_median_s": round(pl_med, 4),
            "notify_delay_poll10_max_s": round(max(pl), 4),
        },
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default=_default_sandbox())
    parser.add_argument("--jobs", type=int, default=60)
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay-jobs", type=int, default=6)
    anyio.run(main, parser.parse_args())
