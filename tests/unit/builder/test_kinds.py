"""Non-tabular inputs in the inventory and the spec: JSON records read as a table, many image
files summarised in the bounded text, free text flagged, and a spec's ``inputs`` checked
against the inventory (a join that would leak the label, an unknown image folder, ...)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openmle.backends._offline_builder import offline_spec
from openmle.builder import intake, inventory
from openmle.builder._inventory import CLASS_FOLDERS, class_folders, read_records
from openmle.builder._spec import parse_spec


def _csv(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _labels_with_images(root: Path, n: int = 30) -> Path:
    rows = "".join(f"img{k},{'a' if k % 2 else 'b'},{k % 5}\n" for k in range(n))
    _csv(root / "labels.csv", "id,label,size\n" + rows)
    for k in range(n):
        (root / "pics" / "all").mkdir(parents=True, exist_ok=True)
        (root / "pics" / "all" / f"img{k}.png").write_bytes(b"\x89PNG not really")
    return root


def test_json_records_and_json_lines_read_as_tables(tmp_path: Path) -> None:
    records = [{"id": 1, "text": "a b", "ok": True}, {"id": 2, "extra": {"x": 1}, "ok": None}]
    (tmp_path / "r.json").write_text(json.dumps(records))
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    for name in ("r.json", "r.jsonl"):
        header, rows = read_records(tmp_path / name)
        assert header == ["id", "text", "ok", "extra"]
        assert rows == [["1", "a b", "true", ""], ["2", "", "", '{"x":1}']]


@pytest.mark.parametrize(
    "text",
    ["{}", "[]", "[1, 2]", "not json", "[" * 100_000 + "]" * 100_000],
    ids=["object", "empty", "scalars", "garbage", "deep"],
)
def test_bad_json_is_an_unreadable_file_not_a_crash(tmp_path: Path, text: str) -> None:
    (tmp_path / "data.json").write_text(text)
    _csv(tmp_path / "t.csv", "id,y\n1,2\n")
    inv = inventory(intake(tmp_path))
    info = inv.file("data.json")
    assert info is not None and info.rows is None and info.error


def test_many_images_are_one_line_of_the_inventory_text(tmp_path: Path) -> None:
    inv = inventory(intake(_labels_with_images(tmp_path / "raw", n=400)))
    text = inv.text()
    assert "pics/all/: 400 png files" in text
    assert text.count(".png") == 1  # one example path, not 400 lines
    assert "labels.csv" in text and "target candidates" in text


def test_free_text_columns_are_flagged(tmp_path: Path) -> None:
    rows = "".join(f"{k},this is a fairly long review number {k},{k % 2}\n" for k in range(20))
    _csv(tmp_path / "raw" / "reviews.csv", "id,review,label\n" + rows)
    inv = inventory(intake(tmp_path / "raw"))
    assert "free text (" in inv.text()
    spec = offline_spec(inv.to_dict())
    assert spec["inputs"] == {"text_columns": ["review"]}
    assert parse_spec(spec, inv).inputs.kind == "text"


def _spec(**inputs: Any) -> dict[str, Any]:
    return {
        "title": "t",
        "data_file": "labels.csv",
        "target": "label",
        "id_column": "id",
        "task_type": "binary",
        "metric": "auc",
        "test_fraction": 0.2,
        "seed": 0,
        "description": "d",
        "inputs": inputs,
    }


def test_the_offline_spec_finds_the_image_folder(tmp_path: Path) -> None:
    inv = inventory(intake(_labels_with_images(tmp_path / "raw")))
    spec = offline_spec(inv.to_dict())
    assert spec["inputs"] == {"images": "pics/all", "image_column": None}
    assert spec["split"] == {"kind": "stratified", "column": None}
    parsed = parse_spec(spec, inv)
    assert parsed.inputs.kind == "image" and parsed.to_dict()["kind"] == "image"


@pytest.mark.parametrize(
    ("inputs", "error"),
    [
        ({"images": "nowhere"}, "not a raw folder of images"),
        ({"images": "pics", "image_column": "label"}, "is the target"),
        ({"image_column": "size"}, "needs 'inputs.images'"),
        ({"text_columns": ["label"]}, "not a non-target text column"),
        ({"text_columns": "review"}, "must be a list"),
        ({"joins": [{"file": "side.csv", "key": "id"}]}, "holds the target"),
        ({"joins": [{"file": "copy.csv", "key": "id"}]}, "adds no column"),
        ({"joins": [{"file": "labels.csv", "key": "id"}]}, "the labelled table"),
        ({"joins": [{"file": "extra.csv", "key": "nope"}]}, "must be a column"),
        ({"joins": [{"file": "pics/all/img1.png", "key": "id"}]}, "not a readable raw table"),
        ({"joins": [{"file": "extra.csv"}]}, "must be"),
        ({"colour": 1}, "keys among"),
    ],
)
def test_bad_inputs_are_refused_naming_the_field(
    tmp_path: Path, inputs: dict[str, Any], error: str
) -> None:
    raw = _labels_with_images(tmp_path / "raw")
    _csv(raw / "side.csv", "id,label,w\nimg1,a,3\n")  # holds the target: a join would leak it
    _csv(raw / "copy.csv", "id,size\nimg1,3\n")  # no new column
    _csv(raw / "extra.csv", "id,w\nimg1,3\n")
    inv = inventory(intake(raw))
    with pytest.raises(ValueError, match=error):
        parse_spec(_spec(**inputs), inv)


def test_a_custom_metric_needs_its_direction(tmp_path: Path) -> None:
    raw = _labels_with_images(tmp_path / "raw")
    inv = inventory(intake(raw))
    spec = {**_spec(), "metric": "custom"}
    del spec["inputs"]
    with pytest.raises(ValueError, match="needs 'higher_is_better'"):
        parse_spec(spec, inv)
    with pytest.raises(ValueError, match="takes no 'metric_params'"):
        parse_spec({**spec, "higher_is_better": True, "metric_params": {"k": 2}}, inv)
    parsed = parse_spec({**spec, "higher_is_better": False}, inv)
    assert parsed.custom and parsed.higher_is_better is False and parsed.grader_metric is None
    assert parsed.to_dict()["custom_higher_is_better"] is False


def _per_class(root: Path, classes: tuple[str, ...] = ("cat", "dog"), n: int = 6) -> Path:
    """root/train/<class>/<k>.png (bytes only: the inventory never decodes an image), an
    unlabelled root/test/*.png and a stray image in train/ itself."""
    for c in classes:
        for k in range(n):
            _write_bytes(root / "train" / c / f"{k}.png", f"{c}{k}".encode())
    for k in range(3):
        _write_bytes(root / "test" / f"u{k}.png", f"u{k}".encode())
    _write_bytes(root / "train" / "stray.png", b"s")
    _write_bytes(root / "train" / ".cache" / "x.png", b"x")  # hidden: not a class
    return root


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_class_folders_are_found_only_with_two_classes_of_direct_images() -> None:
    paths = (
        "train/cat/1.png",
        "train/dog/2.JPG",
        "train/dog/notes.txt",
        "train/x.png",
        "test/3.png",
        "other/only/4.png",
        "deep/a/b/5.png",
        "deep/a/c/6.png",
        "kaggle/train_images/1.png",
        "kaggle/test_images/2.png",
    )
    found = class_folders(paths)
    assert found == {
        "deep/a": [("b/5.png", "b"), ("c/6.png", "c")],
        "train": [("cat/1.png", "cat"), ("dog/2.JPG", "dog")],
    }
    assert class_folders(("cat/1.png", "dog/2.png")) == {
        "": [("cat/1.png", "cat"), ("dog/2.png", "dog")]
    }
    assert class_folders(("images/1.png", "images/2.png", "labels.csv")) == {}


def test_a_per_class_image_folder_is_a_table_the_offline_spec_uses(tmp_path: Path) -> None:
    inv = inventory(intake(_per_class(tmp_path / "raw", classes=("cat", "dog", "fox"))))
    table = inv.file("train/")
    assert table is not None and table.format == CLASS_FOLDERS and table.rows == 18
    label = table.column("label")
    assert label is not None and label.unique == 3 and label.top == ("cat", "dog", "fox")
    assert inv.target_candidates == ("train/:label",)
    assert "train/ (image_folders" in inv.text()
    spec = offline_spec(inv.to_dict())
    assert spec["data_file"] == "train/" and spec["target"] == "label"
    assert spec["inputs"] == {"images": "train", "image_column": "file"}
    assert (spec["task_type"], spec["metric"]) == ("multiclass", "log_loss")
    assert spec["split"] == {"kind": "stratified", "column": None}
    parsed = parse_spec(spec, inv)
    assert parsed.inputs.kind == "image" and parsed.id_column is None
    # A spec that reads the folder without its images is sent back, naming the fix.
    with pytest.raises(ValueError, match='"image_column": "file"'):
        parse_spec({**spec, "inputs": None}, inv)
    two = inventory(intake(_per_class(tmp_path / "two")))
    assert offline_spec(two.to_dict())["metric"] == "auc"
    # Many classes, named by numbers, are still classes (never a regression target).
    many = inventory(intake(_per_class(tmp_path / "many", classes=tuple(map(str, range(25))))))
    spec = offline_spec(many.to_dict())
    assert (spec["task_type"], spec["metric"]) == ("multiclass", "log_loss")
    assert parse_spec(spec, many).task_type == "multiclass"


def test_the_top_folder_can_be_the_class_root(tmp_path: Path) -> None:
    for c in ("a", "b"):
        for k in range(4):
            _write_bytes(tmp_path / "raw" / c / f"{k}.png", f"{c}{k}".encode())
    inv = inventory(intake(tmp_path / "raw"))
    assert inv.files[0].path == "./" and inv.files[0].rows == 8
    spec = offline_spec(inv.to_dict())
    assert spec["inputs"] == {"images": "", "image_column": "file"}
    assert parse_spec(spec, inv).data_file == "./"
