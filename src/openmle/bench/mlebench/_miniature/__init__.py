"""A miniature of MLE-bench's 22 Lite competitions, made on first use (no Kaggle account, no
MLE-bench checkout): a registry laid out like openai/mle-bench and prepared data in the
layout ``mlebench prepare`` writes.

- ``<root>/mle-bench/mlebench/competitions/<id>/{config.yaml,grade.py,_common.py,
  leaderboard.csv,description.md}`` and ``<root>/mle-bench/experiments/splits/low.txt``;
  each ``grade.py`` is openmle's own grader for that competition's answers format and metric
  (:mod:`openmle.bench.mlebench._miniature.graders`), needing only the standard library.
- ``<root>/data/<id>/prepared/{public,private}``: the file names, folders, archives, CSV
  columns, id formats and file formats of that competition's ``prepare.py``; the contents are
  synthetic and tiny. ``public/description.md`` as ``mlebench prepare`` adds it.

:func:`build_miniature` writes it (deterministic: the same bytes for the same arguments);
:func:`smoke_miniature` keeps one copy of the smoke suite's competitions under openmle's
cache for ``openmle bench run smoke``.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import shutil
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path

from openmle.bench._suites import LITE_IDS
from openmle.bench.mlebench._miniature._comps import MAKERS
from openmle.errors import InvalidArgument

__all__ = ["SMOKE_IDS", "VERSION", "build_miniature", "smoke_miniature"]

VERSION = "1"
"""Changes whenever the miniature's bytes change (the smoke cache's key)."""

SMOKE_IDS: tuple[str, ...] = (
    "spooky-author-identification",
    "tabular-playground-series-dec-2021",
    "aerial-cactus-identification",
    "random-acts-of-pizza",
)
"""The smoke suite: text, tabular, images (zipped JPEGs) and JSON records."""

_GRADERS = Path(__file__).parent / "graders"

# id -> (name, competition_type, awards_medals, prizes, grader name, answers, sample
# submission, gold submission or "", higher is better, what to predict)
_META: dict[str, tuple[str, str, bool, tuple[tuple[object, int], ...] | None, str, str, str, str, bool, str]] = {  # noqa: E501
    "aerial-cactus-identification": ("Aerial Cactus Identification", "code", False, None, "auc-roc", "private/test.csv", "public/sample_submission.csv", "", True, "whether each 32x32 aerial image (in test.zip) shows a columnar cactus: has_cactus, a probability"),  # noqa: E501
    "aptos2019-blindness-detection": ("APTOS 2019 Blindness Detection", "code", True, ((1, 25000), (2, 12000), (3, 8000), (4, 5000)), "quadratic-weighted-kappa", "private/test.csv", "public/sample_submission.csv", "", True, "the diabetic retinopathy grade 0-4 (diagnosis) of each retina image in test_images/"),  # noqa: E501
    "denoising-dirty-documents": ("Denoising Dirty Documents", "simple", False, None, "root_mean_squared_error", "private/answers.csv", "public/sampleSubmission.csv", "", False, "the clean intensity (0-1) of every pixel of the scanned pages in test/, one row per pixel id <image>_<row>_<col>"),  # noqa: E501
    "detecting-insults-in-social-commentary": ("Detecting Insults in Social Commentary", "simple", True, ((1, 7000), (2, 2500), ("Visualization Prospect", 500)), "auc-roc", "private/test.csv", "public/sample_submission_null.csv", "private/gold_submission.csv", True, "the probability that each comment (Insult) is insulting"),  # noqa: E501
    "dog-breed-identification": ("Dog Breed Identification", "simple", False, None, "multi-class-log-loss", "private/test.csv", "public/sample_submission.csv", "", False, "a probability for each of 120 breeds for every image in test/"),  # noqa: E501
    "dogs-vs-cats-redux-kernels-edition": ("Dogs vs. Cats Redux: Kernels Edition", "code", False, None, "log-loss", "private/answers.csv", "public/sample_submission.csv", "", False, "the probability that each image in test.zip shows a dog (label)"),  # noqa: E501
    "histopathologic-cancer-detection": ("Histopathologic Cancer Detection", "code", False, None, "auc-roc", "private/answers.csv", "public/sample_submission.csv", "", True, "the probability that the centre of each TIFF patch in test/ holds tumour tissue (label)"),  # noqa: E501
    "jigsaw-toxic-comment-classification-challenge": ("Toxic Comment Classification Challenge", "simple", True, ((1, 18000), (2, 12000), (3, 5000)), "column-wise ROC AUC", "private/test.csv", "public/sample_submission.csv", "", True, "a probability for each of six kinds of toxicity for every comment"),  # noqa: E501
    "leaf-classification": ("Leaf Classification", "simple", False, None, "multi-class-log-loss", "private/test.csv", "public/sample_submission.csv", "", False, "a probability for each of 99 plant species from leaf features and images"),  # noqa: E501
    "mlsp-2013-birds": ("MLSP 2013 Bird Classification Challenge", "simple", True, ((1, 700), (2, 600), (3, 500)), "auc-roc", "private/answers.csv", "public/sample_submission.csv", "", True, "the probability of each of 19 bird species in each test recording; Id = rec_id * 100 + species"),  # noqa: E501
    "new-york-city-taxi-fare-prediction": ("New York City Taxi Fare Prediction", "simple", False, None, "root-mean-squared-error", "private/test.csv", "public/sample_submission.csv", "", False, "the fare (fare_amount) of each taxi ride, by key"),  # noqa: E501
    "nomad2018-predict-transparent-conductors": ("Nomad2018 Predicting Transparent Conductors", "simple", False, ((1, 2496), (2, 1872), (3, 1248)), "mean-column-wise-rmsle", "private/test.csv", "public/sample_submission.csv", "", False, "formation energy and bandgap of each material (geometry in test/<id>/geometry.xyz)"),  # noqa: E501
    "plant-pathology-2020-fgvc7": ("Plant Pathology 2020 - FGVC7", "simple", False, None, "mean-column-wise-roc-auc", "private/test.csv", "public/sample_submission.csv", "", True, "a probability for healthy, multiple_diseases, rust and scab for each leaf image Test_<n>"),  # noqa: E501
    "random-acts-of-pizza": ("Random Acts of Pizza", "simple", False, None, "auc-roc", "private/test.csv", "public/sampleSubmission.csv", "", True, "the probability that each Reddit request (test.json) received a pizza"),  # noqa: E501
    "ranzcr-clip-catheter-line-classification": ("RANZCR CLiP - Catheter and Line Position Challenge", "code", True, ((1, 16000), (2, 12000), (3, 6000), (4, 4000), (5, 4000), (6, 4000), (7, 4000)), "auc-roc", "private/test.csv", "public/sample_submission.csv", "", True, "a probability for each catheter/line position label of every chest X-ray in test/"),  # noqa: E501
    "siim-isic-melanoma-classification": ("SIIM-ISIC Melanoma Classification", "simple", True, ((1, 10000), (2, 6000), (3, 4000), ("With Context Special Prize", 5000), ("Without Context Special Prize", 5000)), "auc-roc", "private/test.csv", "public/sample_submission.csv", "", True, "the probability that each skin lesion image is malignant (target)"),  # noqa: E501
    "spooky-author-identification": ("Spooky Author Identification", "simple", False, None, "multi-class-log-loss", "private/test.csv", "public/sample_submission.csv", "", False, "the probability that each sentence was written by EAP, HPL or MWS"),  # noqa: E501
    "tabular-playground-series-dec-2021": ("Tabular Playground Series - Dec 2021", "simple", False, None, "multi-class-classification-accuracy", "private/test.csv", "public/sample_submission.csv", "", True, "the forest cover type (Cover_Type) of each row"),  # noqa: E501
    "tabular-playground-series-may-2022": ("Tabular Playground Series - May 2022", "simple", False, None, "auc-roc", "private/test.csv", "public/sample_submission.csv", "private/gold_submission.csv", True, "the probability of the binary target of each row"),  # noqa: E501
    "text-normalization-challenge-english-language": ("Text Normalization Challenge - English Language", "simple", True, ((1, 12000), (2, 8000), (3, 5000)), "accuracy", "private/answers.csv", "private/sample_submission.csv", "", True, "the spoken form (after) of each written token, id <sentence_id>_<token_id>"),  # noqa: E501
    "text-normalization-challenge-russian-language": ("Text Normalization Challenge - Russian Language", "simple", True, ((1, 12000), (2, 8000), (3, 5000)), "accuracy", "private/answers.csv", "private/sample_submission.csv", "", True, "the spoken form (after) of each written Russian token, id <sentence_id>_<token_id>"),  # noqa: E501
    "the-icml-2013-whale-challenge-right-whale-redux": ("The ICML 2013 Whale Challenge - Right Whale Redux", "simple", True, ((1, 350), (2, 150)), "auc-roc", "private/test.csv", "public/sampleSubmission.csv", "", True, "the probability that each 2 kHz AIFF clip in test2.zip holds a right whale up-call"),  # noqa: E501
}  # fmt: skip


def _module(cid: str) -> str:
    return cid.replace("-", "_")


def _yaml_scalar(v: object) -> str:
    s = str(v)
    return f'"{s}"' if ":" in s or s.strip() != s else s


def _config(cid: str) -> str:
    name, ctype, medals, prizes, grader, answers, sample, gold, _hib, _what = _META[cid]
    lines = [
        f"id: {cid}",
        f"name: {_yaml_scalar(name)}",
        f"competition_type: {ctype}",
        f"awards_medals: {'true' if medals else 'false'}",
    ]
    if prizes is None:
        lines.append("prizes: null")
    else:
        lines.append("prizes:")
        for pos, value in prizes:
            lines += [f"  - position: {pos}", f"    value: {value}"]
    lines += [
        f"description: mlebench/competitions/{cid}/description.md",
        "",
        "dataset:",
        f"  answers: {cid}/prepared/{answers}",
    ]
    if gold:
        lines.append(f"  gold_submission: {cid}/prepared/{gold}")
    lines += [
        f"  sample_submission: {cid}/prepared/{sample}",
        "",
        "grader:",
        f"  name: {grader}",
        f"  grade_fn: mlebench.competitions.{cid}.grade:grade",
        "",
        f"preparer: mlebench.competitions.{cid}.prepare:prepare",
    ]
    return "\n".join(lines) + "\n"


def _description(cid: str) -> str:
    name, _t, _m, _p, grader, _a, sample, _g, hib, what = _META[cid]
    return (
        f"# {name}\n\n"
        f"Predict {what}.\n\n"
        f"## Evaluation\n\n"
        f"Submissions are scored with {grader} ({'higher' if hib else 'lower'} is better).\n\n"
        f"## Submission File\n\n"
        f"A CSV with the columns and ids of `{Path(sample).name}`.\n\n"
        f"*openmle miniature*: the data has MLE-bench's prepared layout but is small and "
        f"synthetic; use it to try the tooling, not to measure an agent.\n"
    )


def _leaderboard(cid: str, rng: random.Random) -> str:
    hib = _META[cid][8]
    lines = ["scoreNullable,teamId,hasTeamName,submissionDate,score,hasScore"]
    best, step = (0.99, -0.02) if hib else (0.02, 0.03)
    for rank in range(40):
        score = round(best + step * rank + rng.random() * 0.001, 5)
        day = f"2020-{1 + rank % 12:02d}-{1 + rank % 28:02d} 12:00:00"
        lines.append(f"{score},{1000 + rank},True,{day},{score},True")
    return "\n".join(lines) + "\n"


def _write_registry(registry: Path, ids: Sequence[str]) -> None:
    pkg = registry / "mlebench"
    comps = pkg / "competitions"
    comps.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""openmle miniature of the MLE-bench registry."""\n')
    (pkg / "grade_helpers.py").write_text(
        '"""MLE-bench\'s exception name for an ungradable submission."""\n\n\n'
        "class InvalidSubmissionError(Exception):\n"
        '    """A submission that cannot be graded."""\n'
    )
    (comps / "__init__.py").write_text("")
    splits = registry / "experiments" / "splits"
    splits.mkdir(parents=True)
    (splits / "low.txt").write_text("".join(f"{c}\n" for c in ids))
    for cid in ids:
        d = comps / cid
        d.mkdir()
        (d / "__init__.py").write_text("")
        (d / "config.yaml").write_text(_config(cid))
        (d / "description.md").write_text(_description(cid))
        shutil.copyfile(_GRADERS / f"{_module(cid)}.py", d / "grade.py")
        shutil.copyfile(_GRADERS / "_common.py", d / "_common.py")
        (d / "leaderboard.csv").write_text(
            _leaderboard(cid, random.Random(zlib.crc32(cid.encode())))
        )


