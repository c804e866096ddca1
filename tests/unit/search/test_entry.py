"""The entry points: one error (never an ExceptionGroup), preflight before the run directory
exists, and the metric direction from the task or the sandbox, never by default."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.unit.search._det import det_grade

from openmle import Job, ModelRequest, RunResult, Split, TaskMeta
from openmle.errors import (
    InvalidArgument,
    InvalidArgumentType,
    MultipleErrors,
    OpenMLEError,
    RunDirError,
)
from openmle.search import (
    BasicPrompts,
    Budget,
    Node,
    Proposal,
    ResumeSpec,
    RunDir,
    SearchConfig,
    SearchSpec,
    TaskInfo,
    aresume_search,
    arun_search,
    journal_fingerprint,
    read_journal,
    resume_search,
    run_search,
)
from openmle.search._entry import _one_error
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel


def by_step(request: ModelRequest) -> str:
    """A program whose score grows with the step: 0.1, 0.2, ..."""
    step = int(request.metadata["step"])
    return f"```python\nscore = {0.1 * (step + 1):.3f}\n```"


def parts() -> dict[str, Any]:
    return {
        "model": ScriptedModel(by_step),
        "sandbox": FunctionSandbox(det_grade),
        "selector": FunctionSelector(lambda c: 1.0),
        "config": SearchConfig(initial_drafts=4, seed=1),
        "budget": Budget(steps=4),
        "description": "",
        "workers": 1,
    }


class _FailingPrompts:
    """Builds no prompt: a user's prompt builder with a bug in it."""

    def build(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: object = None,
        time_left_s: float | None = None,
    ) -> ModelRequest:
        raise InvalidArgument("Expected a template but got template=None; pass one")

    def parse(self, text: str) -> tuple[str, str | None]:
        return BasicPrompts().parse(text)


# ------------------------------------------------------------------------- one error


def test_an_error_inside_the_search_reaches_the_caller_alone(tmp_path: Path) -> None:
    """run_search raises the InvalidArgument itself, not ExceptionGroup(ExceptionGroup(...))."""
    with pytest.raises(InvalidArgument, match="template=None") as info:
        run_search(
            SearchSpec(task="toy", higher_is_better=True, prompts=_FailingPrompts(), **parts()),
            run_dir=tmp_path / "r",
        )
    assert not isinstance(info.value, BaseExceptionGroup)


@pytest.mark.anyio
async def test_async_entry_points_raise_one_error_too(tmp_path: Path) -> None:
    """arun_search and aresume_search: `except OpenMLEError` catches the failure."""
    out = tmp_path / "r"
    with pytest.raises(OpenMLEError, match="template=None"):
        await arun_search(
            SearchSpec(task="toy", higher_is_better=True, prompts=_FailingPrompts(), **parts()),
            run_dir=out,
        )
    with pytest.raises(OpenMLEError, match="template=None"):
        await aresume_search(
            out,
            ResumeSpec(
                model=ScriptedModel(by_step),
                sandbox=FunctionSandbox(det_grade),
                prompts=_FailingPrompts(),
            ),
        )


def test_resume_search_raises_one_error(tmp_path: Path) -> None:
    out = tmp_path / "r"
    kw = parts()
    kw["budget"] = Budget(steps=2)
    run_search(SearchSpec(task="toy", higher_is_better=True, **kw), run_dir=out)
    with pytest.raises(InvalidArgument, match="template=None"):
        resume_search(
            out,
            ResumeSpec(
                model=ScriptedModel(by_step),
                sandbox=FunctionSandbox(det_grade),
                prompts=_FailingPrompts(),
                budget=Budget(steps=4),
            ),
        )


