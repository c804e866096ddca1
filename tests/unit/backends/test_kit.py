"""The shared sandbox kit: one signal mapping, one artifact listing, one grading rule, one
default resolver, and GPU leases through ``GpuPool`` in both shipped sandboxes."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest

from openmle import Job, Outcome, Resources, RunResult
from openmle._runlog import LogCap
from openmle._task_protocol import TaskHandle
from openmle._types import Split
from openmle.backends import DockerSandbox
from openmle.backends._kit import (
    PROGRAM_FILE,
    default_resolver,
    exit_signal,
    grade_outside,
    signal_exit_code,
    signal_verdict,
    submission_too_large,
    workspace_artifacts,
)
from openmle.errors import InvalidArgument, SandboxError
from openmle.testing import ToyTask

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("code", "shell_base", "sig"),
    [
        (0, True, None),
        (1, True, None),
        (128, True, None),
        (137, True, 9),
        (192, True, 64),
        (193, True, None),
        (137, False, None),
        (-11, False, 11),
        (-11, True, 11),
        (None, False, None),
    ],
)
def test_exit_signal(code: int | None, shell_base: bool, sig: int | None) -> None:
    """bwrap and engines report 128+signal; a plain child reports -signal."""
    assert exit_signal(code, shell_base=shell_base) == sig


def test_engine_codes_are_reported_negative() -> None:
    """128+N from an engine becomes -N (as the local sandbox reports signals)."""
    assert [signal_exit_code(c) for c in (137, 143, 1, 0, None, 200)] == [-9, -15, 1, 0, None, 200]


def test_signal_verdict() -> None:
    """SIGXCPU is the CPU-time limit (a timeout); other signals are named unless OOM/timeout."""
    cpu = -int(signal.SIGXCPU)
    assert signal_verdict(cpu, shell_base=False, timed_out=False, oom=False) == (
        True,
        "killed at its CPU-time limit",
    )
    assert signal_verdict(137, shell_base=True, timed_out=False, oom=False) == (
        False,
        "killed by SIGKILL",
    )
    assert signal_verdict(-9, shell_base=False, timed_out=False, oom=True) == (False, "")
    assert signal_verdict(-9, shell_base=False, timed_out=True, oom=False) == (True, "")
    assert signal_verdict(1, shell_base=True, timed_out=False, oom=False) == (False, "")
    assert signal_verdict(-63, shell_base=False, timed_out=False, oom=False)[1].startswith(
        "killed by"
    )


async def test_artifacts_skip_program_and_never_follow_directory_links(tmp_path: Path) -> None:
    """main.py is left out; a symlinked directory is one entry, never walked into."""
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "secret.txt").write_text("x")
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / PROGRAM_FILE).write_text("print(1)")
    (ws / "sub" / "main.py").write_text("kept: only the top-level program file is skipped")
    (ws / "model.txt").write_text("m")
    (ws / "link").symlink_to(outside, target_is_directory=True)
    assert await workspace_artifacts(ws) == ("link", "model.txt", "sub/main.py")
    assert await workspace_artifacts(tmp_path / "missing") == ()


def test_sparse_oversized_submission_is_refused_before_any_copy(tmp_path: Path) -> None:
    """A sparse 1 GiB submission.csv is refused by its size; nothing is read or copied."""
    with (tmp_path / "submission.csv").open("wb") as f:
        f.truncate(1 << 30)
    refused = submission_too_large(tmp_path)
    assert refused is not None and "1073741824 bytes" in refused.reason
    (tmp_path / "submission.csv").write_text("id,y\n1,2\n")
    assert submission_too_large(tmp_path) is None
    assert submission_too_large(tmp_path / "missing") is None


def _cap(text: str) -> LogCap:
    cap = LogCap(head=1024, tail=1024)
    cap.feed(text.encode())
    return cap


async def _grade(
    task: TaskHandle, ws: Path, grading: Path, exit_code: int | None, logs: str = "", **kw: Any
) -> RunResult:
    return await grade_outside(
        job=Job(code="", task=task.name),
        task=task,
        workspace=ws,
        grading_dir=grading,
        exit_code=exit_code,
        timed_out=kw.pop("timed_out", False),
        oom=kw.pop("oom", False),
        cap=_cap(logs),
        runtime_s=0.5,
        queue_s=0.25,
        shell_base=kw.pop("shell_base", False),
        **kw,
    )


async def test_grade_outside_grades_a_copy_and_classifies(tmp_path: Path) -> None:
    """A clean exit with a good submission is graded from the copy; artifacts are listed."""
    task = ToyTask.create(tmp_path / "task")
    ws = tmp_path / "ws"
    ws.mkdir()
    answers = (task.root / "valid" / "private" / "answers.csv").read_text()
    (ws / "submission.csv").write_text(answers)
    (ws / PROGRAM_FILE).write_text("")
    r = await _grade(task, ws, tmp_path / "graded", 0)
    assert r.outcome is Outcome.SUCCESS and r.score == 1.0
    assert r.artifacts == ("submission.csv",) and r.queue_s == 0.25
    assert (tmp_path / "graded" / "submission.csv").read_text() == answers


async def test_grade_outside_refusals_memory_error_and_signals(tmp_path: Path) -> None:
    """A linked or oversized submission is never graded; MemoryError is OOM; signals named."""
    task = ToyTask.create(tmp_path / "task")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "submission.csv").symlink_to(task.root / "valid" / "private" / "answers.csv")
    r = await _grade(task, ws, tmp_path / "g1", 0)
    assert r.outcome is Outcome.INVALID_SUBMISSION and "regular file" in r.detail
    assert not (tmp_path / "g1" / "submission.csv").exists()
    (ws / "submission.csv").unlink()
    with (ws / "submission.csv").open("wb") as f:
        f.truncate(1 << 30)
    r = await _grade(task, ws, tmp_path / "g2", 0)
    assert r.outcome is Outcome.INVALID_SUBMISSION and "bytes" in r.detail
    assert not (tmp_path / "g2").exists()
    oom = await _grade(task, ws, tmp_path / "g3", 1, "Traceback...\nMemoryError\n")
    assert oom.outcome is Outcome.OOM
    segv = await _grade(task, ws, tmp_path / "g4", 139, shell_base=True)
    assert segv.outcome is Outcome.RUNTIME_ERROR and segv.detail == "killed by SIGSEGV"
    cpu = await _grade(task, ws, tmp_path / "g5", -int(signal.SIGXCPU))
    assert cpu.outcome is Outcome.TIMEOUT and cpu.detail == "killed at its CPU-time limit"
    quota = await _grade(task, ws, tmp_path / "g6", -9, detail="exceeded its workspace quota")
    assert quota.outcome is Outcome.RUNTIME_ERROR
    assert quota.detail == "exceeded its workspace quota"


def _broken_grade(self: ToyTask, submission: Path, split: Split) -> Any:
    raise RuntimeError("answer 42 leaked in a message")


async def test_a_broken_grader_is_infra_error_without_its_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grader's exception type is named, its message (which could quote answers) is not."""
    task = ToyTask.create(tmp_path / "task")
    monkeypatch.setattr(ToyTask, "grade", _broken_grade)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "submission.csv").write_text("id,target\n")
    r = await _grade(task, ws, tmp_path / "g", 0, "printed\n")
    assert r.outcome is Outcome.INFRA_ERROR
    assert "RuntimeError" in r.detail and "42" not in r.detail and r.logs == "printed\n"


