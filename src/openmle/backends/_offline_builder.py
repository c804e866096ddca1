"""The offline model's answers to task-builder requests (no LLM): a spec and a prepare.py.

For simple tabular data: the largest table with a target candidate, its first target candidate,
its first id candidate (else numbered rows); a target with at most 20 whole or text values is a
classification (binary: AUC; multiclass: log loss), otherwise a regression (RMSE). The
prepare.py is a fixed, standard-library template parametrised by the spec: a seeded shuffle,
labelled rows only, a constant sample submission. Deterministic: same inventory, same answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["offline_prepare", "offline_spec"]

_MAX_CLASSES = 20

_PREPARE = '''"""Split one raw table into a task package (written by openmle's offline model)."""

import csv
import json
import random
from collections import Counter
from pathlib import Path

SPEC = json.loads({spec!r})


def _write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\\n")
        w.writerow(header)
        w.writerows(rows)


def prepare(raw, public, private):
    raw, public, private = Path(raw), Path(public), Path(private)
    with open(raw / SPEC["data_file"], newline="", encoding="utf-8-sig") as f:
        records = [r for r in csv.reader(f) if r]
    header, body = records[0], records[1:]
    t = header.index(SPEC["target"])
    body = [r for r in body if r[t].strip() != ""]
    id_col = SPEC["id_column"]
    if id_col is None:
        id_col = "id"
        header = ["id"] + header
        body = [[str(k)] + r for k, r in enumerate(body)]
        t += 1
    i = header.index(id_col)
    order = list(range(len(body)))
    random.Random(SPEC["seed"]).shuffle(order)
    n_test = max(1, round(len(body) * SPEC["test_fraction"]))
    test = [body[k] for k in sorted(order[:n_test])]
    train = [body[k] for k in sorted(order[n_test:])]
    keep = [j for j in range(len(header)) if j != t]
    _write(public / "train.csv", header, train)
    _write(public / "test.csv", [header[j] for j in keep], [[r[j] for j in keep] for r in test])
    target = SPEC["target"]
    _write(private / "test_answer.csv", [id_col, target], [[r[i], r[t]] for r in test])
    metric = SPEC["metric"]
    labels = [r[t] for r in train]
    if metric == "log_loss":
        classes = sorted({{r[t] for r in body}})
        cols = [id_col] + classes
        p = f"{{1 / len(classes):.6f}}"
        rows = [[r[i]] + [p] * len(classes) for r in test]
        fmt = "one probability column per class (" + ", ".join(classes) + ")"
    elif metric in ("rmse", "mae"):
        mean = sum(float(v) for v in labels) / len(labels)
        cols, rows = [id_col, target], [[r[i], f"{{mean:.6g}}"] for r in test]
        fmt = "the predicted value of " + target
    elif metric == "auc":
        cols, rows = [id_col, target], [[r[i], "0.5"] for r in test]
        fmt = "a score for the positive class of " + target
    else:
        top = sorted(Counter(labels).items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        cols, rows = [id_col, target], [[r[i], top] for r in test]
        fmt = "the predicted label of " + target
    _write(public / "sample_submission.csv", cols, rows)
    direction = "higher" if SPEC["higher_is_better"] else "lower"
    (public / "description.txt").write_text(
        f"# {{SPEC['title']}}\\n\\n{{SPEC['description']}}\\n\\n"
        f"Train on train.csv, predict every row of test.csv. Metric: {{metric}} ({{direction}} is "
        f"better). Submission: a CSV with the column {{id_col}} first, then {{fmt}}; see "
        "sample_submission.csv.\\n",
        encoding="utf-8",
    )
'''


def offline_spec(inventory: Mapping[str, Any]) -> dict[str, Any]:
    """A task spec for the inventory's largest table with a target candidate."""
    files = {f["path"]: f for f in inventory.get("files", []) if f.get("rows") is not None}
    candidates = [c.rsplit(":", 1) for c in inventory.get("target_candidates", [])]
    usable = [(p, c) for p, c in candidates if p in files]
    if not usable:
        return {"error": "no table with a target candidate"}
    path, target = max(usable, key=lambda pc: (files[pc[0]]["rows"], -usable.index(pc)))
    table = files[path]
    col = next(c for c in table["columns"] if c["name"] == target)
    ids = [
        c.rsplit(":", 1)[1]
        for c in inventory.get("id_candidates", [])
        if c.rsplit(":", 1)[0] == path
    ]
    id_column = next((c for c in ids if c != target), None)
    classes = col["unique"]
    if (
        col["kind"] in ("categorical", "integer")
        and not col["unique_capped"]
        and classes <= _MAX_CLASSES
    ):
        task_type = "binary" if classes == 2 else "multiclass"
        metric = "auc" if classes == 2 else "log_loss"
    else:
        task_type, metric = "regression", "rmse"
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return {
        "title": f"Predict {target} ({stem})"[:80],
        "data_file": path,
        "target": target,
        "id_column": id_column,
        "task_type": task_type,
        "metric": metric,
        "test_fraction": 0.2,
        "seed": 0,
        "description": f"Predict the column {target!r} of each row of {stem} from the others.",
    }


def offline_prepare(spec: Mapping[str, Any]) -> str:
    """A prepare.py for ``spec``, as a fenced Python block."""
    return "```python\n" + _PREPARE.format(spec=json.dumps(dict(spec), sort_keys=True)) + "```\n"


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
