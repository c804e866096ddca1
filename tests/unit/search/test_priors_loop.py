"""Priors in the search loop: Draft and Improve prompts carry the retrieved block, each node
records which priors it was shown, the manifest holds the library's hash, and resume keeps the
same library (a different one is refused)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.unit.search._toy import toy_spec

from openmle import Job, Message, ModelRequest, Operator, Outcome, RunResult
from openmle.backends import OfflineModel
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.priors import PRIORS_BEGIN, Prior, PriorLibrary, priors_for_search, save_library
from openmle.search import (
    Budget,
    ResumeSpec,
    RunDir,
    SearchConfig,
    SearchSpec,
    resume_search,
    run_search,
)
from openmle.testing import FunctionSandbox, FunctionSelector, ScriptedModel

LIB = PriorLibrary(
    [
        Prior(
            prior_id="boost",
            kind="method",
            text="Gradient boosting: hgb(max_iter=300).",
            source="w",
        ),
        Prior(
            prior_id="leak", kind="pitfall", text="Never fit on the validation rows.", source="w"
        ),
    ]
)
OTHER = PriorLibrary([Prior(prior_id="x", kind="trick", text="Average seeds.", source="w")])


def grade(job: Job) -> RunResult:
    if "raise" in job.code:
        return RunResult(
            outcome=Outcome.RUNTIME_ERROR, split=job.split, error_signature="E", runtime_s=0.1
        )
    value = float(job.code.split("score = ")[1].split()[0])
    return RunResult(outcome=Outcome.SUCCESS, score=value, split=job.split, runtime_s=0.2)


class Recording:
    """A scripted model that keeps every request (steps 2 and 6 fail, so Debug runs)."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> str:
        self.requests.append(request)
        step = int(request.metadata.get("step", 0))
        if step in (2, 6):
            return "```python\nraise ValueError\n```"
        return f"```python\nscore = {0.1 + 0.01 * step}\n```"


DESCRIPTION = "A small tabular regression task."


def _shown(priors: Any) -> Any:
    """What the CLI and the bench do: retrieve and render before the search."""
    if priors is None:
        return None
    return priors_for_search(priors, task="toy", description=DESCRIPTION)


def _search(tmp_path: Path, name: str, priors: Any, model: Recording, steps: int = 10) -> Path:
    out = tmp_path / name
    run_search(
        toy_spec(
            ScriptedModel(model),
            FunctionSandbox(grade),
            budget=Budget(steps=steps),
            config=SearchConfig(initial_drafts=2, seed=1, crossover_prob=0.5),
            description=DESCRIPTION,
            priors=_shown(priors),
        ),
        run_dir=out,
    )
    return out


def test_draft_and_improve_prompts_show_the_block_and_nodes_record_it(tmp_path: Path) -> None:
    model = Recording()
    out = _search(tmp_path, "a", LIB, model)
    ops = {r.operator for r in model.requests}
    assert {Operator.DRAFT, Operator.IMPROVE, Operator.DEBUG} <= ops
    for r in model.requests:
        shown = PRIORS_BEGIN in r.messages[-1].content
        assert shown == (r.operator in (Operator.DRAFT, Operator.IMPROVE)), r.operator
    manifest = json.loads((out / "manifest.json").read_text())
    entry = manifest["extra"]["priors"]
    assert entry["sha256"] == LIB.content_hash and entry["n_priors"] == 2
    assert entry["shown"] == ["boost", "leak"] and PRIORS_BEGIN in entry["block"]
    nodes = RunDir.open(out).nodes()
    for n in nodes:
        want = ("boost", "leak") if n.operator in (Operator.DRAFT, Operator.IMPROVE) else ()
        assert n.priors_shown == want, n.node_id
    # The journal carries it, so exports and reports can read it.
    assert any("priors_shown" in line for line in (out / "journal.jsonl").read_text().split("\n"))


def test_no_priors_no_block_and_no_record(tmp_path: Path) -> None:
    model = Recording()
    out = _search(tmp_path, "a", None, model, steps=4)
    assert all(PRIORS_BEGIN not in r.messages[-1].content for r in model.requests)
    assert "priors" not in json.loads((out / "manifest.json").read_text())["extra"]
    assert "priors_shown" not in (out / "journal.jsonl").read_text()


def test_a_library_file_works_like_the_library(tmp_path: Path) -> None:
    path = tmp_path / "lib.jsonl"
    save_library(LIB, path)
    a = _search(tmp_path, "a", LIB, Recording(), steps=5)
    b = _search(tmp_path, "b", path, Recording(), steps=5)
    ja = [n.to_dict() for n in RunDir.open(a).nodes()]
    jb = [n.to_dict() for n in RunDir.open(b).nodes()]
    for x, y in zip(ja, jb, strict=True):
        assert x.get("priors_shown") == y.get("priors_shown") and x["code"] == y["code"]


def test_resume_keeps_the_library_and_refuses_another(tmp_path: Path) -> None:
    out = _search(tmp_path, "a", LIB, Recording(), steps=4)
    kw: dict[str, Any] = {
        "model": ScriptedModel(Recording()),
        "sandbox": FunctionSandbox(grade),
        "selector": FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
    }
    with pytest.raises(InvalidArgument, match=r"sha256.*same library"):
        resume_search(
            out, ResumeSpec(priors_sha256=OTHER.content_hash, budget=Budget(steps=6), **kw)
        )
    model = Recording()
    kw["model"] = ScriptedModel(model)
    result = resume_search(
        out, ResumeSpec(priors_sha256=LIB.content_hash, budget=Budget(steps=7), **kw)
    )
    assert len(result.nodes) == 7
    late = [r for r in model.requests if r.operator in (Operator.DRAFT, Operator.IMPROVE)]
    assert late and all(PRIORS_BEGIN in r.messages[-1].content for r in late)
    # Without priors_sha256= the manifest's block is shown again.
    model2 = Recording()
    kw["model"] = ScriptedModel(model2)
    resume_search(out, ResumeSpec(budget=Budget(steps=9), **kw))
    late = [r for r in model2.requests if r.operator in (Operator.DRAFT, Operator.IMPROVE)]
    assert late and all(PRIORS_BEGIN in r.messages[-1].content for r in late)
    plain = _search(tmp_path, "b", None, Recording(), steps=3)
    with pytest.raises(InvalidArgument, match="started without priors"):
        resume_search(
            plain, ResumeSpec(priors_sha256=LIB.content_hash, budget=Budget(steps=5), **kw)
        )


