"""prepare.py: written by the model, run in a :class:`~openmle.Sandbox`, retried with the error.

The sandbox runs a small wrapper as an ordinary :class:`~openmle.Job`: the raw directory is the
job's read-only ``$DATA_DIR`` and the wrapper calls ``prepare(raw, public, private)`` into its
own workspace, then packs what it wrote into ``submission.csv`` (one row per file: its relative
path and base64 content). The "grader" of that job is :class:`StageHandle`, which unpacks the
files on the host, refusing anything that is not a plain file under ``public/`` or ``private/``.
So any sandbox works (no network, raw data read-only, the sandbox's limits), and prepare's own
failures come back as data: the run's outcome and its log tail.
"""

from __future__ import annotations

import base64
import csv
import re
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

import anyio
from attrs import define, field, frozen

from openmle._protocols import OperatorModel, Sandbox
from openmle._task_protocol import TaskHandle, TaskResolver
from openmle._types import Job, Message, ModelRequest, Outcome, Split
from openmle.builder._inventory import Inventory
from openmle.builder._spec import PURPOSE_KEY, PURPOSE_PREPARE, TaskSpec

__all__ = [
    "PrepareResult",
    "PrepareRun",
    "StageHandle",
    "StageResolver",
    "request_prepare",
    "run_prepare",
]

SandboxFactory = Callable[[TaskResolver], Sandbox]
_CODE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.DOTALL)
_MAX_LOG = 4000
STAGE_PREFIX = "openmle-builder-stage:"

CONTRACT = """Write a Python module `prepare.py` with a function `prepare(raw, public, private)`
(three pathlib.Path objects) that turns the raw data into a task package, deterministically:
- raw/ is read-only; never touch the network.
- public/train.csv: the labelled training rows (id column, features, target).
- public/test.csv: the test rows without the target column.
- public/sample_submission.csv: one row per test row, the id column first, then the
  prediction column(s) in the metric's format (a naive constant prediction).
- public/description.txt: the task, the metric and the submission format.
- private/test_answer.csv: the id column and the target of every test row.
Use only labelled rows; keep every labelled row in exactly one of train and test; no symbolic
links; no file name that reveals the label. Standard library, numpy and pandas only.
Answer with one ```python block."""

_WRAPPER = """import base64, csv, os, pathlib, sys
SOURCE = {source!r}
ns = {{"__name__": "prepare"}}
exec(compile(SOURCE, "prepare.py", "exec"), ns)
out = pathlib.Path("out").absolute()
(out / "public").mkdir(parents=True, exist_ok=True)
(out / "private").mkdir(parents=True, exist_ok=True)
ns["prepare"](pathlib.Path(os.environ["DATA_DIR"]), out / "public", out / "private")
with open("submission.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["kind", "path", "data"])
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if p.is_symlink():
            w.writerow(["symlink", rel, ""])
        elif p.is_file():
            w.writerow(["file", rel, base64.b64encode(p.read_bytes()).decode()])
        elif not p.is_dir():
            w.writerow(["other", rel, ""])
"""


@frozen(kw_only=True)
class _Unpacked:
    score: float | None
    valid: bool
    reason: str


@define(eq=False)
class StageHandle(TaskHandle):
    """A sandbox "task" whose public data is a raw directory and whose grader unpacks files."""

    name: str
    raw_dir: Path
    dest: Path

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """None: a prepare job has no hidden answers."""
        return ()

    def public_dir(self, split: Split) -> Path:
        """The raw directory, for either split."""
        return self.raw_dir

    def grade(self, submission: Path, split: Split) -> _Unpacked:
        """Unpack the packed files into ``dest`` (plain files under public/ or private/ only)."""
        try:
            csv.field_size_limit(sys.maxsize)
            with open(submission, newline="", encoding="utf-8") as f:
                rows = list(csv.reader(f))
            if not rows or rows[0] != ["kind", "path", "data"]:
                raise ValueError("prepare wrote no file list")
            for kind, rel, data in rows[1:]:
                parts = PurePosixPath(rel).parts
                if (
                    not parts
                    or parts[0] not in ("public", "private")
                    or ".." in parts
                    or rel.startswith("/")
                ):
                    raise ValueError(f"prepare wrote {rel[:80]!r} outside public/ and private/")
                if kind != "file":
                    raise ValueError(
                        f"prepare wrote a {kind} at {rel[:80]!r}; write plain files only"
                    )
                target = self.dest.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(base64.b64decode(data, validate=True))
        except (OSError, ValueError, csv.Error) as exc:
            return _Unpacked(score=None, valid=False, reason=str(exc))
        return _Unpacked(score=0.0, valid=True, reason="")


