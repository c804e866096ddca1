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
from openmle._runlog import LogCap, take_submission
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
    task_outputs,
    workspace_artifacts,
)
from openmle.backends._workspace import OutputLimits, copy_outputs
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


class _OutputsTask:
    """A task graded on an output directory: the score is the number of lines of
    ``a/pred.csv`` and ``b/pred.csv`` in the copy it is handed (a missing file is invalid)."""

    name = "outs"
    private_paths: tuple[Path, ...] = ()

    def __init__(self, outputs: object = "output") -> None:
        self.outputs = outputs
        self.seen: list[Path] = []

    def public_dir(self, split: Split) -> Path:
        return Path("/nonexistent")

    def grade(self, submission: Path, split: Split) -> Any:
        from openmle._runlog import RefusedGrade

        self.seen.append(submission)
        try:
            lines = sum(len((submission / k / "pred.csv").read_text().splitlines()) for k in "ab")
        except OSError as exc:
            return RefusedGrade(reason=f"missing {exc.filename}")
        return _Valid(score=float(lines))


class _Valid:
    def __init__(self, score: float) -> None:
        self.score, self.valid, self.reason = score, True, ""


def _outputs(ws: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)


async def test_grade_outside_hands_an_output_directory_copy(tmp_path: Path) -> None:
    """A task declaring ``outputs`` is graded on a copy of ./output/ (with submission.csv)."""
    task = _OutputsTask()
    ws = tmp_path / "ws"
    _outputs(ws, {"output/a/pred.csv": "x\n1\n", "output/b/pred.csv": "x\n", "main.py": ""})
    (ws / "submission.csv").write_text("id,y\n")
    r = await _grade(task, ws, tmp_path / "g", 0)
    assert r.outcome is Outcome.SUCCESS and r.score == 3.0
    assert task.seen == [tmp_path / "g" / "output"]
    assert (tmp_path / "g" / "output" / "submission.csv").read_text() == "id,y\n"
    assert r.artifacts == ("output/a/pred.csv", "output/b/pred.csv", "submission.csv")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = await _grade(task, empty, tmp_path / "g2", 0)
    assert r.outcome is Outcome.MISSING_SUBMISSION and "./output/" in r.detail


