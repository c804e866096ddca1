"""Validation rules: how each competition's ``prepared/public`` is split into a validation view.

A rule is data (:class:`SplitRule`); :mod:`openmle.bench.mlebench._views` is the engine that
applies it. Every Lite rule below was written from what MLE-bench's ``prepare.py`` of that
competition leaves in ``prepared/public`` and from what its ``grade.py`` reads from the
answers (``checked`` names both files, at ``openai/mle-bench`` commit 783b15a). The held-out
fractions follow each preparer's own test share where it is a fraction, and a fixed count in a
preparer becomes a cap (never more than the pool holds).

Kinds of rule (the unit that is held out):

- ``rows``: rows of a labelled CSV (optionally inside a zip), grouped by a column when rows of
  one group must stay together; media named by id (folders or zips) follow their rows;
- ``paired_images``: dirty/clean image pairs (denoising), answers are pixels;
- ``json_records``: records of a JSON list (answers one row per record);
- ``labelled_files``: files whose names carry the label (dogs vs cats), renumbered;
- ``time_days``: audio clips held out by whole recording days, latest first (right whale);
- ``birds``: MLSP 2013's recordings (labels in ``rec_labels_test_hidden.txt``, one answer row
  per recording and species).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, final

from attrs import field, frozen

from openmle.bench.mlebench._miniature.graders.ranzcr_clip_catheter_line_classification import (
    CLASSES as RANZCR_SCORED,
)

__all__ = ["LITE_RULES", "Media", "RuleKind", "SplitRule", "lite_rule"]

RuleKind = Literal["rows", "paired_images", "json_records", "labelled_files", "time_days", "birds"]


@final
@frozen(kw_only=True)
class Media:
    """Files that belong to a pool row, moved with it.

    Args:
        train: where the labelled rows' files are, relative to ``prepared/public`` (a folder, or
            a ``.zip`` whose members sit at its root as MLE-bench's ``compress`` writes them).
        test: where the held-out rows' files go in the view (a folder or ``.zip``); equal to
            ``train`` for a shared folder (leaf-classification's ``images``).
        name: the file (or folder) name of one row, ``{id}`` standing for its id.
    """

    train: str
    test: str
    name: str = "{id}"


@final
@frozen(kw_only=True)
class SplitRule:
    """How one competition's public data becomes a validation view.

    Args:
        competition: the competition id.
        kind: the unit that is held out (see the module doc).
        pool: the labelled file or folder of ``prepared/public`` (``a.zip!b.csv``: ``b.csv``
            inside ``a.zip``).
        id_column: the column that identifies a row in the submission and the answers.
        targets: the label columns (left out of the unlabeled test part).
        fraction: the share of units held out, in (0, 0.5].
        cap: at most this many units held out (a preparer's fixed test size).
        group: rows with the same value here stay on one side (patients, sentences).
        distinct_ids: only rows whose id is unique in the pool are held out (the grader
            matches rows by that column).
        test_file: the unlabeled test CSV written to the view (None: the competition has none).
        test_columns: its columns (None: the pool's columns without ``targets``).
        sample: the sample submission's file name in ``prepared/public``.
        answers: the answers' path under ``private/`` (as in ``config.yaml``).
        answer_columns: the answer columns; ``("*",)`` for every pool column; empty for the id
            and the targets.
        answer_constants: extra answer columns with a constant value (``Usage``).
        one_hot: the target whose classes the answers one-hot encode (the classes are the
            sample submission's columns after the id).
        media: files that follow their rows.
        filtered: other CSVs of public whose rows follow the pool rows (by ``id_column``).
        test_id: a format for renamed held-out ids (``Test_{i}``), or None to keep ids.
        id_from: pool columns whose values, joined by ``_``, make the id (text normalization).
        sample_from: sample columns filled from a pool column (``after`` <- ``before``).
        private_sample: the sample submission is also written under ``private/`` with this
            name (where ``config.yaml`` names a private sample submission).
        drop: public entries left out of the view (they would leak held-out labels).
        seed: the seed of the deterministic draw.
        checked: the MLE-bench files this rule was checked against.
        instruction: the split in words, for programs that hold out their own part.
    """

    competition: str
    kind: RuleKind = "rows"
    pool: str
    id_column: str
    targets: tuple[str, ...] = ()
    fraction: float = field(default=0.1)
    cap: int | None = None
    group: str | None = None
    distinct_ids: bool = False
    test_file: str | None = "test.csv"
    test_columns: tuple[str, ...] | None = None
    sample: str = "sample_submission.csv"
    answers: str = "test.csv"
    answer_columns: tuple[str, ...] = ()
    answer_constants: Mapping[str, str] = field(factory=dict)
    one_hot: str | None = None
    media: tuple[Media, ...] = ()
    filtered: tuple[str, ...] = ()
    test_id: str | None = None
    id_from: tuple[str, ...] = ()
    sample_from: Mapping[str, str] = field(factory=dict)
    private_sample: str | None = None
    drop: tuple[str, ...] = ()
    seed: int = 0
    checked: tuple[str, ...] = ()
    instruction: str = ""

    @fraction.validator
    def _check_fraction(self, _attr: object, value: float) -> None:
        if not 0.0 < value <= 0.5:
            raise ValueError(f"SplitRule.fraction must lie in (0, 0.5], got {value!r}")

    def describe(self) -> str:
        """One line: the pool, the unit, the fraction and the grouping."""
        unit = {
            "rows": "rows",
            "paired_images": "image pairs",
            "json_records": "records",
            "labelled_files": "files",
            "time_days": "recording days",
            "birds": "recordings",
        }[self.kind]
        cap = f", at most {self.cap}" if self.cap else ""
        grp = f", grouped by {self.group}" if self.group else ""
        latest = "the latest " if self.kind == "time_days" else ""  # whole days, newest first
        return (
            f"{self.pool}: {latest}{self.fraction:.0%} of {unit}{cap}{grp} held out "
            f"(seed {self.seed})"
        )


def _files(cid: str, *extra: str) -> tuple[str, ...]:
    base = f"mlebench/competitions/{cid}"
    return (f"{base}/prepare.py", f"{base}/grade.py", *extra)


_U = "mlebench/competitions/utils.py"

_RULES: tuple[SplitRule, ...] = (
    SplitRule(
        competition="aerial-cactus-identification",
        pool="train.csv",
        id_column="id",
        targets=("has_cactus",),
        fraction=0.19,
        test_file=None,
        media=(Media(train="train.zip", test="test.zip"),),
        checked=_files("aerial-cactus-identification", _U),
        instruction=(
            "Hold out a random 19% of the rows of train.csv (seed 0) as validation; their "
            "images are in train.zip. Score it with ROC AUC of has_cactus."
        ),
    ),
    SplitRule(
        competition="aptos2019-blindness-detection",
        pool="train.csv",
        id_column="id_code",
        targets=("diagnosis",),
        answer_columns=("*",),
        media=(Media(train="train_images", test="test_images", name="{id}.png"),),
        checked=_files("aptos2019-blindness-detection"),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0), images in train_images/. "
            "Score it with quadratic weighted Cohen's kappa of diagnosis."
        ),
    ),
    SplitRule(
        competition="denoising-dirty-documents",
        kind="paired_images",
        pool="train",
        id_column="id",
        targets=("value",),
        fraction=0.2,
        test_file=None,
        sample="sampleSubmission.csv",
        answers="answers.csv",
        media=(Media(train="train_cleaned", test="train_cleaned", name="{id}"),),
        checked=_files("denoising-dirty-documents"),
        instruction=(
            "Hold out a random 20% of the images of train/ (seed 0) with their cleaned "
            "versions in train_cleaned/. Score it with the RMSE of the pixel intensities in "
            "[0, 1] (ids image_row_col, rows and columns from 1)."
        ),
    ),
    SplitRule(
        competition="detecting-insults-in-social-commentary",
        pool="train.csv",
        id_column="Comment",
        targets=("Insult",),
        fraction=0.2,
        distinct_ids=True,
        sample="sample_submission_null.csv",
        answer_columns=("Insult", "Date", "Comment"),
        answer_constants={"Usage": "PrivateTest"},
        checked=_files("detecting-insults-in-social-commentary", _U),
        instruction=(
            "Hold out a random 20% of the rows of train.csv (seed 0), taking only comments that "
            "occur once (the grader matches rows by Comment). Score it with ROC AUC of Insult."
        ),
    ),
    SplitRule(
        competition="dog-breed-identification",
        pool="labels.csv",
        id_column="id",
        targets=("breed",),
        test_file=None,
        one_hot="breed",
        media=(Media(train="train", test="test", name="{id}.jpg"),),
        checked=_files("dog-breed-identification", _U),
        instruction=(
            "Hold out a random 10% of the rows of labels.csv (seed 0), images in train/. Score "
            "it with the multi-class log loss over the 120 breeds."
        ),
    ),
    SplitRule(
        competition="dogs-vs-cats-redux-kernels-edition",
        kind="labelled_files",
        pool="train.zip",
        id_column="id",
        targets=("label",),
        test_file=None,
        answers="answers.csv",
        media=(Media(train="train.zip", test="test.zip"),),
        checked=_files("dogs-vs-cats-redux-kernels-edition"),
        instruction=(
            "Hold out a random 10% of the images of train.zip (seed 0); the label is in the "
            "file name (cat.N.jpg, dog.N.jpg). Score it with the log loss of P(dog)."
        ),
    ),
    SplitRule(
        competition="histopathologic-cancer-detection",
        pool="train_labels.csv",
        id_column="id",
        targets=("label",),
        fraction=0.2,
        test_file=None,
        answers="answers.csv",
        media=(Media(train="train", test="test", name="{id}.tif"),),
        checked=_files("histopathologic-cancer-detection", _U),
        instruction=(
            "Hold out a random 20% of the rows of train_labels.csv (seed 0), images in train/. "
            "Score it with ROC AUC of label."
        ),
    ),
    SplitRule(
        competition="jigsaw-toxic-comment-classification-challenge",
        pool="train.csv",
        id_column="id",
        targets=("toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"),
        checked=_files(
            "jigsaw-toxic-comment-classification-challenge",
            "mlebench/competitions/jigsaw-toxic-comment-classification-challenge/classes.py",
        ),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0). Score it with the mean "
            "column-wise ROC AUC of the six toxicity labels."
        ),
    ),
    SplitRule(
        competition="leaf-classification",
        pool="train.csv",
        id_column="id",
        targets=("species",),
        one_hot="species",
        media=(Media(train="images", test="images", name="{id}.jpg"),),
        checked=_files(
            "leaf-classification", "mlebench/competitions/leaf-classification/classes.py", _U
        ),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0); images/ holds every "
            "image. Score it with the multi-class log loss over the 99 species."
        ),
    ),
    SplitRule(
        competition="mlsp-2013-birds",
        kind="birds",
        pool="essential_data/rec_labels_test_hidden.txt",
        id_column="Id",
        targets=("Probability",),
        fraction=0.2,
        test_file=None,
        answers="answers.csv",
        checked=_files("mlsp-2013-birds", _U),
        instruction=(
            "Take the recordings of fold 0 in essential_data/CVfolds_2.txt whose labels are "
            "known in rec_labels_test_hidden.txt and hold out a random 20% of them (seed 0). "
            "Score it with ROC AUC over all (recording, species) pairs, Id = rec_id*100 + "
            "species."
        ),
    ),
    SplitRule(
        competition="new-york-city-taxi-fare-prediction",
        pool="labels.csv",
        id_column="key",
        targets=("fare_amount",),
        fraction=0.1,
        cap=9914,
        answer_columns=("*",),
        checked=_files("new-york-city-taxi-fare-prediction"),
        instruction=(
            "Hold out 9,914 random rows of labels.csv (at most 10%, seed 0). Score it with the "
            "RMSE of fare_amount."
        ),
    ),
    SplitRule(
        competition="nomad2018-predict-transparent-conductors",
        pool="train.csv",
        id_column="id",
        targets=("formation_energy_ev_natom", "bandgap_energy_ev"),
        answer_columns=("*",),
        media=(Media(train="train", test="test", name="{id}"),),
        checked=_files("nomad2018-predict-transparent-conductors"),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0), geometries in "
            "train/<id>/geometry.xyz. Score it with the mean over the two targets of the RMSLE."
        ),
    ),
    SplitRule(
        competition="plant-pathology-2020-fgvc7",
        pool="train.csv",
        id_column="image_id",
        targets=("healthy", "multiple_diseases", "rust", "scab"),
        answer_columns=("*",),
        test_id="Test_{i}",
        media=(Media(train="images", test="images", name="{id}.jpg"),),
        checked=_files("plant-pathology-2020-fgvc7"),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0), images in images/. Score "
            "it with the mean ROC AUC over the four label columns."
        ),
    ),
    SplitRule(
        competition="random-acts-of-pizza",
        kind="json_records",
        pool="train.json",
        id_column="request_id",
        targets=("requester_received_pizza",),
        fraction=0.2,
        test_file="test.json",
        sample="sampleSubmission.csv",
        checked=_files("random-acts-of-pizza", _U),
        instruction=(
            "Hold out a random 20% of the records of train.json (seed 0) and use only the "
            "fields that test.json has. Score it with ROC AUC of requester_received_pizza."
        ),
    ),
    SplitRule(
        competition="ranzcr-clip-catheter-line-classification",
        pool="train.csv",
        id_column="StudyInstanceUID",
        targets=(*RANZCR_SCORED, "CVC - Normal", "Swan Ganz Catheter Present"),
        group="PatientID",
        test_file=None,
        answer_columns=("*",),
        media=(Media(train="train", test="test", name="{id}.jpg"),),
        filtered=("train_annotations.csv",),
        checked=_files(
            "ranzcr-clip-catheter-line-classification",
            "mlebench/competitions/ranzcr-clip-catheter-line-classification/classes.py",
            _U,
        ),
        instruction=(
            "Hold out a random 10% of the patients (PatientID) of train.csv with all their "
            "studies (seed 0), images in train/. Score it with the mean ROC AUC over the "
            "label columns of sample_submission.csv."
        ),
    ),
    SplitRule(
        competition="siim-isic-melanoma-classification",
        pool="train.csv",
        id_column="image_name",
        targets=("diagnosis", "benign_malignant", "target"),
        group="patient_id",
        test_columns=(
            "image_name",
            "patient_id",
            "sex",
            "age_approx",
            "anatom_site_general_challenge",
        ),
        answer_columns=("image_name", "target"),
        drop=("tfrecords",),
        media=(
            Media(train="train", test="test", name="{id}.dcm"),
            Media(train="jpeg/train", test="jpeg/test", name="{id}.jpg"),
        ),
        checked=_files("siim-isic-melanoma-classification", _U),
        instruction=(
            "Hold out a random 10% of the patients (patient_id) of train.csv with all their "
            "images (seed 0); do not train on tfrecords/, they hold every image with its "
            "label. Score it with ROC AUC of target."
        ),
    ),
    SplitRule(
        competition="spooky-author-identification",
        pool="train.csv",
        id_column="id",
        targets=("author",),
        one_hot="author",
        checked=_files(
            "spooky-author-identification",
            "mlebench/competitions/spooky-author-identification/classes.py",
            _U,
        ),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0). Score it with the "
            "multi-class log loss over EAP, HPL and MWS."
        ),
    ),
    SplitRule(
        competition="tabular-playground-series-dec-2021",
        pool="train.csv",
        id_column="Id",
        targets=("Cover_Type",),
        answer_columns=("*",),
        checked=_files("tabular-playground-series-dec-2021", _U),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (seed 0). Score it with the "
            "accuracy of Cover_Type."
        ),
    ),
    SplitRule(
        competition="tabular-playground-series-may-2022",
        pool="train.csv",
        id_column="id",
        targets=("target",),
        fraction=0.1,
        cap=100_000,
        answer_columns=("*",),
        checked=_files("tabular-playground-series-may-2022", _U),
        instruction=(
            "Hold out a random 10% of the rows of train.csv (at most 100,000, seed 0). Score it "
            "with ROC AUC of target."
        ),
    ),
    *(
        SplitRule(
            competition=f"text-normalization-challenge-{lang}-language",
            pool=f"{p}_train.csv.zip!{p}_train.csv",
            id_column="id",
            targets=("after",),
            group="sentence_id",
            test_file=f"{p}_test_2.csv.zip!{p}_test_2.csv",
            test_columns=("sentence_id", "token_id", "before"),
            sample=f"{p}_sample_submission_2.csv.zip!{p}_sample_submission_2.csv",
            answers="answers.csv",
            answer_columns=("id", "after"),
            id_from=("sentence_id", "token_id"),
            sample_from={"after": "before"},
            private_sample="sample_submission.csv",
            checked=_files(f"text-normalization-challenge-{lang}-language"),
            instruction=(
                f"Hold out a random 10% of the sentences (sentence_id) of {p}_train.csv (inside "
                f"{p}_train.csv.zip) with all their tokens (seed 0). Score it with the accuracy "
                "of after, id = sentence_id_token_id."
            ),
        )
        for lang, p in (("english", "en"), ("russian", "ru"))
    ),
    SplitRule(
        competition="the-icml-2013-whale-challenge-right-whale-redux",
        kind="time_days",
        pool="train2.zip",
        id_column="clip",
        targets=("probability",),
        fraction=0.5,
        test_file=None,
        sample="sampleSubmission.csv",
        media=(Media(train="train2.zip", test="test2.zip"),),
        checked=_files("the-icml-2013-whale-challenge-right-whale-redux", _U),
        instruction=(
            "Hold out the latest recording day of train2.zip (the date is the first part of "
            "a clip's name; the label is its last digit) and train on the earlier days. Score "
            "it with ROC AUC of probability."
        ),
    ),
)

LITE_RULES: Mapping[str, SplitRule] = {r.competition: r for r in _RULES}
"""The validation rule of each of MLE-bench Lite's 22 competitions, by id."""


def lite_rule(competition: str) -> SplitRule | None:
    """The shipped rule of ``competition``, or None."""
    return LITE_RULES.get(competition)
