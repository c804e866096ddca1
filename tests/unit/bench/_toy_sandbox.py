"""The sandbox the toy benchmark's tests run programs in: a program's answer is the number it
writes, graded by the toy's own grader through the bench's resolver."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmle import Job, Outcome, RunResult
from openmle.testing import FunctionSandbox

__all__ = ["number_sandbox"]


def number_sandbox(resolver: Callable[[str], Any]) -> FunctionSandbox:
    """Runs a program by reading the number it writes (``write('0.7')``; anything else writes
    ``nothing``), grading that through ``resolver`` (so the bench keeps the test submission
    and the toy's grader scores it). The submission is a file named after the task and split
    in the working directory, removed once graded."""

    def handle(job: Job) -> RunResult:
        m = re.search(r"write\('([-0-9.]+)'\)", job.code)
        task = resolver(job.task)
        out = Path(job.task.replace("@", "_")).with_suffix("")
        tmp = Path(str(out) + f"-{job.split.value}.csv")
        tmp.write_text(m.group(1) if m else "nothing", encoding="utf-8")
        grade = task.grade(tmp, job.split)
        tmp.unlink(missing_ok=True)
        if not grade.valid:
            return RunResult(
                outcome=Outcome.INVALID_SUBMISSION, split=job.split, detail=grade.reason
            )
        return RunResult(outcome=Outcome.SUCCESS, score=grade.score, split=job.split)

    return FunctionSandbox(handle)