def test_several_errors_become_one_documented_error() -> None:
    """Several leaves: MultipleErrors (an OpenMLEError) carrying each; one leaf: that leaf."""
    first, second = RunDirError("disk full"), ValueError("callback broke")
    group = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [first]), second])
    err = _one_error(group)
    assert isinstance(err, MultipleErrors) and isinstance(err, OpenMLEError)
    assert err.exceptions == (first, second)
    assert err.group is group
    assert "disk full" in str(err) and "callback broke" in str(err)
    only = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [first])])
    assert _one_error(only) is first
    interrupted = BaseExceptionGroup("g", [first, KeyboardInterrupt()])
    assert isinstance(_one_error(interrupted), KeyboardInterrupt)
    same = BaseExceptionGroup("g", [RunDirError("disk full"), RunDirError("disk full")])
    assert _one_error(same) is same.exceptions[0]  # several workers, one cause


def test_money_cap_without_prices_is_one_clear_error(tmp_path: Path) -> None:
    """Budget(usd=...) with a model that reports no cost and no price table: one
    InvalidArgument naming Budget.prices (every worker meets it: still one error)."""
    from openmle import Outcome, RunResult
    from openmle.errors import InvalidArgument
    from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

    def grade(job: Any) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split, runtime_s=1.0)

    with pytest.raises(InvalidArgument, match=r"Budget\.prices"):
        run_search(
            SearchSpec(
                task="toy",
                model=ScriptedModel(lambda r: "```python\nprint(1)\n```"),
                sandbox=FunctionSandbox(grade),
                selector=FunctionSelector(lambda c: 1.0),
                budget=Budget(steps=3, usd=1.0),
                higher_is_better=True,
                description="",
                workers=2,
            ),
            run_dir=tmp_path / "r",
        )


# ------------------------------------------------------------------------- preflight


def test_a_run_dir_that_is_no_path_is_named(tmp_path: Path) -> None:
    spec = SearchSpec(task="toy", higher_is_better=True, **parts())
    with pytest.raises(InvalidArgumentType, match=r"run_dir=5 \(type=int\)"):
        run_search(spec, run_dir=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentType, match=r"run_dir=5 \(type=int\)"):
        resume_search(5, ResumeSpec(model=ScriptedModel(by_step), sandbox=parts()["sandbox"]))  # type: ignore[arg-type]


def test_an_unknown_task_writes_nothing(tmp_path: Path) -> None:
    """A typo in the task is refused before the run directory exists, so the retry works."""
    out = tmp_path / "r1"
    with pytest.raises(InvalidArgument, match=r"Unknown task 'tabular-binaryy'.*higher_is_better"):
        run_search(SearchSpec(task="tabular-binaryy", **parts()), run_dir=out)
    assert not out.exists()


@pytest.mark.parametrize("field", ["sandbox", "model", "selector", "prompts", "budget"])
def test_a_wrong_part_is_refused_before_anything_is_written(tmp_path: Path, field: str) -> None:
    out = tmp_path / "r1"
    kw = parts()
    kw[field] = object()
    with pytest.raises(InvalidArgumentType, match=f"{field}="):
        run_search(SearchSpec(task="toy", higher_is_better=True, **kw), run_dir=out)
    assert not out.exists()


def _uncommitted_run(out: Path) -> None:
    """A run directory as a search leaves it when it dies before its first node."""
    kw = parts()
    kw["budget"] = Budget(steps=1)
    run_search(SearchSpec(task="toy", higher_is_better=True, **kw), run_dir=out)
    lines = (out / "journal.jsonl").read_bytes().splitlines(keepends=True)
    (out / "journal.jsonl").write_bytes(lines[0])  # the proposal only
    assert [r["event"] for r in read_journal(out)] == ["proposal"]
    shutil.rmtree(out / "nodes")
    shutil.rmtree(out / "final")
    (out / "nodes").mkdir()
    (out / "board.json").unlink(missing_ok=True)


