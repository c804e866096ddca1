"""LocalSandbox runs real programs in real isolation and classifies every way they end."""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable
from concurrent.futures import wait as futures_wait
from pathlib import Path
from typing import Literal

import anyio
import attrs
import pytest
from tests._files import alive
from tests._sandboxes import local_in_each_mode, mode_available, prepared_local

from openmle import Job, Outcome, Resources, RunResult, Split
from openmle.backends import LocalSandbox
from openmle.backends._isolation import (
    landlock_abi,
    live_pids_with_env,
    mounts_under,
    safe_rmtree,
)
from openmle.errors import InvalidArgument, InvalidArgumentType, SandboxError, SandboxUnavailable
from openmle.testing import TOY_SOLUTION, ToyTask

#: The ``closing`` fixture: registers a sandbox to close at the test's end and returns it.
Closing = Callable[[LocalSandbox], LocalSandbox]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:LocalSandbox is using its weaker:RuntimeWarning"),
]


@pytest.fixture
def toy(tmp_path: Path) -> ToyTask:
    """A fresh toy task under the test's temp dir."""
    return ToyTask.create(tmp_path / "toy")


@pytest.fixture(params=["bwrap", "landlock"])
async def sandbox(request: pytest.FixtureRequest, toy: ToyTask) -> AsyncIterator[LocalSandbox]:
    """A LocalSandbox in each isolation mode (skipped where the mode is unavailable)."""
    async with prepared_local(
        toy,
        request.param,
        warnings_are_errors=True,
        max_file_mb=64,
        memory_mb=1024,
        kill_grace_s=1.0,
    ) as sb:
        yield sb


@pytest.fixture
async def closing() -> AsyncIterator[Closing]:
    """``closing(LocalSandbox(...))``: the sandbox is closed when the test ends, so its waiting
    spares (launchers, cgroups, run directories) go then, not at a later test's garbage
    collection (where ``test_runs_leave_no_cgroups_or_directories`` saw them vanish)."""
    made: list[LocalSandbox] = []

    def register(sb: LocalSandbox) -> LocalSandbox:
        made.append(sb)
        return sb

    yield register
    with anyio.CancelScope(shield=True):
        for sb in made:
            await sb.aclose()


async def test_solution_succeeds_with_score_and_artifacts(sandbox: LocalSandbox) -> None:
    """The toy solution scores 1.0 on both splits; output, runtime and artifacts are recorded
    (a ``main.py`` the program writes is not an artifact, as in every shipped sandbox)."""
    for split in Split:
        code = TOY_SOLUTION + "\nopen('model.txt', 'w').write('w')\nopen('main.py', 'w')\n"
        r = await sandbox.run(Job(code=code, task="toy", split=split, timeout_s=60))
        assert r.outcome is Outcome.SUCCESS, r
        assert r.score == 1.0 and r.split is split
        assert r.printed_score == 1.0
        assert "Final Validation Score" in r.logs
        assert r.artifacts == ("model.txt", "submission.csv")
        assert r.runtime_s > 0 and r.queue_s >= 0


@pytest.mark.parametrize(
    ("code", "outcome", "signature"),
    [
        ("raise KeyError('column 7')", Outcome.RUNTIME_ERROR, "KeyError: '<str>'"),
        ("import sys; sys.exit(3)", Outcome.RUNTIME_ERROR, "exit_code_3"),
        ("print('no file')", Outcome.MISSING_SUBMISSION, "submission_missing"),
        ("open('submission.csv', 'w').write('x\\n1\\n')", Outcome.INVALID_SUBMISSION, None),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", Outcome.RUNTIME_ERROR, None),
    ],
)
async def test_failures_are_classified(
    sandbox: LocalSandbox, code: str, outcome: Outcome, signature: str | None
) -> None:
    """Crashes, exits, missing and invalid submissions come back as outcomes, never raises."""
    r = await sandbox.run(Job(code=code, task="toy", timeout_s=60))
    assert r.outcome is outcome, r
    assert r.score is None
    if signature is not None:
        assert r.error_signature == signature
    assert r.error_signature


async def test_segfault_detail_names_the_signal(sandbox: LocalSandbox) -> None:
    """A program killed by a signal says which one."""
    r = await sandbox.run(
        Job(code="import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", task="toy")
    )
    assert r.outcome is Outcome.RUNTIME_ERROR
    assert "SIGSEGV" in r.detail


async def _run_past_timeout(sandbox: LocalSandbox, job: Job, printed: str) -> RunResult:
    """Run ``job`` (a program that prints ``printed``, then sleeps past its timeout) with its
    short timeout, then with longer ones while ``printed`` is missing from the output.

    The timeout covers starting the sandbox and Python too, which a loaded machine may not
    do within a short one: the test is about what happens once the program ran (its output
    kept, its processes killed), never about how fast the machine starts it. A sandbox that
    drops the output fails after the longest try.
    """
    r: RunResult | None = None
    for factor in (1, 5, 20):
        with anyio.fail_after(60 + 2 * job.timeout_s * factor):
            r = await sandbox.run(attrs.evolve(job, timeout_s=job.timeout_s * factor))
        if printed in r.logs:
            break
    assert r is not None
    return r


def _probe(name: str) -> str:
    """A ``PROBE`` value no other run on this host carries: :func:`live_pids_with_env` scans
    every process, and the same test in the other isolation mode may run at the same time on
    another worker (seen: the Landlock run's live program counted as the bwrap run's survivor)."""
    return f"{name}-{uuid.uuid4().hex}"


async def test_timeout_kills_tree_and_keeps_output(sandbox: LocalSandbox) -> None:
    """A program past its timeout is TIMEOUT; its children die too; output so far is kept."""
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        "print('working', flush=True)\n"
        "time.sleep(300)\n"
    )
    probe = _probe("timeout-tree")
    job = Job(code=code, task="toy", timeout_s=1.5, env={"PROBE": probe})
    r = await _run_past_timeout(sandbox, job, "working")
    assert r.outcome is Outcome.TIMEOUT, r
    assert r.error_signature == "timeout"
    assert "working" in r.logs
    assert not live_pids_with_env("PROBE", probe)


