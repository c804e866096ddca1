"""The MLE-bench Lite miniature: MLE-bench's prepared layout for all 22 competitions,
deterministic bytes, readable file formats, and graders that score with each competition's
metric and refuse what MLE-bench's graders refuse.

The expected layouts below were checked at development time against each competition's real
``prepare.py`` (fed raw input shaped like the Kaggle download) and the graders against each
real ``grade.py`` (same score to 1e-9 on the sample and on random submissions); see the
module doc of :mod:`openmle.bench.mlebench._miniature`.
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import math
import random
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from openmle.bench import LITE_IDS, SMOKE_IDS, build_miniature, smoke_miniature
from openmle.bench._miniyaml import load as load_yaml
from openmle.bench.mlebench._miniature.graders import _common
from openmle.errors import InvalidArgument

# public entries, private entries: "dir/*.ext" lists a folder and the extensions within
LAYOUT: dict[str, tuple[str, str]] = {
    "aerial-cactus-identification": (
        "description.md sample_submission.csv test.zip train.csv train.zip",
        "test.csv",
    ),
    "aptos2019-blindness-detection": (
        "description.md sample_submission.csv test.csv test_images/*.png train.csv "
        "train_images/*.png",
        "test.csv",
    ),
    "denoising-dirty-documents": (
        "description.md sampleSubmission.csv test/*.png train/*.png train_cleaned/*.png",
        "answers.csv",
    ),
    "detecting-insults-in-social-commentary": (
        "description.md sample_submission_null.csv test.csv train.csv",
        "gold_submission.csv test.csv",
    ),
    "dog-breed-identification": (
        "description.md labels.csv sample_submission.csv test/*.jpg train/*.jpg",
        "test.csv",
    ),
    "dogs-vs-cats-redux-kernels-edition": (
        "description.md sample_submission.csv test/*.jpg test.zip train/*.jpg train.zip",
        "answers.csv",
    ),
    "histopathologic-cancer-detection": (
        "description.md sample_submission.csv test/*.tif train/*.tif train_labels.csv",
        "answers.csv",
    ),
    "jigsaw-toxic-comment-classification-challenge": (
        "description.md sample_submission.csv test.csv train.csv",
        "test.csv",
    ),
    "leaf-classification": (
        "description.md images/*.jpg sample_submission.csv test.csv train.csv",
        "images/ test.csv",
    ),
    "mlsp-2013-birds": (
        "description.md essential_data/*.txt,*.wav sample_submission.csv "
        "supplemental_data/*.bmp,*.txt",
        "answers.csv",
    ),
    "new-york-city-taxi-fare-prediction": (
        "GCP-Coupons-Instructions.rtf description.md labels.csv sample_submission.csv test.csv",
        "test.csv",
    ),
    "nomad2018-predict-transparent-conductors": (
        "description.md sample_submission.csv test/*.xyz test.csv train/*.xyz train.csv",
        "test.csv",
    ),
    "plant-pathology-2020-fgvc7": (
        "description.md images/*.jpg sample_submission.csv test.csv train.csv",
        "test.csv",
    ),
    "random-acts-of-pizza": (
        "description.md sampleSubmission.csv test.json test.zip train.json train.zip",
        "test.csv",
    ),
    "ranzcr-clip-catheter-line-classification": (
        "description.md sample_submission.csv test/*.jpg train/*.jpg train.csv "
        "train_annotations.csv",
        "test.csv",
    ),
    "siim-isic-melanoma-classification": (
        "description.md jpeg/*.jpg sample_submission.csv test/*.dcm test.csv "
        "tfrecords/*.tfrec train/*.dcm train.csv",
        "test.csv",
    ),
    "spooky-author-identification": (
        "description.md sample_submission.csv test.csv train.csv",
        "test.csv",
    ),
    "tabular-playground-series-dec-2021": (
        "description.md sample_submission.csv test.csv train.csv",
        "test.csv",
    ),
    "tabular-playground-series-may-2022": (
        "description.md sample_submission.csv test.csv train.csv",
        "gold_submission.csv test.csv",
    ),
    "text-normalization-challenge-english-language": (
        "description.md en_sample_submission_2.csv.zip en_test_2.csv.zip en_train.csv.zip",
        "answers.csv sample_submission.csv",
    ),
    "text-normalization-challenge-russian-language": (
        "description.md ru_sample_submission_2.csv.zip ru_test_2.csv.zip ru_train.csv.zip",
        "answers.csv sample_submission.csv",
    ),
    "the-icml-2013-whale-challenge-right-whale-redux": (
        "description.md sampleSubmission.csv test2.zip train2.zip",
        "test.csv",
    ),
}

# the first line of the sample submission and of the answers (prefixes for wide ones)
HEADERS: dict[str, tuple[str, str]] = {
    "aerial-cactus-identification": ("id,has_cactus", "id,has_cactus"),
    "aptos2019-blindness-detection": ("id_code,diagnosis", "id_code,diagnosis"),
    "denoising-dirty-documents": ("id,value", "id,value"),
    "detecting-insults-in-social-commentary": (
        "Insult,Date,Comment",
        "Insult,Date,Comment,Usage",
    ),
    "dog-breed-identification": ("id,affenpinscher,afghan_hound,", "id,affenpinscher,"),
    "dogs-vs-cats-redux-kernels-edition": ("id,label", "id,label"),
    "histopathologic-cancer-detection": ("id,label", "id,label"),
    "jigsaw-toxic-comment-classification-challenge": (
        "id,toxic,severe_toxic,obscene,threat,insult,identity_hate",
        "id,toxic,severe_toxic,obscene,threat,insult,identity_hate",
    ),
    "leaf-classification": ("id,Acer_Capillipes,Acer_Circinatum,", "id,Acer_Capillipes,"),
    "mlsp-2013-birds": ("Id,Probability", "Id,Probability"),
    "new-york-city-taxi-fare-prediction": (
        "key,fare_amount",
        "key,fare_amount,pickup_datetime,pickup_longitude,pickup_latitude,dropoff_longitude,"
        "dropoff_latitude,passenger_count",
    ),
    "nomad2018-predict-transparent-conductors": (
        "id,formation_energy_ev_natom,bandgap_energy_ev",
        "id,spacegroup,number_of_total_atoms,percent_atom_al,",
    ),
    "plant-pathology-2020-fgvc7": (
        "image_id,healthy,multiple_diseases,rust,scab",
        "image_id,healthy,multiple_diseases,rust,scab",
    ),
    "random-acts-of-pizza": (
        "request_id,requester_received_pizza",
        "request_id,requester_received_pizza",
    ),
    "ranzcr-clip-catheter-line-classification": (
        "StudyInstanceUID,ETT - Abnormal,ETT - Borderline,ETT - Normal,NGT - Abnormal,"
        "NGT - Borderline,NGT - Incompletely Imaged,NGT - Normal,CVC - Abnormal,"
        "CVC - Borderline",
        "StudyInstanceUID,ETT - Abnormal,",
    ),
    "siim-isic-melanoma-classification": ("image_name,target", "image_name,target"),
    "spooky-author-identification": ("id,EAP,HPL,MWS", "id,EAP,HPL,MWS"),
    "tabular-playground-series-dec-2021": ("Id,Cover_Type", "Id,Elevation,Aspect,Slope,"),
    "tabular-playground-series-may-2022": ("id,target", "id,f_00,f_01,"),
    "text-normalization-challenge-english-language": ('"id","after"', '"id","after"'),
    "text-normalization-challenge-russian-language": ('"id","after"', '"id","after"'),
    "the-icml-2013-whale-challenge-right-whale-redux": ("clip,probability", "clip,probability"),
}

MAGIC = {
    ".jpg": (0, b"\xff\xd8\xff"),
    ".png": (0, b"\x89PNG\r\n\x1a\n"),
    ".tif": (0, b"II*\x00"),
    ".bmp": (0, b"BM"),
    ".wav": (8, b"WAVE"),
    ".aif": (8, b"AIFF"),
    ".dcm": (128, b"DICM"),
}


@pytest.fixture(scope="module")
def mini(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_miniature(tmp_path_factory.mktemp("lite"))


def _config(registry: Path, cid: str) -> dict[str, Any]:
    cfg = load_yaml((registry / "mlebench" / "competitions" / cid / "config.yaml").read_text())
    assert isinstance(cfg, dict)
    return cfg


def _table(path: Path) -> dict[str, Any]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    return {"columns": rows[0], "rows": rows[1:]}


def _grader(cid: str) -> Any:
    return importlib.import_module(
        f"openmle.bench.mlebench._miniature.graders.{cid.replace('-', '_')}"
    ).grade


def _listing(root: Path) -> str:
    out = []
    for p in sorted(root.iterdir()):
        if p.is_dir():
            exts = sorted({q.suffix for q in p.rglob("*") if q.is_file()})
            out.append(f"{p.name}/" + ("*" + ",*".join(exts) if exts else ""))
        else:
            out.append(p.name)
    return " ".join(out)


def test_the_miniature_covers_the_22_lite_competitions() -> None:
    assert set(LAYOUT) == set(HEADERS) == set(LITE_IDS)
    assert set(SMOKE_IDS) <= set(LITE_IDS)


@pytest.mark.parametrize("cid", LITE_IDS)
def test_layout_is_mlebench_prepared_layout(mini: tuple[Path, Path], cid: str) -> None:
    registry, data = mini
    prepared = data / cid / "prepared"
    public, private = LAYOUT[cid]
    assert _listing(prepared / "public") == public
    assert _listing(prepared / "private") == private
    cfg = _config(registry, cid)
    sample, answers = (data / cfg["dataset"][k] for k in ("sample_submission", "answers"))
    want_s, want_a = HEADERS[cid]
    assert sample.read_text(encoding="utf-8").split("\n", 1)[0].startswith(want_s)
    assert answers.read_text(encoding="utf-8").split("\n", 1)[0].startswith(want_a)
    for f in prepared.rglob("*"):  # every binary file has its format's signature
        if f.suffix in MAGIC:
            at, magic = MAGIC[f.suffix]
            assert f.read_bytes()[at : at + len(magic)] == magic, f
        if f.suffix == ".csv":
            text = f.read_bytes()
            assert b"\r\n" not in text and text.endswith(b"\n"), f  # pandas' line ends
    comp = registry / "mlebench" / "competitions" / cid
    for name in ("config.yaml", "grade.py", "leaderboard.csv", "description.md", "__init__.py"):
        assert (comp / name).is_file()
    assert (
        cfg["id"] == cid and cfg["grader"]["grade_fn"] == f"mlebench.competitions.{cid}.grade:grade"
    )
    assert (prepared / "public" / "description.md").read_text() == (
        comp / "description.md"
    ).read_text()
    assert cid in (registry / "experiments" / "splits" / "low.txt").read_text().split()


def test_archives_hold_what_prepare_py_zips(mini: tuple[Path, Path]) -> None:
    _, data = mini

    def names(cid: str, name: str) -> list[str]:
        with zipfile.ZipFile(data / cid / "prepared" / "public" / name) as z:
            return z.namelist()

    aerial = names("aerial-cactus-identification", "train.zip")
    assert aerial and all("/" not in n and n.endswith(".jpg") for n in aerial)
    cats = names("dogs-vs-cats-redux-kernels-edition", "train.zip")
    assert {n.split(".")[0] for n in cats} == {"cat", "dog"}
    assert names("random-acts-of-pizza", "test.zip") == ["test.json"]
    whale = names("the-icml-2013-whale-challenge-right-whale-redux", "test2.zip")
    assert whale[0] == "test2/"
    assert all(n.endswith(f"_Test{i}.aif") for i, n in enumerate(whale[1:]))
    for lang in ("english", "russian"):
        cid = f"text-normalization-challenge-{lang}-language"
        lang = lang[:2]
        assert names(cid, f"{lang}_train.csv.zip") == [f"{lang}_train.csv"]
    pizza = json.loads((data / "random-acts-of-pizza" / "prepared/public/test.json").read_text())
    assert "requester_received_pizza" not in pizza[0] and "request_id" in pizza[0]


def test_builds_are_byte_identical(mini: tuple[Path, Path], tmp_path: Path) -> None:
    ids = ["dogs-vs-cats-redux-kernels-edition", "siim-isic-melanoma-classification"]
    reg2, data2 = build_miniature(tmp_path / "again", ids)
    _, data = mini
    for cid in ids:
        for f in sorted((data2 / cid).rglob("*")):
            if f.is_file():
                assert f.read_bytes() == (data / f.relative_to(data2)).read_bytes(), f
    assert (reg2 / "experiments" / "splits" / "low.txt").read_text().split() == ids


def test_build_refuses_unknown_ids_and_a_used_root(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="No miniature"):
        build_miniature(tmp_path / "a", ["not-a-competition"])
    build_miniature(tmp_path / "b", ["spooky-author-identification"])
    with pytest.raises(InvalidArgument, match="already holds"):
        build_miniature(tmp_path / "b", ["spooky-author-identification"])


def test_smoke_miniature_is_built_once(tmp_path: Path) -> None:
    registry, data = smoke_miniature(tmp_path)
    assert sorted(p.name for p in data.iterdir()) == sorted(SMOKE_IDS)
    stamp = (registry / "experiments" / "splits" / "low.txt").stat().st_mtime_ns
    assert smoke_miniature(tmp_path) == (registry, data)
    assert (registry / "experiments" / "splits" / "low.txt").stat().st_mtime_ns == stamp


def test_images_decode_to_their_colours(mini: tuple[Path, Path]) -> None:
    image = pytest.importorskip("PIL.Image")
    _, data = mini
    seen = set()
    for f in sorted(data.rglob("*")):
        if f.suffix in (".jpg", ".png", ".tif", ".bmp") and f.suffix not in seen:
            seen.add(f.suffix)
            with image.open(f) as im:
                im.load()
                assert im.size[0] >= 8 and im.mode in ("L", "RGB")
    with zipfile.ZipFile(data / "aerial-cactus-identification/prepared/public/test.zip") as z:
        first = z.read(z.namelist()[0])
    with image.open(io.BytesIO(first)) as im:
        assert im.format == "JPEG" and im.size == (32, 32)
    assert seen == {".jpg", ".png", ".tif", ".bmp"}


def test_tfrecords_frame_their_records(mini: tuple[Path, Path]) -> None:
    _, data = mini
    recs = sorted((data / "siim-isic-melanoma-classification/prepared/public/tfrecords").iterdir())
    assert [r.name.split("-")[0] for r in recs] == [
        "test00", "test01", "train00", "train01", "train02", "train03", "train04", "train05",
    ]  # fmt: skip
    test_names = set(
        (data / "siim-isic-melanoma-classification/prepared/private/test.csv")
        .read_text()
        .split()[1:]
    )
    for r in recs:
        blob, n, found = r.read_bytes(), 0, []
        at = 0
        while at < len(blob):
            (size,) = struct.unpack("<Q", blob[at : at + 8])
            record = blob[at + 12 : at + 12 + size]
            found += [t for t in test_names if t.split(",")[0].encode() in record]
            at += 12 + size + 4
            n += 1
        assert n == int(r.stem.split("-")[1])  # the name carries the record count
        assert bool(found) == r.name.startswith("test")


# ---------------------------------------------------------------------------- graders


@pytest.mark.parametrize("cid", LITE_IDS)
def test_sample_submission_grades_and_attacks_are_refused(
    mini: tuple[Path, Path], cid: str
) -> None:
    registry, data = mini
    cfg = _config(registry, cid)
    sub = _table(data / cfg["dataset"]["sample_submission"])
    ans = _table(data / cfg["dataset"]["answers"])
    grade = _grader(cid)
    score = grade(sub, ans)
    assert math.isfinite(score)
    bad = _common.InvalidSubmissionError
    with pytest.raises(bad):
        grade({"columns": sub["columns"], "rows": sub["rows"][1:]}, ans)  # a row short
    with pytest.raises(bad):
        grade({"columns": sub["columns"][:-1], "rows": [r[:-1] for r in sub["rows"]]}, ans)
    with pytest.raises(bad):
        grade({"columns": [], "rows": []}, ans)
    with pytest.raises(bad):
        grade("not a table", ans)
    if cid != "nomad2018-predict-transparent-conductors":  # MLE-bench compares by position
        dup = [sub["rows"][0], *sub["rows"][:-1]]
        with pytest.raises(bad):
            grade({"columns": sub["columns"], "rows": dup}, ans)
    numeric = [i for i, c in enumerate(sub["columns"]) if c not in ("after",) and i > 0]
    if cid != "detecting-insults-in-social-commentary" and numeric:
        nan = [list(r) for r in sub["rows"]]
        nan[0][numeric[0]] = "not-a-number"
        with pytest.raises((bad, ValueError)):
            grade({"columns": sub["columns"], "rows": nan}, ans)


CONSTANT_SCORES = {
    "aerial-cactus-identification": 0.5,
    "dog-breed-identification": math.log(120),
    "dogs-vs-cats-redux-kernels-edition": math.log(2),
    "leaf-classification": math.log(99),
    "jigsaw-toxic-comment-classification-challenge": 0.5,
    "ranzcr-clip-catheter-line-classification": 0.5,
    "aptos2019-blindness-detection": 0.0,
}
"""Scores a constant (uniform) prediction has by the metric's definition."""


