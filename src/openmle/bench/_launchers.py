"""Launch a bench's runs as a job array (Slurm through ``submitit``), and say where each stands.

``openmle bench run --launcher slurm`` makes the bench directory (manifest, preflight) on the
submitting machine, then submits every unfinished run (competition x seed, per arm) as one
task of a ``submitit`` job array on that shared directory. Each task finishes exactly one run
with :func:`openmle.bench.arun_bench` (``only=``) on its node's own sandbox, so each run is an
ordinary run directory: a task that was cancelled, preempted or killed is finished by
``openmle bench resume`` (or by submitting again), as on one machine.

What the launcher knows lives beside the runs::

    BENCH_DIR/launch/launch.json          the launcher, the submission time, each run's job id
    BENCH_DIR/launch/state/<ref>.json     written by the task: started (heartbeat), ended
    BENCH_DIR/launch/submitit/            submitit's own folder (pickles, stdout, stderr)

:func:`launch_status` combines both with the runs' results: ``finished`` (the run's result is
written), ``running`` (its task's heartbeat is fresh), ``lost`` (a task started but its
heartbeat stopped and the run has no result: resume it), ``queued`` (submitted, not started),
``failed`` (its task ended without a result), ``interrupted`` / ``pending`` (not submitted).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, final

import anyio
from attrs import frozen

from openmle._compat import require
from openmle._readback import read_back_json
from openmle.backends import pid_alive
from openmle.errors import InvalidArgument

__all__ = ["LaunchStatus", "array_executor", "launch_status", "run_array_task", "submit_array"]

LAUNCH = "launch"
HEARTBEAT_S = 15.0
"""Seconds between a running task's heartbeats."""
LOST_AFTER_S = 120.0
"""A started task whose heartbeat is older than this is ``lost``."""
_STATE_MAX_BYTES = 64 * 1024
_LAUNCH_MAX_BYTES = 16 * 1024 * 1024
LAUNCHERS = ("slurm", "local")


def _ref(cid: str, seed: int, arm: str) -> str:
    return f"{cid}@arm-{arm}@seed-{seed}" if arm else f"{cid}@seed-{seed}"


