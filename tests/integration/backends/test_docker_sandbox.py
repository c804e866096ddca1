"""``DockerSandbox`` against a real engine (Podman's Docker API in CI, or a Docker daemon)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests._files import open_up
from tests._net import unreached_listener
from tests._socket_families import LOADING, SOCKETS_PROGRAM, USUAL, results

from openmle import Job, Outcome, Resources, Split
from openmle.backends import DockerSandbox
from openmle.errors import SandboxError
from openmle.testing import TOY_SOLUTION, ToyTask

from .conftest import Engine

pytestmark = [pytest.mark.integration, pytest.mark.docker]


@pytest.fixture
def toy(tmp_path: Path) -> ToyTask:
    """A toy task whose directories any container user can read."""
    task = ToyTask.create(tmp_path / "toy")
    open_up(tmp_path)
    return task


def _sandbox(engine: Engine, toy: ToyTask, **kw: Any) -> DockerSandbox:
    kw.setdefault("stop_grace_s", 1.0)
    kw.setdefault("memory_mb", 512)
    return DockerSandbox(
        image=engine.image,
        base_url=engine.base_url,
        resolver=ToyTask.resolver({"toy": toy}),
        gpus=None,
        **kw,
    )


async def _run(engine: Engine, toy: ToyTask, code: str, **kw: Any) -> Any:
    job_kw = {k: kw.pop(k) for k in ("timeout_s", "resources", "split", "env") if k in kw}
    job_kw.setdefault("timeout_s", 60.0)
    async with _sandbox(engine, toy, **kw) as sandbox:
        return await sandbox.run(Job(code=code, task="toy", **job_kw))


@pytest.mark.anyio
async def test_solution_succeeds_and_is_graded_on_the_host(
    docker_engine: Engine, toy: ToyTask
) -> None:
    """The toy solution reads $DATA_DIR, writes submission.csv and scores 1.0 on both splits."""
    for split in (Split.VALID, Split.TEST):
        result = await _run(docker_engine, toy, TOY_SOLUTION, split=split)
        assert result.outcome is Outcome.SUCCESS, result.detail + result.logs
        assert result.score == 1.0
        assert result.split is split
        assert result.printed_score == 1.0
        assert result.exit_code == 0
        assert result.artifacts == ("submission.csv",)
        assert result.runtime_s > 0


@pytest.mark.anyio
async def test_runtime_error_keeps_the_traceback(docker_engine: Engine, toy: ToyTask) -> None:
    """An exception exits 1: RUNTIME_ERROR with the traceback in the logs and a signature."""
    result = await _run(docker_engine, toy, "print('before')\nraise ValueError('boom 42')\n")
    assert result.outcome is Outcome.RUNTIME_ERROR
    assert result.exit_code == 1
    assert "before" in result.logs and "ValueError: boom 42" in result.logs
    assert result.error_signature is not None and "ValueError" in result.error_signature


@pytest.mark.anyio
async def test_timeout_kills_a_program_that_ignores_sigterm(
    docker_engine: Engine, toy: ToyTask, managed_containers: Callable[[], list[str]]
) -> None:
    """A program (and its child) ignoring SIGTERM is killed at the limit: TIMEOUT, logs kept."""
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)'])\n"
        "print('started', flush=True)\n"
        "time.sleep(600)\n"
    )
    # The limit covers the container's and Python's start, which a loaded machine may not
    # finish within 2 s: longer tries until the program printed (the test is about killing
    # a program that ran, not about the machine's speed; lost logs fail the last try).
    for timeout_s in (2.0, 10.0, 40.0):
        result = await _run(docker_engine, toy, code, timeout_s=timeout_s)
        if "started" in result.logs:
            break
    assert result.outcome is Outcome.TIMEOUT, result
    assert result.error_signature == "timeout"
    assert "started" in result.logs
    assert managed_containers() == []


@pytest.mark.anyio
async def test_memory_hog_is_oom(docker_engine: Engine, toy: ToyTask) -> None:
    """A program past its memory limit is killed and reported as OOM, not a crash."""
    code = "x = bytearray(600 * 1024 * 1024)\nprint(len(x))\n"
    result = await _run(docker_engine, toy, code, resources=Resources(memory_mb=64))
    assert result.outcome is Outcome.OOM, (result.exit_code, result.detail, result.logs)
    assert result.error_signature == "out_of_memory"


@pytest.mark.anyio
async def test_missing_and_invalid_submissions(docker_engine: Engine, toy: ToyTask) -> None:
    """Exit 0 without a file is MISSING_SUBMISSION; a malformed file is INVALID_SUBMISSION."""
    missing = await _run(docker_engine, toy, "print('no file')\n")
    assert missing.outcome is Outcome.MISSING_SUBMISSION
    bad = await _run(docker_engine, toy, "open('submission.csv', 'w').write('a,b\\n1,2\\n')\n")
    assert bad.outcome is Outcome.INVALID_SUBMISSION
    assert "expected columns" in bad.detail
    assert bad.score is None


@pytest.mark.anyio
async def test_symlinked_submission_cannot_point_the_grader_at_the_answers(
    docker_engine: Engine, toy: ToyTask
) -> None:
    """A submission.csv symlink to the (host) answers path is refused, not graded."""
    answers = toy.root / "valid" / "private" / "answers.csv"
    code = f"import os\nos.symlink({str(answers)!r}, 'submission.csv')\n"
    result = await _run(docker_engine, toy, code)
    assert result.outcome is Outcome.INVALID_SUBMISSION
    assert "must be a regular file" in result.detail


@pytest.mark.anyio
async def test_network_is_refused(docker_engine: Engine, toy: ToyTask) -> None:
    """With the network off only loopback exists and a listener on the host's loopback (started
    here; probes never target an outside address) cannot be reached."""
    with unreached_listener() as port:
        code = (
            "import socket\n"
            "lines = open('/proc/net/dev').readlines()[2:]\n"
            "ifaces = sorted(l.split(':')[0].strip() for l in lines)\n"
            "print('IFACES', ifaces)\n"
            "try:\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    print('NETWORK_OPEN')\n"
            "except OSError as exc:\n"
            "    print('NETWORK_BLOCKED', type(exc).__name__)\n"
        )
        result = await _run(docker_engine, toy, code)
    assert result.outcome is Outcome.MISSING_SUBMISSION, result.logs
    assert "IFACES ['lo']" in result.logs
    assert "NETWORK_BLOCKED" in result.logs and "NETWORK_OPEN" not in result.logs


@pytest.mark.anyio
async def test_private_answers_are_not_visible(docker_engine: Engine, toy: ToyTask) -> None:
    """Neither the private paths nor any answers file can be found from inside the container."""
    private = [str(p) for p in toy.private_paths]
    code = (
        "import os\n"
        f"for p in {private!r}:\n"
        "    print('EXISTS' if os.path.exists(p) else 'ABSENT', p)\n"
        "found = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root in ('/proc', '/sys', '/dev'):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    found += [os.path.join(root, f) for f in files if f == 'answers.csv']\n"
        "print('FOUND', found)\n"
        "print('DATA', sorted(os.listdir(os.environ['DATA_DIR'])))\n"
        "try:\n"
        "    open(os.path.join(os.environ['DATA_DIR'], 'x'), 'w')\n"
        "    print('DATA_WRITABLE')\n"
        "except OSError:\n"
        "    print('DATA_READ_ONLY')\n"
    )
    result = await _run(docker_engine, toy, code)
    assert "EXISTS" not in result.logs
    assert result.logs.count("ABSENT") == 2
    assert "FOUND []" in result.logs
    assert "DATA ['description.txt', 'sample_submission.csv', 'test.csv', 'train.csv']" in (
        result.logs
    )
    assert "DATA_READ_ONLY" in result.logs


@pytest.mark.anyio
async def test_cancellation_removes_the_container(
    docker_engine: Engine, toy: ToyTask, managed_containers: Callable[[], list[str]]
) -> None:
    """Cancelling a running job stops and removes its container before cancellation ends."""
    sandbox = _sandbox(docker_engine, toy)
    seen: list[str] = []
    async with sandbox, anyio.create_task_group() as tg:

        async def job() -> None:
            await sandbox.run(Job(code="import time\ntime.sleep(600)\n", task="toy"))

        tg.start_soon(job)
        with anyio.fail_after(60):
            while not seen:
                seen = await anyio.to_thread.run_sync(managed_containers)
                await anyio.sleep(0.05)
        tg.cancel_scope.cancel()
    assert managed_containers() == []


@pytest.mark.anyio
async def test_non_root_user_and_pid_limit(docker_engine: Engine, toy: ToyTask) -> None:
    """A sandbox user runs as that uid and can still write its submission; PIDs are capped
    (the threads outlive the loop however slowly it runs, so none frees its PID early)."""
    code = (
        "import os, threading\n"
        "print('UID', os.getuid())\n"
        "started = 0\n"
        "try:\n"
        "    for _ in range(200):\n"
        "        t = threading.Thread(target=__import__('time').sleep, args=(600,), daemon=True)\n"
        "        t.start()\n"
        "        started += 1\n"
        "except RuntimeError:\n"
        "    pass\n"
        "print('THREADS', started)\n"
    ) + TOY_SOLUTION
    result = await _run(docker_engine, toy, code, user="65534:65534", pids_limit=32)
    assert result.outcome is Outcome.SUCCESS, result.logs
    assert "UID 65534" in result.logs
    threads = int(result.logs.split("THREADS ")[1].split()[0])
    assert threads < 32


@pytest.mark.anyio
async def test_chatty_program_output_is_capped(docker_engine: Engine, toy: ToyTask) -> None:
    """Megabytes of output keep only head and tail; the dropped bytes are counted."""
    code = "import sys\nfor i in range(40000):\n    print('line', i, 'x' * 40)\nprint('THE END')\n"
    result = await _run(docker_engine, toy, code, log_head=1000, log_tail=1000)
    assert result.outcome is Outcome.MISSING_SUBMISSION
    assert result.logs.startswith("line 0 ")
    assert "THE END" in result.logs
    assert result.logs_dropped_bytes > 1_000_000


@pytest.mark.anyio
async def test_concurrent_jobs_share_the_limit(docker_engine: Engine, toy: ToyTask) -> None:
    """More jobs than ``max_concurrency`` all finish; late ones report their queue wait."""
    results: list[Any] = []
    async with _sandbox(docker_engine, toy, max_concurrency=2) as sandbox:

        async def one() -> None:
            results.append(await sandbox.run(Job(code=TOY_SOLUTION, task="toy")))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one)
    assert [r.outcome for r in results] == [Outcome.SUCCESS] * 4
    assert max(r.queue_s for r in results) > 0


@pytest.mark.anyio
async def test_missing_image_is_an_infra_error(docker_engine: Engine, toy: ToyTask) -> None:
    """An image the engine lacks is the harness's failure (INFRA_ERROR), not the program's."""
    async with DockerSandbox(
        image="localhost/openmle-no-such-image:0",
        base_url=docker_engine.base_url,
        resolver=ToyTask.resolver({"toy": toy}),
        gpus=None,
    ) as sandbox:
        result = await sandbox.run(Job(code=TOY_SOLUTION, task="toy"))
    assert result.outcome is Outcome.INFRA_ERROR
    assert "refused the container" in result.detail and result.score is None


@pytest.mark.anyio
async def test_unreachable_engine_is_an_infra_error(tmp_path: Path) -> None:
    """No engine at the URL gives INFRA_ERROR (the program never ran)."""
    pytest.importorskip("docker", reason="needs docker: pip install 'openmle[docker]'")
    toy = ToyTask.create(tmp_path / "toy")
    async with DockerSandbox(
        base_url=f"unix://{tmp_path}/nothing.sock", resolver=ToyTask.resolver({"toy": toy})
    ) as sandbox:
        result = await sandbox.run(Job(code=TOY_SOLUTION, task="toy"))
    assert result.outcome is Outcome.INFRA_ERROR


@pytest.mark.anyio
async def test_gpu_job_on_an_engine_without_gpu_runtime_is_a_clear_error(
    docker_engine: Engine, toy: ToyTask
) -> None:
    """Asking for a GPU where the engine cannot give one raises SandboxError saying why."""
    async with _sandbox(docker_engine, toy) as sandbox:
        with pytest.raises(SandboxError, match="GPU"):
            await sandbox.run(Job(code=TOY_SOLUTION, task="toy", resources=Resources(gpus=1)))


@pytest.mark.anyio
async def test_run_after_aclose_raises(docker_engine: Engine, toy: ToyTask) -> None:
    """A closed sandbox refuses new jobs."""
    sandbox = _sandbox(docker_engine, toy)
    await sandbox.aclose()
    await sandbox.aclose()
    with pytest.raises(SandboxError, match="aclose"):
        await sandbox.run(Job(code=TOY_SOLUTION, task="toy"))


@pytest.mark.anyio
async def test_cancellation_at_any_point_leaves_nothing_behind(
    docker_engine: Engine,
    toy: ToyTask,
    tmp_path: Path,
    managed_containers: Callable[[], list[str]],
) -> None:
    """Cancelled at any moment (creating, starting, running), no container or workspace stays."""
    workspaces = tmp_path / "workspaces"
    workspaces.mkdir()
    async with _sandbox(docker_engine, toy, workspace_root=workspaces) as sandbox:
        for delay in (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8):
            with anyio.move_on_after(delay):
                await sandbox.run(Job(code="import time\ntime.sleep(600)\n", task="toy"))
    assert managed_containers() == []
    assert list(workspaces.iterdir()) == []


@pytest.mark.anyio
async def test_podman_profile_refuses_socket_families_that_load_modules(
    docker_engine: Engine, toy: ToyTask
) -> None:
    """On Podman the sandbox's own profile (seccomp="auto") allows only the socket families
    and protocols a kernel has built in: another one would make it run modprobe on the host.
    Docker keeps its engine's profile (the Docker how-to)."""
    if docker_engine.kind != "podman":
        pytest.skip("the tightened profile is Podman's; Docker runs its engine's default")
    result = await _run(docker_engine, toy, SOCKETS_PROGRAM)
    got = results(result.logs)
    # refused by the profile's default action (Podman's: ENOSYS) before the kernel looks
    assert {k: got.get(k) for k in LOADING} == dict.fromkeys(LOADING, "ENOSYS"), result.logs
    assert [got[k] for k in ("pair_unix", *USUAL)] == ["ok"] * 4, result.logs