def build_miniature(root: str | Path, ids: Sequence[str] | None = None) -> tuple[Path, Path]:
    """Write the miniature for ``ids`` (default: all 22 Lite competitions) under ``root``.

    Returns:
        ``(registry, data)``: ``root/mle-bench`` (pass as ``--registry``) and ``root/data``
        (pass as ``--data``).

    Raises:
        InvalidArgument: an id that is not one of the 22, or ``root`` already holds a
            miniature.
    """
    chosen = list(LITE_IDS if ids is None else ids)
    unknown = [c for c in chosen if c not in MAKERS]
    if unknown:
        raise InvalidArgument(
            f"No miniature for {unknown}; the miniature has the 22 Lite competitions "
            f"{list(LITE_IDS)}"
        )
    root = Path(root)
    registry, data = root / "mle-bench", root / "data"
    if registry.exists() or data.exists():
        raise InvalidArgument(f"{root} already holds a miniature; give an empty directory")
    _write_registry(registry, chosen)
    for cid in chosen:
        prepared = data / cid / "prepared"
        public, private = prepared / "public", prepared / "private"
        public.mkdir(parents=True)
        private.mkdir()
        MAKERS[cid](public, private, random.Random(zlib.crc32(cid.encode()) ^ 0x5EED))
        (public / "description.md").write_text(_description(cid))
    return registry, data


def smoke_miniature(cache: str | Path | None = None) -> tuple[Path, Path]:
    """The smoke suite's miniature (:data:`SMOKE_IDS`), built once under ``cache`` (default:
    openmle's cache, ``$OPENMLE_CACHE`` or ``~/.cache/openmle``) and reused.

    Returns:
        ``(registry, data)`` of the cached copy.
    """
    if cache is None:
        from openmle.gym import cache_root

        cache = cache_root()
    key = hashlib.sha256(f"{VERSION}:{','.join(SMOKE_IDS)}".encode()).hexdigest()[:12]
    root = Path(cache) / "mlebench-smoke" / key
    if (root / ".complete").is_file():
        return root / "mle-bench", root / "data"
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root.parent))
    try:
        build_miniature(tmp, SMOKE_IDS)
        (tmp / ".complete").write_text(VERSION + "\n")
        with contextlib.suppress(OSError):
            tmp.rename(root)  # another process may have won the race: use its copy
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    if not (root / ".complete").is_file():
        raise InvalidArgument(f"could not build the smoke miniature under {root}")
    return root / "mle-bench", root / "data"
