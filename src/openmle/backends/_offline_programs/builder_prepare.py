"""Split one raw table into a task package (written by openmle's offline model).

The labelled rows are a table, or the images of a per-class image folder (``<class>/<image>``).
The spec's inputs add to the rows: joined tables (their columns by key, or per-key counts
and means), free text (counts of the training text's most frequent words) and images
(copied as images/<n><suffix> with an image column and the image shrunk to 8x8 grey levels
as 64 pixel columns; Pillow reads them).
"""

import csv
import hashlib
import json
import re
import shutil
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


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


_IMAGES = ("png", "jpg", "jpeg", "bmp", "gif", "webp", "tif", "tiff")


def _class_folders(root):
    """A per-class image folder as a table: each image in a subfolder is a row (columns the
    image column, its path under the folder, and the target, the subfolder's name), the rows
    ordered by the SHA-256 of the image's bytes, so neither a row's number nor its image's
    reveals the label."""
    rows = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for f in sorted(folder.iterdir()):
            if f.is_file() and "." in f.name and f.suffix.lower().lstrip(".") in _IMAGES:
                digest = hashlib.sha256(f.read_bytes()).hexdigest()
                rows.append((digest, f"{folder.name}/{f.name}", folder.name))
    return [SPEC["inputs"]["image_column"], SPEC["target"]], [[p, c] for _, p, c in sorted(rows)]


def _read(path):
    """A raw table as a header and rows of text: CSV/TSV, a JSON list of records or JSON Lines,
    or a per-class image folder (a directory)."""
    if path.is_dir():
        return _class_folders(path)
    suffix = path.suffix.lower()
    if suffix in (".json", ".jsonl"):
        text = path.read_text(encoding="utf-8-sig")
        if suffix == ".jsonl":
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        else:
            records = json.loads(text)
        header = list(dict.fromkeys(str(k) for r in records for k in r))
        return header, [[_cell(r.get(h)) for h in header] for r in records]
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = [r for r in csv.reader(f, delimiter="\t" if suffix == ".tsv" else ",") if r]
    return rows[0], rows[1:]


def _number(text):
    try:
        x = float(text)
    except ValueError:
        return None
    return x if x == x and abs(x) != float("inf") else None


def _join(raw, header, body, join):
    """Add a raw table's columns by key: its row for a unique key, else the per-key row count
    and the mean of each numeric column."""
    other_h, other = _read(raw / join["file"])
    k, mine = other_h.index(join["key"]), header.index(join["key"])
    stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(join["file"]).stem)
    groups: dict[str, list[list[str]]] = {}
    for r in other:
        groups.setdefault(r[k], []).append(r)
    cols = [j for j in range(len(other_h)) if j != k]
    if all(len(g) == 1 for g in groups.values()):
        names = [f"{stem}_{other_h[j]}" for j in cols]
        value = {key: [g[0][j] for j in cols] for key, g in groups.items()}
        blank = [""] * len(cols)
    else:
        numeric = [j for j in cols if all(_number(r[j]) is not None for r in other if r[j])]
        names = [f"{stem}_count"] + [f"{stem}_{other_h[j]}_mean" for j in numeric]
        value = {}
        for key, g in groups.items():
            means = []
            for j in numeric:
                xs = [_number(r[j]) for r in g if r[j]]
                means.append(f"{sum(xs) / len(xs):.6g}" if xs else "")
            value[key] = [str(len(g))] + means
        blank = ["0"] + [""] * len(numeric)
    return header + names, [r + value.get(r[mine], blank) for r in body]


def _words(text):
    return re.findall(r"[a-z0-9]+", text.lower())


def _text_features(header, train, test, column, top=32):
    """Counts of the training text's most frequent words (from train rows only)."""
    j = header.index(column)
    counts = Counter(w for r in train for w in _words(r[j]))
    vocab = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    names = [f"{column}_word_{w}" for w in vocab]

    def add(rows):
        out = []
        for r in rows:
            seen = Counter(_words(r[j]))
            out.append(r + [str(seen[w]) for w in vocab])
        return out

    return header + names, add(train), add(test)


