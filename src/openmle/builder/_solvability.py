"""Solvability: a constant baseline and a quick real model, run through the sandbox.

Both run as ordinary :class:`~openmle.Job` programs (real modules in
:mod:`openmle.builder._baselines`, read as text) on the staged package's ``valid`` split
(a hold-out of the public training data), so they see exactly what a candidate program sees and
are graded by the task's own grader. The task is solvable when both submissions are valid, the
real model (scikit-learn histogram gradient boosting) beats the constant one, and it is not
perfect. Their scores seed the package's leaderboard, which is **synthetic**: evenly spread
scores between the constant baseline and a little beyond the real model, not results of real
people, so medals and human rank have meaningful bounds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from attrs import asdict, frozen

from openmle._embedded import fill, source
from openmle._protocols import Sandbox
from openmle._types import Job, Split
from openmle.builder._prepare import StageResolver
from openmle.builder._spec import TaskSpec

__all__ = ["Baseline", "Solvability", "check_solvability", "synthetic_leaderboard"]

LEADERBOARD_SIZE = 50

BASELINES = "openmle.builder._baselines"
"""The package holding the baseline programs (real modules, read as text)."""


def baseline_program(kind: str, facts: dict[str, Any] | None = None) -> str:
    """The program text of the baseline ``kind`` (``"constant"`` or ``"gradient_boosting"``):
    its module's source (:mod:`openmle.builder._baselines`), with the gradient-boosting
    module's call slot filled with ``facts`` as a JSON literal.

    Raises:
        ValueError: an unknown kind, or ``facts`` missing for gradient boosting.
    """
    if kind == "constant":
        return source(BASELINES, "constant.py")
    if kind == "gradient_boosting" and facts is not None:
        call = f"main(json.loads({json.dumps(facts)!r}))\n"
        return fill(source(BASELINES, "gradient_boosting.py"), {"call": call})
    raise ValueError(f"no baseline program {kind!r} (with facts: {facts is not None})")


@frozen(kw_only=True)
class Baseline:
    """One baseline's run: its name, outcome, score on the valid split and detail."""

    name: str
    outcome: str
    score: float | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: every field, in declaration order."""
        return asdict(self)


@frozen(kw_only=True)
class Solvability:
    """The solvability stage's record."""

    constant: Baseline
    model: Baseline
    higher_is_better: bool
    solvable: bool
    reason: str
    leaderboard: tuple[float, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "constant": self.constant.to_dict(),
            "model": self.model.to_dict(),
            "higher_is_better": self.higher_is_better,
            "solvable": self.solvable,
            "reason": self.reason,
            "leaderboard": "synthetic: spread between the constant and the real model's scores",
        }


def synthetic_leaderboard(
    constant: float, model: float, best: float, n: int = LEADERBOARD_SIZE
) -> tuple[float, ...]:
    """``n`` scores from the constant baseline to 25 % beyond the model, capped at ``best``."""
    span = model - constant
    lo, hi = sorted((constant, best))
    return tuple(min(max(constant + span * 1.25 * k / (n - 1), lo), hi) for k in range(n))


async def _run(sandbox: Sandbox, name: str, code: str, package: Path, timeout_s: float) -> Baseline:
    job = Job(code=code, task=str(package), split=Split.VALID, timeout_s=timeout_s, name=name)
    result = await sandbox.run(job)
    detail = result.detail
    if result.score is None and result.logs.strip():
        # The last lines of the program's output name the error (a traceback's last line).
        detail = f"{detail}; output tail: {result.logs.strip()[-400:]}"
    return Baseline(
        name=name, outcome=result.outcome.value, score=result.score, detail=detail[:600]
    )


async def check_solvability(
    sandbox: Sandbox,
    resolver: StageResolver,
    package: Path,
    spec: TaskSpec,
    *,
    timeout_s: float = 300.0,
) -> Solvability:
    """Run both baselines on ``package``'s valid split and judge the gap."""
    del resolver  # the package path resolves through openmle.gym
    constant = await _run(sandbox, "constant", baseline_program("constant"), package, timeout_s)
    info = {
        "id": spec.submission_id,
        "target": spec.target,
        "metric": spec.metric,
        "k": spec.metric_params.get("k"),
        "task_type": spec.task_type,
    }
    model = await _run(
        sandbox,
        "gradient-boosting",
        baseline_program("gradient_boosting", info),
        package,
        timeout_s,
    )
    hib = spec.higher_is_better
    best: float | None = 1.0 if spec.metric in ("accuracy", "auc", "macro_f1", "map@k") else 0.0
    if spec.custom:
        best = None  # a custom metric's best is not known
    reason: str = ""
    board: tuple[float, ...] = ()
    if constant.score is None or model.score is None:
        bad = constant if constant.score is None else model
        reason = f"the {bad.name} baseline gave no valid submission ({bad.outcome}: {bad.detail})"
    elif (model.score <= constant.score) if hib else (model.score >= constant.score):
        reason = (
            f"gradient boosting ({model.score:.6g}) does not beat the constant "
            f"({constant.score:.6g})"
        )
    elif best is not None and abs(model.score - best) <= 1e-12:
        reason = f"gradient boosting is perfect ({model.score:.6g}); the task is too easy"
    else:
        board = synthetic_leaderboard(
            constant.score,
            model.score,
            model.score + 0.25 * (model.score - constant.score) if best is None else best,
        )
    return Solvability(
        constant=constant,
        model=model,
        higher_is_better=hib,
        solvable=not reason,
        reason=reason,
        leaderboard=board,
    )
