"""Quality gate by the model: five dimensions, 0-5 each, every score tied to evidence.

The judge reads the inventory text, the spec and the gate's and baselines' records, and answers
JSON. A malformed answer, a model error or a timeout is an *evaluation error*: it is recorded
and retried up to a bound, and when every attempt erred the verdict is ``"error"``, never a
silent pass and never a silent rejection. A valid answer becomes ``recommended``,
``conditional`` or ``rejected`` by configurable thresholds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from attrs import asdict, field, frozen

from openmle import _summary_contract as _contract
from openmle._protocols import OperatorModel
from openmle._types import Message
from openmle.builder._spec import PURPOSE_KEY
from openmle.errors import InvalidArgument
from openmle.operators import ask_json

__all__ = ["DIMENSIONS", "PURPOSE_JUDGE", "JudgeResult", "JudgeThresholds", "judge_task"]

PURPOSE_JUDGE = _contract.BUILDER_JUDGE_PURPOSE
"""A request for a quality judgement; ``metadata["evidence"]`` holds the records it judges."""

DIMENSIONS = (
    "task_validity",
    "data_sufficiency",
    "raw_data_use",
    "task_complexity",
    "data_quality",
)
"""The five quality dimensions, each scored 0 (unusable) to 5 (excellent)."""


def _check_thresholds(instance: JudgeThresholds, attribute: object, value: object) -> None:
    for name in ("recommended_mean", "recommended_min", "conditional_mean", "conditional_min"):
        v = getattr(instance, name)
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 5:
            raise InvalidArgument(f"Expected JudgeThresholds.{name} in [0, 5] but got {v!r}")


@frozen(kw_only=True)
class JudgeThresholds:
    """Verdict thresholds on the mean and the lowest of the five scores.

    ``recommended`` needs both recommended bounds, ``conditional`` both conditional bounds;
    anything below is ``rejected``.
    """

    recommended_mean: float = 3.5
    recommended_min: float = 3.0
    conditional_mean: float = 2.5
    conditional_min: float = field(default=2.0, validator=_check_thresholds)

    def verdict(self, scores: Mapping[str, int]) -> str:
        """``"recommended"``, ``"conditional"`` or ``"rejected"`` for ``scores``."""
        values = [scores[d] for d in DIMENSIONS]
        mean, low = sum(values) / len(values), min(values)
        if mean >= self.recommended_mean and low >= self.recommended_min:
            return "recommended"
        if mean >= self.conditional_mean and low >= self.conditional_min:
            return "conditional"
        return "rejected"

    def to_dict(self) -> dict[str, float]:
        """A JSON-ready dict: every field, in declaration order."""
        return asdict(self)


@frozen(kw_only=True)
class JudgeResult:
    """The quality stage's record.

    Args:
        verdict: ``recommended``, ``conditional``, ``rejected`` or ``error`` (no valid answer).
        scores: per dimension, 0-5 (empty on error).
        evidence: per dimension, the judge's evidence.
        errors: each failed attempt's error (malformed answer, model error, timeout).
    """

    verdict: str
    scores: dict[str, int]
    evidence: dict[str, str]
    errors: tuple[str, ...]
    thresholds: JudgeThresholds

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "verdict": self.verdict,
            "scores": dict(self.scores),
            "evidence": dict(self.evidence),
            "errors": list(self.errors),
            "thresholds": self.thresholds.to_dict(),
        }


def parse_judgement(obj: Any) -> tuple[dict[str, int], dict[str, str]]:
    """Check a decoded judge answer.

    Raises:
        ValueError: the first problem (a missing dimension, a score outside 0-5, no evidence).
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("scores"), dict):
        raise ValueError('the answer must be {"scores": {dimension: {"score", "evidence"}}}')
    scores: dict[str, int] = {}
    evidence: dict[str, str] = {}
    for d in DIMENSIONS:
        item = obj["scores"].get(d)
        if not isinstance(item, dict):
            raise ValueError(f"dimension {d!r} is missing")
        s, ev = item.get("score"), item.get("evidence")
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s):
            raise ValueError(f"{d}.score must be an integer 0-5")
        if s != int(s) or not 0 <= s <= 5:
            raise ValueError(f"{d}.score must be an integer 0-5")
        if not isinstance(ev, str) or not ev.strip():
            raise ValueError(f"{d}.evidence must cite the inventory or the gate")
        scores[d], evidence[d] = int(s), ev.strip()[:1000]
    return scores, evidence


def judge_messages(evidence: Mapping[str, Any], inventory_text: str) -> list[Message]:
    """The judge prompt."""
    return [
        Message(
            role="system",
            content="You review a machine-learning task built from raw data. Score each of "
            f"{', '.join(DIMENSIONS)} from 0 (unusable) to 5 (excellent), each with evidence "
            "quoted from the inventory or the records. Answer one JSON object: "
            '{"scores": {"<dimension>": {"score": <0-5>, "evidence": "<text>"}, ...}}',
        ),
        Message(
            role="user",
            content="Inventory:\n"
            + inventory_text
            + "\n\nRecords:\n"
            + json.dumps(evidence, indent=1, sort_keys=True)[:20000],
        ),
    ]


async def judge_task(
    model: OperatorModel,
    evidence: Mapping[str, Any],
    inventory_text: str,
    *,
    thresholds: JudgeThresholds | None = None,
    max_attempts: int = 3,
    timeout_s: float = 300.0,
) -> JudgeResult:
    """Ask ``model`` for a quality judgement; errors are retried, then reported."""
    limits = thresholds or JudgeThresholds()
    asked = await ask_json(
        model,
        judge_messages(evidence, inventory_text),
        parse_judgement,
        metadata={PURPOSE_KEY: PURPOSE_JUDGE, "evidence": dict(evidence)},
        max_attempts=max_attempts,
        timeout_s=timeout_s,
        on_model_error="retry",
    )
    prefix = {
        "timeout": "timeout: ",
        "model_error": "model error: ",
        "invalid": "malformed answer: ",
    }
    errors = tuple(prefix[a.kind] + a.error for a in asked.attempts if a.kind != "ok")
    if asked.value is None:
        return JudgeResult(
            verdict="error", scores={}, evidence={}, errors=errors, thresholds=limits
        )
    scores, ev = asked.value
    return JudgeResult(
        verdict=limits.verdict(scores), scores=scores, evidence=ev, errors=errors, thresholds=limits
    )