async def test_landlock_timeout_kills_children_the_cgroup_does_not_list(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landlock mode has no PID namespace: once the cgroup lists nothing, the run's marker is
    scanned for too, so a child the cgroup did not list (here: the member list reads empty)
    dies with its timed-out parent."""
    from openmle.backends import _isolation

    monkeypatch.setattr(_isolation.Cgroup, "pids", lambda self: set())
    sleeper = "import time; time.sleep(300)"
    orphan = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleeper!r}])"
    code = (  # in a session of its own, and its parent gone: no descendant, no process group
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {orphan!r}], start_new_session=True)\n"
        "print('working', flush=True)\n"
        "time.sleep(300)\n"
    )
    probe = _probe("unlisted-child")
    job = Job(code=code, task="toy", timeout_s=1.5, env={"PROBE": probe})
    async with prepared_local(toy, "landlock", memory_mb=1024, kill_grace_s=1.0) as sb:
        r = await _run_past_timeout(sb, job, "working")
    assert r.outcome is Outcome.TIMEOUT, r
    assert not live_pids_with_env("PROBE", probe)


async def test_env_and_data_dir_reach_program(sandbox: LocalSandbox, toy: ToyTask) -> None:
    """job.env reaches the program; DATA_DIR lists the split's public files, not the host env."""
    code = (
        "import os\n"
        "print('FOO=' + os.environ['FOO'])\n"
        "print('FILES=' + ','.join(sorted(os.listdir(os.environ['DATA_DIR']))))\n"
        "print('SECRET=' + os.environ.get('HOST_SECRET', 'absent'))\n"
    )
    os.environ["HOST_SECRET"] = "s3cr3t"
    try:
        r = await sandbox.run(Job(code=code, task="toy", env={"FOO": "bar"}))
    finally:
        del os.environ["HOST_SECRET"]
    assert "FOO=bar" in r.logs
    assert "FILES=description.txt,sample_submission.csv,test.csv,train.csv" in r.logs
    assert "SECRET=absent" in r.logs


async def test_symlinked_submission_is_not_followed(sandbox: LocalSandbox, toy: ToyTask) -> None:
    """A submission.csv symlinked to the answers is refused, never graded against itself."""
    answers = toy.root / "valid" / "private" / "answers.csv"
    code = f"import os; os.symlink({str(answers)!r}, 'submission.csv')"
    r = await sandbox.run(Job(code=code, task="toy"))
    assert r.outcome is Outcome.INVALID_SUBMISSION
    assert "regular file" in r.detail
    assert r.score is None


async def test_concurrency_limit_queues_jobs(toy: ToyTask, closing: Closing) -> None:
    """With max_concurrency=1 two jobs run one after the other; the second reports queue time."""
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy}), max_concurrency=1))
    await sb.prepare()
    code = "import time; time.sleep(0.5); print('x')"
    results = []

    async def one() -> None:
        results.append(await sb.run(Job(code=code, task="toy")))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    queued = max(r.queue_s for r in results)
    assert queued >= min(r.runtime_s for r in results) * 0.9
    assert all(r.outcome is Outcome.MISSING_SUBMISSION for r in results)


async def test_cancellation_cleans_up(toy: ToyTask, tmp_path: Path) -> None:
    """Cancelling run() kills the program, removes the run directory and propagates."""
    work = tmp_path / "work"
    work.mkdir()
    sb = LocalSandbox(ToyTask.resolver({"toy": toy}), workdir=work)
    await sb.prepare()
    probe = _probe("cancel")
    job = Job(code="import time; time.sleep(300)", task="toy", env={"PROBE": probe})
    with anyio.fail_after(30), anyio.move_on_after(1.0):
        await sb.run(job)
    assert not live_pids_with_env("PROBE", probe)
    # What is left is the next runs' spares (made when this run ended), nothing else.
    await anyio.to_thread.run_sync(lambda: futures_wait(sb._making))
    made = [f.result() for f in sb._making]
    spares = {s.run_dir for s in [*sb._spares, *made] if s is not None}
    assert set(work.iterdir()) <= spares
    await sb.aclose()
    assert list(work.iterdir()) == []


async def test_closed_sandbox_refuses_jobs(toy: ToyTask) -> None:
    """run() after aclose() raises SandboxError; aclose is idempotent."""
    sb = LocalSandbox(ToyTask.resolver({"toy": toy}))
    await sb.aclose()
    await sb.aclose()
    with pytest.raises(SandboxError, match="closed"):
        await sb.run(Job(code="pass", task="toy"))


async def test_unknown_task_and_impossible_gpu_request(toy: ToyTask, closing: Closing) -> None:
    """An unknown task is the resolver's InvalidArgument; an unservable GPU ask is INFRA_ERROR."""
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy}), gpus=0))
    with pytest.raises(InvalidArgument, match="Unknown task"):
        await sb.run(Job(code="pass", task="nope"))
    r = await sb.run(Job(code="pass", task="toy", resources=Resources(gpus=1)))
    assert r.outcome is Outcome.INFRA_ERROR
    assert "gpus=1" in r.detail


def test_bad_arguments_name_the_field() -> None:
    """Constructor validation names the offending field."""
    with pytest.raises(InvalidArgument, match="max_concurrency"):
        LocalSandbox(max_concurrency=0)
    with pytest.raises(InvalidArgument, match="isolation"):
        LocalSandbox(isolation="docker")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="kill_grace_s"):
        LocalSandbox(kill_grace_s=float("nan"))


async def test_memory_limit_without_cgroups_uses_rlimit(toy: ToyTask, closing: Closing) -> None:
    """Where cgroups are unavailable, RLIMIT_DATA stops a memory bomb and the run is OOM."""
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy}), memory_mb=256))
    await sb.prepare()
    sb._cgroups = False  # what a host without writable cgroups looks like
    code = "blocks = [b'x' * (64 << 20) for _ in range(32)]\nprint('ALLOCATED')"
    r = await sb.run(Job(code=code, task="toy"))
    assert r.outcome is Outcome.OOM, r
    assert "ALLOCATED" not in r.logs
    assert r.error_signature == "out_of_memory"


