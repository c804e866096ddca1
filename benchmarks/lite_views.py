"""How long a Lite validation view takes to build on data of real size, beside a plain copy.

Two of the largest Lite shapes, written the way ``mlebench prepare`` leaves them:

- ``tabular-playground-series-dec-2021``: ``train.csv`` with the competition's 56 columns
  (``--rows``, default 1,000,000; the real public ``train.csv`` has 3,600,000 rows);
- ``dogs-vs-cats-redux-kernels-edition``: ``train.zip`` of JPEG members named ``cat.N.jpg`` /
  ``dog.N.jpg`` (``--images``, default 22,500, the real count; members are 20 KiB of bytes,
  the rule never decodes them).

Each view is built with :func:`openmle.bench.mlebench.build_validation_view` (the rows rule and
the labelled-files rule), and beside it, in the same run, the cheapest thing that moves the same
bytes: pandas reading and writing the CSV once, and re-writing the zip member by member. The
ratio says what the split costs over that floor; the rate gives the time at the real size.

Run: ``python benchmarks/lite_views.py [--rows N] [--images N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path[:0] = [
    str(Path(__file__).resolve().parents[1]),
    str(Path(__file__).resolve().parents[1] / "src"),
]

from benchmarks._common import emit  # noqa: E402

from openmle.bench.mlebench import build_validation_view  # noqa: E402

TPS = "tabular-playground-series-dec-2021"
DOGS = "dogs-vs-cats-redux-kernels-edition"
REAL_ROWS = 3_600_000
REAL_IMAGES = 22_500


def tps_public(root: Path, rows: int) -> Path:
    pub = root / TPS / "prepared" / "public"
    pub.mkdir(parents=True)
    rng = np.random.default_rng(0)
    cols = {"Id": np.arange(rows)}
    for name in ("Elevation", "Aspect", "Slope", "Horizontal_Distance_To_Hydrology",
                 "Vertical_Distance_To_Hydrology", "Horizontal_Distance_To_Roadways",
                 "Hillshade_9am", "Hillshade_Noon", "Hillshade_3pm",
                 "Horizontal_Distance_To_Fire_Points"):  # fmt: skip
        cols[name] = rng.integers(0, 4000, rows)
    for k in range(1, 5):
        cols[f"Wilderness_Area{k}"] = rng.integers(0, 2, rows)
    for k in range(1, 41):
        cols[f"Soil_Type{k}"] = rng.integers(0, 2, rows)
    cols["Cover_Type"] = rng.integers(1, 8, rows)
    frame = pd.DataFrame(cols)
    frame.to_csv(pub / "train.csv", index=False)
    frame.drop(columns="Cover_Type").head(1000).to_csv(pub / "test.csv", index=False)
    pd.DataFrame({"Id": frame["Id"].head(1000), "Cover_Type": 2}).to_csv(
        pub / "sample_submission.csv", index=False
    )
    return pub


def dogs_public(root: Path, images: int) -> Path:
    pub = root / DOGS / "prepared" / "public"
    pub.mkdir(parents=True)
    body = os.urandom(20 * 1024)
    with zipfile.ZipFile(pub / "train.zip", "w", zipfile.ZIP_STORED) as zf:
        for k in range(images):
            zf.writestr(f"{'cat' if k % 2 else 'dog'}.{k}.jpg", body)
    with zipfile.ZipFile(pub / "test.zip", "w", zipfile.ZIP_STORED) as zf:
        for k in range(1, 101):
            zf.writestr(f"{k}.jpg", body)
    pd.DataFrame({"id": range(1, 101), "label": 0.5}).to_csv(
        pub / "sample_submission.csv", index=False
    )
    return pub


def timed(fn: object) -> float:
    t0 = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--images", type=int, default=REAL_IMAGES)
    args = ap.parse_args()
    figures: dict[str, object] = {"load": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pub = tps_public(root, args.rows)
        size_mb = (pub / "train.csv").stat().st_size / 2**20
        view = timed(lambda: build_validation_view(TPS, pub, root / "tps-view"))
        floor = timed(lambda: pd.read_csv(pub / "train.csv").to_csv(root / "copy.csv", index=False))
        figures |= {
            "tps_rows": args.rows,
            "tps_train_mb": round(size_mb, 1),
            "tps_view_s": round(view, 2),
            "tps_pandas_copy_s": round(floor, 2),
            "tps_ratio": round(view / floor, 2),
            "tps_real_size_view_s": round(view * REAL_ROWS / args.rows, 1),
        }
        print(f"{TPS}: {args.rows:,} rows ({size_mb:.0f} MB): view {view:.2f} s, "
              f"pandas read+write {floor:.2f} s ({view / floor:.2f}x); at the real "
              f"{REAL_ROWS:,} rows about {view * REAL_ROWS / args.rows:.0f} s")  # fmt: skip
        shutil.rmtree(root / TPS)
        pub = dogs_public(root, args.images)

        def rezip() -> None:
            with (
                zipfile.ZipFile(pub / "train.zip") as src,
                zipfile.ZipFile(root / "copy.zip", "w", zipfile.ZIP_STORED) as dst,
            ):
                for info in src.infolist():
                    dst.writestr(info.filename, src.read(info))

        view = timed(lambda: build_validation_view(DOGS, pub, root / "dogs-view"))
        floor = timed(rezip)
        figures |= {
            "dogs_images": args.images,
            "dogs_view_s": round(view, 2),
            "dogs_rezip_s": round(floor, 2),
            "dogs_ratio": round(view / floor, 2),
            "dogs_real_size_view_s": round(view * REAL_IMAGES / args.images, 1),
        }
        print(f"{DOGS}: {args.images:,} images: view {view:.2f} s, re-zip {floor:.2f} s "
              f"({view / floor:.2f}x)")  # fmt: skip
    emit("lite_views", figures)


if __name__ == "__main__":
    main()