@pytest.mark.parametrize("cid", sorted(CONSTANT_SCORES))
def test_constant_predictions_score_as_the_metric_defines(
    mini: tuple[Path, Path], cid: str
) -> None:
    registry, data = mini
    cfg = _config(registry, cid)
    got = _grader(cid)(
        _table(data / cfg["dataset"]["sample_submission"]),
        _table(data / cfg["dataset"]["answers"]),
    )
    assert got == pytest.approx(CONSTANT_SCORES[cid], abs=1e-9)


def test_perfect_predictions_score_the_best(mini: tuple[Path, Path]) -> None:
    registry, data = mini
    for cid, best in (
        ("siim-isic-melanoma-classification", 1.0),
        ("tabular-playground-series-may-2022", 1.0),
        ("denoising-dirty-documents", 0.0),
        ("text-normalization-challenge-english-language", 1.0),
        ("tabular-playground-series-dec-2021", 1.0),
    ):
        cfg = _config(registry, cid)
        ans = _table(data / cfg["dataset"]["answers"])
        sample = _table(data / cfg["dataset"]["sample_submission"])
        cols = sample["columns"]
        idx = [ans["columns"].index(c) for c in cols]
        perfect = {"columns": cols, "rows": [[r[i] for i in idx] for r in ans["rows"]]}
        assert _grader(cid)(perfect, ans) == pytest.approx(best), cid