async def test_grade_outside_refuses_hostile_output_directories(tmp_path: Path) -> None:
    """Links (to a host file or directory), hard links, FIFOs, huge sparse files, too many
    entries and too deep a tree are each INVALID_SUBMISSION with the reason; never graded."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the answers\n")
    setups: list[tuple[str, Any]] = [
        ("symbolic link", lambda o: (o / "a").mkdir() or (o / "a" / "pred.csv").symlink_to(secret)),
        ("symbolic link", lambda o: (o / "a").symlink_to(tmp_path)),
        ("hard link", lambda o: os.link(secret, o / "pred.csv")),
        ("not a regular file", lambda o: os.mkfifo(o / "pred.csv")),
        ("larger than", lambda o: _sparse(o / "pred.csv", 3 << 30)),
        ("more than 10000 files", lambda o: [(o / f"f{i}").touch() for i in range(10_001)]),
        ("deeper than 16", lambda o: (o / "/".join("d" * 17)).mkdir(parents=True)),
    ]
    for n, (why, setup) in enumerate(setups):
        task = _OutputsTask()
        ws = tmp_path / f"ws{n}"
        (ws / "output").mkdir(parents=True)
        setup(ws / "output")
        r = await _grade(task, ws, tmp_path / f"g{n}", 0)
        assert r.outcome is Outcome.INVALID_SUBMISSION, (why, r.detail)
        assert why in r.detail and r.score is None, (why, r.detail)
        assert task.seen == [] and not (tmp_path / f"g{n}" / "output").exists()
    ws = tmp_path / "wslink"
    ws.mkdir()
    (ws / "output").symlink_to(tmp_path)  # the directory itself
    r = await _grade(_OutputsTask(), ws, tmp_path / "glink", 0)
    assert r.outcome is Outcome.INVALID_SUBMISSION and "must be a directory" in r.detail


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as f:
        f.truncate(size)


def test_copy_outputs_counts_bytes_across_files(tmp_path: Path) -> None:
    """The byte limit is the total over all files, not per file (each counted at its
    apparent or allocated size, the larger)."""
    src = tmp_path / "output"
    size = 64 * 1024
    _outputs(tmp_path, {"output/a": "x" * size, "output/b/c": "y" * size})
    cost = sum(
        max(p.stat().st_size, p.stat().st_blocks * 512) for p in src.rglob("*") if p.is_file()
    )
    assert copy_outputs(src, tmp_path / "ok", limits=OutputLimits(max_bytes=cost)) is None
    assert (tmp_path / "ok" / "b" / "c").read_text() == "y" * size
    why = copy_outputs(src, tmp_path / "no", limits=OutputLimits(max_bytes=size + 100))
    assert why is not None and f"larger than {size + 100} bytes" in why
    assert not (tmp_path / "no").exists()


def _holed(path: Path, size: int) -> bool:
    """Write ``size`` bytes with a hole in the middle; False when this file system has none."""
    with path.open("wb") as f:
        f.write(b"a,b\n")
        f.seek(size - 4)
        f.write(b"1,2\n")
    st = path.stat()
    return st.st_blocks * 512 < st.st_size


@pytest.mark.parametrize("size", [64 * 1024 * 1024, 1024 * 1024])
def test_a_sparse_output_file_is_refused_at_any_size(tmp_path: Path, size: int) -> None:
    """Far under the byte limit, a file with holes is still refused: its copy would write the
    holes out in full on the host (two 0.95 GiB sparse files were 1.9 GiB there; issue 25)."""
    src = tmp_path / "output"
    src.mkdir()
    if not _holed(src / "pred.csv", size):
        pytest.skip("this file system stores no holes")
    why = copy_outputs(src, tmp_path / "dst")
    assert why is not None and "sparse" in why and "pred.csv" in why
    assert not (tmp_path / "dst").exists()


def test_a_sparse_submission_is_refused(tmp_path: Path) -> None:
    """A sparse submission.csv under the grader's size limit is never copied to the host."""
    ws = tmp_path / "ws"
    ws.mkdir()
    if not _holed(ws / "submission.csv", 32 * 1024 * 1024):
        pytest.skip("this file system stores no holes")
    copy, refused = take_submission(ws, tmp_path / "grading")
    assert copy is None and refused is not None and "sparse" in refused.reason
    assert not (tmp_path / "grading" / "submission.csv").exists()


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "main.py", "submission.csv", ".x", 3])
async def test_a_bad_outputs_name_is_a_clear_task_error(tmp_path: Path, bad: object) -> None:
    """A task declaring an unusable ``outputs`` is an INFRA_ERROR naming the attribute."""
    with pytest.raises(SandboxError, match="outputs="):
        task_outputs(_OutputsTask(bad))
    assert task_outputs(_OutputsTask(None)) is None
    ws = tmp_path / "ws"
    ws.mkdir()
    r = await _grade(_OutputsTask(bad), ws, tmp_path / "g", 0)
    assert r.outcome is Outcome.INFRA_ERROR and "outputs=" in r.detail


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
    """The inherited mask stops at its first invalid entry ("-1" and "" hide every GPU)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,-1,4")
    assert DockerSandbox().gpus == ("3",)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert DockerSandbox().gpus == ()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert DockerSandbox().gpus is None
    assert os.environ.get("CUDA_VISIBLE_DEVICES") is None


def test_pid_alive_is_the_one_liveness_check() -> None:
    """``openmle.backends.pid_alive`` (the container watchdog's own check, standard library
    only): a running process is alive; a zombie, a reaped pid and anything that is not a
    process id above 1 are not."""
    import subprocess
    import sys
    import time

    from openmle.backends import pid_alive

    assert pid_alive(os.getpid())
    assert not any(pid_alive(p) for p in (True, 0, 1, -5, "123", None, 2.0))
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while pid_alive(child.pid) and time.monotonic() < deadline:  # exited, not reaped: a zombie
        time.sleep(0.05)
    assert not pid_alive(child.pid)
    child.wait()
    assert not pid_alive(child.pid)
