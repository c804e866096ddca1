"""Priors from finished runs: validation evidence only, never the test score."""

from __future__ import annotations

import json
from pathlib import Path

from openmle import Job, ModelRequest, Outcome, RunResult, Split
from openmle.priors import (
    LexicalRetriever,
    TaskProfile,
    load_library,
    priors_from_run,
    priors_from_runs,
    save_library,
)
from openmle.search import Budget, RunDir, SearchConfig, SearchSpec, run_search
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

TEST_SCORE = 0.987654321


def model(request: ModelRequest) -> str:
    """Drafts write a sklearn program; improvements switch to lightgbm with a higher score."""
    if request.operator is not None and request.operator.value == "draft":
        return "```python\nimport sklearn\nscore = 0.5\n```"
    if "lightgbm" in request.messages[-1].content:
        return "```python\nimport lightgbm\nscore = 0.75\n```"
    return "```python\nimport lightgbm\nscore = 0.7\n```"


def grade(job: Job) -> RunResult:
    """Validation grades what the program says; the test split gets a marker score."""
    value = float(job.code.split("score = ")[1].split()[0])
    score = TEST_SCORE if job.split is Split.TEST else value
    return RunResult(outcome=Outcome.SUCCESS, score=score, split=job.split, runtime_s=1.0)


def make_run(path: Path) -> Path:
    run_search(
        SearchSpec(
            task="toy-tabular",
            model=ScriptedModel(model),
            sandbox=FunctionSandbox(grade),
            selector=FunctionSelector(lambda c: 0.1 + (c.score or 0.0)),
            budget=Budget(steps=6),
            config=SearchConfig(initial_drafts=2, seed=1, fresh_draft_prob=0.0),
            workers=1,
            ordered=True,
            higher_is_better=True,
            description="predict a binary label from tabular features",
        ),
        run_dir=path,
    )
    return path


def test_priors_from_a_run_use_validation_only(tmp_path: Path) -> None:
    """The sklearn -> lightgbm change is a method prior with its validation effect; the run's
    test score (which the run did journal) appears nowhere in the priors or the file."""
    run = make_run(tmp_path / "run")
    rd = RunDir.open(run)
    final = rd.final_result()
    rd.close()
    assert final is not None and final[1].score == TEST_SCORE  # the run did grade the test split
    profile = TaskProfile(task_type="classification", modality="tabular")
    priors = priors_from_run(run, profile=profile)
    switch = [p for p in priors if p.prior_id.endswith("sklearn-to-lightgbm")]
    assert switch, [p.prior_id for p in priors]
    (p,) = switch
    assert p.kind == "method" and p.family == "lightgbm" and p.provenance == "run"
    assert p.effect is not None and 0.19 < p.effect < 0.26 and p.n >= 1
    assert (p.task_type, p.modality, p.metric_family) == ("classification", "tabular", "any")
    assert "toy-tabular" in p.source_ids

    lib = priors_from_runs({run: profile})
    out = tmp_path / "lib.jsonl"
    save_library(lib, out)
    text = out.read_text()
    assert repr(TEST_SCORE)[:8] not in text and "0.98765" not in text
    for rec in map(json.loads, text.splitlines()):
        assert "test" not in json.dumps(rec).lower().replace("toy-", "")
    assert load_library(out) == lib
    # deterministic: the same run gives the same library
    assert priors_from_runs({run: profile}).content_hash == lib.content_hash
    # and retrieval finds the method prior for a matching task
    hits = LexicalRetriever().retrieve(
        lib, TaskProfile(description="binary label, tabular", task_type="classification"), k=3
    )
    assert hits and hits[0].kind == "method"