def _write(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(dict(data), sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def array_executor(launcher: str, folder: Path, parameters: Mapping[str, Any]) -> Any:
    """A ``submitit`` executor for ``--launcher slurm`` or ``local``.

    ``slurm``: ``submitit.AutoExecutor(cluster="slurm")``, which calls ``sbatch``; ``local``:
    ``submitit.LocalExecutor`` (the tasks run as processes of this machine; for a laptop and
    for tests); with ``parameters`` (``update_parameters``).

    Raises:
        MissingDependency: ``submitit`` is not installed (the ``slurm`` extra).
        InvalidArgument: an unknown launcher or parameter.
    """
    submitit = require("submitit", "slurm")
    if launcher not in LAUNCHERS:
        raise InvalidArgument(f"Expected --launcher in {LAUNCHERS} but got {launcher!r}")
    ex = (
        submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        if launcher == "slurm"
        else submitit.LocalExecutor(folder=str(folder))
    )
    try:
        ex.update_parameters(**dict(parameters))
    except (TypeError, ValueError, NameError) as exc:  # NameError: submitit's unknown key
        said = " ".join(str(exc).split())
        raise InvalidArgument(
            f"--launcher-option: {said[:600]}; check each KEY=VALUE (dictionaries as JSON, "
            'e.g. slurm_additional_parameters={"account": "a"})'
        ) from None
    return ex


def submit_array(
    path: str | os.PathLike[str],
    *,
    executor: Any,
    models: Callable[[], tuple[Any, Any]],
    launcher: str = "slurm",
    sandbox: str | None = None,
) -> dict[str, str]:
    """Submit every unfinished run of the bench at ``path`` as one task of a job array.

    Runs a task of an earlier submission still holds (``running`` or ``queued`` in
    :func:`launch_status`) are left to it.

    Args:
            path: a bench directory (made by :func:`openmle.bench.arun_bench` or ``bench run``).
            executor: a ``submitit`` executor (:func:`array_executor`).
            models: a picklable zero-argument callable building, in the task, the operator model
                and the summary model (or None) (the CLI's builds them from the specs).
            launcher: recorded in ``launch/launch.json``.
            sandbox: the ``--sandbox`` spec the tasks use (None: the manifest's; one naming a
                server is passed here so no task takes a URL from a file).

    Returns:
            ``{ref: job id}`` of the runs submitted (none when every run is finished).
    """
    from openmle.bench._runner import BenchRun

    run = BenchRun.open(path)
    busy = {
        (r.competition_id, r.seed, r.arm)
        for r in launch_status(run.path)
        if r.state in {"running", "queued"}
    }
    todo = [
        s
        for s in run.status()
        if s.state != "done" and (s.competition_id, s.seed, s.arm) not in busy
    ]
    if not todo:
        return {}
    for s in todo:  # a new task writes its own state
        (run.path / LAUNCH / "state" / f"{_ref(s.competition_id, s.seed, s.arm)}.json").unlink(
            missing_ok=True
        )
    bench_dir = str(run.path.resolve())
    jobs = executor.map_array(
        run_array_task,
        [bench_dir] * len(todo),
        [s.competition_id for s in todo],
        [s.seed for s in todo],
        [s.arm for s in todo],
        [models] * len(todo),
        [sandbox] * len(todo),
    )
    ids = {
        _ref(s.competition_id, s.seed, s.arm): str(j.job_id)
        for s, j in zip(todo, jobs, strict=True)
    }
    launch = run.path / LAUNCH / "launch.json"
    previous: dict[str, Any] = {}
    if launch.is_file():
        old = read_back_json(launch, max_bytes=_LAUNCH_MAX_BYTES)
        previous = dict(old.get("jobs", {})) if isinstance(old, dict) else {}
    _write(
        launch,
        {
            "launcher": launcher,
            "host": socket.gethostname(),
            "submitted_at": _now(),
            "jobs": {**previous, **ids},
        },
    )
    return ids


def run_array_task(
    bench_dir: str,
    cid: str,
    seed: int,
    arm: str,
    models: Callable[[], tuple[Any, Any]],
    sandbox: str | None = None,
) -> str:
    """One task of the array: finish run (``cid``, ``seed``, ``arm``) of the bench, with a
    heartbeat in ``launch/state/<ref>.json``. Returns the run's state at the end.
    """
    from openmle.bench._runner import arun_bench, bench_sandbox, bench_status

    ref = _ref(cid, seed, arm)
    state_file = Path(bench_dir) / LAUNCH / "state" / f"{ref}.json"
    array = os.environ.get("SLURM_ARRAY_JOB_ID", "")
    job_id = f"{array}_{os.environ.get('SLURM_ARRAY_TASK_ID', '')}" if array else ""
    me = {"host": socket.gethostname(), "pid": os.getpid(), "started_at": _now(), "job_id": job_id}
    stop = threading.Event()

    def beat() -> None:
        while True:
            _write(state_file, {**me, "state": "running", "beat": time.time()})
            if stop.wait(HEARTBEAT_S):
                return

    t = threading.Thread(target=beat, daemon=True)
    t.start()
    end = "failed"
    try:
        model, summary = models()
        box = None if sandbox is None else bench_sandbox(sandbox)
        anyio.run(
            lambda: arun_bench(
                bench_dir,
                model=model,
                summary_model=summary,
                sandbox=box,
                only=[(cid, seed, arm)],
                emit=print,
            )
        )
        states = {(s.competition_id, s.seed, s.arm): s.state for s in bench_status(bench_dir)}
        end = "finished" if states.get((cid, seed, arm)) == "done" else "failed"
        return end
    finally:
        stop.set()
        t.join()
        _write(state_file, {**me, "state": end, "beat": time.time(), "ended_at": _now()})


@final
@frozen(kw_only=True)
class LaunchStatus:
    """Where one run of a launched bench stands (see :func:`launch_status`).

    Args:
        competition_id, seed, arm: the run.
        state: ``finished``, ``running``, ``lost``, ``queued``, ``failed``, ``interrupted`` or
            ``pending``.
        job_id: the launcher's job id ("" when not submitted).
        host: the node the task ran on ("" when not started).
    """

    competition_id: str
    seed: int
    arm: str
    state: str
    job_id: str = ""
    host: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "competition_id": self.competition_id,
            "seed": self.seed,
            "arm": self.arm,
            "state": self.state,
            "job_id": self.job_id,
            "host": self.host,
        }


def _read_state(path: Path, max_bytes: int = _STATE_MAX_BYTES) -> dict[str, Any] | None:
    """The JSON object at ``path`` (at most ``max_bytes``), or None when missing or not one."""
    try:
        data = read_back_json(path, max_bytes=max_bytes)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _slurm_queue(ids: Iterable[str]) -> set[str] | None:
    """The job ids of ``ids`` Slurm still has (pending or running), None when ``squeue``
    does not answer.
    """
    wanted = sorted({i for i in ids if re.fullmatch(r"\d+(_\d+)?", i)})
    if not wanted:
        return set()
    squeue = shutil.which("squeue")
    if squeue is None:
        return None
    arrays = ",".join(sorted({w.split("_")[0] for w in wanted}))
    try:
        out = subprocess.run(
            [squeue, "-h", "-r", "-o", "%i", "-j", arrays],
            capture_output=True, text=True, timeout=30, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        # squeue refuses ids it no longer knows: every one of them has left the queue
        return set() if "Invalid job id" in out.stderr else None
    return {ln.strip() for ln in out.stdout.splitlines() if ln.strip()}


def launch_status(path: str | os.PathLike[str], *, now: float | None = None) -> list[LaunchStatus]:
    """Where every run of the bench at ``path`` stands.

    ``finished``; ``running`` (its
    task's heartbeat is fresh); ``lost`` (its task started but is gone without a result: its
    process on this host is dead, Slurm no longer lists it, or its heartbeat is older than
    :data:`LOST_AFTER_S`); ``failed`` (its task ended without a result); ``queued`` (submitted,
    not started); ``stopped`` (submitted, gone before it started); ``interrupted`` /
    ``pending`` (never submitted). ``bench resume --launcher`` submits all but the finished,
    running and queued ones. Everything read back is untrusted (bounded reads; a malformed
    state file counts as absent).

    Raises:
        InvalidArgument: not a bench directory.
    """
    from openmle.bench._runner import BenchRun

    run = BenchRun.open(path)
    jobs: dict[str, Any] = {}
    launch = _read_state(run.path / LAUNCH / "launch.json", _LAUNCH_MAX_BYTES) or {}
    if isinstance(launch.get("jobs"), dict):
        jobs = launch["jobs"]
    launcher = launch.get("launcher")
    here = socket.gethostname()
    t = time.time() if now is None else now
    rows = []
    for s in run.status():
        ref = _ref(s.competition_id, s.seed, s.arm)
        job = str(jobs.get(ref, ""))[:64]
        st = _read_state(run.path / LAUNCH / "state" / f"{ref}.json") or {}
        rows.append((s, ref, job, st))
    queue = (
        _slurm_queue(job for s, _, job, st in rows if job and s.state != "done")
        if launcher == "slurm"
        else None
    )
    out = []
    for s, _, job, st in rows:
        host = str(st.get("host", ""))[:128]
        beat = st.get("beat")
        if s.state == "done":
            state = "finished"
        elif st.get("state") == "running" and isinstance(beat, int | float):
            gone = (host == here and not pid_alive(st.get("pid"))) or (
                queue is not None and job not in queue
            )
            state = "lost" if gone or t - float(beat) > LOST_AFTER_S else "running"
        elif st.get("state") in {"failed", "finished"}:
            state = "failed"
        elif job:
            gone = (queue is not None and job not in queue) or (
                launcher == "local"
                and launch.get("host") == here
                and job.isdigit()
                and not pid_alive(int(job))
            )
            state = "stopped" if gone else "queued"
        else:
            state = s.state
        out.append(
            LaunchStatus(
                competition_id=s.competition_id,
                seed=s.seed,
                arm=s.arm,
                state=state,
                job_id=job,
                host=host,
            )
        )
    return out


def counts(rows: Iterable[LaunchStatus]) -> dict[str, int]:
    """Runs per state."""
    out: dict[str, int] = {}
    for r in rows:
        out[r.state] = out.get(r.state, 0) + 1
    return out
