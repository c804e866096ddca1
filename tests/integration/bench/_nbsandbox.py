"""A LocalSandbox that appends every job it is given (task, split, resources, timeout) to the
JSON-lines file named by ``$OPENMLE_TEST_JOBS`` (for ``--sandbox MODULE:recording``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmle import Job, RunResult
from openmle.backends import LocalSandbox


class Recording:
    """Records each job, then runs it on the local sandbox."""

    def __init__(self, inner: LocalSandbox, log: Path) -> None:
        self.inner = inner
        self.log = log

    @property
    def max_concurrency(self) -> int:
        return int(self.inner.max_concurrency)

    async def run(self, job: Job) -> RunResult:
        line = {
            "task": job.task,
            "split": str(job.split),
            "resources": job.resources.to_dict(),
            "timeout_s": job.timeout_s,
        }
        with self.log.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(line) + "\n")
        return await self.inner.run(job)

    async def aclose(self) -> None:
        await self.inner.aclose()


def recording(*, resolver: Callable[[str], Any]) -> Recording:
    """The sandbox factory (takes the bench's resolver)."""
    return Recording(LocalSandbox(resolver=resolver), Path(os.environ["OPENMLE_TEST_JOBS"]))
