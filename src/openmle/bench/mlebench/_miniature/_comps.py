"""The 22 MLE-bench Lite competitions in miniature: each maker writes ``prepared/public``
and ``prepared/private`` with the file names, folders, archives, CSV columns (in order), id
formats and file formats that the competition's ``prepare.py`` in openai/mle-bench writes;
the contents are small and synthetic (a few rows, flat 8x8-block images, short tones).

Every maker takes ``(public, private, rng)`` and is deterministic given the seeded ``rng``.
"""

from __future__ import annotations

import json
import random
import shutil
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

from openmle.bench.mlebench._miniature import _formats as fmt
from openmle.bench.mlebench._miniature.graders import (
    jigsaw_toxic_comment_classification_challenge as _toxic,
)
from openmle.bench.mlebench._miniature.graders.dog_breed_identification import BREEDS
from openmle.bench.mlebench._miniature.graders.leaf_classification import SPECIES
from openmle.bench.mlebench._miniature.graders.plant_pathology_2020_fgvc7 import CLASSES as PLANT
from openmle.bench.mlebench._miniature.graders.ranzcr_clip_catheter_line_classification import (
    CLASSES as RANZCR_SCORED,
)
from openmle.bench.mlebench._miniature.graders.spooky_author_identification import AUTHORS

__all__ = ["MAKERS"]

TOXIC = _toxic.CLASSES

Maker = Callable[[Path, Path, random.Random], None]
W = fmt.write_csv


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _split(labels: Sequence[int], n_test: int, rng: random.Random) -> tuple[list[int], list[int]]:
    """Shuffled train and test row indices; the test part holds both labels 0 and 1 (or
    every label when there are few) so that the metrics are defined.
    """
    order = list(range(len(labels)))
    rng.shuffle(order)
    test: list[int] = []
    for want in sorted(set(labels)):
        for i in order:
            if labels[i] == want and i not in test:
                test.append(i)
                break
    for i in order:
        if len(test) >= n_test:
            break
        if i not in test:
            test.append(i)
    rng.shuffle(test)
    return [i for i in order if i not in test], test


def _rgb(label: int, rng: random.Random) -> list[list[fmt.Pixel]]:
    """A 2x2-block colour pattern whose green channel carries the label."""
    base = 60 + 40 * label
    return [
        [(rng.randrange(40, 200), min(255, base + rng.randrange(0, 30)), rng.randrange(40, 200))]
        * 2
        for _ in range(2)
    ]


def _zip(dest: Path, members: Sequence[tuple[str, Path | None]], *, deflate: bool = True) -> None:
    """A zip of ``(arcname, file)`` members (``None``: a folder entry) with fixed dates, so
    the bytes are reproducible.
    """
    with zipfile.ZipFile(dest, "w") as z:
        for arcname, src in members:
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            if src is None:
                info.external_attr = (0o40755 << 16) | 0x10
                z.writestr(info, b"")
            else:
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED
                z.writestr(info, src.read_bytes())


def _zip_dir(src: Path, dest: Path) -> None:
    """``mlebench.utils.compress``: a deflated zip of ``src``'s files, names relative to it."""
    files = sorted(p for p in src.rglob("*") if p.is_file())
    _zip(dest, [(p.relative_to(src).as_posix(), p) for p in files])


def _archive(public: Path, name: str) -> None:
    """``shutil.make_archive(public / stem, "zip", public, name)``: ``name`` (a file, or a
    folder with its entry first) under its own name, deflated.
    """
    target = public / name
    if target.is_file():
        _zip(public / f"{Path(name).stem}.zip", [(name, target)])
        return
    files = sorted(p for p in target.rglob("*") if p.is_file())
    members: list[tuple[str, Path | None]] = [(f"{name}/", None)]
    members += [(p.relative_to(public).as_posix(), p) for p in files]
    _zip(public / f"{name}.zip", members)


# ---------------------------------------------------------------------------- images


def aerial_cactus(public: Path, private: Path, rng: random.Random) -> None:
    labels = [i % 2 == 0 for i in range(150)]
    ids = [f"{_hex(rng, 32)}.jpg" for _ in labels]
    train, test = _split([int(x) for x in labels], 28, rng)  # prepare.py's 0.19
    W(public / "train.csv", ["id", "has_cactus"], [[ids[i], int(labels[i])] for i in train])
    W(private / "test.csv", ["id", "has_cactus"], [[ids[i], int(labels[i])] for i in test])
    W(public / "sample_submission.csv", ["id", "has_cactus"], [[ids[i], 0.5] for i in test])
    for part, rows in (("train", train), ("test", test)):
        d = public / part
        d.mkdir()
        for i in rows:
            (d / ids[i]).write_bytes(fmt.jpeg(32, 32, _rgb(int(labels[i]), rng)))
        _zip_dir(d, public / f"{part}.zip")
        shutil.rmtree(d)


def aptos(public: Path, private: Path, rng: random.Random) -> None:
    grades = [i % 5 for i in range(80)]
    ids = [_hex(rng, 12) for _ in grades]
    train, test = _split(grades, 8, rng)
    for part in ("test_images", "train_images"):
        (public / part).mkdir()
    for i in train:
        (public / "train_images" / f"{ids[i]}.png").write_bytes(
            fmt.png(16, 16, _rgb(grades[i], rng))
        )
    for i in test:
        (public / "test_images" / f"{ids[i]}.png").write_bytes(
            fmt.png(16, 16, _rgb(grades[i], rng))
        )
    W(public / "train.csv", ["id_code", "diagnosis"], [[ids[i], grades[i]] for i in train])
    W(private / "test.csv", ["id_code", "diagnosis"], [[ids[i], grades[i]] for i in test])
    W(public / "test.csv", ["id_code"], [[ids[i]] for i in test])
    W(public / "sample_submission.csv", ["id_code", "diagnosis"], [[ids[i], 0] for i in test])


