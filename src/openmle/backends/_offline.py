"""An operator model that writes real tabular ML programs without any LLM.

:class:`OfflineModel` composes programs from building blocks — numpy models (ridge, softmax
regression, k-nearest neighbours) and, when scikit-learn is installed, random forests, extra
trees, histogram gradient boosting and linear models; features (missing-value flags,
imputation, log transforms, pairwise products, standardisation, one-hot or ordinal categories);
and hyperparameters. Each program carries its design as a ``# recipe:`` comment, the way a
person leaves a note at the top of a script.

How it reads its context (honestly: only what a language model would see):
- The parents are the programs in the request's fenced code blocks, in order; their recipes
  are read from their ``# recipe:`` lines. Nothing else about them is known.
- Debug reads the feedback text of the prompt (the program's output, the error) and repairs
  known error signatures: NaN or infinite inputs, a missing module, a timeout or memory limit.
  An unknown error falls back to a conservative program.
- Improve changes exactly one thing (a hyperparameter, a feature, the model, the imputation);
  Crossover blends the two parents' models and unites their features; Draft samples a fresh
  design. Drafts and improvements sometimes carry realistic bugs (no imputation before a model
  that rejects NaN, a log of a possibly non-positive column), so Debug has real work.

The programs inspect the data files at run time: the target is the train column absent from
``test.csv``, the id column and submission columns come from ``sample_submission.csv``, the
task kind from the target values and the submission shape, the metric from
``description.txt``. They hold out 20% of ``train.csv`` for their own check, print
``Final Validation Score: x`` (recorded by the search, never trusted by default), refit on all
rows and write ``submission.csv``. The model never sees answers: it has no access to any file.

Randomness comes only from ``ModelRequest.seed`` (the search derives one per step), so the
same request gives the same program.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import re
from typing import Any, final

import numpy as np
from attrs import define, field

from openmle._protocols import OperatorModel
from openmle._summary_contract import (
    NODE_SUMMARY_PURPOSE,
    OUTCOME_LINE_RE,
    PARENT_LINE_RE,
    PURPOSE_KEY,
    SUMMARY_KEYS,
)
from openmle._types import ModelRequest, ModelResponse, Operator, Usage

__all__ = ["OfflineModel", "render_program"]

_RECIPE = re.compile(r"^# recipe: (\{.*\})\s*$", re.MULTILINE)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", re.DOTALL)

Recipe = dict[str, Any]

NUMPY_MODELS = ("ridge", "logreg", "knn")
SKLEARN_MODELS = ("hgb", "rf", "et", "linear")

_GRID: dict[str, dict[str, list[Any]]] = {
    "ridge": {"alpha": [0.01, 0.1, 1.0, 10.0, 100.0]},
    "logreg": {"lr": [0.05, 0.1, 0.3], "epochs": [100, 200, 400], "l2": [0.0, 1e-3, 1e-2]},
    "knn": {"k": [5, 15, 31, 63], "weighted": [False, True]},
    "hgb": {
        "learning_rate": [0.03, 0.06, 0.1, 0.2],
        "max_iter": [100, 200, 300],
        "max_leaf_nodes": [7, 15, 31, 63],
        "l2": [0.0, 1.0, 5.0],
    },
    "rf": {"n_estimators": [60, 120, 200], "max_depth": [6, 12, None], "min_leaf": [1, 3, 8]},
    "et": {"n_estimators": [60, 120, 200], "max_depth": [8, 16, None], "min_leaf": [1, 3, 8]},
    "linear": {"c": [0.01, 0.1, 1.0, 10.0]},
}
_DEFAULTS: dict[str, dict[str, Any]] = {
    "ridge": {"alpha": 1.0},
    "logreg": {"lr": 0.1, "epochs": 200, "l2": 1e-3},
    "knn": {"k": 15, "weighted": True},
    "hgb": {"learning_rate": 0.1, "max_iter": 100, "max_leaf_nodes": 15, "l2": 0.0},
    "rf": {"n_estimators": 120, "max_depth": 12, "min_leaf": 3},
    "et": {"n_estimators": 120, "max_depth": 16, "min_leaf": 3},
    "linear": {"c": 1.0},
}
_FEATURES = ("missing_flags", "log1p", "poly2", "standardize", "log")
_NAN_OK = {"hgb"}
_SCALE_SENSITIVE = {"knn", "logreg", "linear", "ridge"}


def _sklearn_available() -> bool:
    return importlib.util.find_spec("sklearn") is not None


# ------------------------------------------------------------------------------- the program

_PRELUDE = '''\
import csv
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per run; the search runs several
import numpy as np
{imports}
DATA = os.environ.get("DATA_DIR", ".")


def read(name):
    with open(os.path.join(DATA, name), newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


# Inspect the files: the target is the train column missing from test.csv; the id and the
# submission columns come from sample_submission.csv.
train_h, train_rows = read("train.csv")
test_h, test_rows = read("test.csv")
sub_h, _ = read("sample_submission.csv")
id_col, out_cols = sub_h[0], sub_h[1:]
target = [c for c in train_h if c not in test_h][0]
feat_cols = [c for c in test_h if c != id_col]
desc_path = os.path.join(DATA, "description.txt")
description = open(desc_path, encoding="utf-8").read().lower() if os.path.exists(desc_path) else ""
y_raw = [r[train_h.index(target)] for r in train_rows]
print(f"train {{len(train_rows)}} rows, test {{len(test_rows)}} rows, target {{target!r}}")


def is_number(v):
    if v == "":
        return True
    try:
        float(v)
        return True
    except ValueError:
        return False


num_cols = [c for c in feat_cols if all(is_number(r[train_h.index(c)]) for r in train_rows)]
cat_cols = [c for c in feat_cols if c not in num_cols]


def numeric(rows, header):
    idx = [header.index(c) for c in num_cols]
    out = np.full((len(rows), len(idx)), np.nan)
    for i, r in enumerate(rows):
        for k, j in enumerate(idx):
            if r[j] != "":
                out[i, k] = float(r[j])
    return out


levels = {{c: sorted({{r[train_h.index(c)] for r in train_rows}}) for c in cat_cols}}


def categorical(rows, header):
    blocks = []
    for c in cat_cols:
        j = header.index(c)
        values = [r[j] for r in rows]
{cat_block}
    return np.hstack(blocks) if blocks else np.zeros((len(rows), 0))


# The task kind, from the submission shape and the target values.
if len(out_cols) > 1:
    kind, classes = "multiclass", list(out_cols)
    y = np.array([classes.index(v) for v in y_raw])
elif len(set(y_raw)) == 2 or not all(v != "" and is_number(v) for v in y_raw):
    kind = "binary" if len(set(y_raw)) == 2 else "labels"
    numeric_labels = all(v != "" and is_number(v) for v in y_raw)
    classes = sorted(set(y_raw), key=float) if numeric_labels else sorted(set(y_raw))
    y = np.array([classes.index(v) for v in y_raw])
else:
    kind, classes = "regression", []
    y = np.array([float(v) for v in y_raw])
K = len(classes)
words = ("auc", "probab", "log loss")
want_proba = kind == "multiclass" or (kind == "binary" and any(w in description for w in words))
print(f"task kind: {{kind}}; numeric {{len(num_cols)}}, categorical {{len(cat_cols)}} columns")


def features(num_tr, num_te, cat_tr, cat_te):
    """Feature engineering, fitted on the training rows only."""
    tr, te = num_tr.copy(), num_te.copy()
{feature_block}
    tr, te = np.hstack([tr, cat_tr]), np.hstack([te, cat_te])
{scale_block}
    return tr, te


{model_defs}

def fit_predict(x_tr, y_tr, x_te):
{input_check}    preds = []
{model_calls}
{combine}


def score(y_true, pred):
    if kind == "regression":
        return float(np.sqrt(np.mean((y_true - pred) ** 2)))
    p = np.clip(pred, 1e-15, 1.0)
    p = p / p.sum(axis=1, keepdims=True)
    if kind == "multiclass" or "log loss" in description:
        return float(-np.mean(np.log(p[np.arange(len(y_true)), y_true])))
    if "auc" in description:
        s, pos = p[:, 1], y_true == 1
        ranks = np.empty(len(s))
        ranks[np.argsort(s, kind="mergesort")] = np.arange(1, len(s) + 1)
        for v in np.unique(s):
            ranks[s == v] = ranks[s == v].mean()
        n_pos, n_neg = pos.sum(), (~pos).sum()
        return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
    return float(np.mean(p.argmax(axis=1) == y_true))


num_tr, num_te = numeric(train_rows, train_h), numeric(test_rows, test_h)
cat_tr, cat_te = categorical(train_rows, train_h), categorical(test_rows, test_h)

# Hold out 20% of the training rows for our own check.
order = np.random.default_rng(0).permutation(len(y))
cut = int(0.8 * len(y))
a, b = order[:cut], order[cut:]
x_a, x_b = features(num_tr[a], num_tr[b], cat_tr[a], cat_tr[b])
hold = fit_predict(x_a, y[a], x_b)
if not np.all(np.isfinite(hold)):
    raise ValueError("predictions contain NaN or infinity")
print(f"Final Validation Score: {{score(y[b], hold):.6f}}")

# Refit on every training row and predict the test rows.
x_tr, x_te = features(num_tr, num_te, cat_tr, cat_te)
pred = fit_predict(x_tr, y, x_te)
if not np.all(np.isfinite(pred)):
    raise ValueError("predictions contain NaN or infinity")
ids = [r[test_h.index(id_col)] for r in test_rows]
with open("submission.csv", "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\\n")
    w.writerow(sub_h)
    for i, row_id in enumerate(ids):
        if kind == "regression":
            w.writerow([row_id, f"{{pred[i]:.6f}}"])
        elif kind == "multiclass":
            w.writerow([row_id, *(f"{{v:.6f}}" for v in pred[i] / pred[i].sum())])
        elif want_proba:
            w.writerow([row_id, f"{{pred[i, 1] / pred[i].sum():.6f}}"])
        else:
            w.writerow([row_id, classes[int(np.argmax(pred[i]))]])
print("wrote submission.csv")
'''

_CAT = {
    "onehot": (
        "        keep = levels[c][:30]\n"
        "        blocks.append(np.array([[v == lv for lv in keep] for v in values], dtype=float))"
    ),
    "ordinal": (
        "        code = {lv: i for i, lv in enumerate(levels[c])}\n"
        "        blocks.append(np.array([[code.get(v, -1)] for v in values], dtype=float))"
    ),
}

_FEATURE_CODE = {
    "missing_flags": (
        "    # Flag missing values before filling them.\n"
        "    miss = np.isnan(num_tr).any(axis=0)\n"
        "    tr = np.hstack([tr, np.isnan(num_tr[:, miss]).astype(float)])\n"
        "    te = np.hstack([te, np.isnan(num_te[:, miss]).astype(float)])"
    ),
    "impute_median": (
        "    # Fill missing numbers with the training median.\n"
        "    med = np.nanmedian(num_tr, axis=0)\n"
        "    med = np.where(np.isnan(med), 0.0, med)\n"
        "    n = num_tr.shape[1]\n"
        "    tr[:, :n] = np.where(np.isnan(tr[:, :n]), med, tr[:, :n])\n"
        "    te[:, :n] = np.where(np.isnan(te[:, :n]), med, te[:, :n])"
    ),
    "impute_mean": (
        "    # Fill missing numbers with the training mean.\n"
        "    mean = np.nanmean(num_tr, axis=0)\n"
        "    mean = np.where(np.isnan(mean), 0.0, mean)\n"
        "    n = num_tr.shape[1]\n"
        "    tr[:, :n] = np.where(np.isnan(tr[:, :n]), mean, tr[:, :n])\n"
        "    te[:, :n] = np.where(np.isnan(te[:, :n]), mean, te[:, :n])"
    ),
    "log1p": (
        "    # Signed log1p of the numeric columns (safe for any sign).\n"
        "    n = num_tr.shape[1]\n"
        "    tr = np.hstack([tr, np.sign(tr[:, :n]) * np.log1p(np.abs(tr[:, :n]))])\n"
        "    te = np.hstack([te, np.sign(te[:, :n]) * np.log1p(np.abs(te[:, :n]))])"
    ),
    "log": (
        "    # Log of the numeric columns shifted by their training minimum.\n"
        "    n = num_tr.shape[1]\n"
        "    low = np.nanmin(tr[:, :n], axis=0)\n"
        "    with np.errstate(divide='ignore', invalid='ignore'):\n"
        "        tr = np.hstack([tr, np.log(tr[:, :n] - low)])\n"
        "        te = np.hstack([te, np.log(te[:, :n] - low)])"
    ),
    "poly2": (
        "    # Pairwise products of the first numeric columns.\n"
        "    n = min(num_tr.shape[1], 6)\n"
        "    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]\n"
        "    tr = np.hstack([tr] + [tr[:, i : i + 1] * tr[:, j : j + 1] for i, j in pairs])\n"
        "    te = np.hstack([te] + [te[:, i : i + 1] * te[:, j : j + 1] for i, j in pairs])"
    ),
}

_SCALE = (
    "    mu, sd = np.nanmean(tr, axis=0), np.nanstd(tr, axis=0)\n"
    "    sd = np.where(sd > 0, sd, 1.0)\n"
    "    tr, te = (tr - mu) / sd, (te - mu) / sd"
)

_MODEL_DEFS = {
    "ridge": '''\
def ridge(x_tr, y_tr, x_te, alpha):
    """Closed-form ridge regression; classes are fitted as one-hot targets."""
    xa = np.hstack([x_tr, np.ones((len(x_tr), 1))])
    xb = np.hstack([x_te, np.ones((len(x_te), 1))])
    t = np.eye(K)[y_tr] if K else y_tr[:, None]
    reg = alpha * np.eye(xa.shape[1])
    reg[-1, -1] = 0.0
    w = np.linalg.solve(xa.T @ xa + reg, xa.T @ t)
    out = xb @ w
    if not K:
        return out[:, 0]
    out = np.clip(out, 1e-3, None)
    return out / out.sum(axis=1, keepdims=True)
''',
    "logreg": '''\
def logreg(x_tr, y_tr, x_te, lr, epochs, l2):
    """Softmax regression by full-batch gradient descent (linear regression if no classes)."""
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0) + 1e-9
    a, b = (x_tr - mu) / sd, (x_te - mu) / sd
    a = np.hstack([a, np.ones((len(a), 1))])
    b = np.hstack([b, np.ones((len(b), 1))])
    if not K:
        w = np.zeros(a.shape[1])
        for _ in range(epochs):
            w -= lr * (a.T @ (a @ w - y_tr) / len(a) + l2 * w)
        return b @ w
    t = np.eye(K)[y_tr]
    w = np.zeros((a.shape[1], K))
    for _ in range(epochs):
        z = a @ w
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        w -= lr * (a.T @ (p - t) / len(a) + l2 * w)
    z = b @ w
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)
''',
    "knn": '''\
def knn(x_tr, y_tr, x_te, k, weighted):
    """k-nearest neighbours on standardised features, in chunks."""
    mu, sd = x_tr.mean(axis=0), x_tr.std(axis=0) + 1e-9
    a, b = (x_tr - mu) / sd, (x_te - mu) / sd
    out = []
    for s in range(0, len(b), 500):
        d = ((b[s:s + 500, None, :] - a[None, :, :]) ** 2).sum(axis=2)
        idx = np.argpartition(d, k, axis=1)[:, :k]
        near = np.take_along_axis(d, idx, axis=1)
        w = 1.0 / (np.sqrt(near) + 1e-6) if weighted else np.ones(idx.shape)
        if K:
            votes = np.zeros((len(idx), K))
            for c in range(K):
                votes[:, c] = (w * (y_tr[idx] == c)).sum(axis=1)
            votes += 0.5
            out.append(votes / votes.sum(axis=1, keepdims=True))
        else:
            out.append((w * y_tr[idx]).sum(axis=1) / w.sum(axis=1))
    return np.concatenate(out)
''',
    "hgb": '''\
def hgb(x_tr, y_tr, x_te, learning_rate, max_iter, max_leaf_nodes, l2):
    """Histogram gradient boosting (handles missing values natively)."""
    cls = HistGradientBoostingClassifier if K else HistGradientBoostingRegressor
    m = cls(learning_rate=learning_rate, max_iter=max_iter, max_leaf_nodes=max_leaf_nodes,
            l2_regularization=l2, random_state=0)
    m.fit(x_tr, y_tr)
    return proba(m, x_te) if K else m.predict(x_te)
''',
    "rf": '''\
def rf(x_tr, y_tr, x_te, n_estimators, max_depth, min_leaf):
    """Random forest."""
    cls = RandomForestClassifier if K else RandomForestRegressor
    m = cls(n_estimators=n_estimators, max_depth=max_depth, min_samples_leaf=min_leaf,
            random_state=0, n_jobs=1)
    m.fit(x_tr, y_tr)
    return proba(m, x_te) if K else m.predict(x_te)
''',
    "et": '''\
def et(x_tr, y_tr, x_te, n_estimators, max_depth, min_leaf):
    """Extremely randomised trees."""
    cls = ExtraTreesClassifier if K else ExtraTreesRegressor
    m = cls(n_estimators=n_estimators, max_depth=max_depth, min_samples_leaf=min_leaf,
            random_state=0, n_jobs=1)
    m.fit(x_tr, y_tr)
    return proba(m, x_te) if K else m.predict(x_te)
''',
    "linear": '''\
def linear(x_tr, y_tr, x_te, c):
    """Logistic regression for classes, ridge regression for numbers (sklearn)."""
    if K:
        m = LogisticRegression(C=c, max_iter=500)
        m.fit(x_tr, y_tr)
        return proba(m, x_te)
    m = Ridge(alpha=1.0 / c)
    m.fit(x_tr, y_tr)
    return m.predict(x_te)
''',
}

_INPUT_CHECK = (
    "    if not (np.all(np.isfinite(x_tr)) and np.all(np.isfinite(x_te))):\n"
    '        raise ValueError("Input X contains NaN or infinity; impute or transform it first")\n'
)

_PROBA = '''\
def proba(m, x):
    """Class probabilities in the order of `classes` (a class absent from a fold gets 0)."""
    out = np.zeros((len(x), K))
    out[:, m.classes_.astype(int)] = m.predict_proba(x)
    return out
'''

_SK_IMPORTS = {
    "hgb": "from sklearn.ensemble import HistGradientBoostingClassifier, "
    "HistGradientBoostingRegressor",
    "rf": "from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor",
    "et": "from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor",
    "linear": "from sklearn.linear_model import LogisticRegression, Ridge",
}


def render_program(recipe: Recipe, plan: str = "") -> str:
    """The Python program for ``recipe`` (a dict with models, features, impute, cat).

    The recipe is written as the program's first line (``# recipe: {...}``), so a later
    operator can read the design back from the code alone.
    """
    models = recipe["models"]
    names = [m["name"] for m in models]
    imports = "".join(_SK_IMPORTS[n] + "\n" for n in dict.fromkeys(names) if n in _SK_IMPORTS)
    feats = list(recipe["features"])
    steps: list[str] = []
    if "missing_flags" in feats:
        steps.append(_FEATURE_CODE["missing_flags"])
    if recipe["impute"] in ("median", "mean"):
        steps.append(_FEATURE_CODE[f"impute_{recipe['impute']}"])
    steps.extend(_FEATURE_CODE[f] for f in ("log", "log1p", "poly2") if f in feats)
    feature_block = "\n".join(steps) if steps else "    pass"
    scale_block = _SCALE if "standardize" in feats else "    pass"
    defs = [_MODEL_DEFS[n] for n in dict.fromkeys(names)]
    if any(n in _SK_IMPORTS for n in names):
        defs.insert(0, _PROBA)
    calls = "\n".join(
        f"    preds.append({m['name']}(x_tr, y_tr, x_te"
        + "".join(f", {k}={v!r}" for k, v in sorted(m["params"].items()))
        + "))"
        for m in models
    )
    body = _PRELUDE.format(
        imports=imports,
        cat_block=_CAT[recipe["cat"]],
        feature_block=feature_block,
        scale_block=scale_block,
        model_defs="\n\n".join(defs),
        input_check=_INPUT_CHECK if any(n in NUMPY_MODELS for n in names) else "",
        model_calls=calls,
        combine=(
            "    blend = sum(preds) / len(preds)  # an ensemble: average the models\n"
            "    return blend"
            if len(models) > 1
            else "    return preds[0]"
        ),
    )
    doc = (plan or "A tabular model.").replace('"""', "'''")
    header = f"# recipe: {json.dumps(recipe, sort_keys=True)}\n" + f'"""{doc}"""\n\n'
    return header + body


