"""Non-tabular task packages (``layout = "files"``) and shipped validation splits."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._files import public_private
from tests.unit.bench._minibench import png

from openmle.errors import TaskPackageError
from openmle.gym import load_task, validate_path


def files_package(root: Path, *, ship_valid: bool = True) -> Path:
    """An image-folder task: no train.csv/test.csv, labels in a CSV beside the images."""
    pub, priv = root / "data" / "public", root / "data" / "private"
    (pub / "train").mkdir(parents=True)
    (pub / "test").mkdir()
    priv.mkdir(parents=True)
    (root / "task.toml").write_text('layout = "files"\nmetric = "accuracy"\n')
    (pub / "description.txt").write_text("Bright or dark 4x4 images; predict label 0/1.\n")
    labels = ["id,label"]
    for i in range(8):
        png(pub / "train" / f"a{i}.png", 200 if i % 2 else 30)
        labels.append(f"a{i},{i % 2}")
    (pub / "train_labels.csv").write_text("\n".join(labels) + "\n")
    for i in range(4):
        png(pub / "test" / f"t{i}.png", 200 if i % 2 else 30)
    (pub / "sample_submission.csv").write_text(
        "id,label\n" + "".join(f"t{i},0\n" for i in range(4))
    )
    (priv / "test_answer.csv").write_text(
        "id,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(4))
    )
    if ship_valid:
        vpub, vpriv = root / "data" / "valid" / "public", root / "data" / "valid" / "private"
        (vpub / "train").mkdir(parents=True)
        (vpub / "test").mkdir()
        vpriv.mkdir(parents=True)
        (vpub / "description.txt").write_text("validation view\n")
        for i in range(6):
            png(vpub / "train" / f"a{i}.png", 200 if i % 2 else 30)
        png(vpub / "test" / "a6.png", 30)
        png(vpub / "test" / "a7.png", 200)
        (vpub / "train_labels.csv").write_text("\n".join(labels[:7]) + "\n")
        (vpub / "sample_submission.csv").write_text("id,label\na6,0\na7,0\n")
        (vpriv / "test_answer.csv").write_text("id,label\na6,0\na7,1\n")
    return root


def test_files_layout_validates_and_grades_both_splits(tmp_path: Path) -> None:
    """No train.csv/test.csv needed; the shipped validation split is what search sees; its
    answers are private."""
    root = files_package(tmp_path / "imgs")
    report = validate_path(root)
    assert report.ok, [str(p) for p in report.problems]
    assert report.sample_score == 0.5
    task = load_task(root)
    assert task.layout == "files"
    assert task.public_dir("valid") == root / "data" / "valid" / "public"
    assert root / "data" / "valid" / "private" in task.private_paths
    g = task.grade(root / "data" / "valid" / "public" / "sample_submission.csv", "valid")
    assert g.valid and g.score == 0.5


def test_files_layout_needs_a_shipped_validation_split(tmp_path: Path) -> None:
    root = files_package(tmp_path / "imgs", ship_valid=False)
    report = validate_path(root)
    files = {p.file for p in report.errors}
    assert "data/valid/private/test_answer.csv" in files
    assert "data/public/train.csv" not in files and "data/public/test.csv" not in files
    with pytest.raises(TaskPackageError, match="data/valid"):
        load_task(root).public_dir("valid")


def test_files_layout_checks_sample_against_answers(tmp_path: Path) -> None:
    root = files_package(tmp_path / "imgs")
    (root / "data/public/sample_submission.csv").write_text("id,label\nt0,0\nt1,0\nt2,0\n")
    report = validate_path(root, smoke_test=False)
    assert any(
        p.file == "data/private/test_answer.csv" and "sample_submission.csv has 3" in p.message
        for p in report.errors
    )


def test_tabular_package_may_ship_its_validation_split(tmp_path: Path) -> None:
    root = tmp_path / "tab"
    data = root / "data"
    pub, _ = public_private(
        data, "id,label\n10,0\n11,0\n", "test_answer.csv", "id,label\n10,0\n11,1\n"
    )
    (root / "task.toml").write_text('metric = "accuracy"\n')
    (pub / "description.txt").write_text("x\n")
    (pub / "train.csv").write_text(
        "id,x,label\n" + "".join(f"{i},{i},{i % 2}\n" for i in range(10))
    )
    (pub / "test.csv").write_text("id,x\n10,10\n11,11\n")
    vpub, _ = public_private(
        data / "valid", "id,label\n8,0\n9,0\n", "test_answer.csv", "id,label\n8,0\n9,1\n"
    )
    task = load_task(root)
    assert task.public_dir("valid") == vpub
    assert validate_path(root).ok
    (root / "task.toml").write_text('layout = "images"\n')
    with pytest.raises(TaskPackageError, match="layout"):
        load_task(root)