async def test_cgroup_oom_kill_is_oom(sandbox: LocalSandbox) -> None:
    """A memory bomb under the job's memory limit ends OOM with an out-of-memory detail."""
    code = "blocks = [b'x' * (64 << 20) for _ in range(32)]\nprint('ALLOCATED')"
    r = await sandbox.run(Job(code=code, task="toy", resources=Resources(memory_mb=256)))
    assert r.outcome is Outcome.OOM, r
    assert "memory" in r.detail


async def test_leftovers_are_killed_without_cgroups(sandbox: LocalSandbox) -> None:
    """Without cgroups, escaped children (new session, double fork) are still found and killed."""
    sandbox._cgroups = False  # what a host without writable cgroups looks like
    code = (
        "import os, shutil, subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],\n"
        "                 start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(300)\n"
        "    os._exit(0)\n"
        "print('parent done')\n"
    )
    for timeout_s, outcome in ((120.0, Outcome.MISSING_SUBMISSION), (1.0, Outcome.TIMEOUT)):
        env = {"PROBE": _probe(f"nocg-{timeout_s}")}
        if outcome is Outcome.MISSING_SUBMISSION:
            with anyio.fail_after(180):
                r = await sandbox.run(Job(code=code, task="toy", timeout_s=timeout_s, env=env))
        else:  # killed past its timeout once it has forked (longer tries on a slow start)
            job = Job(code=code + "time.sleep(300)\n", task="toy", timeout_s=timeout_s, env=env)
            r = await _run_past_timeout(sandbox, job, "parent done")
        assert r.outcome is outcome, r
        for _ in range(50):
            if not live_pids_with_env("PROBE", env["PROBE"]):
                break
            await anyio.sleep(0.1)
        assert not live_pids_with_env("PROBE", env["PROBE"])