# ------------------------------------------------------------------------------- the designer


def _describe(recipe: Recipe) -> str:
    models = " + ".join(
        f"{m['name']}({', '.join(f'{k}={v}' for k, v in sorted(m['params'].items()))})"
        for m in recipe["models"]
    )
    feats = ", ".join(recipe["features"]) or "raw features"
    return f"{models} on {feats}; impute {recipe['impute']}; categories {recipe['cat']}"


def _builder_answer(request: ModelRequest) -> str | None:
    """The answer to a task-builder request (its kind in ``metadata["purpose"]``), else None."""
    from openmle._summary_contract import BUILDER_JUDGE_PURPOSE as PURPOSE_JUDGE
    from openmle._summary_contract import BUILDER_PREPARE_PURPOSE as PURPOSE_PREPARE
    from openmle._summary_contract import BUILDER_SPEC_PURPOSE as PURPOSE_SPEC
    from openmle.backends._offline_builder import offline_judgement, offline_prepare, offline_spec

    purpose = request.metadata.get(PURPOSE_KEY)
    if purpose == PURPOSE_SPEC:
        return json.dumps(offline_spec(request.metadata.get("inventory") or {}), sort_keys=True)
    if purpose == PURPOSE_PREPARE:
        return offline_prepare(request.metadata.get("spec") or {})
    if purpose == PURPOSE_JUDGE:
        return json.dumps(offline_judgement(request.metadata.get("evidence") or {}), sort_keys=True)
    return None