def denoising(public: Path, private: Path, rng: random.Random) -> None:
    names = [f"{n}.png" for n in sorted(rng.sample(range(2, 217), 10))]
    width, height = 12, 6
    clean: dict[str, list[list[int]]] = {}
    for name in names:
        ink = {(rng.randrange(height), rng.randrange(width)) for _ in range(8)}
        clean[name] = [[30 if (r, c) in ink else 255 for c in range(width)] for r in range(height)]
    order = list(range(len(names)))
    rng.shuffle(order)
    test = {names[i] for i in order[:2]}
    for d in ("train", "test", "train_cleaned"):
        (public / d).mkdir()
    for name in names:
        dirty = [[max(0, v - rng.randrange(0, 90)) for v in row] for row in clean[name]]
        (public / ("test" if name in test else "train") / name).write_bytes(fmt.png_gray(dirty))
        if name not in test:
            (public / "train_cleaned" / name).write_bytes(fmt.png_gray(clean[name]))
    rows: list[list[object]] = [
        [f"{name[: -len('.png')]}_{r + 1}_{c + 1}", clean[name][r][c] / 255.0]
        for name in sorted(test)  # sorted paths, as prepare.py lists them
        for r in range(height)
        for c in range(width)
    ]
    W(private / "answers.csv", ["id", "value"], rows)
    W(public / "sampleSubmission.csv", ["id", "value"], [[r[0], 1] for r in rows])


def dog_breed(public: Path, private: Path, rng: random.Random) -> None:
    breeds = [BREEDS[(7 * i) % len(BREEDS)] for i in range(16)]
    ids = [_hex(rng, 32) for _ in breeds]
    train, test = _split([0] * len(breeds), 4, rng)
    W(public / "labels.csv", ["id", "breed"], [[ids[i], breeds[i]] for i in train])
    W(
        private / "test.csv",
        ["id", *BREEDS],
        [[ids[i], *(int(b == breeds[i]) for b in BREEDS)] for i in test],
    )
    for part, rows in (("train", train), ("test", test)):
        (public / part).mkdir()
        for i in rows:
            (public / part / f"{ids[i]}.jpg").write_bytes(fmt.jpeg(24, 16, _rgb(i % 2, rng)))
    W(
        public / "sample_submission.csv",
        ["id", *BREEDS],
        [[ids[i], *([1 / 120] * len(BREEDS))] for i in test],
    )


def dogs_vs_cats(public: Path, private: Path, rng: random.Random) -> None:
    labels = [i % 2 for i in range(16)]  # 1: dog
    train, test = _split(labels, 4, rng)
    (public / "train").mkdir()
    counts = {0: 0, 1: 0}
    for i in train:
        kind = "dog" if labels[i] else "cat"
        name = f"{kind}.{counts[labels[i]]}.jpg"
        counts[labels[i]] += 1
        (public / "train" / name).write_bytes(fmt.jpeg(16, 16, _rgb(labels[i], rng)))
    (public / "test").mkdir()
    for k, i in enumerate(test, start=1):
        (public / "test" / f"{k}.jpg").write_bytes(fmt.jpeg(16, 16, _rgb(labels[i], rng)))
    for part in ("train", "test"):  # prepare.py zips them and keeps the folders too
        _zip_dir(public / part, public / f"{part}.zip")
    ks = range(1, len(test) + 1)
    W(
        private / "answers.csv",
        ["id", "label"],
        [[k, labels[i]] for k, i in zip(ks, test, strict=True)],
    )
    W(public / "sample_submission.csv", ["id", "label"], [[k, 0.5] for k in ks])


def histopathologic(public: Path, private: Path, rng: random.Random) -> None:
    labels = [i % 2 for i in range(150)]
    ids = [_hex(rng, 40) for _ in labels]
    train, test = _split(labels, 20, rng)
    (public / "train").mkdir()
    (public / "test").mkdir()
    for part, rows in (("train", train), ("test", test)):
        for i in rows:
            (public / part / f"{ids[i]}.tif").write_bytes(fmt.tiff(16, 16, _rgb(labels[i], rng)))
    # prepare.py keeps the raw file's row order (a filter, not a shuffle)
    W(public / "train_labels.csv", ["id", "label"], [[ids[i], labels[i]] for i in sorted(train)])
    W(private / "answers.csv", ["id", "label"], [[ids[i], labels[i]] for i in sorted(test)])
    W(public / "sample_submission.csv", ["id", "label"], [[ids[i], 0] for i in sorted(test)])