def test_pandas_frames_grade_like_plain_tables(mini: tuple[Path, Path]) -> None:
    pd = pytest.importorskip("pandas")
    registry, data = mini
    for cid in LITE_IDS:
        cfg = _config(registry, cid)
        s, a = (data / cfg["dataset"][k] for k in ("sample_submission", "answers"))
        frames = _grader(cid)(pd.read_csv(s), pd.read_csv(a))
        assert frames == pytest.approx(_grader(cid)(_table(s), _table(a)), abs=1e-12), cid


def test_metrics_match_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(3)
    for _ in range(20):
        n = rng.randrange(4, 30)
        y = [rng.randrange(2) for _ in range(n)]
        y[0], y[1] = 0, 1
        p = [round(rng.random(), 2) for _ in range(n)]  # ties included
        assert _common.auroc(y, p) == pytest.approx(metrics.roc_auc_score(y, p), abs=1e-12)
        assert _common.binary_log_loss(y, p) == pytest.approx(metrics.log_loss(y, p), abs=1e-9)
        a = [rng.randrange(5) for _ in range(n)]
        b = [rng.randrange(5) for _ in range(n)]
        if len(set(a) | set(b)) > 1:
            want = metrics.cohen_kappa_score(a, b, weights="quadratic")
            assert _common.quadratic_kappa(a, b) == pytest.approx(want, abs=1e-12)
        k = 4
        truth = [[int(j == rng.randrange(k)) for j in range(k)] for _ in range(n)]
        probs = [[rng.random() + 1e-3 for _ in range(k)] for _ in range(n)]
        probs = [[x / sum(r) for x in r] for r in probs]
        assert _common.log_loss(truth, probs) == pytest.approx(
            metrics.log_loss(truth, probs), abs=1e-9
        )
        t = [rng.random() * 5 for _ in range(n)]
        q = [rng.random() * 5 for _ in range(n)]
        assert _common.rmsle(t, q) == pytest.approx(
            metrics.root_mean_squared_log_error(t, q), abs=1e-12
        )


def test_auroc_is_undefined_with_one_class() -> None:
    with pytest.raises(ValueError, match="both classes"):
        _common.auroc([1, 1, 1], [0.2, 0.5, 0.9])
