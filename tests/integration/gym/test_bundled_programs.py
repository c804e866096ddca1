"""Real programs on the bundled tasks: a better program scores clearly better on both splits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openmle import Split
from openmle.gym import bundled

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# One program for all three tasks: "linear" = one-hot + impute + linear model,
# "gbm" = the same features into histogram gradient boosting with early stopping.
PROGRAM = r"""
import os, sys
import numpy as np, pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

kind = sys.argv[1]
data = os.environ["DATA_DIR"]
train = pd.read_csv(os.path.join(data, "train.csv"))
test = pd.read_csv(os.path.join(data, "test.csv"))
sample = pd.read_csv(os.path.join(data, "sample_submission.csv"))
target = [c for c in train.columns if c not in test.columns][0]
y = train.pop(target)
X = pd.get_dummies(pd.concat([train, test]).drop(columns=["id"]), dtype=float)
X = X.fillna(X.iloc[: len(train)].median())
Xtr, Xte = X.iloc[: len(train)], X.iloc[len(train):]
pred_cols = [c for c in sample.columns if c != "id"]
out = pd.DataFrame({"id": test["id"]})
if len(pred_cols) > 1 or y.nunique() == 2:
    model = (HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05,
                                            early_stopping=True, random_state=0)
             if kind == "gbm"
             else make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)))
    model.fit(Xtr, y)
    proba = model.predict_proba(Xte)
    if len(pred_cols) > 1:
        for j, c in enumerate(model.classes_):
            out[c] = proba[:, j]
    else:
        out[pred_cols[0]] = proba[:, 1]
else:
    model = (HistGradientBoostingRegressor(max_iter=200, learning_rate=0.05,
                                           early_stopping=True, random_state=0)
             if kind == "gbm" else make_pipeline(StandardScaler(), Ridge()))
    model.fit(Xtr, y)
    out[pred_cols[0]] = model.predict(Xte)
out.to_csv("submission.csv", index=False)
"""


@pytest.mark.parametrize("name", ["tabular-binary", "tabular-multiclass", "tabular-regression"])
@pytest.mark.parametrize("split", [Split.VALID, Split.TEST])
def test_gbm_beats_linear_beats_sample(name: str, split: Split, tmp_path: Path) -> None:
    """Gradient boosting > linear model > sample submission, by the task's direction."""
    pytest.importorskip("sklearn", reason="needs sklearn: pip install 'openmle[data]'")
    task = bundled(name)
    scores = {}
    for kind in ("linear", "gbm"):
        work = tmp_path / kind
        work.mkdir()
        subprocess.run(
            [sys.executable, "-c", PROGRAM, kind],
            cwd=work,
            env={**os.environ, "DATA_DIR": str(task.public_dir(split)), "OMP_NUM_THREADS": "1"},
            check=True,
            capture_output=True,
            timeout=300,
        )
        report = task.grade(work / "submission.csv", split)
        assert report.valid, report.reason
        assert report.score is not None
        scores[kind] = report.score
    sample = task.grade(task.public_dir(split) / "sample_submission.csv", split).score
    assert sample is not None
    sign = 1.0 if task.higher_is_better else -1.0
    span = abs(scores["gbm"] - sample)
    assert sign * (scores["gbm"] - scores["linear"]) > 0.05 * span, scores
    assert sign * (scores["linear"] - sample) > 0.05 * span, (scores, sample)
