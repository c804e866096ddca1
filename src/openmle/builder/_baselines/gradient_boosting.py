"""The real-model baseline: scikit-learn's histogram gradient boosting on the raw features.

Run as a sandbox job's ``main.py`` (see :mod:`openmle.builder._baselines`): the last line's
call is a slot that :func:`openmle.builder._solvability.baseline_program` fills with the task's
facts as a JSON literal (``id``, ``target``, ``metric``, ``k``, ``task_type``). Reads
``$DATA_DIR/{train,test,sample_submission}.csv`` and writes ``./submission.csv`` in the
format the metric needs (probabilities of the positive class for AUC, one column per class for
log loss, the top ``k`` classes for MAP@k, else the prediction).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

_TRUTHY = {"1", "1.0", "true", "yes", "y", "t"}


def _positive(classes: list[str]) -> int:
    """The index of the positive class: a truthy label, else the largest number, else the
    last label in sorted order.
    """
    low = [c.strip().lower() for c in classes]
    if any(c in _TRUTHY for c in low):
        return next(i for i, c in enumerate(low) if c in _TRUTHY)
    try:
        return int(np.argmax([float(c) for c in low]))
    except ValueError:
        return int(np.argmax([c == sorted(low)[-1] for c in low]))


def main(spec: dict[str, Any]) -> None:
    """Fit on ``train.csv``, predict ``test.csv`` and write ``submission.csv``."""
    d = os.environ["DATA_DIR"]
    idc, target, metric = spec["id"], spec["target"], spec["metric"]
    train = pd.read_csv(os.path.join(d, "train.csv"), dtype={idc: str, target: str})
    test = pd.read_csv(os.path.join(d, "test.csv"), dtype={idc: str})
    sample = pd.read_csv(os.path.join(d, "sample_submission.csv"), dtype={idc: str}, nrows=1)
    feats = [c for c in test.columns if c != idc and c in train.columns]
    both = pd.concat([train[feats], test[feats]], keys=["a", "b"])
    for c in feats:
        if not pd.api.types.is_numeric_dtype(both[c]):
            both[c] = both[c].astype("category").cat.codes
    x, xt = both.loc["a"].to_numpy(float), both.loc["b"].to_numpy(float)
    y = train[target]
    out = pd.DataFrame({idc: test[idc]})
    if metric in ("rmse", "mae", "rmsle") or spec["task_type"] == "regression":
        regressor = HistGradientBoostingRegressor(max_iter=100, random_state=0)
        pred = regressor.fit(x, y.astype(float)).predict(xt)
        out[target] = np.clip(pred, 0.0, None) if metric == "rmsle" else pred
    else:
        model = HistGradientBoostingClassifier(max_iter=100, random_state=0).fit(x, y)
        classes = [str(c) for c in model.classes_]
        proba = model.predict_proba(xt)
        if metric == "auc":
            out[target] = proba[:, _positive(classes)]
        elif metric == "log_loss":
            for col in sample.columns[1:]:
                out[col] = proba[:, classes.index(col)] if col in classes else 0.0
        elif metric == "map@k":
            top = np.argsort(-proba, axis=1, kind="stable")[:, : spec["k"]]
            out[target] = [" ".join(classes[j] for j in row) for row in top]
        else:
            out[target] = model.predict(xt)
    out.to_csv("submission.csv", index=False)


if __name__ == "__main__":
    main(json.loads("{}"))  # <<call>>