@define(eq=False)
class StageResolver:
    """Resolves stage handles by reference, and everything else through ``openmle.gym``."""

    handles: dict[str, TaskHandle] = field(factory=dict)

    def add(self, handle: TaskHandle) -> str:
        """Register ``handle``; returns its reference for ``Job.task``."""
        ref = STAGE_PREFIX + uuid.uuid4().hex
        self.handles[ref] = handle
        return ref

    def __call__(self, ref: str) -> TaskHandle:
        handle = self.handles.get(ref)  # kept until the run ends: a sandbox may resolve twice
        if handle is not None:
            return handle
        from openmle.gym import resolve_task

        return resolve_task(ref)


@frozen(kw_only=True)
class PrepareRun:
    """One run of prepare.py: how it ended and the tail of its output."""

    outcome: str
    detail: str
    logs_tail: str
    runtime_s: float

    @property
    def ok(self) -> bool:
        """Whether prepare ran and its files were unpacked."""
        return self.outcome == Outcome.SUCCESS.value

    def error_text(self) -> str:
        """What to tell the model when the run failed."""
        return f"outcome {self.outcome}: {self.detail}\n{self.logs_tail}".strip()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "outcome": self.outcome,
            "detail": self.detail,
            "logs_tail": self.logs_tail,
            "runtime_s": self.runtime_s,
        }


@frozen(kw_only=True)
class PrepareResult:
    """The prepare stage's record: the accepted source and every attempt's run."""

    source: str
    runs: tuple[PrepareRun, ...]

    @property
    def ok(self) -> bool:
        """Whether the last attempt succeeded."""
        return bool(self.runs) and self.runs[-1].ok

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the source is in the package as utils/prepare.py)."""
        return {"ok": self.ok, "attempts": [r.to_dict() for r in self.runs]}


async def run_prepare(
    sandbox: Sandbox,
    resolver: StageResolver,
    source: str,
    raw_dir: Path,
    dest: Path,
    *,
    timeout_s: float = 300.0,
) -> PrepareRun:
    """Run ``source``'s ``prepare`` in ``sandbox`` on ``raw_dir``; unpack into ``dest``."""

    def fresh() -> None:
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)

    await anyio.to_thread.run_sync(fresh)
    ref = resolver.add(StageHandle(name="prepare", raw_dir=raw_dir, dest=dest))
    job = Job(code=_WRAPPER.format(source=source), task=ref, split=Split.TEST, timeout_s=timeout_s)
    try:
        result = await sandbox.run(job)
    finally:
        resolver.handles.pop(ref, None)
    return PrepareRun(
        outcome=result.outcome.value,
        detail=result.detail[:_MAX_LOG],
        logs_tail=result.logs[-_MAX_LOG:],
        runtime_s=result.runtime_s,
    )


def extract_code(text: str) -> str | None:
    """The first fenced Python block of ``text`` (or None)."""
    match = _CODE.search(text)
    return match.group(1) if match else None


def prepare_messages(spec: TaskSpec, inv: Inventory) -> list[Message]:
    """The prepare prompt: the contract, the spec and the inventory."""
    import json

    return [
        Message(role="system", content=CONTRACT),
        Message(
            role="user",
            content="Task spec:\n"
            + json.dumps(spec.to_dict(), indent=1)
            + "\n\nInventory:\n"
            + inv.text(),
        ),
    ]


async def request_prepare(
    model: OperatorModel,
    sandbox: Sandbox,
    resolver: StageResolver,
    spec: TaskSpec,
    inv: Inventory,
    raw_dir: Path,
    dest: Path,
    *,
    max_attempts: int = 3,
    timeout_s: float = 300.0,
    extra_metadata: Mapping[str, Any] | None = None,
) -> PrepareResult:
    """Ask for prepare.py and run it; a failure goes back to the model with its error text."""
    messages = prepare_messages(spec, inv)
    runs: list[PrepareRun] = []
    source = ""
    for _ in range(max_attempts):
        request = ModelRequest(
            messages=messages,
            metadata={
                PURPOSE_KEY: PURPOSE_PREPARE,
                "spec": spec.to_dict(),
                **(extra_metadata or {}),
            },
            temperature=0.0,
        )
        answer = (await model.complete(request)).text
        code = extract_code(answer)
        if code is None:
            run = PrepareRun(
                outcome=Outcome.MISSING_CODE.value,
                detail="no ```python block",
                logs_tail="",
                runtime_s=0.0,
            )
        else:
            source = code
            run = await run_prepare(sandbox, resolver, code, raw_dir, dest, timeout_s=timeout_s)
        runs.append(run)
        if run.ok:
            break
        messages = [
            *messages,
            Message(role="assistant", content=answer[:200_000]),
            Message(role="user", content="prepare.py failed:\n" + run.error_text() + "\nFix it."),
        ]
    return PrepareResult(source=source, runs=tuple(runs))
