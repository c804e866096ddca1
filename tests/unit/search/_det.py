"""Deterministic search fakes shared by the run-directory tests.

A model whose program depends on the whole prompt (so on the parents and the memory), a grader
of its programs, and the ordered search they run: two runs with the same arguments write the
same journal, which is what the resume and export tests compare.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from openmle import Job, ModelRequest, Outcome, RunResult
from openmle.search import Budget, SearchConfig, SearchSpec, run_search
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

ORDERED = SearchConfig(initial_drafts=3, seed=7, fresh_draft_prob=0.1)
"""The search configuration of :func:`ordered_run` unless one is given."""


def det_model(request: ModelRequest, fail_below: float = 0.2) -> str:
    """A deterministic model: the program depends on the whole prompt (so on the parents); a
    prompt hashing below ``fail_below`` (as a fraction) gets a program that raises.
    """
    digest = hashlib.sha256(request.messages[-1].content.encode()).hexdigest()
    value = int(digest[:6], 16) / 0xFFFFFF
    if value < fail_below:
        return "```python\nraise ValueError('bad value 3')\n```"
    return f"```python\nscore = {value:.6f}\n```"


def det_grade(job: Job) -> RunResult:
    """Grades 'score = x' programs; others fail with a runtime error."""
    if "score = " not in job.code:
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR,
            split=job.split,
            error_signature="ValueError: bad value <n>",
            logs="Traceback (most recent call last):\nValueError: bad value 3\n",
            runtime_s=0.5,
        )
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=1.0)


def det_parts() -> dict[str, Any]:
    """Model, sandbox and selector shared by an original run and its resumes."""
    return {
        "model": ScriptedModel(det_model),
        "sandbox": FunctionSandbox(det_grade),
        "selector": FunctionSelector(lambda c: 0.1 + (c.score or 0.0)),
    }


def ordered_run(
    out: Path,
    *,
    steps: int = 14,
    workers: int = 2,
    config: SearchConfig = ORDERED,
    description: str = "",
    **parts: Any,
) -> Path:
    """An uninterrupted ordered run of task "toy" into ``out`` with ``parts`` (model,
    sandbox, selector, prompts...); returns ``out``.
    """
    run_search(
        SearchSpec(
            task="toy",
            higher_is_better=True,
            **parts,
            budget=Budget(steps=steps),
            config=config,
            workers=workers,
            ordered=True,
            description=description,
        ),
        run_dir=out,
    )
    return out