async def test_gpu_leases_compose_with_inherited_mask(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    """Job GPU 1 under CUDA_VISIBLE_DEVICES=3,5 sees device 5; jobs without GPUs see none;
    two jobs wanting the same GPU run one after the other."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy})))
    code = "import os, time; print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES']); time.sleep(0.3)"
    r = await sb.run(Job(code=code, task="toy", resources=Resources(gpu_ids=(1,))))
    assert "CVD=5\n" in r.logs
    r = await sb.run(Job(code=code, task="toy"))
    assert "CVD=\n" in r.logs
    results: list[RunResult] = []

    async def one() -> None:
        results.append(await sb.run(Job(code=code, task="toy", resources=Resources(gpus=2))))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert all("CVD=3,5\n" in x.logs for x in results)
    assert max(x.queue_s for x in results) >= 0.25  # the second waited for the lease


async def test_auto_falls_back_to_landlock_with_one_warning(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    """Without bubblewrap, "auto" warns once and runs in Landlock mode; "bwrap" refuses."""
    from openmle.backends import _local

    if landlock_abi() == 0:
        pytest.skip("Landlock is not supported by this kernel")
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(_local, "_warned", set())
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy})))
    with pytest.warns(RuntimeWarning, match="weaker Landlock isolation"):
        assert await sb.prepare() == "landlock"
    again = closing(LocalSandbox(ToyTask.resolver({"toy": toy})))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert await again.prepare() == "landlock"  # no second warning
    r = await again.run(Job(code=TOY_SOLUTION, task="toy"))
    assert r.outcome is Outcome.SUCCESS and r.score == 1.0
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        await LocalSandbox(ToyTask.resolver({"toy": toy}), isolation="bwrap").prepare()
    monkeypatch.setattr("openmle.backends._isolation.landlock_abi", lambda: 0)
    with pytest.raises(SandboxUnavailable, match="Install bubblewrap"):
        await LocalSandbox(ToyTask.resolver({"toy": toy})).prepare()


async def test_default_resolver_is_openmle_gym(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    """Without a resolver, jobs resolve through openmle.gym.resolve_task (looked up at run time)."""
    import openmle.gym

    monkeypatch.delattr(openmle.gym, "resolve_task", raising=False)
    sb = closing(LocalSandbox())
    with pytest.raises(SandboxError, match="resolver="):
        await sb.run(Job(code="pass", task="toy"))
    seen: list[str] = []

    def resolve(ref: str) -> ToyTask:
        seen.append(ref)
        return toy

    monkeypatch.setattr(openmle.gym, "resolve_task", resolve, raising=False)
    r = await sb.run(Job(code=TOY_SOLUTION, task="my-task"))
    assert seen == ["my-task"] and r.outcome is Outcome.SUCCESS


async def test_run_rejects_non_jobs(toy: ToyTask, closing: Closing) -> None:
    """run() takes an openmle.Job."""
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy})))
    with pytest.raises(InvalidArgumentType, match="Job"):
        await sb.run({"code": "pass"})  # type: ignore[arg-type]


async def test_everyday_library_calls_work_inside(sandbox: LocalSandbox) -> None:
    """shutil.copy (chmod), multiprocessing, asyncio and temp files work under isolation."""
    code = (
        "import asyncio, multiprocessing as mp, os, shutil, tempfile\n"
        "shutil.copy(os.path.join(os.environ['DATA_DIR'], 'sample_submission.csv'),\n"
        "            'submission.csv')\n"
        "with mp.Pool(2) as pool:\n"
        "    print('pool', pool.map(abs, [-1, -2]))\n"
        "print(asyncio.run(asyncio.sleep(0, 'asyncio ok')))\n"
        "with tempfile.NamedTemporaryFile() as f:\n"
        "    f.write(b'x')\n"
        "print('cpus', os.environ['OMP_NUM_THREADS'])\n"
    )
    r = await sandbox.run(Job(code=code, task="toy", resources=Resources(cpus=2)))
    assert r.outcome is Outcome.SUCCESS, r
    assert "pool [1, 2]" in r.logs and "asyncio ok" in r.logs and "cpus 2" in r.logs


async def test_cpu_quota_puts_runs_in_a_cpu_cgroup(
    sandbox: LocalSandbox, toy: ToyTask, closing: Closing
) -> None:
    """With cpu_quota=True a run also joins a CPU cgroup (where cgroups are available)."""
    if not sandbox._cgroups:
        pytest.skip("cgroups are not writable here")
    mode = sandbox.isolation_mode
    assert mode is not None
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy}), isolation=mode, cpu_quota=True))
    code = "print(open('/proc/self/cgroup').read())"
    r = await sb.run(Job(code=code, task="toy", resources=Resources(cpus=0.5)))
    assert r.outcome is Outcome.MISSING_SUBMISSION, r
    cpu_lines = [line for line in r.logs.splitlines() if ":cpu:" in line or ":cpu," in line]
    if mode == "landlock":  # bwrap's cgroup namespace shows "/" instead of the path
        assert cpu_lines and all("openmle-" in line for line in cpu_lines), r.logs


@pytest.mark.slow
async def test_hostile_neighbours_do_not_disturb_honest_runs(sandbox: LocalSandbox) -> None:
    """A fork bomb, a memory bomb and a stdout flood running alongside leave honest runs intact."""
    from openmle.testing import HOSTILE_PROGRAMS

    header = (
        "PRIVATE_FILES = []\nPRIVATE_DIRS = []\nTASK_ROOT = '/nonexistent'\nSENTINELS = []\n"
        "PORT = 1\nHOST_SECRET = 'x'\nHOST_PIDS = []\nHOST_UNIX_SOCKET = '/nonexistent'\n"
    )
    by_name = {p.name: p for p in HOSTILE_PROGRAMS}
    jobs = [("solution", Job(code=TOY_SOLUTION, task="toy", timeout_s=120))] * 2
    for name in ("fork_bomb", "memory_bomb", "stdout_flood"):
        p = by_name[name]
        job = Job(
            code=header + p.body,
            task="toy",
            timeout_s=p.timeout_s,
            resources=Resources(memory_mb=p.memory_mb),
        )
        jobs.append((name, job))
    results: dict[int, tuple[str, RunResult]] = {}

    async def one(i: int, name: str, job: Job) -> None:
        results[i] = (name, await sandbox.run(job))

    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            for i, (name, job) in enumerate(jobs):
                tg.start_soon(one, i, name, job)
    for name, r in results.values():
        if name == "solution":
            assert r.outcome is Outcome.SUCCESS and r.score == 1.0, r
        else:
            assert r.outcome in by_name[name].expected, (name, r)


async def test_cgroups_can_be_turned_off(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    """cgroups=False runs without per-run cgroups; rlimits still stop a memory bomb; root is
    warned that fork bombs then go unbounded."""
    monkeypatch.setattr("openmle.backends._local._warned", set())
    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy}), cgroups=False, memory_mb=256))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await sb.prepare()
    warned = any("RLIMIT_NPROC does not bind root" in str(w.message) for w in caught)
    assert warned == (os.geteuid() == 0)
    assert not sb._cgroups
    r = await sb.run(Job(code=TOY_SOLUTION, task="toy"))
    assert r.outcome is Outcome.SUCCESS
    bomb = "blocks = [b'x' * (64 << 20) for _ in range(32)]"
    assert (await sb.run(Job(code=bomb, task="toy"))).outcome is Outcome.OOM


async def test_runs_leave_no_cgroups_or_directories(toy: ToyTask, tmp_path: Path) -> None:
    """After runs of every kind and aclose(), no run cgroup, run directory or data view is left."""
    import glob

    work = tmp_path / "work"
    work.mkdir()
    patterns = [f"/sys/fs/cgroup/{'*/' * depth}openmle-{os.getpid()}-*" for depth in range(5)]

    def ours() -> set[str]:
        return {path for pattern in patterns for path in glob.glob(pattern)}

    gc.collect()  # an unclosed sandbox of an earlier test drops its spares' cgroups now
    before = ours()
    for _mode, sb in local_in_each_mode(toy, workdir=work):
        for code in (TOY_SOLUTION, "import time; time.sleep(60)", "raise SystemExit(3)"):
            await sb.run(Job(code=code, task="toy", timeout_s=1.0))
        await sb.aclose()
    assert ours() - before == set()  # none of this test's (an earlier one's may have gone)
    assert list(work.iterdir()) == []


def _forged(job: Job, env: dict[str, str]) -> Job:
    """``job`` with an environment ``Job`` itself would refuse (a caller that bypasses it)."""
    from types import MappingProxyType

    object.__setattr__(job, "env", MappingProxyType(env))
    return job


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a shared object")
async def test_loader_variables_never_run_outside_the_isolation(
    sandbox: LocalSandbox, tmp_path: Path
) -> None:
    """An LD_PRELOAD object would run as the host's user before any isolation: Job refuses
    it, and the sandbox refuses a forged job too, so the object's constructor never runs."""
    flag = tmp_path / "preloaded"
    src = tmp_path / "evil.c"
    src.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void evil(void) {\n"
        f'  FILE *f = fopen("{flag}", "a"); if (f) {{ fputs("ran\\n", f); fclose(f); }}\n'
        "}\n"
    )
    lib = tmp_path / "evil.so"
    await anyio.run_process(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)])
    with pytest.raises(InvalidArgument, match=r"LD_PRELOAD.*loader"):
        Job(code="print(1)", task="toy", env={"LD_PRELOAD": str(lib)})
    job = _forged(Job(code="print('ran')", task="toy"), {"LD_PRELOAD": str(lib)})
    r = await sandbox.run(job)
    assert r.outcome is Outcome.INFRA_ERROR
    assert "LD_PRELOAD" in r.detail
    assert not flag.exists()


