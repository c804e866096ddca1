"""The offline model's answers to task-builder requests (no LLM): a spec and a prepare.py.

The inventory's hints come first: the user's goal (its target and metric), the raw sample
submission (its labelled table, target, id column and answer format: labels are graded by
accuracy, a probability by AUC, probabilities per class by log loss, values by RMSE) and the
metric the raw description names. Without hints, for simple tabular data: the largest table
with a target candidate, its first target candidate,
its first id candidate (else numbered rows); a target with at most 20 whole or text values is a
classification (binary: AUC; multiclass: log loss), otherwise a regression (RMSE). The
prepare.py is a fixed, standard-library template parametrised by the spec
(``_offline_programs/builder_prepare.py``): a seeded shuffle,
labelled rows only, a constant sample submission. Deterministic: same inventory, same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from openmle._embedded import fill, source

__all__ = ["offline_prepare", "offline_spec"]

_MAX_CLASSES = 20

_PROGRAMS = "openmle.backends._offline_programs"
_SPLIT = "openmle.gym"  # _splitrules.py: standard library only, embedded in prepare.py


_FORMAT_METRIC = {
    "labels": "accuracy",
    "probability": "auc",
    "probabilities": "log_loss",
    "values": "rmse",
}
_FORMAT_METRICS = {
    "labels": ("accuracy", "macro_f1"),
    "probability": ("auc",),
    "probabilities": ("log_loss",),
    "values": ("rmse", "rmsle", "mae"),
}
_METRIC_TYPES = {
    "accuracy": ("binary", "multiclass"),
    "auc": ("binary",),
    "log_loss": ("binary", "multiclass"),
    "macro_f1": ("binary", "multiclass"),
    "rmse": ("regression",),
    "rmsle": ("regression",),
    "mae": ("regression",),
}


def _choose(
    inventory: Mapping[str, Any], files: Mapping[str, Any], hints: Mapping[str, Any]
) -> tuple[str, str] | None:
    """The (table, target): the goal's, the sample submission's, else the largest candidate."""
    candidates = [c.rsplit(":", 1) for c in inventory.get("target_candidates", [])]
    skip = {hints.get("sample_file"), *(hints.get("unlabeled_files") or [])}
    usable = [(p, c) for p, c in candidates if p in files and p not in skip]
    goal = hints.get("goal_target")
    if goal is not None:
        chosen = next(((p, c) for p, c in usable if c == goal), None)
        if chosen is not None:
            return chosen
    if hints.get("target") and hints.get("labelled_file") in files:
        return str(hints["labelled_file"]), str(hints["target"])
    if not usable:
        return None
    # A column named like a label (churn, target, ...) before a table's last column, then
    # the largest table: a side table of many rows must not win by its size alone.
    return max(usable, key=lambda pc: (_named(pc[1]), files[pc[0]]["rows"], -usable.index(pc)))


_LABEL_WORDS = ("target", "label", "class", "y", "outcome", "species", "churn", "price")


def _named(column: str) -> bool:
    low = column.strip().lower()
    return low in _LABEL_WORDS or low.endswith(tuple("_" + w for w in _LABEL_WORDS))


_TIME_NAMES = ("date", "time", "timestamp", "datetime", "year")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?([ T]\d{2}:\d{2}(:\d{2})?)?$")


def _time_column(
    columns: list[Mapping[str, Any]], target: str, id_column: str | None
) -> str | None:
    """A filled column that orders the rows in time: ISO dates (by its most frequent values),
    else a whole-number column named like a time (``date``, ``year``, ``order_date``...).
    The test set is then the latest rows (a time split), as a forecast would be.
    """
    for c in columns:
        name = str(c["name"])
        if name in (target, id_column) or c["missing"] or c["unique"] < 2:
            continue
        top = [str(t) for t in c.get("top") or []]
        if c["kind"] == "categorical" and top and all(_ISO_DATE.match(t) for t in top):
            return name
        words = re.split(r"[^a-z]+", name.lower())
        if c["kind"] == "integer" and any(w in _TIME_NAMES for w in words):
            return name
    return None


def _describe(target: str, stem: str, hints: Mapping[str, Any], follows_sample: bool) -> str:
    text = f"Predict the column {target!r} of each row of {stem} from the others."
    if follows_sample:
        text += (
            f" As in the raw sample submission {hints.get('sample_file')!r}: one row per id "
            f"{hints.get('id_column')!r}, the answer given as {hints.get('answer_format')}."
        )
    return text[:2000]


_CLASS_FOLDERS = "image_folders"  # openmle.builder._inventory.CLASS_FOLDERS
_IMAGES = ("png", "jpg", "jpeg", "bmp", "gif", "webp", "tif", "tiff")
_TEXT_WORDS = 5.0


def _inputs(
    inventory: Mapping[str, Any],
    files: Mapping[str, Any],
    hints: Mapping[str, Any],
    path: str,
    target: str,
    id_column: str | None,
) -> dict[str, Any]:
    """What the rows carry: the folder holding every raw image (an image task), free-text
    columns (a text task), other tables sharing a key column (a multi-table task).
    """
    table = files[path]
    if table.get("format") == _CLASS_FOLDERS:  # a per-class image folder: its images are rows
        file = table["columns"][0]["name"]  # "file", or the sample submission's id column
        return {"images": "" if path == "./" else path.rstrip("/"), "image_column": file}
    cols = {c["name"]: c for c in table["columns"]}
    images = [f["path"] for f in inventory.get("files", []) if str(f.get("format")) in _IMAGES]
    out: dict[str, Any] = {}
    if images:
        parts = [p.split("/")[:-1] for p in images]
        common: list[str] = []
        for level in zip(*parts, strict=False):
            if len(set(level)) > 1:
                break
            common.append(level[0])
        out["images"] = "/".join(common)
        named = [
            c["name"]
            for c in table["columns"]
            if c["name"] not in (target, id_column)
            and c.get("top")
            and all(str(t).lower().rsplit(".", 1)[-1] in _IMAGES for t in c["top"])
        ]
        out["image_column"] = named[0] if named else None
    texts = [
        n
        for n, c in cols.items()
        if n not in (target, id_column)
        and c["kind"] == "categorical"
        and (c.get("mean_words") or 0.0) >= _TEXT_WORDS
    ]
    if texts:
        out["text_columns"] = texts
    barred = {path, hints.get("sample_file"), *(hints.get("unlabeled_files") or [])}
    joins = []
    for other, info in sorted(files.items()):
        names = {c["name"] for c in info["columns"]}
        if other in barred or target in names or names <= set(cols):
            continue  # the labelled table, the answer, or its unlabeled twin (no new column)
        for c in info["columns"]:
            mine = cols.get(c["name"])
            if mine is not None and c["name"] != target and (c["all_unique"] or mine["all_unique"]):
                joins.append({"file": other, "key": c["name"]})
                break
    if joins:
        out["joins"] = joins
    return out


def offline_spec(inventory: Mapping[str, Any]) -> dict[str, Any]:
    """A task spec for the inventory's hints, else its largest table with a target candidate."""
    files = {f["path"]: f for f in inventory.get("files", []) if f.get("rows") is not None}
    hints = inventory.get("hints") or {}
    chosen = _choose(inventory, files, hints)
    if chosen is None:
        return {"error": "no table with a target candidate"}
    path, target = chosen
    table = files[path]
    col = next(c for c in table["columns"] if c["name"] == target)
    ids = [
        c.rsplit(":", 1)[1]
        for c in inventory.get("id_candidates", [])
        if c.rsplit(":", 1)[0] == path
    ]
    id_column = next((c for c in ids if c != target), None)
    given = next((c for c in table["columns"] if c["name"] == hints.get("id_column")), None)
    if given is not None and given["all_unique"] and given["name"] != target:
        id_column = given["name"]
    classes = col["unique"]
    if table.get("format") == _CLASS_FOLDERS or (  # a folder per class: always classes
        col["kind"] in ("categorical", "integer")
        and not col["unique_capped"]
        and classes <= _MAX_CLASSES
    ):
        task_type = "binary" if classes == 2 else "multiclass"
        metric = "auc" if classes == 2 else "log_loss"
    else:
        task_type, metric = "regression", "rmse"
    follows_sample = target == hints.get("target") and path == hints.get("labelled_file")
    if follows_sample:
        fmt = hints.get("answer_format")
        if fmt in ("labels", "probability", "probabilities") and task_type == "regression":
            task_type = "binary" if classes == 2 else "multiclass"
        if fmt == "values":
            task_type = "regression"
        metric = _FORMAT_METRIC.get(str(fmt), metric)
    fits = _FORMAT_METRICS.get(str(hints.get("answer_format"))) if follows_sample else None
    for named in (hints.get("metric"), hints.get("description_metric")):
        fit = named in _METRIC_TYPES and task_type in _METRIC_TYPES[named]
        if fit and (fits is None or named in fits):
            metric = str(named)
            break
    if metric == "rmsle" and (col.get("minimum") or 0.0) < 0:
        metric = "rmse"
    stem = path.rstrip("/").rsplit("/", 1)[-1].rsplit(".", 1)[0] or "images"
    time_column = _time_column(table["columns"], target, id_column)
    split: dict[str, Any] | None = {"kind": "time", "column": time_column} if time_column else None
    inputs = _inputs(inventory, files, hints, path, target, id_column)
    if split is None and inputs and task_type != "regression":
        split = {"kind": "stratified", "column": None}
    for join in inputs.get("joins", []):
        key = next(c for c in table["columns"] if c["name"] == join["key"])
        if split is None and not key["all_unique"] and key["name"] != id_column:
            split = {"kind": "group", "column": key["name"]}  # no key on both sides
    return {
        "title": f"Predict {target} ({stem})"[:80],
        "data_file": path,
        "target": target,
        "id_column": id_column,
        "task_type": task_type,
        "metric": metric,
        "test_fraction": 0.2,
        "seed": 0,
        **({"split": split} if split else {}),
        **({"inputs": inputs} if inputs else {}),
        "description": hints.get("description") or _describe(target, stem, hints, follows_sample),
    }