def test_bad_priors_argument_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="priors"):
        _search(tmp_path, "a", 42, Recording())
    assert not (tmp_path / "a").exists()
    with pytest.raises(InvalidArgumentType, match="priors_for_search"):
        SearchSpec(
            task="toy",
            model=ScriptedModel(Recording()),
            sandbox=FunctionSandbox(grade),
            budget=Budget(steps=1),
            priors=LIB,  # type: ignore[arg-type]  # a library, not its rendered block
        )
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(InvalidArgument, match="line 1"):
        _search(tmp_path, "b", tmp_path / "bad.jsonl", Recording())
    assert not (tmp_path / "b").exists()


def _draft(text: str, seed: int) -> dict[str, Any]:
    request = ModelRequest(
        messages=(Message(role="user", content=text),), operator=Operator.DRAFT, seed=seed
    )
    answer = anyio.run(OfflineModel(sklearn=True, bug_rate=0.0).complete, request)
    found = re.search(r"^# recipe: (\{.*\})$", answer.text, re.MULTILINE)
    assert found is not None
    recipe: dict[str, Any] = json.loads(found.group(1))
    return recipe


def test_offline_model_drafts_the_model_a_method_prior_names() -> None:
    block = (
        f"{PRIORS_BEGIN}\n- [pitfall] knn(k=5, weighted=False) was slow.\n"
        "- [method] best: hgb(l2=1.0, learning_rate=0.2, max_iter=300, max_leaf_nodes=7) on "
        "standardize\nPRIORS>>>"
    )
    for seed in range(8):
        plain = _draft("Task: predict y.", seed)
        advised = _draft(f"Task: predict y.\n{block}", seed)
        m = advised["models"][0]
        assert m["name"] == "hgb", plain
        assert m["params"] == {
            "l2": 1.0,
            "learning_rate": 0.2,
            "max_iter": 300,
            "max_leaf_nodes": 7,
        }
    # Off-grid values fall back to the defaults; a pitfall alone advises nothing.
    odd = f"{PRIORS_BEGIN}\n- [method] rf(n_estimators=7) helped\nPRIORS>>>"
    assert _draft(odd, 0)["models"][0] == {
        "name": "rf",
        "params": {"n_estimators": 120, "max_depth": 12, "min_leaf": 3},
    }
    only_pitfall = f"{PRIORS_BEGIN}\n- [pitfall] hgb(max_iter=300) overfit\nPRIORS>>>"
    names = {_draft(only_pitfall, s)["models"][0]["name"] for s in range(12)}
    assert names != {"hgb"}


def test_priors_from_a_run_quote_its_best_program(tmp_path: Path) -> None:
    """The run's best program becomes a method prior with its gain over the mean Draft."""
    from openmle.priors import priors_from_run

    out = _search(tmp_path, "a", None, Recording(), steps=8)
    nodes = RunDir.open(out).nodes()
    best = max((n for n in nodes if n.score is not None), key=lambda n: n.score or 0.0)
    drafts = [n.score for n in nodes if not n.parent_ids and n.score is not None]
    (prior,) = [p for p in priors_from_run(out) if p.prior_id.endswith("-best")]
    assert prior.kind == "method" and prior.n == len(drafts)
    assert best.score is not None
    assert prior.effect == pytest.approx(best.score - sum(drafts) / len(drafts))
    assert "the best validation score came from this program" in prior.text
    assert prior.source_ids[0] == "toy"


def test_the_deprecated_keyword_form_still_takes_a_library(tmp_path: Path) -> None:
    """run_search("toy", priors=library) (deprecated) shows the same block as the spec form,
    and resume_search(dir, priors=library) checks its hash."""
    a = _search(tmp_path, "a", LIB, Recording(), steps=4)
    b = tmp_path / "b"
    parts: dict[str, Any] = {
        "sandbox": FunctionSandbox(grade),
        "selector": FunctionSelector(lambda c: 1.0 + (c.score or 0.0)),
    }
    with pytest.warns(DeprecationWarning, match="SearchSpec"):
        run_search(
            "toy",
            higher_is_better=True,
            model=ScriptedModel(Recording()),
            budget=Budget(steps=4),
            config=SearchConfig(initial_drafts=2, seed=1, crossover_prob=0.5),
            workers=1,
            description=DESCRIPTION,
            priors=LIB,
            run_dir=b,
            quiet=True,
            **parts,
        )
    extra = [json.loads((d / "manifest.json").read_text())["extra"]["priors"] for d in (a, b)]
    assert extra[0] == extra[1]
    with (
        pytest.warns(DeprecationWarning, match="0.2.0"),
        pytest.raises(InvalidArgument, match="same library"),
    ):
        resume_search(b, model=ScriptedModel(Recording()), priors=OTHER, quiet=True, **parts)
    with (
        pytest.warns(DeprecationWarning, match="0.2.0"),
        pytest.raises(InvalidArgumentType, match="priors_for"),
    ):
        run_search("toy", model=ScriptedModel(Recording()), priors="lib.jsonl", **parts)