async def test_launch_chain_runs_with_a_fixed_environment(sandbox: LocalSandbox) -> None:
    """job.env reaches the program's own process only, never the launcher or bwrap."""
    probe = f"probe-{os.getpid()}-{id(sandbox)}"
    code = "import time\nprint('ready', flush=True)\ntime.sleep(4)\n"
    carriers: list[str] = []
    finished = anyio.Event()

    def scan() -> None:
        for pid in live_pids_with_env("OPENMLE_PROBE_LAUNCH", probe):
            try:  # readlink fails once the process is gone (realpath would return the link)
                exe = os.readlink(f"/proc/{pid}/exe")
            except OSError:
                continue
            carriers.append(os.path.realpath(exe))

    async def watch() -> None:  # the whole run long, however slowly the machine starts it
        while not finished.is_set():
            await anyio.to_thread.run_sync(scan)
            await anyio.sleep(0.1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        try:
            r = await sandbox.run(
                Job(code=code, task="toy", timeout_s=120, env={"OPENMLE_PROBE_LAUNCH": probe})
            )
        finally:
            finished.set()
    assert r.outcome is Outcome.MISSING_SUBMISSION
    assert carriers, "the program itself must carry job.env"
    python = await anyio.to_thread.run_sync(os.path.realpath, sys.executable)
    assert {c for c in carriers if c != python} == set()


async def test_lone_surrogate_in_code_is_an_outcome(sandbox: LocalSandbox) -> None:
    """Source that cannot be written as UTF-8 ends as a runtime error, never an exception."""
    r = await sandbox.run(Job(code="print('\ud800')", task="toy"))
    assert r.outcome is Outcome.RUNTIME_ERROR
    assert "not valid UTF-8" in r.detail


@pytest.mark.parametrize("cgroups", [True, False])
@pytest.mark.filterwarnings("ignore:LocalSandbox has no cgroups:RuntimeWarning")
async def test_quota_watchdog_kills_where_no_tmpfs_can_be_mounted(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch, cgroups: bool
) -> None:
    """Without the right to mount (not root), a watchdog kills a run past its quota; in the
    Landlock mode without cgroups, where the run's subreaper is the sandbox's child, it kills
    what runs under the subreaper, which then exits by itself."""
    from openmle.backends import _isolation

    monkeypatch.setattr(_isolation, "mount_quota_tmpfs", lambda *a, **k: False)
    made = local_in_each_mode(toy, max_workspace_mb=64, max_workspace_files=500, cgroups=cgroups)
    for mode, sb in made:
        code = (
            "import os, time\n"
            "for i in range(5000):\n"
            "    open(f'f{i}', 'w').close()\n"
            "time.sleep(600)\n"
            "print('SURVIVED')\n"
        )
        # Sleeping past the timeout: a watchdog that missed the quota ends as TIMEOUT, never
        # as a race between the watchdog and the program's own end.
        r = await sb.run(Job(code=code, task="toy", timeout_s=120))
        assert r.outcome is Outcome.RUNTIME_ERROR, (mode, r.detail)
        assert "workspace quota" in r.detail and "files" in r.detail
        assert "SURVIVED" not in r.logs
        await sb.aclose()


async def test_kept_workspace_is_copied_out_and_no_mount_is_left(
    toy: ToyTask, tmp_path: Path
) -> None:
    """keep_workspaces keeps workspace/ and program/; no quota tmpfs stays mounted."""
    work = tmp_path / "work"
    work.mkdir()
    for _mode, sb in local_in_each_mode(toy, workdir=work, keep_workspaces=True):
        r = await sb.run(Job(code="open('kept.txt', 'w').write('k')", task="toy"))
        assert r.artifacts == ("kept.txt",)
        await sb.aclose()
    for run_dir in work.iterdir():
        assert (run_dir / "workspace" / "kept.txt").read_text() == "k"
        assert (run_dir / "program" / "main.py").exists()
        assert not (run_dir / "box").exists()
    assert str(work) not in await anyio.Path("/proc/self/mountinfo").read_text()


async def test_kept_workspace_has_no_set_user_id_files(toy: ToyTask, tmp_path: Path) -> None:
    """A program running as root leaves a set-user-ID copy of a shell: the kept copy has no
    set-user-ID or set-group-ID bit (it would be a root shell on the host)."""
    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import os, shutil\n"
        "os.makedirs('deep/er')\n"
        "for path in ('rootshell', 'deep/er/rootshell'):\n"
        "    shutil.copy('/bin/sh', path)\n"
        "    os.chmod(path, 0o6755)\n"
        "os.chmod('deep', 0o2755)\n"
    )
    for _mode, sb in local_in_each_mode(toy, workdir=work, keep_workspaces=True):
        r = await sb.run(Job(code=code, task="toy"))
        assert r.outcome is Outcome.MISSING_SUBMISSION, r.logs
        await sb.aclose()
    kept = [p for run_dir in work.iterdir() for p in (run_dir / "workspace").rglob("*")]
    assert len(kept) >= 3
    assert not [p for p in kept if p.lstat().st_mode & 0o6000]


def _owner_driver(
    toy: ToyTask, work: Path, code: str, probe: str, token: str, *, cgroups: bool = True
) -> str:
    """A Python program (for ``python -c``) that runs ``code`` in a Landlock LocalSandbox of
    ``toy`` (workdir ``work``, cgroups as ``cgroups`` says) with ``probe=token`` in the job's
    environment: the sandbox's owner process, for the kill -9 tests."""
    import textwrap

    cgroups_arg = "" if cgroups else "cgroups=False, "
    return textwrap.dedent(
        f"""
        import anyio, warnings
        from pathlib import Path
        from openmle import Job
        from openmle.backends import LocalSandbox
        from openmle.testing import ToyTask
        warnings.simplefilter("ignore")
        toy = ToyTask(root=Path({str(toy.root)!r}), name="toy")
        async def main():
            sb = LocalSandbox(ToyTask.resolver({{"toy": toy}}), isolation="landlock",
                              {cgroups_arg}workdir=Path({str(work)!r}))
            await sb.run(Job(code={code!r}, task="toy", timeout_s=300,
                             env={{{probe!r}: {token!r}}}))
        anyio.run(main)
        """
    )


