"""The model's quality gate: errors are retried and reported, never a silent pass or reject."""

from __future__ import annotations

import json

import anyio
import pytest

from openmle import ModelRequest, ModelResponse
from openmle.backends import OfflineModel
from openmle.builder import DIMENSIONS, PURPOSE_JUDGE, PURPOSE_KEY, JudgeThresholds
from openmle.builder._judge import judge_task
from openmle.errors import InvalidArgument, ModelError


def _answer(score: int) -> str:
    return json.dumps(
        {"scores": {d: {"score": score, "evidence": f"{d}: 40 rows"} for d in DIMENSIONS}}
    )


class _Script:
    """Answers from a script: a string is the answer, "HANG" never answers, an exception raises."""

    def __init__(self, steps: list[object]) -> None:
        self.steps = steps
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        assert request.metadata[PURPOSE_KEY] == PURPOSE_JUDGE
        step = self.steps[self.calls]
        self.calls += 1
        if step == "HANG":
            await anyio.sleep_forever()
        if isinstance(step, Exception):
            raise step
        return ModelResponse(text=str(step))


def _judge(model: object, **kw: object) -> object:
    return anyio.run(lambda: judge_task(model, {"gate": {"passed": True}}, "inventory", **kw))  # type: ignore[arg-type]


def test_malformed_then_timeout_then_low_score_is_error_error_rejected() -> None:
    model = _Script(["{not json", "HANG", _answer(1)])
    result = _judge(model, timeout_s=0.5, max_attempts=3)
    assert result.verdict == "rejected"  # type: ignore[attr-defined]
    errors = result.errors  # type: ignore[attr-defined]
    assert len(errors) == 2
    assert errors[0].startswith("malformed answer")
    assert errors[1].startswith("timeout")
    assert result.scores == dict.fromkeys(DIMENSIONS, 1)  # type: ignore[attr-defined]
    assert result.to_dict()["errors"] == list(errors)  # type: ignore[attr-defined]


def test_only_errors_is_an_error_verdict_not_a_pass_or_reject() -> None:
    model = _Script(["[]", ModelError("service down"), '{"scores": {}}'])
    result = _judge(model, max_attempts=3)
    assert result.verdict == "error"  # type: ignore[attr-defined]
    assert result.scores == {}  # type: ignore[attr-defined]
    assert [e.split(":")[0] for e in result.errors] == [  # type: ignore[attr-defined]
        "malformed answer",
        "model error",
        "malformed answer",
    ]


@pytest.mark.parametrize(
    ("score", "verdict"), [(5, "recommended"), (3, "conditional"), (2, "rejected")]
)
def test_thresholds_are_configurable(score: int, verdict: str) -> None:
    limits = JudgeThresholds(
        recommended_mean=4, recommended_min=4, conditional_mean=3, conditional_min=3
    )
    assert _judge(_Script([_answer(score)]), thresholds=limits).verdict == verdict  # type: ignore[attr-defined]


def test_scores_need_evidence_and_range() -> None:
    bad = json.loads(_answer(3))
    bad["scores"]["data_quality"]["evidence"] = " "
    out_of_range = json.loads(_answer(3))
    out_of_range["scores"]["task_validity"]["score"] = 7
    result = _judge(_Script([json.dumps(bad), json.dumps(out_of_range)]), max_attempts=2)
    assert result.verdict == "error"  # type: ignore[attr-defined]
    assert "evidence" in result.errors[0] and "0-5" in result.errors[1]  # type: ignore[attr-defined]


def test_bad_thresholds_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="recommended_mean"):
        JudgeThresholds(recommended_mean=9)


def test_offline_model_judges_from_the_records() -> None:
    evidence = {
        "spec": {"data_file": "d.csv", "id_column": None},
        "inventory": {
            "files": [
                {
                    "path": "d.csv",
                    "rows": 1500,
                    "columns": [{"missing": 0}, {"missing": 0}, {"missing": 30}],
                }
            ]
        },
        "gate": {"passed": True, "findings": []},
        "solvability": {"solvable": True, "constant": {"score": 0.5}, "model": {"score": 0.8}},
    }
    result = anyio.run(lambda: judge_task(OfflineModel(), evidence, "inv"))
    assert result.errors == ()
    assert (
        result.scores["data_sufficiency"] == 4
        and "1500 labelled rows" in result.evidence["data_sufficiency"]
    )
    assert result.scores["task_validity"] == 5