def test_default_resolver_looks_up_gym_at_call_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both sandboxes default to it; a missing resolve_task names ``resolver=``."""
    import openmle.gym

    assert DockerSandbox().resolver is default_resolver
    toy = ToyTask.create(tmp_path / "task")
    monkeypatch.setattr(openmle.gym, "resolve_task", lambda ref: toy)
    assert default_resolver("anything") is toy
    monkeypatch.delattr(openmle.gym, "resolve_task")
    with pytest.raises(SandboxError, match="resolver="):
        default_resolver("anything")


async def test_docker_leases_gpus_through_the_pool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Concurrent GPU jobs get distinct pool ids; a request the pool can never serve raises
    instead of waiting for ever (an empty pool used to divide by zero)."""
    toy = ToyTask.create(tmp_path / "task")
    held: list[tuple[str, ...]] = []
    busy: set[str] = set()

    async def fake_run(
        self: DockerSandbox,
        job: Job,
        task: TaskHandle,
        public: Path,
        ids: tuple[str, ...] | None,
        queue_s: float,
        image: str | None = None,
    ) -> RunResult:
        assert ids is not None and not busy.intersection(ids)
        busy.update(ids)
        held.append(ids)
        await anyio.sleep(0.01)
        busy.difference_update(ids)
        return RunResult.infra_error("fake", split=job.split)

    monkeypatch.setattr(DockerSandbox, "_run", fake_run)
    sb = DockerSandbox(gpus=["a", "b", "c"], resolver=lambda ref: toy, build_task_images=False)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for n in (1, 2, 1, 2):
                tg.start_soon(sb.run, Job(code="", task="toy", resources=Resources(gpus=n)))
        await sb.run(Job(code="", task="toy", resources=Resources(gpu_ids=(2,))))
    assert sorted(len(ids) for ids in held) == [1, 1, 1, 2, 2] and held[-1] == ("c",)
    for pool, resources in (
        (["a"], Resources(gpus=2)),
        ([], Resources(gpus=1)),
    ):
        sb = DockerSandbox(gpus=pool, resolver=lambda ref: toy, build_task_images=False)
        with anyio.fail_after(10), pytest.raises(InvalidArgument, match="GPU"):
            await sb.run(Job(code="", task="toy", resources=resources))


def test_docker_pool_reads_cuda_visible_devices_as_cuda_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The inherited mask stops at its first invalid entry ("-1" hides every GPU)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,-1,4")
    assert DockerSandbox().gpus == ("3",)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert DockerSandbox().gpus is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert DockerSandbox().gpus is None
    assert os.environ.get("CUDA_VISIBLE_DEVICES") is None
