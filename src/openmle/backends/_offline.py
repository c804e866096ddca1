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
- Cross-task priors (the ``<<<PRIORS ... PRIORS>>>`` block of a Draft or Improve prompt, see
  :func:`openmle.priors.render_priors`): a ``method`` or ``trick`` line that names one of its
  models as ``name(key=value, ...)`` (the way its own plans do) is advice it follows. A Draft
  then builds an advised model (chosen by the seed among them, in block order), with the
  advised hyperparameters that are on its grid; an Improve that would replace the model
  replaces it by an advised one. ``pitfall`` lines and models it cannot build are ignored.

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

from openmle._embedded import fill, parts, source
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
_PRIORS_BLOCK = re.compile(r"<<<PRIORS[^\n]*\n(.*?)PRIORS>>>", re.DOTALL)
_ADVISED = re.compile(r"\b(ridge|logreg|knn|hgb|rf|et|linear)\(([^()]*)\)")
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

_PROGRAMS = "openmle.backends._offline_programs"
"""The package holding the program template (``tabular.py``) and its parts."""

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
    part = parts(_PROGRAMS, "tabular_parts.py")
    models = recipe["models"]
    names = [m["name"] for m in models]
    imports = "".join(_SK_IMPORTS[n] + "\n" for n in dict.fromkeys(names) if n in _SK_IMPORTS)
    feats = list(recipe["features"])
    steps: list[str] = []
    if "missing_flags" in feats:
        steps.append(part["feature:missing_flags"])
    if recipe["impute"] in ("median", "mean"):
        steps.append(part[f"feature:impute_{recipe['impute']}"])
    steps.extend(part[f"feature:{f}"] for f in ("log", "log1p", "poly2") if f in feats)
    defs = [part[f"model:{n}"] for n in dict.fromkeys(names)]
    if any(n in _SK_IMPORTS for n in names):
        defs.insert(0, part["proba"])
    calls = "".join(
        f"preds.append({m['name']}(x_tr, y_tr, x_te"
        + "".join(f", {k}={v!r}" for k, v in sorted(m["params"].items()))
        + "))\n"
        for m in models
    )
    doc = (plan or "A tabular model.").replace('"""', "'''")
    return fill(
        source(_PROGRAMS, "tabular.py"),
        {
            "recipe": f"# recipe: {json.dumps(recipe, sort_keys=True)}\n",
            "docstring": f'"""{doc}"""\n',
            "imports": imports,
            "cat_block": part[f"cat:{recipe['cat']}"],
            "feature_block": "".join(steps) or "pass\n",
            "scale_block": part["scale"] if "standardize" in feats else "pass\n",
            "model_defs": "\n\n".join(defs) + "\n",
            "input_check": part["input_check"] if any(n in NUMPY_MODELS for n in names) else "",
            "model_calls": calls,
            "combine": (
                "blend = sum(preds) / len(preds)  # an ensemble: average the models\nreturn blend\n"
                if len(models) > 1
                else "return preds[0]\n"
            ),
        },
    )


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
            return self._response(text, builder_answer)
        if request.metadata.get(PURPOSE_KEY) == NODE_SUMMARY_PURPOSE:
            return self._response(text, _summarise(text))
        seed = request.seed
        if seed is None:
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
        rng = np.random.default_rng(seed)
        parents = [json.loads(m) for m in _RECIPE.findall(_without_priors(text))]
        op = request.operator or Operator.DRAFT
        advised = self._advised(text) if op in (Operator.DRAFT, Operator.IMPROVE) else []
        if op is Operator.DEBUG and parents:
            recipe, plan = self._debug(parents[0], _feedback(text), rng)
        elif op is Operator.CROSSOVER and len(parents) >= 2:
            recipe, plan = self._crossover(parents[0], parents[1], rng)
        elif op in (Operator.IMPROVE, Operator.CROSSOVER) and parents:
            recipe, plan = self._improve(parents[0], rng, advised)
        else:
            recipe, plan = self._draft(rng, advised)
        program = render_program(recipe, plan)
        return self._response(text, f"{plan}\n\n```python\n{program}```\n")

    def _response(self, prompt: str, answer: str) -> ModelResponse:
        """``answer`` as a finished response, its usage estimated at 4 characters a token."""
        return ModelResponse(
            text=answer,
            usage=Usage(
                prompt_tokens=max(1, len(prompt) // 4), completion_tokens=max(1, len(answer) // 4)
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

    def _advised(self, text: str) -> list[dict[str, Any]]:
        """The models the priors block advises (method and trick lines), in block order, with
        the advised hyperparameters that are on the grid (the rest at their defaults).
        """
        block = _PRIORS_BLOCK.search(text)
        if block is None:
            return []
        out: list[dict[str, Any]] = []
        for line in block.group(1).splitlines():
            if not line.lstrip().startswith(("- [method]", "- [trick]")):
                continue
            for name, args in _ADVISED.findall(line):
                if name not in self._models():
                    continue
                params = dict(_DEFAULTS[name])
                for part in args.split(","):
                    key, eq, raw = part.partition("=")
                    key = key.strip()
                    if not eq or key not in _GRID[name]:
                        continue
                    for option in _GRID[name][key]:
                        if repr(option) == raw.strip() or str(option) == raw.strip():
                            params[key] = option
                model = {"name": name, "params": params}
                if model not in out:
                    out.append(model)
        return out

    def _draft(
        self, rng: np.random.Generator, advised: list[dict[str, Any]] | None = None
    ) -> tuple[Recipe, str]:
        model = self._random_model(rng)
        if advised:
            model = copy.deepcopy(advised[int(rng.integers(len(advised)))])
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

    def _improve(
        self,
        parent: Recipe,
        rng: np.random.Generator,
        advised: list[dict[str, Any]] | None = None,
    ) -> tuple[Recipe, str]:
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
        others = [a for a in advised or () if a["name"] != m["name"]]
        if others:
            new = copy.deepcopy(others[int(rng.integers(len(others)))])
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


def _without_priors(text: str) -> str:
    """``text`` without its priors block (advice is never mistaken for a parent program)."""
    return _PRIORS_BLOCK.sub("", text)


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