def leaf(public: Path, private: Path, rng: random.Random) -> None:
    n = 16
    ids = sorted(rng.sample(range(1, 1585), n))
    species = [SPECIES[(11 * i) % len(SPECIES)] for i in range(n)]
    feats = [f"{k}{j}" for k in ("margin", "shape", "texture") for j in range(1, 65)]
    values = [[round(rng.random() / 32, 6) for _ in feats] for _ in range(n)]
    train, test = _split([0] * n, 4, rng)
    (public / "images").mkdir()
    (private / "images").mkdir()  # prepare.py makes it and leaves it empty
    for i in train + test:
        (public / "images" / f"{ids[i]}.jpg").write_bytes(
            fmt.jpeg(
                16, 16, [[(0, 0, 0), (255, 255, 255)], [(255, 255, 255), (0, 0, 0)]], gray=True
            )
        )
    W(
        public / "train.csv",
        ["id", "species", *feats],
        [[ids[i], species[i], *values[i]] for i in train],
    )
    W(public / "test.csv", ["id", *feats], [[ids[i], *values[i]] for i in test])
    W(
        private / "test.csv",
        ["id", *SPECIES],
        [[ids[i], *(int(s == species[i]) for s in SPECIES)] for i in test],
    )
    W(
        public / "sample_submission.csv",
        ["id", *SPECIES],
        [[ids[i], *([1 / len(SPECIES)] * len(SPECIES))] for i in test],
    )


def plant_pathology(public: Path, private: Path, rng: random.Random) -> None:
    n = 200
    label = [i % 4 for i in range(n)]
    train, test = _split(label, 20, rng)
    (public / "images").mkdir()
    names = {i: f"Train_{k}" for k, i in enumerate(train)} | {
        i: f"Test_{k}" for k, i in enumerate(test)
    }
    for i in range(n):  # every image, under its new name
        (public / "images" / f"{names[i]}.jpg").write_bytes(
            fmt.jpeg(24, 16, _rgb(label[i] % 2, rng))
        )
    hot = {i: [int(label[i] == k) for k in range(4)] for i in range(n)}
    cols = ["image_id", *PLANT]
    W(private / "test.csv", cols, [[names[i], *hot[i]] for i in test])
    W(public / "sample_submission.csv", cols, [[names[i], 0.25, 0.25, 0.25, 0.25] for i in test])
    W(public / "test.csv", ["image_id"], [[names[i]] for i in test])
    W(public / "train.csv", cols, [[names[i], *hot[i]] for i in train])


RANZCR_ALL = (*RANZCR_SCORED, "CVC - Normal", "Swan Ganz Catheter Present")


def ranzcr(public: Path, private: Path, rng: random.Random) -> None:
    n = 170
    uids = [f"1.2.826.0.1.3680043.8.498.{rng.randrange(10**37, 10**38)}" for _ in range(n)]
    patients = [_hex(rng, 9) for _ in range(n)]
    train, test = list(range(10, n)), list(range(10))
    hot = [
        # the test rows: each scored label positive once; the training rows: labels at random
        [int(k == i) for k in range(len(RANZCR_ALL))]
        if i < 10
        else [int(rng.random() < 0.5) for _ in RANZCR_ALL]
        for i in range(n)
    ]
    rng.shuffle(train)
    rng.shuffle(test)
    (public / "train").mkdir()
    (public / "test").mkdir()
    for part, rows in (("train", train), ("test", test)):
        for i in rows:
            shade = 80 + 15 * (i % 10)
            (public / part / f"{uids[i]}.jpg").write_bytes(
                fmt.jpeg(16, 16, (shade, shade, shade), gray=True)
            )
    cols = ["StudyInstanceUID", *RANZCR_ALL, "PatientID"]
    W(public / "train.csv", cols, [[uids[i], *hot[i], patients[i]] for i in train])
    notes = []
    for i in sorted(train):  # the raw annotations' order, filtered
        if any(hot[i][:9]):
            lab = RANZCR_ALL[hot[i].index(1)]
            pts = [[rng.randrange(100, 2000), rng.randrange(100, 2000)] for _ in range(3)]
            notes.append([uids[i], lab, json.dumps(pts)])
    W(public / "train_annotations.csv", ["StudyInstanceUID", "label", "data"], notes)
    W(private / "test.csv", cols, [[uids[i], *hot[i], patients[i]] for i in test])
    W(
        public / "sample_submission.csv",
        ["StudyInstanceUID", *RANZCR_SCORED],
        [[uids[i], *([0] * len(RANZCR_SCORED))] for i in test],
    )


SITES = ("head/neck", "upper extremity", "lower extremity", "torso", None)