def offline_prepare(spec: Mapping[str, Any]) -> str:
    """A prepare.py for ``spec``, as a fenced Python block."""
    text = json.dumps(dict(spec), sort_keys=True)
    program = fill(
        source(_PROGRAMS, "builder_prepare.py"),
        {"spec": f"SPEC = json.loads({text!r})\n", "splitrules": source(_SPLIT, "_splitrules.py")},
    )
    return "```python\n" + program + "```\n"


def _band(value: float, bounds: tuple[float, ...]) -> int:
    """1 + the number of ``bounds`` that ``value`` reaches (bounds ascending)."""
    return 1 + sum(value >= b for b in bounds)


def offline_judgement(evidence: Mapping[str, Any]) -> dict[str, Any]:
    """A quality judgement from the records' figures (row counts, missing cells, baselines)."""
    spec = evidence.get("spec") or {}
    inventory = evidence.get("inventory") or {}
    gate = evidence.get("gate") or {}
    solv = evidence.get("solvability") or {}
    tables = [f for f in inventory.get("files", []) if f.get("rows") is not None]
    table = next((f for f in tables if f["path"] == spec.get("data_file")), None)
    rows = int(table["rows"]) if table else 0
    cols = table["columns"] if table else []
    cells = max(1, rows * len(cols))
    missing = sum(int(c["missing"]) for c in cols) / cells
    features = max(0, len(cols) - 1 - (spec.get("id_column") is not None))
    valid = bool(gate.get("passed")) and bool(solv.get("solvable", True))
    const = (solv.get("constant") or {}).get("score")
    model = (solv.get("model") or {}).get("score")
    scores = {
        "task_validity": (
            5 if valid else 1,
            f"gate findings: {len(gate.get('findings', []))}; baselines: constant {const}, "
            f"gradient boosting {model}",
        ),
        "data_sufficiency": (
            min(5, _band(rows, (100, 300, 1000, 5000))),
            f"{rows} labelled rows in {spec.get('data_file')}",
        ),
        "raw_data_use": (
            5 if len(tables) <= 1 else 3,
            f"the task uses 1 of {len(tables)} raw table(s)",
        ),
        "task_complexity": (
            min(5, _band(features, (2, 5, 20, 100))),
            f"{features} feature column(s)",
        ),
        "data_quality": (
            5 - min(4, _band(missing, (0.01, 0.1, 0.3, 0.5)) - 1),
            f"{missing:.1%} of cells missing",
        ),
    }
    return {"scores": {k: {"score": s, "evidence": e} for k, (s, e) in scores.items()}}
