"""prepare.py: written by the model, run in a :class:`~openmle.Sandbox`, retried with the error.

The sandbox runs :mod:`openmle.builder._prepare_program` (a real module) as an ordinary
:class:`~openmle.Job`: the raw directory is the job's read-only ``$DATA_DIR`` and the program
calls ``prepare(raw, public, private)`` into ``./prepared/public`` and ``./prepared/private``
in its own workspace. The stage's handle (:class:`StageHandle`) declares that directory as its
``outputs``, so the prepared files come back through the sandbox's output channel
(:func:`openmle.backends._kit.grade_outside`): copied out of the workspace streaming, bounded
(10,000 entries, 2 GiB counted at each file's apparent or allocated size, 16 levels:
:class:`openmle.backends._workspace.OutputLimits`), and refused whole for a symbolic link,
hard link, FIFO, socket, device or sparse file. The handle then checks the names (only
``public/`` and ``private/`` at the top, at most :data:`MAX_DEPTH` levels below them, names of
printable characters up to 200 bytes, no hidden names) and moves the tree into the package,
file by file, never reading a file's content. No submission file is a file-transfer channel:
anything prepare.py writes outside ``./prepared/`` (a ``submission.csv`` of its own included)
stays in the sandbox or refuses the result. So any sandbox works (no network, raw data
read-only, the sandbox's limits), and prepare's own failures come back as data: the run's
outcome and its log tail.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
from attrs import asdict, define, field, frozen

from openmle._protocols import OperatorModel, Sandbox
from openmle._task_protocol import TaskHandle, TaskResolver
from openmle._trees import remove_tree
from openmle._types import Job, Message, ModelRequest, Outcome, Split
from openmle.builder import _prepare_program
from openmle.builder._inventory import Inventory
from openmle.builder._spec import PURPOSE_KEY, PURPOSE_PREPARE, TaskSpec, task_messages

__all__ = [
    "PrepareResult",
    "PrepareRun",
    "StageHandle",
    "StageResolver",
    "prepare_program",
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
links; no file name that reveals the label. Standard library, numpy and pandas only
(and Pillow to read images).
When the spec's "inputs" name them: join each joined table's columns onto the rows by its key
(aggregate a key that repeats there); keep free-text columns; copy each row's image to
public/images/ under a name that does not reveal the label, with a column "image" holding its
path relative to public/ ("images/..."), in train.csv and test.csv.
A data_file ending in "/" is a folder of one subfolder per class: each image directly in a
subfolder is a labelled row (its label the subfolder's name); order the rows by something
that does not reveal the label (the SHA-256 of the image's bytes) and never use the raw path;
its columns are the spec's inputs.image_column (the path under the folder) and target; when
the id_column is that image column, each row's id is the neutral file name of its copied
image (images/000012.png: "000012.png").
Answer with one ```python block."""

MAX_DEPTH = 8
"""Directory levels below ``public/`` or ``private/`` a prepared tree may have."""
MAX_NAME_BYTES = 200
"""Longest file or directory name (UTF-8 bytes) in a prepared tree."""
_TOP = ("public", "private")


def prepare_program(source: str) -> str:
    """The job's program: :mod:`openmle.builder._prepare_program`'s source and one call of
    its ``main`` on ``source`` (the model's prepare.py, passed as a string literal).
    """
    module = Path(_prepare_program.__file__).read_text(encoding="utf-8")
    return f'{module}\n\nif __name__ == "__main__":\n    main({source!r})\n'


@frozen(kw_only=True)
class _Unpacked:
    score: float | None
    valid: bool
    reason: str


