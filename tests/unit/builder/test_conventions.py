"""Kaggle conventions: a raw sample submission, a description and a user's goal decide the task.

The raw folders are synthetic miniatures in the layout of real competition downloads
(Titanic: train.csv, test.csv without the target, gender_submission.csv; a per-class
probability submission; a regression with description.txt naming its metric).
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import attrs
import pytest
from tests._kaggle_raw import (
    SEEDLING_SPECIES,
    plant_seedlings_like,
    probabilities_like,
    regression_like,
    time_ordered_like,
    titanic_like,
)

from openmle import ModelRequest, ModelResponse
from openmle.backends._offline_builder import offline_spec
from openmle.builder import intake, inventory
from openmle.builder._conventions import clean_description, metric_named
from openmle.builder._gate import FINDINGS, _check_class_ids, _check_hints
from openmle.builder._spec import hint_conflicts, parse_spec, request_spec


def test_titanic_heuristic_alone_picks_embarked_and_the_hints_pick_survived(
    tmp_path: Path,
) -> None:
    inv = inventory(intake(titanic_like(tmp_path / "titanic")))
    hints = inv.hints
    assert hints.sample_file == "gender_submission.csv"
    assert (hints.id_column, hints.answer_columns) == ("PassengerId", ("Survived",))
    assert (hints.labelled_file, hints.target) == ("train.csv", "Survived")
    assert hints.answer_format == "labels"
    assert hints.unlabeled_files == ("test.csv",)
    data = inv.to_dict()
    # Without the hints (what the builder did before), the last column wins: the wrong task.
    old = offline_spec(
        {
            "files": data["files"],
            "id_candidates": data["id_candidates"],
            "target_candidates": [c for c in data["target_candidates"] if "Survived" not in c],
        }
    )
    assert old["target"] == "Embarked"
    spec = offline_spec(data)
    assert spec["target"] == "Survived" and spec["data_file"] == "train.csv"
    assert spec["id_column"] == "PassengerId" and spec["metric"] == "accuracy"
    assert "gender_submission.csv" in spec["description"]
    parsed = parse_spec(spec, inv)
    assert hint_conflicts(parsed, hints) == []
    assert "conventions (follow them)" in inv.text().splitlines()[0]


def test_probabilities_per_class_follow_the_sample_order(tmp_path: Path) -> None:
    inv = inventory(intake(probabilities_like(tmp_path / "otto")))
    hints = inv.hints
    assert hints.answer_format == "probabilities" and hints.target == "target"
    assert hints.answer_columns == ("Class_3", "Class_1", "Class_2")
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert spec.metric == "log_loss" and spec.target == "target"
    assert spec.answer_columns == ("Class_3", "Class_1", "Class_2")
    assert spec.to_dict()["answer_columns"] == ["Class_3", "Class_1", "Class_2"]


@pytest.mark.parametrize(
    ("words", "metric"),
    [
        ("the Root Mean Squared Logarithmic Error (RMSLE)", "rmsle"),
        (
            "Root-Mean-Squared-Error (RMSE) between the logarithm of the predicted value and "
            "the logarithm of the observed sales price",
            "rmsle",
        ),
        ("the mean absolute error", "mae"),
        ("RMSE", "rmse"),
    ],
)
def test_description_is_the_task_description_and_names_its_metric(
    tmp_path: Path, words: str, metric: str
) -> None:
    inv = inventory(intake(regression_like(tmp_path / "house", words)))
    hints = inv.hints
    assert hints.description_file == "description.txt"
    assert hints.description.startswith("Goal\nPredict the sales price")
    assert "\x07" not in hints.description and "\n\n\n" not in hints.description
    assert hints.description_metric == metric
    assert hints.answer_format == "values"
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert spec.metric == metric and spec.target == "SalePrice"
    assert spec.description == hints.description


def test_a_spec_answer_against_the_hints_is_retried_with_the_finding(tmp_path: Path) -> None:
    inv = inventory(intake(titanic_like(tmp_path / "titanic")))
    good = offline_spec(inv.to_dict())
    wrong = dict(good, target="Embarked", task_type="multiclass", metric="log_loss")
    on_test = dict(good, data_file="test.csv", target="Embarked", task_type="multiclass")
    auc = dict(good, metric="auc")

    class Scripted:
        def __init__(self, answers: list[str]) -> None:
            self.answers, self.requests = answers, list[ModelRequest]()

        async def complete(self, request: ModelRequest) -> ModelResponse:
            self.requests.append(request)
            return ModelResponse(text=self.answers[len(self.requests) - 1])

    model = Scripted([json.dumps(wrong), json.dumps(on_test), json.dumps(auc), json.dumps(good)])
    result = anyio.run(lambda: request_spec(model, inv, max_attempts=4))
    assert result.spec.target == "Survived"
    errors = [a.error for a in result.attempts]
    assert "gender_submission.csv" in errors[0] and "'Survived'" in errors[0]
    assert "unlabeled test table" in errors[1]
    assert "labels" in errors[2] and "accuracy" in errors[2]
    assert errors[3] == ""
    assert errors[0] in model.requests[1].messages[-1].content


def test_the_gate_finds_a_task_that_contradicts_the_hints(tmp_path: Path) -> None:
    inv = inventory(intake(titanic_like(tmp_path / "titanic")))
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    found: list[tuple[str, str, str]] = []
    _check_hints(spec, inv, ["PassengerId", "Survived"], lambda *f: found.append(f))
    assert found == []
    _check_hints(spec, inv, ["PassengerId", "prediction"], lambda *f: found.append(f))
    assert [f[0] for f in found] == ["contradicts_sample_submission"]
    # A spec that escaped the checks (a target other than the sample's) is a finding too.
    escaped = attrs.evolve(spec, target="Embarked", task_type="multiclass")
    found.clear()
    _check_hints(escaped, inv, ["PassengerId", "Embarked"], lambda *f: found.append(f))
    assert [f[0] for f in found] == ["contradicts_sample_submission"]
    assert "gender_submission.csv" in found[0][2]
    assert {"contradicts_sample_submission", "contradicts_description", "contradicts_goal"} <= set(
        FINDINGS
    )


def test_description_metric_contradiction_and_goal_are_named(tmp_path: Path) -> None:
    raw = regression_like(tmp_path / "house", "the mean absolute error")
    inv = inventory(intake(raw))
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    rmse = spec.to_dict() | {"metric": "rmse"}
    rmse.pop("higher_is_better")
    with pytest.raises(ValueError, match="description names metric 'mae'"):
        parse_spec(rmse, inv)
    # The user's goal and --metric steer the spec and win over the description.
    inv = inventory(intake(raw), goal="predict SalePrice from LotArea", metric="rmse")
    assert inv.hints.goal_target == "SalePrice" and inv.hints.metric == "rmse"
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert spec.metric == "rmse" and "predict SalePrice" in inv.text()
    other = spec.to_dict() | {"target": "LotArea"}
    other.pop("higher_is_better")
    with pytest.raises(ValueError, match="goal names the target 'SalePrice'"):
        parse_spec(other, inv)


def test_goal_without_a_sample_picks_its_column(tmp_path: Path) -> None:
    raw = titanic_like(tmp_path / "titanic")
    (raw / "gender_submission.csv").unlink()
    inv = inventory(intake(raw), goal="Predict whether a passenger Survived.")
    assert inv.hints.sample_file is None and inv.hints.goal_target == "Survived"
    spec = offline_spec(inv.to_dict())
    assert spec["target"] == "Survived" and spec["data_file"] == "train.csv"


def test_a_goal_naming_no_column_is_a_warning_naming_its_words_and_the_columns(
    tmp_path: Path,
) -> None:
    """`--goal "predict species"` on iris (whose label column is `target`) was ignored without
    a word; now the inventory says which words named no column, and which columns there are."""
    raw = tmp_path / "iris"
    raw.mkdir()
    rows = [f"{i % 7}.1,{i % 5}.2,{i % 3}" for i in range(30)]
    (raw / "data.csv").write_text("sepal length (cm),petal width (cm),target\n" + "\n".join(rows))
    warning = inventory(intake(raw), goal="predict species").goal_warning()
    assert warning is not None
    assert "'predict species' names no column of data.csv" in warning
    assert "(columns: sepal length (cm), petal width (cm), target)" in warning
    assert '--goal "predict target"' in warning
    assert inventory(intake(raw), goal="predict target").goal_warning() is None
    assert inventory(intake(raw)).goal_warning() is None


def test_metric_names_and_cleaning_are_exact() -> None:
    assert metric_named("scored by accuracy") == "accuracy"
    assert metric_named("area under the ROC curve, then accuracy") == "auc"
    assert metric_named("multi-class logarithmic loss") == "log_loss"
    assert metric_named("MAP@5") == "map@k"
    assert metric_named("nothing here") is None
    # plant-seedlings' wording: micro-averaged F1 of one label per row is accuracy.
    assert metric_named("MeanFScore, which is actually a micro-averaged F1-score") == "accuracy"
    assert metric_named("the F1-score") == "macro_f1"
    long = "line\n" * 1000
    cleaned = clean_description(long, 100)
    assert len(cleaned) <= 100 and cleaned.endswith("...")
    assert clean_description("<b>bold</b>\x00 text") == "bold  text"


def test_a_time_ordered_table_is_split_by_time(tmp_path: Path) -> None:
    inv = inventory(intake(time_ordered_like(tmp_path / "sales")))
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert spec.target == "sales" and spec.task_type == "regression"
    assert (spec.split.kind, spec.split.column) == ("time", "date")
    # A plain table keeps the random split.
    titanic = inventory(intake(titanic_like(tmp_path / "titanic")))
    assert "split" not in offline_spec(titanic.to_dict())


def test_a_data_table_named_like_a_submission_is_data(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [f"{k},{k % 7},{'yes' if k % 3 else 'no'}" for k in range(60)]
    (raw / "submissions.csv").write_text("row,pages,accepted\n" + "\n".join(rows) + "\n")
    inv = inventory(intake(raw))
    assert inv.hints.sample_file is None and inv.hints.empty
    assert offline_spec(inv.to_dict())["data_file"] == "submissions.csv"


def test_several_targets_are_refused_unless_the_goal_names_one(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = [f"{k},{k % 5},{k % 2},{(k // 2) % 2}" for k in range(60)]
    (raw / "train.csv").write_text("id,x,toxic,obscene\n" + "\n".join(rows) + "\n")
    (raw / "test.csv").write_text("id,x\n" + "\n".join(f"{k},{k % 5}" for k in range(60, 70)))
    sample = "\n".join(f"{k},0.5,0.5" for k in range(60, 70))
    (raw / "sample_submission.csv").write_text("id,toxic,obscene\n" + sample + "\n")
    inv = inventory(intake(raw))
    assert inv.hints.answer_format == "several"
    with pytest.raises(ValueError, match="several target columns"):
        parse_spec(offline_spec(inv.to_dict()), inv)
    inv = inventory(intake(raw), goal="predict obscene")
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert spec.target == "obscene"


def test_a_class_folder_with_a_sample_submission_follows_it(tmp_path: Path) -> None:
    """plant-seedlings (MLE-bench's layout): train/<species>/*.png, an unlabeled test/*.png
    and sample_submission.csv ``file,species``; no table holds the answers."""
    raw = plant_seedlings_like(tmp_path / "seedlings", real_images=False)
    inv = inventory(intake(raw))
    hints = inv.hints
    assert hints.sample_file == "sample_submission.csv"
    assert (hints.id_column, hints.answer_columns) == ("file", ("species",))
    assert (hints.labelled_file, hints.target, hints.answer_format) == (
        "train/",
        "species",
        "labels",
    )
    # The folder's label column is named as the sample answers; test/ is no labelled data.
    table = inv.file("train/")
    assert table is not None and [c.name for c in table.columns] == ["file", "species"]
    assert table.rows == 150
    assert inv.target_candidates[0] == "train/:species"
    assert "per-class image folder" in inv.text() and "neutral file names" in inv.text()
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert (spec.data_file, spec.target, spec.id_column) == ("train/", "species", "file")
    assert (spec.metric, spec.task_type, spec.split.kind) == (
        "accuracy",
        "multiclass",
        "stratified",
    )
    assert (spec.inputs.images, spec.inputs.image_column) == ("train", "file")
    assert hint_conflicts(spec, hints) == []
    # A spec answer numbering the rows (id) or asking log loss is sent back naming the fix.
    good = offline_spec(inv.to_dict())
    with pytest.raises(ValueError, match="id column is 'file'"):
        parse_spec(dict(good, id_column=None), inv)
    with pytest.raises(ValueError, match=r"labels.*accuracy"):
        parse_spec(dict(good, metric="log_loss"), inv)
    with pytest.raises(ValueError, match="'label' is not a column"):
        parse_spec(dict(good, target="label"), inv)
    # Its description's metric (micro-averaged F1 of one label: accuracy) agrees, macro F1 not.
    (raw / "description.md").write_text(
        "Tell a weed from a crop seedling.\n\nScored by MeanFScore, a micro-averaged F1-score.\n"
    )
    inv = inventory(intake(raw))
    assert inv.hints.description_metric == "accuracy"
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert spec.metric == "accuracy" and spec.description.startswith("Tell a weed")
    with pytest.raises(ValueError, match="description names metric 'accuracy'"):
        parse_spec(dict(good, metric="macro_f1"), inv)


@pytest.mark.parametrize("idc", ["file", "image", "id"])
def test_a_class_folder_with_per_class_probabilities_keeps_their_order(
    tmp_path: Path, idc: str
) -> None:
    raw = plant_seedlings_like(
        tmp_path / "seedlings", probabilities=True, real_images=False, id_column=idc
    )
    inv = inventory(intake(raw))
    order = (SEEDLING_SPECIES[2], SEEDLING_SPECIES[0], SEEDLING_SPECIES[1])
    assert (inv.hints.answer_format, inv.hints.answer_columns) == ("probabilities", order)
    assert inv.hints.target == "label"
    # The folder's image column is named as the sample's id column.
    table = inv.file("train/")
    assert table is not None and [c.name for c in table.columns] == [idc, "label"]
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert (spec.metric, spec.answer_columns, spec.id_column) == ("log_loss", order, idc)
    assert spec.inputs.image_column == idc
    with pytest.raises(ValueError, match=f'"image_column": "{idc}"'):
        parse_spec(dict(offline_spec(inv.to_dict()), inputs={"images": "train"}), inv)


def test_a_sample_naming_no_class_of_the_folder_is_no_hint(tmp_path: Path) -> None:
    raw = plant_seedlings_like(tmp_path / "seedlings", real_images=False)
    rows = (raw / "sample_submission.csv").read_text().replace("Sugar beet", "Oak tree")
    (raw / "sample_submission.csv").write_text(rows)
    inv = inventory(intake(raw))
    assert inv.hints.labelled_file is None and inv.hints.target is None
    table = inv.file("train/")
    assert table is not None and [c.name for c in table.columns] == ["file", "label"]
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    assert (spec.target, spec.id_column) == ("label", None)


def test_the_gate_finds_a_class_folder_task_against_its_sample(tmp_path: Path) -> None:
    inv = inventory(intake(plant_seedlings_like(tmp_path / "s", real_images=False)))
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    found: list[tuple[str, str, str]] = []
    _check_hints(spec, inv, ["file", "species"], lambda *f: found.append(f))
    assert found == []
    # The builder's old answer, id,label numbered rows, is a finding; so is another order.
    for header in (["id", "species"], ["species", "file"], ["file", *SEEDLING_SPECIES]):
        found.clear()
        _check_hints(spec, inv, header, lambda *f: found.append(f))
        assert [f[0] for f in found] == ["contradicts_sample_submission"], header
    escaped = attrs.evolve(spec, id_column=None)
    found.clear()
    _check_hints(escaped, inv, ["id", "species"], lambda *f: found.append(f))
    assert {f[0] for f in found} == {"contradicts_sample_submission"}
    assert "'file'" in found[0][2]


@pytest.mark.parametrize(
    ("ids", "leaks"),
    [
        (["000000.png", "000001.png"], False),
        (["0", "1"], False),
        (["Sugar beet/abc.png", "000001.png"], True),  # a raw path: its folder is the class
        (["black_grass_0001.png", "000001.png"], True),  # a class name in other spelling
        (["COMMON-WHEAT.png", "000001.png"], True),
    ],
)
def test_the_gate_finds_ids_that_name_the_class(
    tmp_path: Path, ids: list[str], leaks: bool
) -> None:
    inv = inventory(intake(plant_seedlings_like(tmp_path / "s", real_images=False)))
    spec = parse_spec(offline_spec(inv.to_dict()), inv)
    found: list[tuple[str, str, str]] = []
    _check_class_ids(
        spec, inv, (["file", "image"], [[i, "x"] for i in ids]), lambda *f: found.append(f)
    )
    assert [f[0] for f in found] == (["label_leaking_id"] if leaks else [])
    assert "label_leaking_id" in FINDINGS