def test_a_run_dir_without_a_committed_step_can_be_started_over(tmp_path: Path) -> None:
    out = tmp_path / "r1"
    _uncommitted_run(out)
    with pytest.warns(UserWarning, match="no committed step; starting over"):
        result = run_search(SearchSpec(task="toy", higher_is_better=True, **parts()), run_dir=out)
    assert len(result.nodes) == 4
    events = [r["event"] for r in read_journal(out)]
    assert events.count("node") == 4 and events.count("proposal") == 4
    kinds = [s["event"] for s in RunDir.open(out).sessions()]
    assert kinds == ["start", "end", "start", "end"]  # the sessions file is kept


def test_a_run_dir_without_a_committed_step_can_be_resumed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "r1"
    _uncommitted_run(out)
    with caplog.at_level(logging.WARNING, logger="openmle.search"):
        result = resume_search(
            out, ResumeSpec(model=ScriptedModel(by_step), sandbox=FunctionSandbox(det_grade))
        )
    assert "holds no committed step" in caplog.text
    assert len(result.nodes) == 1


def test_a_run_dir_with_committed_steps_is_still_refused(tmp_path: Path) -> None:
    out = tmp_path / "r1"
    kw = parts()
    kw["budget"] = Budget(steps=1)
    run_search(SearchSpec(task="toy", higher_is_better=True, **kw), run_dir=out)
    before = (out / "journal.jsonl").read_bytes()
    with pytest.raises(InvalidArgument, match="resume it"):
        run_search(SearchSpec(task="toy", higher_is_better=True, **parts()), run_dir=out)
    assert (out / "journal.jsonl").read_bytes() == before


# ------------------------------------------------------------------------- direction


class _RemoteSandbox:
    """A sandbox that knows its tasks (as a job service does) and says so via task_meta."""

    def __init__(self, meta: TaskMeta | None) -> None:
        self.inner = FunctionSandbox(det_grade)
        self.jobs = self.inner.jobs
        self.meta = meta
        self.asked: list[str] = []

    async def run(self, job: Job) -> RunResult:
        return await self.inner.run(job)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def task_meta(self, task: str) -> TaskMeta | None:
        self.asked.append(task)
        return self.meta


def test_the_direction_comes_from_the_sandbox_when_the_task_is_remote(tmp_path: Path) -> None:
    """A remote lower-is-better task is minimised (the old default maximised it)."""
    sandbox = _RemoteSandbox(TaskMeta(higher_is_better=False))
    kw = parts()
    kw["sandbox"] = sandbox
    result = run_search(SearchSpec(task="remote-rmse", **kw), run_dir=tmp_path / "r")
    assert sandbox.asked == ["remote-rmse"]
    assert result.best is not None and result.best.score == pytest.approx(0.1)
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["task"]["higher_is_better"] is False
    test_jobs = [j for j in sandbox.jobs if j.split is Split.TEST]
    assert len(test_jobs) == 1 and "0.100" in test_jobs[0].code