def siim(public: Path, private: Path, rng: random.Random) -> None:
    groups, per = 8, 8
    n = groups * per
    names = [f"ISIC_{rng.randrange(10**6, 10**7)}" for _ in range(n)]
    # four images per patient, one of them malignant (a patient held out has both classes)
    patients = [
        (f"IP_{rng.randrange(10**6, 10**7)}", rng.choice(("male", "female"))) for _ in range(n // 4)
    ]
    target = [int(i % 4 == 3) for i in range(n)]
    rows = [
        [
            names[i],
            patients[i // 4][0],
            patients[i // 4][1],
            float(rng.randrange(20, 80, 5)),
            SITES[i % len(SITES)],
            "melanoma" if target[i] else "unknown",
            "malignant" if target[i] else "benign",
            target[i],
        ]
        for i in range(n)
    ]
    test_groups = {0, 6}  # the raw train00 and train06 TFRecords hold the test images
    is_test = [i // per in test_groups for i in range(n)]
    train = [i for i in range(n) if not is_test[i]]
    test = [i for i in range(n) if is_test[i]]
    W(
        public / "train.csv",
        ["image_name", "patient_id", "sex", "age_approx", "anatom_site_general_challenge",
         "diagnosis", "benign_malignant", "target"],
        [rows[i] for i in train],
    )  # fmt: skip
    W(
        public / "test.csv",
        ["image_name", "patient_id", "sex", "age_approx", "anatom_site_general_challenge"],
        [rows[i][:5] for i in test],
    )
    W(public / "sample_submission.csv", ["image_name", "target"], [[names[i], 0] for i in test])
    W(private / "test.csv", ["image_name", "target"], [[names[i], target[i]] for i in test])
    images = {i: fmt.jpeg(16, 16, _rgb(target[i], rng)) for i in range(n)}
    for part, idx in (("train", train), ("test", test)):
        (public / part).mkdir()
        (public / "jpeg" / part).mkdir(parents=True)
        for i in idx:
            r = rows[i]
            (public / part / f"{names[i]}.dcm").write_bytes(
                fmt.dicom(
                    16, 16, 90 + 60 * target[i], patient_id=str(r[1]), sex=str(r[2]),
                    age=int(float(str(r[3]))),
                    sop_uid=f"1.2.826.0.1.3680043.8.1055.1.{rng.randrange(10**9)}",
                )
            )  # fmt: skip
            (public / "jpeg" / part / f"{names[i]}.jpg").write_bytes(images[i])
    (public / "tfrecords").mkdir()
    counts = {"train": 0, "test": 0}
    for g in range(groups):
        part = "test" if g in test_groups else "train"
        recs: list[dict[str, bytes | int]] = []
        for i in range(g * per, (g + 1) * per):
            r = rows[i]
            recs.append(
                {
                    "image": images[i],
                    "image_name": names[i].encode(),
                    "patient_id": str(r[1]).encode(),
                    "target": target[i],
                }
            )
        name = f"{part}{counts[part]:02d}-{per}.tfrec"
        counts[part] += 1
        (public / "tfrecords" / name).write_bytes(fmt.tfrecord(recs))


# ---------------------------------------------------------------------------- text


INSULTS = ("you are a complete idiot", "what a moron you are", "shut up you fool")
KIND = ("thanks for the link", "I agree with this point", "nice game last night", "see you there")


def insults(public: Path, private: Path, rng: random.Random) -> None:
    def comment(i: int) -> tuple[int, str | None, str]:
        bad = i % 5 < 2
        text = (INSULTS if bad else KIND)[i % 3 if bad else i % 4]
        date = None if i % 5 == 4 else f"201206{10 + i % 18:02d}{rng.randrange(10**5, 10**6)}Z"
        return int(bad), date, f'"{text} #{i}"'

    rows = [comment(i) for i in range(150)]
    train, test = rows[:120], rows[120:]
    W(public / "train.csv", ["Insult", "Date", "Comment"], train)
    W(
        private / "test.csv",
        ["Insult", "Date", "Comment", "Usage"],
        [[*r, "PrivateTest" if k % 2 else "PublicTest"] for k, r in enumerate(test)],
    )
    W(private / "gold_submission.csv", ["Insult", "Date", "Comment"], test)
    W(public / "test.csv", ["Date", "Comment"], [r[1:] for r in test])
    W(
        public / "sample_submission_null.csv",
        ["Insult", "Date", "Comment"],
        [[0, *r[1:]] for r in test],
    )


def jigsaw(public: Path, private: Path, rng: random.Random) -> None:
    def text(i: int) -> str:
        return f"Comment {i}: this edit was {'awful' if i % 2 else 'fine'}.\nThanks."

    train = [
        [_hex(rng, 16), text(i), *(int(rng.random() < 0.4) for _ in range(6))] for i in range(160)
    ]
    test_ids = [_hex(rng, 16) for _ in range(10)]
    labels: list[list[int]] = []
    for k in range(10):
        if k < 6:
            labels.append([int(j == k) for j in range(6)])
        elif k < 8:
            labels.append([0] * 6)
        else:
            labels.append([-1] * 6)  # not scored
    W(public / "train.csv", ["id", "comment_text", *TOXIC], train)
    W(public / "test.csv", ["id", "comment_text"], [[t, text(k)] for k, t in enumerate(test_ids)])
    W(public / "sample_submission.csv", ["id", *TOXIC], [[t, *([0.5] * 6)] for t in test_ids])
    W(
        private / "test.csv",
        ["id", *TOXIC],
        [[t, *lab] for t, lab in zip(test_ids, labels, strict=True)],
    )


RAOP_TRAIN_FIELDS = (
    "giver_username_if_known", "number_of_downvotes_of_request_at_retrieval",
    "number_of_upvotes_of_request_at_retrieval", "post_was_edited", "request_id",
    "request_number_of_comments_at_retrieval", "request_text", "request_text_edit_aware",
    "request_title", "requester_account_age_in_days_at_request",
    "requester_account_age_in_days_at_retrieval",
    "requester_days_since_first_post_on_raop_at_request",
    "requester_days_since_first_post_on_raop_at_retrieval",
    "requester_number_of_comments_at_request", "requester_number_of_comments_at_retrieval",
    "requester_number_of_comments_in_raop_at_request",
    "requester_number_of_comments_in_raop_at_retrieval", "requester_number_of_posts_at_request",
    "requester_number_of_posts_at_retrieval", "requester_number_of_posts_on_raop_at_request",
    "requester_number_of_posts_on_raop_at_retrieval", "requester_number_of_subreddits_at_request",
    "requester_received_pizza", "requester_subreddits_at_request",
    "requester_upvotes_minus_downvotes_at_request",
    "requester_upvotes_minus_downvotes_at_retrieval",
    "requester_upvotes_plus_downvotes_at_request",
    "requester_upvotes_plus_downvotes_at_retrieval", "requester_user_flair",
    "requester_username", "unix_timestamp_of_request", "unix_timestamp_of_request_utc",
)  # fmt: skip
RAOP_TEST_FIELDS = (
    "giver_username_if_known", "request_id", "request_text_edit_aware", "request_title",
    "requester_account_age_in_days_at_request",
    "requester_days_since_first_post_on_raop_at_request",
    "requester_number_of_comments_at_request", "requester_number_of_comments_in_raop_at_request",
    "requester_number_of_posts_at_request", "requester_number_of_posts_on_raop_at_request",
    "requester_number_of_subreddits_at_request", "requester_subreddits_at_request",
    "requester_upvotes_minus_downvotes_at_request", "requester_upvotes_plus_downvotes_at_request",
    "requester_username", "unix_timestamp_of_request", "unix_timestamp_of_request_utc",
)  # fmt: skip


def _raop_value(field: str, i: int, got: bool, rng: random.Random) -> object:
    if field == "requester_received_pizza":
        return got
    if field == "post_was_edited":
        return bool(i % 4 == 0)
    if field == "giver_username_if_known":
        return "N/A"
    if field == "request_id":
        return f"t3_{_hex(rng, 5)}"
    if field in ("request_text", "request_text_edit_aware"):
        return f"Hungry student here, {'paying it forward' if got else 'any help'} (#{i})."
    if field == "request_title":
        return f"[Request] Pizza for a long week #{i}"
    if field == "requester_subreddits_at_request":
        return ["AskReddit", "pizza"][: i % 3]
    if field == "requester_user_flair":
        return "shroom" if got else None
    if field == "requester_username":
        return f"user_{_hex(rng, 6)}"
    if field.startswith("unix_timestamp"):
        return float(1_300_000_000 + 3600 * i)
    if "days" in field:
        return round(rng.random() * 900, 6)
    return rng.randrange(0, 60)


def pizza(public: Path, private: Path, rng: random.Random) -> None:
    n = 150
    got = [i % 5 < 2 for i in range(n)]
    records = [{f: _raop_value(f, i, got[i], rng) for f in RAOP_TRAIN_FIELDS} for i in range(n)]
    train, test = _split([int(g) for g in got], 30, rng)
    (public / "train.json").write_text(json.dumps([records[i] for i in train], indent=4))
    (public / "test.json").write_text(
        json.dumps([{f: records[i][f] for f in RAOP_TEST_FIELDS} for i in test], indent=4)
    )
    _archive(public, "train.json")
    _archive(public, "test.json")
    ids = [records[i]["request_id"] for i in test]
    W(
        private / "test.csv",
        ["request_id", "requester_received_pizza"],
        [[rid, int(got[i])] for rid, i in zip(ids, test, strict=True)],
    )
    W(
        public / "sampleSubmission.csv",
        ["request_id", "requester_received_pizza"],
        [[r, 0] for r in ids],
    )


SPOOKY = {
    "EAP": "The raven tapped upon the chamber door at midnight",
    "HPL": "The eldritch thing beneath the ancient city stirred",
    "MWS": "The creature wept beside the frozen lake of Geneva",
}


def spooky(public: Path, private: Path, rng: random.Random) -> None:
    n = 18
    authors = [AUTHORS[i % 3] for i in range(n)]
    ids = [f"id{rng.randrange(10**4, 10**5)}" for _ in range(n)]
    texts = [f"{SPOOKY[a]}, and the night went on ({i})." for i, a in enumerate(authors)]
    train, test = _split([0] * n, 3, rng)
    W(
        public / "train.csv",
        ["id", "text", "author"],
        [[ids[i], texts[i], authors[i]] for i in train],
    )
    W(public / "test.csv", ["id", "text"], [[ids[i], texts[i]] for i in test])
    W(
        public / "sample_submission.csv",
        ["id", *AUTHORS],
        [[ids[i], 0.403493538995863, 0.287808366106543, 0.308698094897594] for i in test],
    )
    W(
        private / "test.csv",
        ["id", *AUTHORS],
        [[ids[i], *(int(a == authors[i]) for a in AUTHORS)] for i in test],
    )


NORMALIZE = {
    "en": [
        ("PLAIN", "The", "The"), ("PLAIN", "meeting", "meeting"), ("PLAIN", "is", "is"),
        ("DATE", "2017", "twenty seventeen"), ("PUNCT", ".", "."), ("CARDINAL", "12", "twelve"),
        ("LETTERS", "BBC", "b b c"), ("PLAIN", "at", "at"), ("MEASURE", "5kg", "five kilograms"),
    ],
    "ru": [
        ("PLAIN", "Встреча", "Встреча"), ("PLAIN", "в", "в"),
        ("DATE", "2017", "две тысячи семнадцатом"),
        ("PUNCT", ".", "."), ("CARDINAL", "12", "двенадцать"), ("LETTERS", "МГУ", "м г у"),
        ("PLAIN", "году", "году"), ("MEASURE", "5 кг", "пяти килограммов"),
    ],
}  # fmt: skip


def _text_norm(lang: str) -> Callable[[Path, Path, random.Random], None]:
    def make(public: Path, private: Path, rng: random.Random) -> None:
        vocab = NORMALIZE[lang]
        sentences = [[rng.choice(vocab) for _ in range(rng.randrange(3, 7))] for _ in range(12)]
        order = list(range(len(sentences)))
        rng.shuffle(order)
        test_ids, train_ids = order[:2], order[2:]
        train = [
            [new, t, *sentences[old][t]]
            for new, old in enumerate(sorted(train_ids))
            for t in range(len(sentences[old]))
        ]
        test = [
            [new, t, *sentences[old][t]]
            for new, old in enumerate(sorted(test_ids))
            for t in range(len(sentences[old]))
        ]
        q = {"nonnumeric": True}
        W(
            private / "answers.csv",
            ["id", "after"],
            [[f"{s}_{t}", a] for s, t, _c, _b, a in test],
            **q,
        )
        sample = [[f"{s}_{t}", b] for s, t, _c, b, _a in test]
        W(private / "sample_submission.csv", ["id", "after"], sample, **q)
        files = {
            f"{lang}_train.csv": (["sentence_id", "token_id", "class", "before", "after"], train),
            f"{lang}_test_2.csv": (
                ["sentence_id", "token_id", "before"],
                [r[:2] + r[3:4] for r in test],
            ),
            f"{lang}_sample_submission_2.csv": (["id", "after"], sample),
        }
        for name, (header, rows) in files.items():
            W(public / name, header, rows, **q)
            _zip(public / f"{name}.zip", [(name, public / name)], deflate=False)
            (public / name).unlink()

    return make


# ---------------------------------------------------------------------------- tabular


def taxi(public: Path, private: Path, rng: random.Random) -> None:
    rows = []
    for i in range(30):
        t = f"2013-0{1 + i % 9}-{10 + i % 18:02d} {i % 24:02d}:{i % 60:02d}:{(7 * i) % 60:02d}"
        lon, lat = -73.98 + rng.random() / 20, 40.75 + rng.random() / 20
        lon2, lat2 = lon + rng.random() / 30, lat + rng.random() / 30
        fare = round(2.5 + 120 * (abs(lon2 - lon) + abs(lat2 - lat)), 2)
        rows.append(
            [f"{t}.{rng.randrange(10**7)}", fare, f"{t} UTC", round(lon, 6), round(lat, 6),
             round(lon2, 6), round(lat2, 6), 1 + i % 4]
        )  # fmt: skip
    train, test = _split([0] * len(rows), 6, rng)
    cols = ["key", "fare_amount", "pickup_datetime", "pickup_longitude", "pickup_latitude",
            "dropoff_longitude", "dropoff_latitude", "passenger_count"]  # fmt: skip
    W(public / "labels.csv", cols, [rows[i] for i in train])
    W(public / "test.csv", [cols[0], *cols[2:]], [[rows[i][0], *rows[i][2:]] for i in test])
    W(public / "sample_submission.csv", ["key", "fare_amount"], [[rows[i][0], 11.35] for i in test])
    W(private / "test.csv", cols, [rows[i] for i in test])
    (public / "GCP-Coupons-Instructions.rtf").write_text(
        "{\\rtf1\\ansi\\deff0 {\\fonttbl {\\f0 Helvetica;}}\\f0\\fs24 "
        "Miniature placeholder for the competition's cloud-coupon instructions.\\par}\n"
    )


NOMAD_COLS = (
    "id", "spacegroup", "number_of_total_atoms", "percent_atom_al", "percent_atom_ga",
    "percent_atom_in", "lattice_vector_1_ang", "lattice_vector_2_ang", "lattice_vector_3_ang",
    "lattice_angle_alpha_degree", "lattice_angle_beta_degree", "lattice_angle_gamma_degree",
    "formation_energy_ev_natom", "bandgap_energy_ev",
)  # fmt: skip


def nomad(public: Path, private: Path, rng: random.Random) -> None:
    n = 20
    rows, geoms = [], []
    for _ in range(n):
        al = round(rng.choice((0.0, 0.25, 0.5, 0.75)), 4)
        ga = round((1 - al) * rng.random(), 4)
        vec = [round(5 + 20 * rng.random(), 4) for _ in range(3)]
        rows.append(
            [rng.choice((12, 33, 167, 194, 206, 227)), float(rng.choice((10, 20, 30, 40, 60, 80))),
             al, ga, round(1 - al - ga, 4), *vec, round(90 + rng.random(), 4),
             round(90 + rng.random(), 4), round(90 + 30 * rng.random(), 4),
             round(0.3 * rng.random(), 4), round(0.5 + 4 * al + rng.random(), 4)]
        )  # fmt: skip
        lines = ["#=======================================================",
                 "# openmle miniature geometry (synthetic)",
                 "#======================================================="]  # fmt: skip
        lines += [f"lattice_vector {v:.8f} 0.00000000 0.00000000 " for v in vec]
        for k in range(4):
            el = ("Al", "Ga", "In", "O")[k]
            lines.append(f"atom {k * 1.1:.8f} {k * 0.7:.8f} {k * 0.3:.8f} {el}")
        geoms.append("\n".join(lines) + "\n")
    train, test = _split([0] * n, 4, rng)
    for part, idx in (("train", train), ("test", test)):
        for new, i in enumerate(idx, start=1):
            d = public / part / str(new)
            d.mkdir(parents=True)
            (d / "geometry.xyz").write_text(geoms[i])
    W(public / "train.csv", NOMAD_COLS, [[k, *rows[i]] for k, i in enumerate(train, start=1)])
    W(private / "test.csv", NOMAD_COLS, [[k, *rows[i]] for k, i in enumerate(test, start=1)])
    W(
        public / "test.csv",
        NOMAD_COLS[:-2],
        [[k, *rows[i][:-2]] for k, i in enumerate(test, start=1)],
    )
    W(
        public / "sample_submission.csv",
        ["id", "formation_energy_ev_natom", "bandgap_energy_ev"],
        [[k, 0.1779, 1.8892] for k in range(1, len(test) + 1)],
    )


TPS_DEC_COLS = (
    "Id", "Elevation", "Aspect", "Slope", "Horizontal_Distance_To_Hydrology",
    "Vertical_Distance_To_Hydrology", "Horizontal_Distance_To_Roadways", "Hillshade_9am",
    "Hillshade_Noon", "Hillshade_3pm", "Horizontal_Distance_To_Fire_Points",
    *(f"Wilderness_Area{k}" for k in range(1, 5)), *(f"Soil_Type{k}" for k in range(1, 41)),
    "Cover_Type",
)  # fmt: skip


def tps_dec(public: Path, private: Path, rng: random.Random) -> None:
    n = 30
    ids = rng.sample(range(4_000_000), n)
    rows = []
    for i in range(n):
        cover = 1 + i % 3
        nums = [2500 + 200 * cover + rng.randrange(100), rng.randrange(360), rng.randrange(40),
                rng.randrange(600), rng.randrange(-50, 200), rng.randrange(5000),
                rng.randrange(256), rng.randrange(256), rng.randrange(256),
                rng.randrange(5000)]  # fmt: skip
        flags = [int(k == i % 4) for k in range(4)] + [int(k == i % 40) for k in range(40)]
        rows.append([ids[i], *nums, *flags, cover])
    train, test = _split([0] * n, 5, rng)
    W(public / "train.csv", TPS_DEC_COLS, [rows[i] for i in train])
    W(private / "test.csv", TPS_DEC_COLS, [rows[i] for i in test])
    W(public / "test.csv", TPS_DEC_COLS[:-1], [rows[i][:-1] for i in test])
    W(public / "sample_submission.csv", ["Id", "Cover_Type"], [[rows[i][0], 2] for i in test])


TPS_MAY_COLS = ("id", *(f"f_{k:02d}" for k in range(31)), "target")


def tps_may(public: Path, private: Path, rng: random.Random) -> None:
    n = 150
    target = [i % 2 for i in range(n)]
    rows = []
    for i in range(n):
        f: list[object] = [round(rng.gauss(0.3 * target[i], 1), 6) for _ in range(7)]
        f += [rng.randrange(0, 12) for _ in range(12)]
        f += [round(rng.gauss(0, 2), 6) for _ in range(8)]
        f += ["".join(rng.choice("ABCDEFGHIJKLMNOPQRST") for _ in range(10))]
        f += [round(rng.gauss(0, 200), 6), rng.randrange(2), rng.randrange(3)]
        rows.append([*f, target[i]])
    train, test = _split(target, 30, rng)
    new_train = [[k, *rows[i]] for k, i in enumerate(train)]
    new_test = [[len(train) + k, *rows[i]] for k, i in enumerate(test)]
    W(public / "train.csv", TPS_MAY_COLS, new_train)
    W(private / "test.csv", TPS_MAY_COLS, new_test)
    W(public / "test.csv", TPS_MAY_COLS[:-1], [r[:-1] for r in new_test])
    W(private / "gold_submission.csv", ["id", "target"], [[r[0], r[-1]] for r in new_test])
    W(public / "sample_submission.csv", ["id", "target"], [[r[0], 0.5] for r in new_test])


# ---------------------------------------------------------------------------- audio


BIRDS = (
    ("BRCR", "Brown Creeper"), ("PAWR", "Pacific Wren"), ("PSFL", "Pacific-slope Flycatcher"),
    ("RBNU", "Red-breasted Nuthatch"), ("DEJU", "Dark-eyed Junco"),
    ("OSFL", "Olive-sided Flycatcher"), ("HETH", "Hermit Thrush"),
    ("CBCH", "Chestnut-backed Chickadee"), ("VATH", "Varied Thrush"), ("HEWA", "Hermit Warbler"),
    ("SWTH", "Swainson's Thrush"), ("HAFL", "Hammond's Flycatcher"), ("WETA", "Western Tanager"),
    ("BHGB", "Black-headed Grosbeak"), ("GCKI", "Golden Crowned Kinglet"),
    ("WAVI", "Warbling Vireo"), ("MGWA", "MacGillivray's Warbler"), ("STJA", "Stellar's Jay"),
    ("CONI", "Common Nighthawk"),
)  # fmt: skip


def mlsp_birds(public: Path, private: Path, rng: random.Random) -> None:
    n = 60
    test = set(rng.sample(range(n), 12))
    names = [
        f"PC{1 + i % 13}_2009{6 + i % 3:02d}{10 + i % 20:02d}_0{50000 + 13 * i}_{i:04d}"
        for i in range(n)
    ]
    labels = [sorted({(3 * i) % 19, (5 * i + 1) % 19}) if i % 4 else [] for i in range(n)]
    labels[min(test)] = [2, 7]  # the scored part has positives
    ess, sup = public / "essential_data", public / "supplemental_data"
    ess.mkdir()
    sup.mkdir()
    W(ess / "CVfolds_2.txt", ["rec_id", "fold"], [[i, int(i in test)] for i in range(n)])
    W(ess / "rec_id2filename.txt", ["rec_id", "filename"], [[i, names[i]] for i in range(n)])
    with (ess / "rec_labels_test_hidden.txt").open("w") as fh:
        fh.write("rec_id,[labels]\n")
        for i in range(n):
            lab = "?" if i in test else ",".join(str(x) for x in labels[i])
            fh.write(f"{i},{lab}\n" if lab else f"{i}\n")
    W(private / "answers.csv", ["Id", "Probability"],
      [[i * 100 + s, int(s in labels[i])] for i in sorted(test) for s in range(19)])  # fmt: skip
    W(public / "sample_submission.csv", ["Id", "Probability"],
      [[i * 100 + s, 0] for i in sorted(test) for s in range(19)])  # fmt: skip
    W(
        ess / "species_list.txt",
        ["class_id", "code", "species"],
        [[k, c, s] for k, (c, s) in enumerate(BIRDS)],
    )
    (ess / "src_wavs").mkdir()
    for d in (
        "filtered_spectrograms",
        "segmentation_examples",
        "spectrograms",
        "supervised_segmentation",
    ):
        (sup / d).mkdir()
    for i, name in enumerate(names):
        (ess / "src_wavs" / f"{name}.wav").write_bytes(fmt.wav(16000, 0.05, 2000 + 150 * i))
        spec = fmt.bmp(16, 8, _rgb(int(bool(labels[i])), rng))
        for d in ("filtered_spectrograms", "spectrograms", "supervised_segmentation"):
            (sup / d / f"{name}.bmp").write_bytes(spec)
        if i % 3 == 0:  # only some recordings have a segmentation example
            (sup / "segmentation_examples" / f"{name}.bmp").write_bytes(spec)
    (sup / "segment_clusters.bmp").write_bytes(fmt.bmp(16, 16, (200, 200, 200)))
    (sup / "segment_mosaic.bmp").write_bytes(fmt.bmp(16, 16, (20, 20, 20)))
    header = "rec_id,[histogram of segment features]\n"  # prepare.py writes it on all three
    hist = "".join(
        f"{i}," + ",".join(f"{rng.random():.6f}" for _ in range(100)) + "\n" for i in range(n)
    )
    seg = "".join(
        f"{i},{s}," + ",".join(f"{rng.random():.6f}" for _ in range(38)) + "\n"
        for i in range(n) for s in range(1 + i % 2)
    )  # fmt: skip
    rect = "".join(
        f"{i},{s},{rng.randrange(100)},{rng.randrange(100, 200)},"
        f"{rng.randrange(50)},{rng.randrange(50, 120)},\n"
        for i in range(n) for s in range(1 + i % 2)
    )  # fmt: skip
    (sup / "histogram_of_segments.txt").write_text(header + hist)
    (sup / "segment_features.txt").write_text(header + seg)
    (sup / "segment_rectangles.txt").write_text(header + rect)


def whale(public: Path, private: Path, rng: random.Random) -> None:
    days = ("20090328", "20090329", "20090330", "20090331")
    clips = []
    for d, day in enumerate(days):
        for k in range(4):
            label = (k + d) % 2
            sec = rng.randrange(0, 86400)
            stamp = f"{sec // 3600:02d}{sec % 3600 // 60:02d}{sec % 60:02d}"
            clips.append((f"{day}_{stamp}_{rng.randrange(60):03d}s{rng.randrange(10)}ms", label))
    clips.sort()
    train = [c for c in clips if c[0][:8] in days[:2]]
    test = [c for c in clips if c[0][:8] in days[2:]]
    (public / "train2").mkdir()
    for idx, (prefix, label) in enumerate(train):
        (public / "train2" / f"{prefix}_TRAIN{idx}_{label}.aif").write_bytes(
            fmt.aiff(2000, 0.25, 150.0 if label else 600.0)
        )
    (public / "test2").mkdir()
    answers = []
    for idx, (prefix, label) in enumerate(test):
        name = f"{prefix}_Test{idx}.aif"
        (public / "test2" / name).write_bytes(fmt.aiff(2000, 0.25, 150.0 if label else 600.0))
        answers.append([name, label])
    for part in ("train2", "test2"):
        _archive(public, part)
        shutil.rmtree(public / part)
    W(private / "test.csv", ["clip", "probability"], answers)
    W(public / "sampleSubmission.csv", ["clip", "probability"], [[a[0], 0] for a in answers])


MAKERS: dict[str, Maker] = {
    "aerial-cactus-identification": aerial_cactus,
    "aptos2019-blindness-detection": aptos,
    "denoising-dirty-documents": denoising,
    "detecting-insults-in-social-commentary": insults,
    "dog-breed-identification": dog_breed,
    "dogs-vs-cats-redux-kernels-edition": dogs_vs_cats,
    "histopathologic-cancer-detection": histopathologic,
    "jigsaw-toxic-comment-classification-challenge": jigsaw,
    "leaf-classification": leaf,
    "mlsp-2013-birds": mlsp_birds,
    "new-york-city-taxi-fare-prediction": taxi,
    "nomad2018-predict-transparent-conductors": nomad,
    "plant-pathology-2020-fgvc7": plant_pathology,
    "random-acts-of-pizza": pizza,
    "ranzcr-clip-catheter-line-classification": ranzcr,
    "siim-isic-melanoma-classification": siim,
    "spooky-author-identification": spooky,
    "tabular-playground-series-dec-2021": tps_dec,
    "tabular-playground-series-may-2022": tps_may,
    "text-normalization-challenge-english-language": _text_norm("en"),
    "text-normalization-challenge-russian-language": _text_norm("ru"),
    "the-icml-2013-whale-challenge-right-whale-redux": whale,
}
"""Competition id -> the maker of its prepared data."""
