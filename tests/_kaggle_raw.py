"""Synthetic raw folders in the layout of real competition downloads (no real data).

Titanic's shape (train.csv with PassengerId, Survived first and Embarked last; test.csv
without Survived; gender_submission.csv), a per-class probability submission in an unsorted
class order, and a House-Prices-like regression whose description.txt names the metric.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path


def _write(path: Path, header: list[str], rows: Sequence[Sequence[object]]) -> None:
    lines = [",".join(header)] + [",".join(str(c) for c in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def titanic_like(root: Path, n: int = 120, n_test: int = 40) -> Path:
    """train.csv (PassengerId, Survived first, Embarked last), test.csv, gender_submission.csv."""
    rng = random.Random(0)
    root.mkdir(parents=True)
    rows, test = [], []
    for k in range(1, n + n_test + 1):
        sex = rng.choice(["male", "female"])
        pclass = rng.choice([1, 2, 3])
        age = rng.randint(1, 70)
        fare = round(rng.uniform(5, 100), 2)
        embarked = rng.choice(["S", "C", "Q"])
        survived = int((sex == "female") != (rng.random() < 0.15))
        if k <= n:
            rows.append([k, survived, pclass, sex, age, fare, embarked])
        else:
            test.append([k, pclass, sex, age, fare, embarked])
    _write(
        root / "train.csv",
        ["PassengerId", "Survived", "Pclass", "Sex", "Age", "Fare", "Embarked"],
        rows,
    )
    _write(root / "test.csv", ["PassengerId", "Pclass", "Sex", "Age", "Fare", "Embarked"], test)
    sample = [[r[0], int(r[2] == "female")] for r in test]
    _write(root / "gender_submission.csv", ["PassengerId", "Survived"], sample)
    return root


def probabilities_like(root: Path, n: int = 150, n_test: int = 30) -> Path:
    """A per-class probability submission: id,Class_3,Class_1,Class_2 (not sorted)."""
    rng = random.Random(1)
    root.mkdir(parents=True)
    rows, test = [], []
    for k in range(n + n_test):
        a, b = rng.uniform(0, 10), rng.uniform(0, 10)
        label = "Class_1" if a < 4 else ("Class_2" if b < 5 else "Class_3")
        if k < n:
            rows.append([k, round(a, 3), round(b, 3), label])
        else:
            test.append([k, round(a, 3), round(b, 3)])
    _write(root / "train.csv", ["id", "feat_a", "feat_b", "target"], rows)
    _write(root / "test.csv", ["id", "feat_a", "feat_b"], test)
    classes = ["Class_3", "Class_1", "Class_2"]
    _write(root / "sampleSubmission.csv", ["id", *classes], [[r[0], 1, 0, 0] for r in test])
    return root


def regression_like(root: Path, metric_words: str, n: int = 150, n_test: int = 30) -> Path:
    """House-prices shape: Id, features, SalePrice last; description.txt names the metric."""
    rng = random.Random(2)
    root.mkdir(parents=True)
    rows, test = [], []
    for k in range(1, n + n_test + 1):
        area = rng.randint(500, 4000)
        quality = rng.randint(1, 10)
        zone = rng.choice(["RL", "RM", "FV"])
        price = int(area * 60 + quality * 9000 + rng.randint(-9000, 9000))
        if k <= n:
            rows.append([k, area, quality, zone, price])
        else:
            test.append([k, area, quality, zone])
    _write(root / "train.csv", ["Id", "LotArea", "OverallQual", "MSZoning", "SalePrice"], rows)
    _write(root / "test.csv", ["Id", "LotArea", "OverallQual", "MSZoning"], test)
    _write(root / "sample_submission.csv", ["Id", "SalePrice"], [[r[0], 180921.5] for r in test])
    (root / "description.txt").write_text(
        "<h2>Goal</h2>\nPredict the sales price for each house.\n\n\n\n"
        f"Submissions are evaluated on {metric_words}.\x07\n"
    )
    return root


def time_ordered_like(root: Path, n: int = 200) -> Path:
    """A daily sales table (ISO ``date``, store, promo, sales), rows not in date order."""
    import datetime

    rng = random.Random(3)
    root.mkdir(parents=True)
    start = datetime.date(2021, 1, 1)
    rows = []
    for k in range(n):
        day = start + datetime.timedelta(days=k // 2)
        store = "A" if k % 2 else "B"
        promo = rng.randint(0, 1)
        sales = round(100 + k * 0.5 + 40 * promo + (15 if store == "A" else 0) + rng.gauss(0, 5), 2)
        rows.append([day.isoformat(), store, promo, sales])
    rng.shuffle(rows)
    _write(root / "sales.csv", ["date", "store", "promo", "sales"], rows)
    return root


SEEDLING_SPECIES = ("Black-grass", "Common wheat", "Sugar beet")
"""Three of plant-seedlings-classification's twelve species, spelt as its folders are."""


def plant_seedlings_like(
    root: Path,
    n: int = 150,
    n_test: int = 12,
    *,
    probabilities: bool = False,
    real_images: bool = True,
    id_column: str = "file",
) -> Path:
    """MLE-bench's prepared plant-seedlings-classification layout: ``train/<species>/<name>.png``
    (names nine hex digits, as Kaggle's), an unlabeled ``test/<name>.png`` and
    ``sample_submission.csv`` with ``file,species`` (the test images' names, one constant
    species), or with ``probabilities`` ``file,<species>...`` (in an unsorted order);
    ``id_column`` renames ``file``.

    ``real_images``: 12x12 RGB PNGs (numpy and Pillow, the ``data`` extra) whose classes differ
    in brightness by region, else a few distinct bytes (the inventory does not open images).
    """
    rng = random.Random(7)
    (root / "test").mkdir(parents=True)

    def image(path: Path, c: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not real_images:
            path.write_bytes(b"\x89PNG\r\n\x1a\n" + path.name.encode())
            return
        import numpy as np
        from PIL import Image

        pixels = np.random.default_rng(rng.randrange(2**32)).normal(100, 40, size=(12, 12, 3))
        if c == 0:
            pixels[:6] += 60
        elif c == 1:
            pixels[:, :6] += 60
        Image.fromarray(np.clip(pixels, 0, 255).astype("uint8")).save(path)

    for k in range(n):
        c = k % len(SEEDLING_SPECIES)
        image(root / "train" / SEEDLING_SPECIES[c] / f"{rng.getrandbits(36):09x}.png", c)
    names = [f"{rng.getrandbits(36):09x}.png" for _ in range(n_test)]
    for k, name in enumerate(names):
        image(root / "test" / name, k % 3)
    if probabilities:
        species = [SEEDLING_SPECIES[2], SEEDLING_SPECIES[0], SEEDLING_SPECIES[1]]
        _write(
            root / "sample_submission.csv",
            [id_column, *species],
            [[name, "0.333", "0.333", "0.334"] for name in names],
        )
    else:
        sample = [[m, "Sugar beet"] for m in names]
        _write(root / "sample_submission.csv", [id_column, "species"], sample)
    return root