async def test_landlock_program_dies_with_its_owner(toy: ToyTask, tmp_path: Path) -> None:
    """kill -9 of the process running the sandbox kills the program (parent-death signal)."""
    if mode_available("landlock") is not None:
        pytest.skip("Landlock unavailable")

    token = f"pdeath-{os.getpid()}-{id(tmp_path)}"
    work = tmp_path / "work"
    work.mkdir()
    driver = _owner_driver(toy, work, "import time; time.sleep(300)", "OPENMLE_PDEATH_PROBE", token)
    owner = await anyio.open_process([sys.executable, "-c", driver], env=os.environ.copy())
    async with owner:
        try:
            pids: set[int] = set()
            for _ in range(300):
                pids = await anyio.to_thread.run_sync(
                    live_pids_with_env, "OPENMLE_PDEATH_PROBE", token
                )
                # The program itself (past the launcher's exec), not the launcher.
                ran = [await anyio.to_thread.run_sync(_runs_main, p) for p in pids]
                if pids and all(ran):
                    break
                await anyio.sleep(0.1)
            else:
                pytest.fail("the program did not start")
            (pid,) = pids
            owner.kill()
            await owner.wait()
            for _ in range(100):
                if not await anyio.to_thread.run_sync(alive, pid):
                    break
                await anyio.sleep(0.1)
            else:
                os.kill(pid, 9)
                pytest.fail("the program outlived the process that ran the sandbox")
        finally:
            if owner.returncode is None:
                owner.kill()
            # What the killed owner could not clean (a job service's start-up sweep does it).
            await anyio.to_thread.run_sync(safe_rmtree, work)
    assert not await anyio.to_thread.run_sync(mounts_under, work)


def _runs_main(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) > 1 and argv[1].endswith(b"main.py")