def test_no_direction_anywhere_refuses_to_start(tmp_path: Path) -> None:
    """Neither the task nor the sandbox can say: refused, naming what to pass."""
    kw = parts()
    kw["sandbox"] = _RemoteSandbox(None)
    with pytest.raises(InvalidArgument, match=r"pass higher_is_better=True or False"):
        run_search(SearchSpec(task="remote-rmse", **kw), run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()
    kw["sandbox"] = FunctionSandbox(det_grade)
    with pytest.raises(InvalidArgument, match=r"no task_meta\(task\) method"):
        run_search(SearchSpec(task="remote-rmse", **kw))


def test_a_sandbox_answering_garbage_is_refused() -> None:
    class Bad(_RemoteSandbox):
        async def task_meta(self, task: str) -> Any:
            return {"higher_is_better": False}

    kw = parts()
    kw["sandbox"] = Bad(None)
    with pytest.raises(InvalidArgumentType, match=r"must return an openmle\.TaskMeta"):
        run_search(SearchSpec(task="remote-rmse", **kw))


def test_a_bundled_task_gives_its_own_direction() -> None:
    """The task package wins over the sandbox (which is not asked)."""
    from openmle.search._entry import task_direction

    sandbox = _RemoteSandbox(TaskMeta(higher_is_better=True))
    assert task_direction("tabular-regression", sandbox) is False
    assert sandbox.asked == []


def test_a_task_meta_table_on_the_sandbox_gives_the_direction(tmp_path: Path) -> None:
    """A sandbox's task_meta mapping (JobServiceSandbox's setting) is read too."""

    class Tabled(_RemoteSandbox):
        def __init__(self) -> None:
            super().__init__(None)
            self.task_meta = {"remote-rmse": TaskMeta(higher_is_better=False)}  # type: ignore[assignment]

    kw = parts()
    kw["sandbox"] = Tabled()
    result = run_search(SearchSpec(task="remote-rmse", **kw))
    assert result.best is not None and result.best.score == pytest.approx(0.1)
    with pytest.raises(InvalidArgument, match="table has no entry for 'other'"):
        run_search(SearchSpec(task="other", **kw))


# ------------------------------------------------------------------------- the spec, progress


def test_the_old_keyword_form_works_with_one_deprecation_warning(tmp_path: Path) -> None:
    """run_search("task", model=..., ...) and resume_search(dir, model=...) still run, warning
    once each through the one deprecation helper (with the release that removes them), and
    give the same journal as the spec form."""
    new, old = tmp_path / "new", tmp_path / "old"
    run_search(SearchSpec(task="toy", higher_is_better=True, **parts()), run_dir=new, quiet=True)
    with pytest.warns(DeprecationWarning, match=r"run_search\(<task>.*removed in openmle 0\.2\.0"):
        run_search("toy", higher_is_better=True, run_dir=old, quiet=True, **parts())
    assert journal_fingerprint(old) == journal_fingerprint(new)
    with pytest.warns(DeprecationWarning, match=r"resume_search\(<run_dir>.*ResumeSpec"):
        resume_search(
            old, model=ScriptedModel(by_step), sandbox=FunctionSandbox(det_grade), quiet=True
        )
    with pytest.raises(TypeError, match="unexpected keyword argument 'modle'"):
        run_search("toy", modle=ScriptedModel(by_step))
    with pytest.raises(InvalidArgumentType, match="move budget into the SearchSpec"):
        run_search(SearchSpec(task="toy", **parts()), budget=Budget(steps=1))


def test_a_spec_names_the_bad_field_when_it_is_made() -> None:
    kw = parts()
    kw["workers"] = 0
    with pytest.raises(InvalidArgument, match="workers=0"):
        SearchSpec(task="toy", **kw)
    with pytest.raises(InvalidArgumentType, match=r"task=123 .*str\(path\)"):
        SearchSpec(task=123, **parts())  # type: ignore[arg-type]
    kw = parts()
    kw["budget"] = None
    with pytest.raises(InvalidArgumentType, match=r"budget=None; pass e\.g\. budget=Budget"):
        SearchSpec(task="toy", **kw)
    with pytest.raises(InvalidArgumentType, match="sandbox="):
        ResumeSpec(model=ScriptedModel(by_step), sandbox=object())  # type: ignore[arg-type]


def test_the_default_progress_line_goes_to_stderr_unless_quiet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line per node on stderr by default; quiet=True prints nothing; on_progress replaces
    the line."""
    result = run_search(SearchSpec(task="toy", higher_is_better=True, **parts()))
    err = capsys.readouterr().err.splitlines()
    assert len(err) == len(result.nodes) == 4
    assert err[0].startswith("[  1/4] ") and "best" in err[0] and "budget" in err[0]
    run_search(SearchSpec(task="toy", higher_is_better=True, **parts()), quiet=True)
    assert capsys.readouterr().err == ""
    seen: list[int] = []
    run_search(
        SearchSpec(task="toy", higher_is_better=True, **parts()),
        on_progress=lambda p: seen.append(p.steps_done) if p.last is not None else None,
    )
    assert seen == [1, 2, 3, 4]
    assert capsys.readouterr().err == ""
