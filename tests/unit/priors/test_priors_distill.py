"""Distillation from artifacts with a scripted model: good records, malformed answers,
records citing excluded tasks, refused sources, timeouts and model errors."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from openmle import ModelRequest, ModelResponse, OperatorModel
from openmle.errors import ModelRateLimited
from openmle.priors import Artifact, Exclusions, adistill, default_exclusions, distill
from openmle.testing import ScriptedModel

GOOD = {
    "priors": [
        {
            "kind": "method",
            "text": "Target-encode high-cardinality categoricals inside the CV folds.",
            "task_type": "classification",
            "modality": "tabular",
            "metric_family": "auc",
            "size_band": "medium",
            "family": "lightgbm",
            "effect": 0.004,
            "cites": ["home-credit-default-risk"],
        },
        {"kind": "pitfall", "text": "Do not fit scalers on the test set.", "cites": []},
    ]
}

WRITEUP = Artifact(
    name="home credit 5th place",
    text="We used LightGBM with target encoding...",
    source_id="home-credit-default-risk",
    licence="CC-BY-4.0",
)


def test_good_records(tmp_path: Path) -> None:
    """A valid answer becomes typed priors with provenance; one call, the prompt is ours."""
    model = ScriptedModel(["```json\n" + json.dumps(GOOD) + "\n```"])
    path = tmp_path / "w.txt"
    path.write_text(WRITEUP.text)
    art = Artifact.from_file(path, source_id=WRITEUP.source_id, licence="CC-BY-4.0")
    report = distill(model, [art, art])
    assert [f.reason for f in report.failures] == ["same name and text as an earlier artifact"]
    assert not report.refusals
    a, b = report.library.priors
    assert (a.kind, a.modality, a.effect, a.n, a.licence) == (
        "method",
        "tabular",
        0.004,
        1,
        "CC-BY-4.0",
    )
    assert a.provenance == "artifact" and a.source == "w.txt"
    assert "home-credit-default-risk" in a.source_ids
    assert (b.kind, b.task_type, b.effect) == ("pitfall", "any", None)
    assert len(model.requests) == 1
    prompt = model.requests[0].messages[-1].content
    assert WRITEUP.text in prompt and '"priors"' in prompt


def test_malformed_retried_with_error_then_reported() -> None:
    """Malformed answers are sent back with the validation error; after the bound, reported."""
    bad_kind = {"priors": [{"kind": "hint", "text": "x"}]}
    model = ScriptedModel(["not json at all", json.dumps(bad_kind), json.dumps(GOOD)])
    report = distill(model, [WRITEUP], max_attempts=3)
    assert len(report.library) == 2 and not report.failures
    retry = model.requests[1].messages
    assert retry[-2].role == "assistant" and retry[-2].content == "not json at all"
    assert "no JSON object" in retry[-1].content
    assert "Prior.kind" in model.requests[2].messages[-1].content

    flood = {"priors": [{"kind": "trick", "text": "x", "cites": ["a"] * 1000}]}
    deep = '{"a":' + "[" * 20_000 + "]" * 20_000 + "}"
    model = ScriptedModel([json.dumps(flood), deep, "x" * 300_000, json.dumps(GOOD)])
    report = distill(model, [WRITEUP], max_attempts=4)
    assert len(report.library) == 2
    errors = [r.messages[-1].content for r in model.requests[1:]]
    assert "cites holds 1000" in errors[0] and "nested" in errors[1] and "300000" in errors[2]

    stubborn = ScriptedModel(['{"priors": "none"}'] * 2)
    report = distill(stubborn, [WRITEUP], max_attempts=2)
    assert len(report.library) == 0 and not report.refusals
    (failure,) = report.failures
    assert failure.attempts == 2 and "priors" in failure.reason and failure.source == WRITEUP.name


def test_record_citing_excluded_task_is_refused() -> None:
    """A record that cites an excluded competition is refused and recorded; others are kept."""
    answer = {
        "priors": [
            GOOD["priors"][0],
            {
                "kind": "trick",
                "text": "Use TTA with flips.",
                "cites": ["Aerial Cactus Identification"],
            },
        ]
    }
    report = distill(ScriptedModel([json.dumps(answer)]), [WRITEUP])
    assert [p.kind for p in report.library.priors] == ["method"]
    (refusal,) = report.refusals
    assert "aerial-cactus-identification" in refusal.reason


def test_excluded_source_is_never_sent() -> None:
    """Sources about an excluded task (suite id, user's list, data hash) never reach the model."""
    model = ScriptedModel([json.dumps(GOOD)])
    arts = [
        Artifact(name="Spooky Author Identification - 2nd place", text="..."),
        Artifact(name="my notes", text="...", source_id="my-holdout"),
        Artifact(name="other notes", text="...", data_hashes=("cafe01",)),
        WRITEUP,
    ]
    excl = Exclusions(ids=["my-holdout"], data_hashes=["CAFE01"])
    report = distill(model, arts, exclusions=default_exclusions(extra=excl))
    assert [r.source for r in report.refusals] == [a.name for a in arts[:3]]
    assert len(model.requests) == 1 and WRITEUP.text in model.requests[0].messages[-1].content
    assert len(report.library) == 2


def test_timeout_and_model_error_are_reported() -> None:
    """A call past its timeout and a ModelError are reported per source; the rest go on."""

    inner = ScriptedModel([json.dumps(GOOD)])

    class Slow(OperatorModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            if "slow" in request.messages[-1].content:
                await anyio.sleep(30)
            if "limited" in request.messages[-1].content:
                raise ModelRateLimited("429 slow down")
            return await inner.complete(request)

    model = Slow()
    arts = [
        Artifact(name="a", text="slow write-up"),
        Artifact(name="b", text="limited write-up"),
        Artifact(name="c", text="fine write-up"),
    ]

    async def go() -> None:
        report = await adistill(model, arts, timeout_s=0.2)
        reasons = {f.source: f.reason for f in report.failures}
        assert "timed out" in reasons["a"] and "ModelRateLimited" in reasons["b"]
        assert [p.source for p in report.library.priors] == ["c", "c"]

    anyio.run(go)