@define(eq=False)
class StageHandle(TaskHandle):
    """A sandbox "task" whose public data is a raw directory and whose output directory
    (``./prepared/``) is the prepared package data, moved into ``dest``.
    """

    name: str
    raw_dir: Path
    dest: Path
    outputs: str = _prepare_program.OUTPUTS

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """None: a prepare job has no hidden answers."""
        return ()

    def public_dir(self, split: Split) -> Path:
        """The raw directory, for either split."""
        return self.raw_dir

    def grade(self, submission: Path, split: Split) -> _Unpacked:
        """Move the sandbox's bounded copy of ``./prepared/`` (``submission``) into ``dest``.

        Only directories and regular files under ``public/`` and ``private/`` (no other
        top-level entry), at most :data:`MAX_DEPTH` levels deep, names of printable characters
        of at most :data:`MAX_NAME_BYTES` bytes, none starting with ``.``; anything else
        refuses the whole result (nothing is moved). Nothing is read.
        """
        src = Path(submission)
        try:
            if src.is_symlink() or not src.is_dir():
                raise ValueError("prepare wrote no ./prepared/ directory")
            _check_tree(src)
            for top in _TOP:
                if (src / top).is_dir():
                    shutil.move(src / top, self.dest / top)
        except (OSError, ValueError) as exc:
            remove_tree(self.dest)
            self.dest.mkdir(parents=True, exist_ok=True)
            return _Unpacked(score=None, valid=False, reason=str(exc)[:_MAX_LOG])
        return _Unpacked(score=0.0, valid=True, reason="")


_PRINTABLE = re.compile(r"[^\x00-\x1f\x7f/\\]+")


def _check_name(name: str, rel: str) -> None:
    if (
        name.startswith(".")
        or not _PRINTABLE.fullmatch(name)
        or len(os.fsencode(name)) > MAX_NAME_BYTES
        or not name.isprintable()
    ):
        shown = rel.encode("utf-8", "backslashreplace").decode()[:120]
        raise ValueError(
            f"prepare wrote {shown!r}: names must be printable, at most {MAX_NAME_BYTES} bytes "
            "and not hidden (no leading '.'); rename it"
        )


def _check_tree(root: Path) -> None:
    """Raise ValueError unless ``root`` holds only plain files and directories under
    ``public/`` and ``private/`` within the depth and name rules (no link is followed).
    """
    with os.scandir(root) as top:
        for entry in top:
            if entry.name not in _TOP or not entry.is_dir(follow_symlinks=False):
                shown = entry.name.encode("utf-8", "backslashreplace").decode()[:80]
                raise ValueError(
                    f"prepare wrote {shown!r} outside public/ and private/; write only there"
                )
    stack = [(root / top, top, 0) for top in _TOP if (root / top).is_dir()]
    while stack:
        folder, rel, depth = stack.pop()
        with os.scandir(folder) as it:
            for entry in it:
                sub = f"{rel}/{entry.name}"
                _check_name(entry.name, sub)
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    if depth + 1 > MAX_DEPTH:
                        raise ValueError(
                            f"prepare wrote {sub[:120]!r}, deeper than {MAX_DEPTH} levels "
                            f"below {rel.split('/')[0]}/; flatten it"
                        )
                    stack.append((Path(entry.path), sub, depth + 1))
                elif not stat.S_ISREG(mode):
                    raise ValueError(
                        f"prepare wrote a link or special file at {sub[:120]!r}; write plain "
                        "files only"
                    )


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

    def error_text(self, limit: int | None = None) -> str:
        """What to tell the model when the run failed.

        Args:
            limit: at most this many characters; a longer text keeps its first line (the
                outcome) and the END of the logs, where the error is, joined by ``...``.
        """
        head = f"outcome {self.outcome}: {self.detail}"
        text = f"{head}\n{self.logs_tail}".strip()
        if limit is None or len(text) <= limit:
            return text
        first = head[: max(0, limit // 2)]
        keep = max(0, limit - len(first) - 5)
        return f"{first}\n...\n{self.logs_tail[-keep:]}" if keep else first

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every field, in declaration order."""
        return asdict(self)


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
        remove_tree(dest)
        dest.mkdir(parents=True)

    await anyio.to_thread.run_sync(fresh)
    ref = resolver.add(StageHandle(name="prepare", raw_dir=raw_dir, dest=dest))
    job = Job(code=prepare_program(source), task=ref, split=Split.TEST, timeout_s=timeout_s)
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
    return task_messages(CONTRACT, spec, "\n\nInventory:\n" + inv.text())


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