@final
@define(eq=False)
class OfflineModel(OperatorModel):
    """Writes runnable tabular ML programs for Draft, Improve, Debug and Crossover; no LLM.

    Args:
        sklearn: offer scikit-learn models (default: when it is importable here).
        bug_rate: probability that a Draft or Improve carries a realistic bug for Debug to fix.
        model: the model id reported in responses.
    """

    sklearn: bool | None = None
    bug_rate: float = 0.2
    model: str = "offline"
    calls: int = field(default=0, init=False)

    def _models(self) -> tuple[str, ...]:
        use = _sklearn_available() if self.sklearn is None else self.sklearn
        return NUMPY_MODELS + SKLEARN_MODELS if use else NUMPY_MODELS

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Write a program for ``request.operator`` from the parents in its messages (or, for
        a node-summary request of :class:`~openmle.search.SummaryStore`, the summary).
        """
        self.calls += 1
        text = "\n".join(m.content for m in request.messages)
        builder_answer = _builder_answer(request)
        if builder_answer is not None:
            return ModelResponse(
                text=builder_answer,
                usage=Usage(
                    prompt_tokens=max(1, len(text) // 4),
                    completion_tokens=max(1, len(builder_answer) // 4),
                ),
                model=self.model,
                finish_reason="stop",
            )
        if request.metadata.get(PURPOSE_KEY) == NODE_SUMMARY_PURPOSE:
            answer = _summarise(text)
            return ModelResponse(
                text=answer,
                usage=Usage(
                    prompt_tokens=max(1, len(text) // 4), completion_tokens=max(1, len(answer) // 4)
                ),
                model=self.model,
                finish_reason="stop",
            )
        seed = request.seed
        if seed is None:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
        rng = np.random.default_rng(seed)
        parents = [json.loads(m) for m in _RECIPE.findall(text)]
        op = request.operator or Operator.DRAFT
        if op is Operator.DEBUG and parents:
            recipe, plan = self._debug(parents[0], _feedback(text), rng)
        elif op is Operator.CROSSOVER and len(parents) >= 2:
            recipe, plan = self._crossover(parents[0], parents[1], rng)
        elif op in (Operator.IMPROVE, Operator.CROSSOVER) and parents:
            recipe, plan = self._improve(parents[0], rng)
        else:
            recipe, plan = self._draft(rng)
        program = render_program(recipe, plan)
        answer = f"{plan}\n\n```python\n{program}```\n"
        return ModelResponse(
            text=answer,
            usage=Usage(
                prompt_tokens=max(1, len(text) // 4), completion_tokens=max(1, len(answer) // 4)
            ),
            model=self.model,
            finish_reason="stop",
        )

    # ------------------------------------------------------------------------------ operators

    def _random_model(self, rng: np.random.Generator, avoid: str | None = None) -> dict[str, Any]:
        names = [n for n in self._models() if n != avoid]
        name = names[int(rng.integers(len(names)))]
        params = {k: v[int(rng.integers(len(v)))] for k, v in _GRID[name].items()}
        return {"name": name, "params": params}

    def _draft(self, rng: np.random.Generator) -> tuple[Recipe, str]:
        model = self._random_model(rng)
        feats = [f for f in ("missing_flags", "log1p", "poly2") if rng.random() < 0.3]
        if model["name"] in _SCALE_SENSITIVE or rng.random() < 0.3:
            feats.append("standardize")
        impute = "median" if rng.random() < 0.7 else "mean"
        if rng.random() < self.bug_rate:
            if rng.random() < 0.5:
                impute = "none"
            else:
                feats.insert(0, "log")
        recipe: Recipe = {
            "models": [model],
            "features": _ordered(feats),
            "impute": impute,
            "cat": "onehot" if rng.random() < 0.6 else "ordinal",
        }
        return recipe, f"Draft: {_describe(recipe)}."

    def _improve(self, parent: Recipe, rng: np.random.Generator) -> tuple[Recipe, str]:
        r = copy.deepcopy(parent)
        moves = ["param", "param", "param", "feature", "model", "cat"]
        move = moves[int(rng.integers(len(moves)))]
        idx = int(rng.integers(len(r["models"])))
        m = r["models"][idx]
        if move == "param" and _GRID.get(m["name"]):
            key = sorted(_GRID[m["name"]])[int(rng.integers(len(_GRID[m["name"]])))]
            options = [v for v in _GRID[m["name"]][key] if v != m["params"].get(key)]
            if options:
                value = options[int(rng.integers(len(options)))]
                m["params"][key] = value
                return r, f"Improve: set {m['name']}.{key}={value!r}; {_describe(r)}."
        if move == "feature":
            pool = [f for f in _FEATURES if f != "log" or rng.random() < self.bug_rate * 2]
            f = pool[int(rng.integers(len(pool)))]
            if f in r["features"]:
                r["features"].remove(f)
                return r, f"Improve: drop feature {f}; {_describe(r)}."
            r["features"] = _ordered([*r["features"], f])
            return r, f"Improve: add feature {f}; {_describe(r)}."
        if move == "cat":
            r["cat"] = "ordinal" if r["cat"] == "onehot" else "onehot"
            return r, f"Improve: encode categories as {r['cat']}; {_describe(r)}."
        new = self._random_model(rng, avoid=m["name"])
        new["params"] = dict(_DEFAULTS[new["name"]])
        r["models"][idx] = new
        if new["name"] in _SCALE_SENSITIVE and "standardize" not in r["features"]:
            r["features"] = _ordered([*r["features"], "standardize"])
        return r, f"Improve: replace {m['name']} with {new['name']}; {_describe(r)}."

    def _crossover(self, a: Recipe, b: Recipe, rng: np.random.Generator) -> tuple[Recipe, str]:
        models = [copy.deepcopy(a["models"][0])]
        other = b["models"][0]
        if other != models[0]:
            models.append(copy.deepcopy(other))
        feats = _ordered(sorted(set(a["features"]) | set(b["features"])))
        impute = a["impute"] if a["impute"] != "none" else b["impute"]
        r: Recipe = {"models": models, "features": feats, "impute": impute, "cat": a["cat"]}
        return r, f"Crossover: blend both parents' models and unite their features; {_describe(r)}."

    def _debug(self, parent: Recipe, feedback: str, rng: np.random.Generator) -> tuple[Recipe, str]:
        r = copy.deepcopy(parent)
        fb = feedback.lower()
        fixes: list[str] = []
        if re.search(r"infinit|\binf\b|divide by zero", fb) and "log" in r["features"]:
            r["features"] = _ordered([f for f in r["features"] if f != "log"] + ["log1p"])
            fixes.append(
                "replace the log of shifted columns (infinite at the minimum) by a signed log1p"
            )
        if re.search(r"\bnan\b", fb) and r["impute"] == "none":
            r["impute"] = "median"
            fixes.append("impute missing values with the training median")
        if "no module named" in fb:
            for m in r["models"]:
                if m["name"] in SKLEARN_MODELS:
                    m["name"] = "ridge" if m["name"] == "linear" else "knn"
                    m["params"] = dict(_DEFAULTS[m["name"]])
            r["features"] = _ordered([*r["features"], "standardize"])
            fixes.append("replace scikit-learn models by numpy ones (the module is missing)")
        if any(w in fb for w in ("timeout", "wall-clock limit", "out_of_memory", "memoryerror")):
            for m in r["models"]:
                for key in ("n_estimators", "max_iter", "epochs"):
                    if key in m["params"]:
                        m["params"][key] = max(20, int(m["params"][key]) // 3)
                if m["name"] == "knn":
                    m["name"], m["params"] = "ridge", dict(_DEFAULTS["ridge"])
            r["features"] = [f for f in r["features"] if f != "poly2"]
            fixes.append("make the program cheaper (fewer iterations, no pairwise products)")
        if not fixes:
            # Unknown error: fall back to a conservative design that keeps the parent's model.
            r["impute"] = "median"
            r["features"] = _ordered([f for f in r["features"] if f in ("standardize", "log1p")])
            r["cat"] = "onehot"
            fixes.append("rewrite conservatively (median imputation, safe features)")
        return r, f"Debug: {'; '.join(fixes)}; {_describe(r)}."


def _ordered(feats: list[str]) -> list[str]:
    return [f for f in _FEATURES if f in set(feats)]


_SECTION = re.compile(r"^#{1,3} (.+)$", re.MULTILINE)


def _feedback(text: str) -> str:
    """The feedback the prompt shows: its ``Feedback`` sections, else the text outside code.

    Only the feedback is read, so wording elsewhere (a submission checklist that mentions
    missing or infinite values) cannot trigger a repair.
    """
    heads = list(_SECTION.finditer(text))
    parts = [
        text[h.end() : heads[i + 1].start() if i + 1 < len(heads) else len(text)]
        for i, h in enumerate(heads)
        if h.group(1).strip().lower().startswith("feedback")
    ]
    if parts:
        return "\n".join(parts)
    return _FENCE.sub(lambda m: "" if "# recipe:" in m.group(1) else m.group(0), text)


_SCORE_LINE = OUTCOME_LINE_RE
_PARENT_LINE = PARENT_LINE_RE


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _summarise(text: str) -> str:
    """A node summary (the JSON :class:`~openmle.search.SummaryStore` asks for) from the
    summary prompt alone: the method from the program's recipe line, the lesson from the
    validation scores the prompt states.
    """
    recipes = _RECIPE.findall(text)
    try:
        method = f"Fits {_describe(json.loads(recipes[-1]))}."
    except (IndexError, ValueError, KeyError, TypeError):
        method = "A program without a readable recipe."
    own = _SCORE_LINE.search(text)
    outcome, score = (own.group(1), _number(own.group(2))) if own else ("unknown", None)
    parent = _PARENT_LINE.search(text)
    before = None if parent is None else _number(parent.group(2))
    if score is None:
        lesson = f"It did not produce a validation score (outcome {outcome})."
    elif parent is not None and before is not None:
        lesson = (
            f"Validation {score:.6g} against {before:.6g} for parent {parent.group(1)} "
            f"({score - before:+.4g})."
        )
    else:
        lesson = f"Validation {score:.6g} with no scored parent to compare with."
    return json.dumps(dict(zip(SUMMARY_KEYS, (method, lesson), strict=True)))