async def test_bwrap_launcher_sets_the_limits_without_prlimit(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No prlimit on the host is no matter: the spare launcher joined the cgroup and sets the
    rlimits itself before it execs bwrap; the solution still scores and a fork bomb is still
    bounded."""
    why = mode_available("bwrap")
    if why is not None:
        pytest.skip(f"bwrap unavailable: {why}")
    real = shutil.which
    monkeypatch.setattr("shutil.which", lambda n: None if n == "prlimit" else real(n))
    async with LocalSandbox(
        ToyTask.resolver({"toy": toy}), isolation="bwrap", max_processes=16, max_file_mb=1
    ) as sb:
        r = await sb.run(Job(code=TOY_SOLUTION, task="toy", timeout_s=60))
        assert r.outcome is Outcome.SUCCESS and r.score == 1.0, r
        code = (
            "import resource, os\n"
            "print('fsize', resource.getrlimit(resource.RLIMIT_FSIZE)[0])\n"
            "n = 0\n"
            "try:\n"
            "    for _ in range(64):\n"
            "        if os.fork() == 0:\n"
            "            import time; time.sleep(30); os._exit(0)\n"
            "        n += 1\n"
            "except OSError as exc:\n"
            "    print('refused after', n, exc.errno)\n"
        )
        r = await sb.run(Job(code=code, task="toy", timeout_s=60))
        assert f"fsize {1024 * 1024}" in r.logs, r.logs
        assert "refused after" in r.logs, r.logs


@pytest.mark.parametrize("mode", ["bwrap", "landlock"])
async def test_consecutive_runs_get_their_own_cgroup_accounting(
    toy: ToyTask, mode: Literal["bwrap", "landlock"]
) -> None:
    """One slot, runs back to back (each started by the spare the previous one left): an OOM
    run, then a run that allocates less than its limit is not OOM; a run that holds many
    processes does not lower the next run's process bound; limits follow each job."""
    why = mode_available(mode)
    if why is not None:
        pytest.skip(f"{mode} unavailable: {why}")
    async with LocalSandbox(
        ToyTask.resolver({"toy": toy}), isolation=mode, max_concurrency=1, max_processes=24
    ) as sb:
        await sb.prepare()
        if not sb._cgroups:
            pytest.skip("no cgroups here")
        bomb = "blocks = [b'x' * (64 << 20) for _ in range(32)]\nprint('ALLOCATED')"
        small = Resources(memory_mb=256)
        assert (await sb.run(Job(code=bomb, task="toy", resources=small))).outcome is Outcome.OOM
        # the next run's launcher is made (then waits) in its own cgroup
        assert len(sb._spares) + len(sb._making) == 1
        # 128 MiB fits the 256 MiB of this job (the OOM counter of the last run is not ours)
        fits = "b = b'x' * (128 << 20)\nprint('FITS')\n" + TOY_SOLUTION
        r = await sb.run(Job(code=fits, task="toy", resources=small))
        assert r.outcome is Outcome.SUCCESS and "FITS" in r.logs, r
        # more than the first jobs' limit, under this job's own: its limit applies
        more = "b = b'x' * (384 << 20)\nprint('MORE')\n" + TOY_SOLUTION
        r = await sb.run(Job(code=more, task="toy", resources=Resources(memory_mb=768)))
        assert r.outcome is Outcome.SUCCESS and "MORE" in r.logs, r
        forks = (
            "import os, time\n"
            "n = 0\n"
            "try:\n"
            "    for _ in range(40):\n"
            "        if os.fork() == 0:\n"
            "            time.sleep(30); os._exit(0)\n"
            "        n += 1\n"
            "except OSError:\n"
            "    pass\n"
            "print('forked', n)\n"
        )
        counts = []
        for _ in range(2):  # the second run's bound is not lowered by the first's children
            r = await sb.run(Job(code=forks, task="toy", timeout_s=60))
            counts.append(next(x for x in r.logs.splitlines() if x.startswith("forked")))
        assert counts[0] == counts[1], counts
        assert int(counts[0].split()[1]) < 24


_MULTI_PROGRAM = """
import csv, os
out = os.environ.get("OUTPUT_DIR", "output")
for inst, flip in [("inst1", 0), ("inst2", 5)]:
    with open(os.path.join(os.environ["DATA_DIR"], inst + ".csv")) as fh:
        rows = list(csv.DictReader(fh))
    os.makedirs(os.path.join(out, inst), exist_ok=True)
    with open(os.path.join(out, inst, "pred.csv"), "w") as fh:
        fh.write("id,label\\n")
        for n, row in enumerate(rows):
            label = int(float(row["x"]) > 0)
            fh.write(f"{row['id']},{1 - label if n < flip else label}\\n")
"""


@pytest.fixture
async def nb_sandbox(tmp_path: Path) -> AsyncIterator[tuple[LocalSandbox, Path]]:
    """A LocalSandbox resolving ``multi`` to a miniature NatureBench case whose evaluator reads
    ``OUTPUT_DIR/inst1/pred.csv`` and ``OUTPUT_DIR/inst2/pred.csv``."""
    from tests.unit.bench._mininb import add_multi_output_case, build

    from openmle.bench import NatureBench
    from openmle.gym import GradeLimits

    nb = NatureBench(build(tmp_path / "nb"), grade_limits=GradeLimits(timeout_s=60.0))
    task = nb.task(add_multi_output_case(nb.root))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sb = LocalSandbox(
            {"multi": task}.__getitem__, memory_mb=1024, max_file_mb=8192, kill_grace_s=1.0
        )
        await sb.prepare()
    try:
        yield sb, task.root
    finally:
        await sb.aclose()


async def test_naturebench_output_directory_is_graded(
    nb_sandbox: tuple[LocalSandbox, Path],
) -> None:
    """Per-instance files under ./output/ reach the evaluator as OUTPUT_DIR/<inst>/pred.csv."""
    sb, _root = nb_sandbox
    r = await sb.run(Job(code=_MULTI_PROGRAM, task="multi", split=Split.TEST))
    assert r.outcome is Outcome.SUCCESS, r.detail
    # inst1: 20/20 right, g = (1 - 0.8) / 0.8; inst2: 15/20 right, g = (0.75 - 0.8) / 0.8
    assert r.score == pytest.approx(((1.0 - 0.8) / 0.8 + (0.75 - 0.8) / 0.8) / 2)
    assert "output/inst1/pred.csv" in r.artifacts and "output/inst2/pred.csv" in r.artifacts
    half = await sb.run(Job(code=_MULTI_PROGRAM.replace(', ("inst2", 5)', ""), task="multi"))
    assert half.outcome is Outcome.SUCCESS  # inst2 missing counts g = -1
    assert half.score == pytest.approx(((1.0 - 0.8) / 0.8 - 1.0) / 2)
    none = await sb.run(Job(code="print('nothing')", task="multi"))
    assert none.outcome is Outcome.MISSING_SUBMISSION and "./output/" in none.detail


async def test_naturebench_program_is_given_output_dir_in_its_workspace(
    nb_sandbox: tuple[LocalSandbox, Path],
) -> None:
    """``$OUTPUT_DIR`` was unset (the case's README tells the program to write there); now it
    is ``<workspace>/output``, as the harness's ``OUTPUT_DIR=/workspace/output``, and a job's
    own value cannot move it out of the workspace.
    """
    sb, _root = nb_sandbox
    strict = _MULTI_PROGRAM.replace(
        'out = os.environ.get("OUTPUT_DIR", "output")',
        'out = os.environ["OUTPUT_DIR"]\n'
        'assert out == os.path.join(os.getcwd(), "output"), (out, os.getcwd())',
    )
    r = await sb.run(Job(code=strict, task="multi", split=Split.TEST, env={"OUTPUT_DIR": "/tmp"}))
    assert r.outcome is Outcome.SUCCESS, (r.detail, r.logs)
    assert "output/inst1/pred.csv" in r.artifacts


async def test_naturebench_output_link_fifo_and_sparse_file_are_refused(
    nb_sandbox: tuple[LocalSandbox, Path],
) -> None:
    """A link to the answers, a FIFO or a huge sparse file inside ./output/ is never graded."""
    sb, root = nb_sandbox
    answers = root / "evaluation" / "ground_truth" / "inst1.csv"
    mk = "import os; os.makedirs('output/inst1'); "
    cases = {
        f"os.symlink({str(answers)!r}, 'output/inst1/pred.csv')": "symbolic link",
        f"os.symlink({str(answers.parent)!r}, 'output/inst2')": "symbolic link",
        "os.mkfifo('output/inst1/pred.csv')": "not a regular file",
        "f = open('output/inst1/pred.csv', 'wb'); f.truncate(3 << 30); f.close()": "larger than",
        # Sparse at any size: 0 bytes in the sandbox, 8 MiB written out by a copy on the host.
        "f = open('output/inst1/pred.csv', 'wb'); f.truncate(8 << 20); f.close()": "sparse",
    }
    for code, why in cases.items():
        r = await sb.run(Job(code=mk + code, task="multi"))
        assert r.outcome is Outcome.INVALID_SUBMISSION, (code, r.detail)
        assert why in r.detail and r.score is None, (code, r.detail)
    linked = await sb.run(Job(code=f"import os; os.symlink({str(root)!r}, 'output')", task="multi"))
    assert linked.outcome is Outcome.INVALID_SUBMISSION and "must be a directory" in linked.detail


async def test_landlock_grandchildren_of_a_killed_owner_are_swept(
    toy: ToyTask, tmp_path: Path
) -> None:
    """Landlock, no cgroups: kill -9 of the sandbox's process leaves the program's own child
    (the parent-death signal reaches the program only); the next LocalSandbox start kills it.
    """
    if mode_available("landlock") is not None:
        pytest.skip("Landlock unavailable")

    token = f"orphan-{os.getpid()}-{id(tmp_path)}"
    work = tmp_path / "work"
    work.mkdir()
    program = (
        "import os, time\nif os.fork() == 0:\n    time.sleep(300)\nelse:\n    time.sleep(300)\n"
    )
    driver = _owner_driver(toy, work, program, "OPENMLE_ORPHAN_PROBE", token, cgroups=False)
    owner = await anyio.open_process([sys.executable, "-c", driver], env=os.environ.copy())
    pids: set[int] = set()
    async with owner:
        try:
            for _ in range(300):
                pids = await anyio.to_thread.run_sync(
                    live_pids_with_env, "OPENMLE_ORPHAN_PROBE", token
                )
                if len(pids) == 2 and all(
                    [await anyio.to_thread.run_sync(_runs_main, p) for p in pids]
                ):
                    break
                await anyio.sleep(0.1)
            else:
                pytest.fail(f"the program and its child did not start: {pids}")
            owner.kill()
            await owner.wait()
            for _ in range(100):  # the program itself dies with its owner
                if sum([await anyio.to_thread.run_sync(alive, p) for p in pids]) <= 1:
                    break
                await anyio.sleep(0.1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sb = LocalSandbox(ToyTask.resolver({"toy": toy}), isolation="landlock")
                await sb.prepare()
                await sb.aclose()
            for _ in range(200):
                if not any([await anyio.to_thread.run_sync(alive, p) for p in pids]):
                    break
                await anyio.sleep(0.1)
            else:
                pytest.fail("the program's child outlived its owner and the next sandbox start")
        finally:
            for p in pids:
                with contextlib.suppress(OSError):
                    os.kill(p, 9)
            if owner.returncode is None:
                owner.kill()
            await anyio.to_thread.run_sync(safe_rmtree, work)


async def test_bwrap_mountinfo_names_no_host_path_of_the_data(toy: ToyTask) -> None:
    """bwrap mode as root: ``/proc/self/mountinfo`` names no host path of the public data (a
    copy in a tmpfs is bound at ``/data``) nor of the run directory (a quota tmpfs).
    """
    if mode_available("bwrap") is not None or os.geteuid() != 0:
        pytest.skip("needs bwrap as root (elsewhere the leak is documented)")
    sb = LocalSandbox(ToyTask.resolver({"toy": toy}), isolation="bwrap")
    try:
        code = (
            "import os\nprint(open('/proc/self/mountinfo').read())\n"
            "print('FILES=' + ','.join(sorted(os.listdir('/data'))))\n"
        )
        r = await sb.run(Job(code=code, task="toy"))
    finally:
        await sb.aclose()
    public = toy.public_dir(Split.VALID)
    assert "FILES=" in r.logs and " /data " in r.logs
    real = str(await anyio.Path(public).resolve())
    for host in {str(public), real, str(toy.root)}:
        assert host not in r.logs
    assert "openmle-run-" not in r.logs
    listed = r.logs.split("FILES=")[1].split()[0].split(",")
    assert listed == sorted([p.name async for p in anyio.Path(public).iterdir()])


async def test_a_finished_runs_namespace_number_spares_a_later_namespace(
    toy: ToyTask, monkeypatch: pytest.MonkeyPatch, closing: Closing
) -> None:
    """Landlock mode without cgroups finds a run's leftovers by its mount namespace. The
    kernel gives a freed namespace's number to the next one made at once: scanned by number
    after the run's last process exited, the search killed whatever lived in the next
    namespace (another run's program, any host process in a new namespace). The sandbox holds
    the run's namespace open, so its number names nothing else while it looks."""
    if os.geteuid() != 0 or mode_available("landlock") or shutil.which("unshare") is None:
        pytest.skip("needs root, Landlock and unshare(1): the run's own mount namespace")
    import subprocess

    from openmle.backends import _local

    sb = closing(LocalSandbox(ToyTask.resolver({"toy": toy}), isolation="landlock", cgroups=False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        await sb.prepare()
    ours = os.readlink("/proc/self/ns/mnt")
    innocents: list[subprocess.Popen[bytes]] = []
    real = _local._run_pids

    def run_pids(main: int | None, *args: object, **kwargs: object) -> set[int]:
        if main is None and kwargs.get("namespace") and not innocents:
            # The run's program has exited (its namespace freed, unless held): a host process
            # makes a namespace of its own now.
            innocents.append(subprocess.Popen(["unshare", "--mount", "sleep", "120"]))
            for _ in range(500):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{innocents[0].pid}/ns/mnt") != ours:
                        break
                time.sleep(0.01)
        return real(main, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_local, "_run_pids", run_pids)
    try:
        r = await sb.run(Job(code="print('done')", task="toy"))
        assert r.outcome is Outcome.MISSING_SUBMISSION, r
        assert innocents, "the run's leftovers were not looked for by its namespace"
        assert innocents[0].poll() is None, "a process in a later namespace was killed"
    finally:
        for p in innocents:
            p.kill()
            p.wait()


async def test_the_runs_process_group_is_signalled_only_while_its_number_is_held(
    sandbox: LocalSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's leftovers are killed by process group too, whose id is the program's pid. A
    reaped program's pid is free for the next process the host starts (and, with ``setsid``,
    for its group): the program stays a zombie, holding its number, until the kill is over."""
    from openmle.backends import _isolation

    real = _isolation.kill_group
    signalled: list[tuple[int, bool]] = []

    def kill_group(pgid: int, sig: int) -> None:
        signalled.append((pgid, Path(f"/proc/{pgid}").exists()))
        real(pgid, sig)

    monkeypatch.setattr(_isolation, "kill_group", kill_group)
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    time.sleep(60)\n"
        "    os._exit(0)\n"
        "print('parent done')\n"
    )
    r = await sandbox.run(Job(code=code, task="toy"))
    assert r.outcome is Outcome.MISSING_SUBMISSION, r
    assert all(held for _, held in signalled), signalled
    if sandbox.isolation_mode == "landlock":  # bwrap: its PID namespace ends with the program
        assert signalled, "the leftover child was not killed by its group"


@pytest.mark.filterwarnings("ignore:LocalSandbox has no cgroups:RuntimeWarning")
@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        ("import sys; sys.exit(3)", 3),
        ("import os; os.kill(os.getpid(), 9)", -9),
        ("import os; os.abort()", -6),
    ],
    ids=["exit-3", "sigkill", "abort"],
)
async def test_the_subreaper_passes_the_programs_exit_status_on(
    toy: ToyTask, code: str, exit_code: int
) -> None:
    """Landlock mode without cgroups: the launcher stays as the run's subreaper and exits as
    its program did (by the same signal; SIGKILL, which has no handler to reset, included)."""
    async with prepared_local(toy, "landlock", cgroups=False) as sb:
        r = await sb.run(Job(code=code, task="toy"))
    assert r.outcome is Outcome.RUNTIME_ERROR, r
    assert r.exit_code == exit_code, r
