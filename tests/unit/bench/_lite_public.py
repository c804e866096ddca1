"""Tiny ``prepared/public`` folders shaped exactly like each Lite ``prepare.py`` writes them.

File names, columns, image/audio extensions and archive layouts follow MLE-bench's preparers
(``mlebench/competitions/<id>/prepare.py``, commit 783b15a); the contents are made up and tiny.
``ANSWER_HEADERS`` is the header each preparer writes to ``prepared/private/<answers>`` (what
the competition's ``grade.py`` reads), which the validation view must reproduce.
"""

from __future__ import annotations

import csv
import json
import random
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from openmle.bench.mlebench._miniature.graders.ranzcr_clip_catheter_line_classification import (
    CLASSES as RANZCR_SCORED,
)

DOGS = [f"breed_{i}" for i in range(5)]
LEAVES = [f"Species_{i}" for i in range(4)]
JIGSAW = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
RANZCR = list(RANZCR_SCORED)  # the nine labels MLE-bench scores (and its sample submission has)
RANZCR_TRAIN = [*RANZCR, "CVC - Normal", "Swan Ganz Catheter Present"]
NOMAD = [
    "id",
    "spacegroup",
    "number_of_total_atoms",
    "percent_atom_al",
    "percent_atom_ga",
    "percent_atom_in",
    "lattice_vector_1_ang",
    "lattice_vector_2_ang",
    "lattice_vector_3_ang",
    "lattice_angle_alpha_degree",
    "lattice_angle_beta_degree",
    "lattice_angle_gamma_degree",
    "formation_energy_ev_natom",
    "bandgap_energy_ev",
]
TAXI = [
    "key",
    "fare_amount",
    "pickup_datetime",
    "pickup_longitude",
    "pickup_latitude",
    "dropoff_longitude",
    "dropoff_latitude",
    "passenger_count",
]
SIIM = [
    "image_name",
    "patient_id",
    "sex",
    "age_approx",
    "anatom_site_general_challenge",
    "diagnosis",
    "benign_malignant",
    "target",
]
TPS_DEC = ["Id", "Elevation", "Aspect", "Soil_Type1", "Cover_Type"]
TPS_MAY = ["id", "f_00", "f_01", "f_27", "target"]

ANSWER_HEADERS: dict[str, list[str]] = {
    "aerial-cactus-identification": ["id", "has_cactus"],
    "aptos2019-blindness-detection": ["id_code", "diagnosis"],
    "denoising-dirty-documents": ["id", "value"],
    "detecting-insults-in-social-commentary": ["Insult", "Date", "Comment", "Usage"],
    "dog-breed-identification": ["id", *DOGS],
    "dogs-vs-cats-redux-kernels-edition": ["id", "label"],
    "histopathologic-cancer-detection": ["id", "label"],
    "jigsaw-toxic-comment-classification-challenge": ["id", *JIGSAW],
    "leaf-classification": ["id", *LEAVES],
    "mlsp-2013-birds": ["Id", "Probability"],
    "new-york-city-taxi-fare-prediction": TAXI,
    "nomad2018-predict-transparent-conductors": NOMAD,
    "plant-pathology-2020-fgvc7": ["image_id", "healthy", "multiple_diseases", "rust", "scab"],
    "random-acts-of-pizza": ["request_id", "requester_received_pizza"],
    "ranzcr-clip-catheter-line-classification": ["StudyInstanceUID", *RANZCR_TRAIN, "PatientID"],
    "siim-isic-melanoma-classification": ["image_name", "target"],
    "spooky-author-identification": ["id", "EAP", "HPL", "MWS"],
    "tabular-playground-series-dec-2021": TPS_DEC,
    "tabular-playground-series-may-2022": TPS_MAY,
    "text-normalization-challenge-english-language": ["id", "after"],
    "text-normalization-challenge-russian-language": ["id", "after"],
    "the-icml-2013-whale-challenge-right-whale-redux": ["clip", "probability"],
}

N = 20


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def blob(path: Path, text: str = "x") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def _images(
    pub: Path,
    ids: Sequence[str],
    ext: str,
    *,
    train: str = "train",
    test: str = "test",
    test_id: str = "t0",
) -> None:
    """A placeholder image ``pub/<train>/<id>.<ext>`` per id and ``pub/<test>/<test_id>.<ext>``."""
    for i in ids:
        blob(pub / train / f"{i}.{ext}")
    blob(pub / test / f"{test_id}.{ext}")


