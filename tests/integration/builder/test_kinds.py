"""Non-tabular raw folders build end to end with the offline model through a LocalSandbox
(gate, solvability, ``openmle task validate``), each with its split rule, answer format and a
vetted metric, and a short offline search on the package beats its constant baseline:

- an image folder with a labels CSV, and image folders per class without one (tiny PNGs made
  here with numpy and Pillow, the ``data`` extra; skipped without it), also in MLE-bench's
  plant-seedlings layout with a sample submission (``file,species``) the task follows;
- free text in a CSV, and the same text as JSON records;
- a labelled table joined by a key to a table of several rows per key.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest
from tests._kaggle_raw import SEEDLING_SPECIES, plant_seedlings_like
from tests.integration.builder._steps import Mutant, replace, search_beats_constant
from tests.integration.builder._steps import build as _build
from tests.integration.builder._steps import validate as _validate

from openmle.builder import BuildResult

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.needs("pandas", "sklearn"),  # the baselines and the search's programs
]

_WORDS = {
    "pos": ["great", "lovely", "excellent", "happy", "superb", "fine", "wonderful"],
    "neg": ["awful", "terrible", "boring", "sad", "poor", "broken", "dreadful"],
}
_FILLER = ["the", "film", "was", "really", "quite", "and", "a", "story", "plot", "it"]


def _write_csv(path: Path, header: list[str], rows: list[list[Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def image_folder(root: Path, n: int = 160) -> Path:
    """images/<id>.png (12x12 RGB noise, brighter or darker) and labels.csv (id,label), with
    one label in seven flipped (so no model is perfect)."""
    import numpy as np
    from PIL import Image as image

    rng = np.random.default_rng(0)
    (root / "images").mkdir(parents=True)
    rows = []
    for k in range(n):
        bright = bool(k % 2)
        base = 150 if bright else 100
        pixels = np.clip(rng.normal(base, 60, size=(12, 12, 3)), 0, 255).astype("uint8")
        image.fromarray(pixels).save(root / "images" / f"img{k:04d}.png")
        label = "bright" if bright != (k % 7 == 0) else "dark"
        rows.append([f"img{k:04d}", label])
    _write_csv(root / "labels.csv", ["id", "label"], rows)
    return root


def per_class_folders(root: Path, n: int = 150) -> Path:
    """train/<class>/<k>.png for three classes (12x12 RGB noise, the top half brighter, the
    left half brighter, or neither; no label is wrong: the noise keeps a model's log loss above
    0, and a confidently wrong label would sink a small boosted model's), and an unlabelled
    test/*.png that must not become labelled rows."""
    import numpy as np
    from PIL import Image as image

    rng = np.random.default_rng(1)
    classes = ("top", "left", "flat")
    for k in range(n):
        c = k % 3
        pixels = rng.normal(100, 40, size=(12, 12, 3))
        if c == 0:
            pixels[:6] += 60
        elif c == 1:
            pixels[:, :6] += 60
        folder = root / "train" / classes[c]
        folder.mkdir(parents=True, exist_ok=True)
        image.fromarray(np.clip(pixels, 0, 255).astype("uint8")).save(folder / f"{k:04d}.png")
    (root / "test").mkdir()
    for k in range(10):
        noise = rng.integers(0, 255, size=(12, 12, 3)).astype("uint8")
        image.fromarray(noise).save(root / "test" / f"u{k}.png")
    return root


def _review(rng: random.Random, label: str) -> str:
    words = [rng.choice(_FILLER) for _ in range(8)]
    for _ in range(2):
        words.insert(rng.randrange(len(words)), rng.choice(_WORDS[label]))
    if rng.random() < 0.1:  # some noise: a word of the other side
        words.insert(0, rng.choice(_WORDS["neg" if label == "pos" else "pos"]))
    return " ".join(words)


def text_records(root: Path, *, as_json: bool, n: int = 200) -> Path:
    """Reviews with a sentiment: reviews.csv (id,review,sentiment) or reviews.json records."""
    rng = random.Random(3)
    root.mkdir(parents=True)
    rows = []
    for k in range(n):
        label = rng.choice(["pos", "neg"])
        rows.append({"id": f"r{k}", "review": _review(rng, label), "sentiment": label})
    if as_json:
        (root / "reviews.json").write_text(json.dumps(rows), encoding="utf-8")
    else:
        _write_csv(
            root / "reviews.csv",
            ["id", "review", "sentiment"],
            [[r["id"], r["review"], r["sentiment"]] for r in rows],
        )
    return root


def joined_tables(root: Path, n: int = 200) -> Path:
    """customers.csv (customer_id, region, churn) and orders.csv (several rows per customer):
    churn follows the number and size of a customer's orders, held only in orders.csv."""
    rng = random.Random(5)
    root.mkdir(parents=True)
    customers: list[list[Any]] = []
    orders: list[list[Any]] = []
    for k in range(n):
        cid = f"c{k:04d}"
        count = rng.randint(1, 8)
        for _ in range(count):
            orders.append([f"o{len(orders)}", cid, round(rng.uniform(5, 50), 2)])
        churn = int(count <= 3) if rng.random() > 0.1 else int(count > 3)
        customers.append([cid, rng.choice(["north", "south"]), churn])
    _write_csv(root / "customers.csv", ["customer_id", "region", "churn"], customers)
    _write_csv(root / "orders.csv", ["order_id", "customer_id", "amount"], orders)
    return root


def _built(raw: Path, pkg: Path) -> tuple[BuildResult, dict[str, Any]]:
    """Build ``raw`` into ``pkg``, which must succeed; the result and the package's spec."""
    result = _build(raw, pkg)
    assert result.status == "built", result.reason
    spec: dict[str, Any] = result.record["spec"]["spec"]
    return result, spec


def _header(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[0].split(",")


@pytest.mark.needs("PIL")
def test_an_image_folder_with_a_labels_csv_builds_validates_and_searches(tmp_path: Path) -> None:
    raw = image_folder(tmp_path / "raw")
    pkg = tmp_path / "pkg"
    result, spec = _built(raw, pkg)
    assert spec["kind"] == "image"
    assert spec["inputs"]["images"] == "images"
    assert spec["split"]["kind"] == "stratified"
    assert spec["metric"] == "auc"
    public = pkg / "data" / "public"
    train_h = _header(public / "train.csv")
    assert "image" in train_h and "px63" in train_h
    with open(public / "test.csv", newline="", encoding="utf-8") as f:
        test_rows = list(csv.DictReader(f))
    assert all((public / r["image"]).is_file() for r in test_rows)
    # No image name reveals its label: they are numbered.
    assert not any("bright" in p.name or "dark" in p.name for p in (public / "images").iterdir())
    assert _header(public / "sample_submission.csv") == ["id", "label"]
    _validate(pkg)
    _beats(pkg, result)


@pytest.mark.needs("PIL")
def test_image_folders_per_class_build_validate_and_search(tmp_path: Path) -> None:
    raw = per_class_folders(tmp_path / "raw")
    pkg = tmp_path / "pkg"
    result, spec = _built(raw, pkg)
    assert (spec["kind"], spec["data_file"], spec["target"]) == ("image", "train/", "label")
    assert spec["inputs"]["images"] == "train" and spec["inputs"]["image_column"] == "file"
    assert (spec["metric"], spec["split"]["kind"]) == ("log_loss", "stratified")
    public = pkg / "data" / "public"
    # Per-class probabilities, in the classes' order; the raw path (it names the class) is gone.
    assert _header(public / "sample_submission.csv") == ["id", "flat", "left", "top"]
    assert "file" not in _header(public / "train.csv")
    with open(public / "train.csv", newline="", encoding="utf-8") as f:
        train = list(csv.DictReader(f))
    with open(pkg / "data" / "private" / "test_answer.csv", newline="", encoding="utf-8") as f:
        answers = list(csv.DictReader(f))
    assert len(train) + len(answers) == 150  # every labelled image, none of test/*.png
    assert {r["label"] for r in answers} == {"top", "left", "flat"}
    # Rows are numbered in the order of the images' hashes: a number does not give the class.
    by_id = sorted(train + answers, key=lambda r: int(r["id"]))
    assert len({r["label"] for r in by_id[:20]}) == 3
    assert not any(p.stem in ("top", "left", "flat") for p in (public / "images").iterdir())
    _validate(pkg)
    _beats(pkg, result)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


@pytest.mark.needs("PIL")
@pytest.mark.parametrize(
    ("probabilities", "idc"),
    [(False, "file"), (True, "image_name"), (False, "image")],
    ids=["labels", "probs", "id-image"],
)
def test_plant_seedlings_layout_follows_its_sample_submission(
    tmp_path: Path, probabilities: bool, idc: str
) -> None:
    """train/<species>/*.png, an unlabeled test/*.png and sample_submission.csv (file,species
    as MLE-bench prepares plant-seedlings-classification, or image_name,<species>...): the
    package answers in the sample's columns, its ids are the copied images' neutral names."""
    raw = plant_seedlings_like(tmp_path / "raw", probabilities=probabilities, id_column=idc)
    pkg = tmp_path / "pkg"
    result, spec = _built(raw, pkg)
    assert result.record["gate"]["findings"] == []
    assert (spec["data_file"], spec["id_column"], spec["kind"]) == ("train/", idc, "image")
    assert spec["inputs"]["image_column"] == idc
    public, private = pkg / "data" / "public", pkg / "data" / "private"
    sample_h = _header(raw / "sample_submission.csv")
    assert _header(public / "sample_submission.csv") == sample_h
    target = "label" if probabilities else "species"
    assert spec["target"] == target
    assert spec["metric"] == ("log_loss" if probabilities else "accuracy")
    assert _header(private / "test_answer.csv") == [idc, target]
    train, test = _rows(public / "train.csv"), _rows(public / "test.csv")
    answers = _rows(private / "test_answer.csv")
    assert len(train) + len(answers) == 150  # the labelled images only, none of raw test/
    assert {r[target] for r in answers} == set(SEEDLING_SPECIES)  # class names, as the sample
    # Ids are file names like the sample's, of the copies (no class, no raw name in them).
    raw_names = {p.name for p in (raw / "train").rglob("*.png")}
    for r in train + test:
        assert r[idc].endswith(".png") and r[idc] not in raw_names
        assert r["image"].rsplit("/", 1)[-1] == r[idc].rsplit("/", 1)[-1]
        assert (public / r["image"]).is_file()
        assert not any(s.lower() in r[idc].lower() for s in SEEDLING_SPECIES)
    assert {r[idc] for r in test} == {r[idc] for r in answers}
    # Ids follow the images' hashes: the first ids hold every class.
    by_id = sorted(train + answers, key=lambda r: r[idc])
    assert len({r[target] for r in by_id[:20]}) == 3
    _validate(pkg)
    _beats(pkg, result)


@pytest.mark.needs("PIL")
def test_ids_that_keep_the_raw_path_are_a_gate_finding(tmp_path: Path) -> None:
    """A prepare.py naming rows by their raw path (``Black-grass/0a1b2c3d4.png``: the class)
    is rejected by the gate with label_leaking_id."""
    raw = plant_seedlings_like(tmp_path / "raw", n=60, n_test=3)
    keep_raw = replace(
        'neutral = name if in_place else name.split("/")[-1]', "neutral = r[id_index]"
    )
    result = _build(raw, tmp_path / "pkg", Mutant(keep_raw), solvability=False)
    assert (result.status, result.stage) == ("rejected", "gate"), result.reason
    assert "label_leaking_id" in result.findings, result.findings
    assert not (tmp_path / "pkg").exists()


@pytest.mark.parametrize("as_json", [False, True], ids=["csv", "json"])
def test_text_records_build_validate_and_search(tmp_path: Path, as_json: bool) -> None:
    raw = text_records(tmp_path / "raw", as_json=as_json)
    pkg = tmp_path / "pkg"
    result, spec = _built(raw, pkg)
    assert spec["kind"] == "text"
    assert spec["inputs"]["text_columns"] == ["review"]
    assert spec["split"]["kind"] == "stratified"
    train_h = _header(pkg / "data" / "public" / "train.csv")
    assert "review" in train_h
    assert any(h.startswith("review_word_") for h in train_h)
    _validate(pkg)
    _beats(pkg, result)


def test_tables_joined_by_a_key_build_validate_and_search(tmp_path: Path) -> None:
    raw = joined_tables(tmp_path / "raw")
    pkg = tmp_path / "pkg"
    result, spec = _built(raw, pkg)
    assert spec["kind"] == "joined"
    assert spec["data_file"] == "customers.csv"
    assert spec["inputs"]["joins"] == [{"file": "orders.csv", "key": "customer_id"}]
    train_h = _header(pkg / "data" / "public" / "train.csv")
    assert "orders_count" in train_h and "orders_amount_mean" in train_h
    _validate(pkg)
    _beats(pkg, result)


def _beats(pkg: Path, result: BuildResult) -> None:
    search_beats_constant(pkg, result, steps=2)
