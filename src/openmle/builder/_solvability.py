"""Solvability: a constant baseline and a quick real model, run through the sandbox.

Both run as ordinary :class:`~openmle.Job` programs on the staged package's ``valid`` split
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

from attrs import frozen

from openmle._protocols import Sandbox
from openmle._types import Job, Split
from openmle.builder._prepare import StageResolver
from openmle.builder._spec import TaskSpec

__all__ = ["Baseline", "Solvability", "check_solvability", "synthetic_leaderboard"]

LEADERBOARD_SIZE = 50

CONSTANT = """import os, shutil
shutil.copyfile(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), "submission.csv")
"""

GBM = """import json, os
import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

SPEC = json.loads({spec!r})
d = os.environ["DATA_DIR"]
idc, target, metric = SPEC["id"], SPEC["target"], SPEC["metric"]
train = pd.read_csv(os.path.join(d, "train.csv"), dtype={{idc: str, target: str}})
test = pd.read_csv(os.path.join(d, "test.csv"), dtype={{idc: str}})
sample = pd.read_csv(os.path.join(d, "sample_submission.csv"), dtype={{idc: str}}, nrows=1)
feats = [c for c in test.columns if c != idc and c in train.columns]
both = pd.concat([train[feats], test[feats]], keys=["a", "b"])
for c in feats:
    if not pd.api.types.is_numeric_dtype(both[c]):
        both[c] = both[c].astype("category").cat.codes
X, Xt = both.loc["a"].to_numpy(float), both.loc["b"].to_numpy(float)
y = train[target]
out = pd.DataFrame({{idc: test[idc]}})
if metric in ("rmse", "mae", "rmsle") or SPEC["task_type"] == "regression":
    model = HistGradientBoostingRegressor(max_iter=100, random_state=0)
    pred = model.fit(X, y.astype(float)).predict(Xt)
    out[target] = np.clip(pred, 0.0, None) if metric == "rmsle" else pred
else:
    model = HistGradientBoostingClassifier(max_iter=100, random_state=0).fit(X, y)
    classes = [str(c) for c in model.classes_]
    proba = model.predict_proba(Xt)
    if metric == "auc":
        low = [c.strip().lower() for c in classes]
        truthy = {{"1", "1.0", "true", "yes", "y", "t"}}
        if any(c in truthy for c in low):
            pos = next(i for i, c in enumerate(low) if c in truthy)
        else:
            try:
                pos = int(np.argmax([float(c) for c in low]))
            except ValueError:
                pos = int(np.argmax([c == sorted(low)[-1] for c in low]))
        out[target] = proba[:, pos]
    elif metric == "log_loss":
        for col in sample.columns[1:]:
            out[col] = proba[:, classes.index(col)] if col in classes else 0.0
    elif metric == "map@k":
        top = np.argsort(-proba, axis=1, kind="stable")[:, : SPEC["k"]]
        out[target] = [" ".join(classes[j] for j in row) for row in top]
    else:
        out[target] = model.predict(Xt)
out.to_csv("submission.csv", index=False)
"""


@frozen(kw_only=True)
class Baseline:
    """One baseline's run: its name, outcome, score on the valid split and detail."""

    name: str
    outcome: str
    score: float | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "name": self.name,
            "outcome": self.outcome,
            "score": self.score,
            "detail": self.detail,
        }


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
    constant = await _run(sandbox, "constant", CONSTANT, package, timeout_s)
    info = {
        "id": spec.submission_id,
        "target": spec.target,
        "metric": spec.metric,
        "k": spec.metric_params.get("k"),
        "task_type": spec.task_type,
    }
    model = await _run(
        sandbox, "gradient-boosting", GBM.format(spec=json.dumps(info)), package, timeout_s
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
