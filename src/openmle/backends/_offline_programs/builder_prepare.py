"""Split one raw table into a task package (written by openmle's offline model)."""

import csv
import json
from collections import Counter
from pathlib import Path

# The split rules follow, verbatim from openmle.gym._splitrules (standard library only).
from openmle.gym import split_indices  # <<splitrules>>

SPEC = json.loads("{}")  # <<spec>>


def _write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
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
    rule = SPEC.get("split") or {"kind": "random", "column": None}
    col = rule["column"]
    chosen = set(
        split_indices(
            len(body),
            kind=rule["kind"],
            fraction=SPEC["test_fraction"],
            seed=SPEC["seed"],
            labels=[r[t] for r in body],
            keys=[r[header.index(col)] for r in body] if col else None,
            column=col,
        )
    )
    test = [r for k, r in enumerate(body) if k in chosen]
    train = [r for k, r in enumerate(body) if k not in chosen]
    keep = [j for j in range(len(header)) if j != t]
    _write(public / "train.csv", header, train)
    _write(public / "test.csv", [header[j] for j in keep], [[r[j] for j in keep] for r in test])
    target = SPEC["target"]
    _write(private / "test_answer.csv", [id_col, target], [[r[i], r[t]] for r in test])
    metric = SPEC["metric"]
    labels = [r[t] for r in train]
    if metric == "log_loss":
        classes = SPEC.get("answer_columns") or sorted({r[t] for r in body})
        cols = [id_col] + classes
        p = f"{1 / len(classes):.6f}"
        rows = [[r[i]] + [p] * len(classes) for r in test]
        fmt = "one probability column per class (" + ", ".join(classes) + ")"
    elif metric in ("rmse", "mae", "rmsle"):
        mean = sum(float(v) for v in labels) / len(labels)
        cols, rows = [id_col, target], [[r[i], f"{mean:.6g}"] for r in test]
        fmt = "the predicted value of " + target
    elif metric == "map@k":
        k = SPEC["metric_params"]["k"]
        ranked = [c for c, _ in sorted(Counter(labels).items(), key=lambda kv: (-kv[1], kv[0]))]
        cols, rows = [id_col, target], [[r[i], " ".join(ranked[:k])] for r in test]
        fmt = f"up to {k} labels of " + target + ", space-separated, best first"
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
        f"# {SPEC['title']}\n\n{SPEC['description']}\n\n"
        f"Train on train.csv, predict every row of test.csv. Metric: {metric} ({direction} is "
        f"better). Submission: a CSV with the column {id_col} first, then {fmt}; see "
        "sample_submission.csv.\n",
        encoding="utf-8",
    )