def _images(raw, public, header, body, id_index):
    """Copy each row's image to public/images/<n><suffix>; add the image column and 64 pixel
    columns (8x8 grey levels). The raw image column (its path may name the label) is dropped,
    unless it is the id column (a per-class folder whose sample submission names rows by
    file): its values become the copies' neutral names (<n><suffix>), or their paths when
    the id column is named image (then it is the image column too)."""
    try:
        from PIL import Image
    except ImportError:
        raise SystemExit("an image task needs Pillow: pip install 'openmle[data]'") from None
    folder = raw / SPEC["inputs"]["images"] if SPEC["inputs"]["images"] else raw
    column = SPEC["inputs"].get("image_column")
    by_stem: dict[str, Path] = {}
    if column is None:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                by_stem.setdefault(p.stem, p)
    (public / "images").mkdir(parents=True, exist_ok=True)
    named_by_image = column is not None and column == SPEC["id_column"]
    in_place = named_by_image and column == "image"  # the id column is the image column
    out = []
    for n, r in enumerate(body):
        src = folder / r[header.index(column)] if column else by_stem.get(r[id_index])
        if src is None or not src.is_file():
            raise SystemExit(f"no image for row {r[id_index]!r} under {folder}")
        name = f"images/{n:06d}{src.suffix.lower()}"
        shutil.copyfile(src, public / name)
        with Image.open(src) as im:
            pixels = list(im.convert("L").resize((8, 8), Image.Resampling.BILINEAR).getdata())
        if named_by_image:  # the id names the copy (its path, if the id column is "image")
            neutral = name if in_place else name.split("/")[-1]
            r = r[:id_index] + [neutral] + r[id_index + 1 :]
        out.append(r + ([] if in_place else [name]) + [str(v) for v in pixels])
    header = header + ([] if in_place else ["image"]) + [f"px{k}" for k in range(64)]
    if column and column != SPEC["id_column"]:
        j = header.index(column)
        header = header[:j] + header[j + 1 :]
        out = [r[:j] + r[j + 1 :] for r in out]
    return header, out


def _sample(metric, id_col, labels, body, t, i, test):
    """The constant sample submission's columns and rows, and its format in words."""
    target = SPEC["target"]
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
    return cols, rows, fmt


def prepare(raw, public, private):
    raw, public, private = Path(raw), Path(public), Path(private)
    header, body = _read(raw / SPEC["data_file"])
    inputs = SPEC.get("inputs") or {}
    for join in inputs.get("joins") or []:
        header, body = _join(raw, header, body, join)
    t = header.index(SPEC["target"])
    body = [r for r in body if r[t].strip() != ""]
    id_col = SPEC["id_column"]
    if id_col is None:
        id_col = "id"
        header = ["id"] + header
        body = [[str(k)] + r for k, r in enumerate(body)]
        t += 1
    i = header.index(id_col)
    if inputs.get("images") is not None:
        header, body = _images(raw, public, header, body, i)
        t, i = header.index(SPEC["target"]), header.index(id_col)
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
    for column in inputs.get("text_columns") or []:
        header, train, test = _text_features(header, train, test, column)
    keep = [j for j in range(len(header)) if j != t]
    _write(public / "train.csv", header, train)
    _write(public / "test.csv", [header[j] for j in keep], [[r[j] for j in keep] for r in test])
    target = SPEC["target"]
    _write(private / "test_answer.csv", [id_col, target], [[r[i], r[t]] for r in test])
    metric = SPEC["metric"]
    cols, rows, fmt = _sample(metric, id_col, [r[t] for r in train], body, t, i, test)
    _write(public / "sample_submission.csv", cols, rows)
    direction = "higher" if SPEC["higher_is_better"] else "lower"
    notes = ""
    if inputs.get("images") is not None:
        notes += (
            "Each row has an image: the column image names it (a path in this folder); px0 to "
            "px63 are the image shrunk to 8x8 grey levels.\n"
        )
    for column in inputs.get("text_columns") or []:
        notes += f"The column {column} is free text; {column}_word_* count its common words.\n"
    for join in inputs.get("joins") or []:
        notes += f"Columns from {join['file']} are joined by {join['key']}.\n"
    (public / "description.txt").write_text(
        f"# {SPEC['title']}\n\n{SPEC['description']}\n\n{notes}"
        f"Train on train.csv, predict every row of test.csv. Metric: {metric} ({direction} is "
        f"better). Submission: a CSV with the column {id_col} first, then {fmt}; see "
        "sample_submission.csv.\n",
        encoding="utf-8",
    )