def zip_dir(path: Path, files: dict[str, bytes], *, folder: str | None = None) -> None:
    """A zip as ``compress`` (members at the root) or ``make_archive`` (under ``folder/``)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if folder:
            zf.writestr(f"{folder}/", b"")
        for name, data in files.items():
            zf.writestr(f"{folder}/{name}" if folder else name, data)


def _zip_csv(
    path: Path, member: str, header: Sequence[str], rows: Sequence[Sequence[object]]
) -> None:
    tmp = path.with_suffix(".tmp")
    write_csv(tmp, header, rows)
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(tmp, arcname=member)
    tmp.unlink()


def make_public(cid: str, root: Path) -> Path:
    """``root/<cid>/prepared/public`` for competition ``cid``; returns the public folder."""
    pub = root / cid / "prepared" / "public"
    pub.mkdir(parents=True)
    rng = random.Random(cid)
    BUILDERS[cid](pub, rng)
    return pub


def _aerial(pub: Path, rng: random.Random) -> None:
    ids = [f"{rng.getrandbits(64):016x}.jpg" for _ in range(N)]
    write_csv(pub / "train.csv", ["id", "has_cactus"], [(i, k % 2) for k, i in enumerate(ids)])
    zip_dir(pub / "train.zip", {i: b"jpg" for i in ids})
    zip_dir(pub / "test.zip", {"aaaa.jpg": b"jpg", "bbbb.jpg": b"jpg"})
    write_csv(
        pub / "sample_submission.csv", ["id", "has_cactus"], [("aaaa.jpg", 0.5), ("bbbb.jpg", 0.5)]
    )


def _aptos(pub: Path, rng: random.Random) -> None:
    ids = [f"{rng.getrandbits(48):012x}" for _ in range(N)]
    write_csv(pub / "train.csv", ["id_code", "diagnosis"], [(i, k % 5) for k, i in enumerate(ids)])
    _images(pub, ids, "png", train="train_images", test="test_images")
    write_csv(pub / "test.csv", ["id_code"], [("t0",)])
    write_csv(pub / "sample_submission.csv", ["id_code", "diagnosis"], [("t0", 0)])


def _png(path: Path, rng: random.Random, shape: tuple[int, int] = (3, 4)) -> None:
    from PIL import Image  # the data extra (Pillow); only denoising needs it

    path.parent.mkdir(parents=True, exist_ok=True)
    arr = np.array(
        [[rng.randrange(256) for _ in range(shape[1])] for _ in range(shape[0])], np.uint8
    )
    Image.fromarray(arr, mode="L").save(path)


def _denoising(pub: Path, rng: random.Random) -> None:
    for k in range(1, 11):
        _png(pub / "train" / f"{k}.png", rng)
        _png(pub / "train_cleaned" / f"{k}.png", rng)
    _png(pub / "test" / "99.png", rng)
    write_csv(
        pub / "sampleSubmission.csv",
        ["id", "value"],
        [(f"99_{r}_{c}", 1) for r in range(1, 4) for c in range(1, 5)],
    )


def _insults(pub: Path, rng: random.Random) -> None:
    rows = [
        (k % 2, f"2012060{k % 9}123456Z" if k % 3 else "", f'"comment, number {k}\nline"')
        for k in range(N)
    ]
    rows.append((1, "", '"comment, number 0\nline"'))  # a duplicate comment stays in train
    write_csv(pub / "train.csv", ["Insult", "Date", "Comment"], rows)
    write_csv(pub / "test.csv", ["Date", "Comment"], [("", "hello")])
    write_csv(pub / "sample_submission_null.csv", ["Insult", "Date", "Comment"], [(0, "", "hello")])


def _dog_breed(pub: Path, rng: random.Random) -> None:
    ids = [f"{rng.getrandbits(64):016x}" for _ in range(N)]
    write_csv(pub / "labels.csv", ["id", "breed"], [(i, DOGS[k % 5]) for k, i in enumerate(ids)])
    _images(pub, ids, "jpg")
    write_csv(pub / "sample_submission.csv", ["id", *DOGS], [("t0", *[1 / 5] * 5)])


def _dogs_vs_cats(pub: Path, rng: random.Random) -> None:
    files = {f"cat.{k}.jpg": b"c" for k in range(10)} | {f"dog.{k}.jpg": b"d" for k in range(10)}
    zip_dir(pub / "train.zip", files)
    zip_dir(pub / "test.zip", {"1.jpg": b"x", "2.jpg": b"y"})
    write_csv(pub / "sample_submission.csv", ["id", "label"], [(1, 0.5), (2, 0.5)])


def _histo(pub: Path, rng: random.Random) -> None:
    ids = [f"{rng.getrandbits(80):020x}" for _ in range(N)]
    write_csv(pub / "train_labels.csv", ["id", "label"], [(i, k % 2) for k, i in enumerate(ids)])
    _images(pub, ids, "tif")
    write_csv(pub / "sample_submission.csv", ["id", "label"], [("t0", 0)])


def _jigsaw(pub: Path, rng: random.Random) -> None:
    rows = [(f"{k:016x}", f"text {k}", *[(k >> j) & 1 for j in range(6)]) for k in range(N)]
    write_csv(pub / "train.csv", ["id", "comment_text", *JIGSAW], rows)
    write_csv(pub / "test.csv", ["id", "comment_text"], [("ffff", "t")])
    write_csv(pub / "sample_submission.csv", ["id", *JIGSAW], [("ffff", *[0.5] * 6)])


def _leaf(pub: Path, rng: random.Random) -> None:
    rows = [
        (k, LEAVES[k % 4], round(rng.random(), 6), round(rng.random(), 6)) for k in range(1, N + 1)
    ]
    write_csv(pub / "train.csv", ["id", "species", "margin1", "shape1"], rows)
    write_csv(pub / "test.csv", ["id", "margin1", "shape1"], [(99, 0.1, 0.2)])
    for k in [*range(1, N + 1), 99]:
        blob(pub / "images" / f"{k}.jpg")
    write_csv(pub / "sample_submission.csv", ["id", *LEAVES], [(99, *[0.25] * 4)])


def _birds(pub: Path, rng: random.Random) -> None:
    ess, sup = pub / "essential_data", pub / "supplemental_data"
    n = 24
    test = {3, 7, 11, 19}
    write_csv(ess / "CVfolds_2.txt", ["rec_id", "fold"], [(r, int(r in test)) for r in range(n)])
    write_csv(
        ess / "rec_id2filename.txt",
        ["rec_id", "filename"],
        [(r, f"PC{r}_2009_{r:04d}") for r in range(n)],
    )
    lines = ["rec_id,[labels]"]
    for r in range(n):
        if r in test:
            lines.append(f"{r},?")
        elif r % 5 == 0:
            lines.append(f"{r}")
        else:
            lines.append(f"{r},{r % 19},{(r * 7) % 19}")
    (ess / "rec_labels_test_hidden.txt").write_text("\n".join(lines) + "\n")
    (ess / "species_list.txt").write_text(
        "class_id,code,species\n" + "".join(f"{s},S{s},bird {s}\n" for s in range(19))
    )
    for r in range(n):
        blob(ess / "src_wavs" / f"PC{r}_2009_{r:04d}.wav", "RIFF")
        for d in ("filtered_spectrograms", "spectrograms", "supervised_segmentation"):
            blob(sup / d / f"PC{r}_2009_{r:04d}.bmp", "BM")
    (sup / "segmentation_examples").mkdir(parents=True)
    blob(sup / "segment_clusters.bmp", "BM")
    blob(sup / "segment_mosaic.bmp", "BM")
    for name, head in (
        ("histogram_of_segments.txt", "rec_id,[histogram of segment features]"),
        ("segment_features.txt", "rec_id,[histogram of segment features]"),
        ("segment_rectangles.txt", "rec_id,[histogram of segment features]"),
    ):
        (sup / name).write_text(head + "\n" + "".join(f"{r},0.1,0.2\n" for r in range(n)))
    write_csv(
        pub / "sample_submission.csv",
        ["Id", "Probability"],
        [(r * 100 + s, 0) for r in sorted(test) for s in range(19)],
    )


def _taxi(pub: Path, rng: random.Random) -> None:
    rows = [
        (
            f"2012-01-{k % 28 + 1:02d} 10:00:00.{k:07d}",
            round(5 + rng.random() * 20, 2),
            f"2012-01-{k % 28 + 1:02d} 10:00:00 UTC",
            -73.9,
            40.7,
            -73.95,
            40.75,
            1 + k % 3,
        )
        for k in range(N)
    ]
    write_csv(pub / "labels.csv", TAXI, rows)
    write_csv(
        pub / "test.csv",
        [c for c in TAXI if c != "fare_amount"],
        [("k", "2012-01-01 10:00:00 UTC", -73.9, 40.7, -73.9, 40.7, 1)],
    )
    write_csv(pub / "sample_submission.csv", ["key", "fare_amount"], [("k", 11.35)])
    blob(pub / "GCP-Coupons-Instructions.rtf", "{\\rtf1}")


def _nomad(pub: Path, rng: random.Random) -> None:
    rows = [
        (
            k,
            33,
            40,
            0.5,
            0.25,
            0.25,
            9.9,
            8.8,
            7.7,
            90,
            90,
            90,
            round(rng.random(), 4),
            round(rng.random() * 5, 4),
        )
        for k in range(1, N + 1)
    ]
    write_csv(pub / "train.csv", NOMAD, rows)
    write_csv(
        pub / "test.csv", NOMAD[:-2], [(1, 33, 40, 0.5, 0.25, 0.25, 9.9, 8.8, 7.7, 90, 90, 90)]
    )
    for k in range(1, N + 1):
        blob(pub / "train" / str(k) / "geometry.xyz", "lattice_vector 1 0 0")
    blob(pub / "test" / "1" / "geometry.xyz", "lattice_vector 1 0 0")
    write_csv(
        pub / "sample_submission.csv",
        ["id", "formation_energy_ev_natom", "bandgap_energy_ev"],
        [(1, 0.1779, 1.8892)],
    )


def _plant(pub: Path, rng: random.Random) -> None:
    rows = [(f"Train_{k}", *[int(k % 4 == j) for j in range(4)]) for k in range(N)]
    write_csv(pub / "train.csv", ["image_id", "healthy", "multiple_diseases", "rust", "scab"], rows)
    write_csv(pub / "test.csv", ["image_id"], [("Test_0",)])
    train = [f"Train_{k}" for k in range(N)]
    _images(pub, train, "jpg", train="images", test="images", test_id="Test_0")
    write_csv(
        pub / "sample_submission.csv",
        ["image_id", "healthy", "multiple_diseases", "rust", "scab"],
        [("Test_0", 0.25, 0.25, 0.25, 0.25)],
    )


def _pizza(pub: Path, rng: random.Random) -> None:
    train = [
        {
            "request_id": f"t3_{k:05x}",
            "request_text": f"please {k}",
            "requester_received_pizza": bool(k % 3 == 0),
            "requester_upvotes_minus_downvotes_at_retrieval": k,
            "giver_username_if_known": "N/A",
        }
        for k in range(N)
    ]
    test = [{"request_id": "t3_zzz", "request_text": "x", "giver_username_if_known": "N/A"}]
    (pub / "train.json").write_text(json.dumps(train, indent=4))
    (pub / "test.json").write_text(json.dumps(test, indent=4))
    for stem in ("train", "test"):
        with zipfile.ZipFile(pub / f"{stem}.zip", "w") as zf:
            zf.write(pub / f"{stem}.json", arcname=f"{stem}.json")
    write_csv(
        pub / "sampleSubmission.csv", ["request_id", "requester_received_pizza"], [("t3_zzz", 0)]
    )


def _ranzcr(pub: Path, rng: random.Random) -> None:
    uids = [f"1.2.826.0.1.{rng.getrandbits(40)}" for _ in range(N)]
    rows = [
        (u, *[int((k + j) % 5 == 0) for j in range(11)], f"pat{k // 2}") for k, u in enumerate(uids)
    ]
    write_csv(pub / "train.csv", ["StudyInstanceUID", *RANZCR_TRAIN, "PatientID"], rows)
    write_csv(
        pub / "train_annotations.csv",
        ["StudyInstanceUID", "label", "data"],
        [(u, "CVC - Normal", "[[1, 2]]") for u in uids[::2]],
    )
    _images(pub, uids, "jpg", test_id="1.2.3")
    write_csv(pub / "sample_submission.csv", ["StudyInstanceUID", *RANZCR], [("1.2.3", *[0] * 9)])


def _siim(pub: Path, rng: random.Random) -> None:
    rows = [
        (
            f"ISIC_{k:07d}",
            f"IP_{k // 3:07d}",
            "male",
            45.0,
            "torso",
            "unknown",
            "benign",
            int(k % 4 == 0),
        )
        for k in range(N)
    ]
    write_csv(pub / "train.csv", SIIM, rows)
    write_csv(pub / "test.csv", SIIM[:5], [("ISIC_9999999", "IP_9", "female", 50.0, "torso")])
    write_csv(pub / "sample_submission.csv", ["image_name", "target"], [("ISIC_9999999", 0)])
    for r in rows:
        blob(pub / "train" / f"{r[0]}.dcm")
        blob(pub / "jpeg" / "train" / f"{r[0]}.jpg")
    blob(pub / "test" / "ISIC_9999999.dcm")
    blob(pub / "jpeg" / "test" / "ISIC_9999999.jpg")
    blob(pub / "tfrecords" / "train00-2071.tfrec")
    blob(pub / "tfrecords" / "test00-2071.tfrec")


def _spooky(pub: Path, rng: random.Random) -> None:
    authors = ["EAP", "HPL", "MWS"]
    write_csv(
        pub / "train.csv",
        ["id", "text", "author"],
        [(f"id{k:05d}", f"It was, {k}", authors[k % 3]) for k in range(N)],
    )
    write_csv(pub / "test.csv", ["id", "text"], [("id99999", "x")])
    write_csv(
        pub / "sample_submission.csv",
        ["id", *authors],
        [("id99999", 0.403493538995863, 0.287808366106543, 0.308698094897594)],
    )


def _tps_dec(pub: Path, rng: random.Random) -> None:
    write_csv(
        pub / "train.csv", TPS_DEC, [(k, 3000 + k, k % 360, k % 2, 1 + k % 7) for k in range(N)]
    )
    write_csv(pub / "test.csv", TPS_DEC[:-1], [(999, 3000, 1, 0)])
    write_csv(pub / "sample_submission.csv", ["Id", "Cover_Type"], [(999, 2)])


def _tps_may(pub: Path, rng: random.Random) -> None:
    write_csv(
        pub / "train.csv",
        TPS_MAY,
        [(k, round(rng.random(), 5), k % 7, "ABCDEFGHIJ", k % 2) for k in range(N)],
    )
    write_csv(pub / "test.csv", TPS_MAY[:-1], [(999, 0.5, 1, "ABCDEFGHIJ")])
    write_csv(pub / "sample_submission.csv", ["id", "target"], [(999, 0.5)])


def _textnorm(prefix: str) -> Callable[[Path, random.Random], None]:
    def build(pub: Path, rng: random.Random) -> None:
        rows = [
            (s, t, "PLAIN" if t else "CARDINAL", f"w{s}.{t}", f"word {s} {t}")
            for s in range(12)
            for t in range(1 + s % 3)
        ]
        _zip_csv(
            pub / f"{prefix}_train.csv.zip",
            f"{prefix}_train.csv",
            ["sentence_id", "token_id", "class", "before", "after"],
            rows,
        )
        _zip_csv(
            pub / f"{prefix}_test_2.csv.zip",
            f"{prefix}_test_2.csv",
            ["sentence_id", "token_id", "before"],
            [(0, 0, "x")],
        )
        _zip_csv(
            pub / f"{prefix}_sample_submission_2.csv.zip",
            f"{prefix}_sample_submission_2.csv",
            ["id", "after"],
            [("0_0", "x")],
        )

    return build


def _whale(pub: Path, rng: random.Random) -> None:
    files = {}
    k = 0
    for day in ("20090328", "20090329"):
        for j in range(10):
            files[f"{day}_{j:06d}_{j * 3:03d}s0ms_TRAIN{k}_{k % 2}.aif"] = b"FORM"
            k += 1
    zip_dir(pub / "train2.zip", files, folder="train2")
    zip_dir(pub / "test2.zip", {"20090330_000000_000s0ms_Test0.aif": b"FORM"}, folder="test2")
    write_csv(
        pub / "sampleSubmission.csv",
        ["clip", "probability"],
        [("20090330_000000_000s0ms_Test0.aif", 0)],
    )


BUILDERS: dict[str, Callable[[Path, random.Random], None]] = {
    "aerial-cactus-identification": _aerial,
    "aptos2019-blindness-detection": _aptos,
    "denoising-dirty-documents": _denoising,
    "detecting-insults-in-social-commentary": _insults,
    "dog-breed-identification": _dog_breed,
    "dogs-vs-cats-redux-kernels-edition": _dogs_vs_cats,
    "histopathologic-cancer-detection": _histo,
    "jigsaw-toxic-comment-classification-challenge": _jigsaw,
    "leaf-classification": _leaf,
    "mlsp-2013-birds": _birds,
    "new-york-city-taxi-fare-prediction": _taxi,
    "nomad2018-predict-transparent-conductors": _nomad,
    "plant-pathology-2020-fgvc7": _plant,
    "random-acts-of-pizza": _pizza,
    "ranzcr-clip-catheter-line-classification": _ranzcr,
    "siim-isic-melanoma-classification": _siim,
    "spooky-author-identification": _spooky,
    "tabular-playground-series-dec-2021": _tps_dec,
    "tabular-playground-series-may-2022": _tps_may,
    "text-normalization-challenge-english-language": _textnorm("en"),
    "text-normalization-challenge-russian-language": _textnorm("ru"),
    "the-icml-2013-whale-challenge-right-whale-redux": _whale,
}
