"""Loading packages, task.toml, the validation view and task resolution."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from openmle import Resources, Split
from openmle._task_protocol import TaskHandle
from openmle.errors import InvalidArgument, TaskPackageError
from openmle.gym import bundled_names, load_task, resolve_task

from .conftest import PackageBuilder


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_load_reads_task_toml(make_package: PackageBuilder) -> None:
    """task.toml sets name, metric, direction, bounds, resources and limits."""
    root = make_package(
        toml='name = "houses"\nmetric = "rmse"\ntheoretical_min = 0\ntime_limit_s = 30\n'
        "valid_fraction = 0.25\n[resources]\ncpus = 2\ngpus = 1\n"
    )
    task = load_task(root)
    assert isinstance(task, TaskHandle)
    assert task.name == "houses" and task.metric_name == "rmse"
    assert task.meta.higher_is_better is False and task.meta.theoretical_min == 0.0
    assert task.resources == Resources(cpus=2, gpus=1)
    assert task.time_limit_s == 30.0 and task.id_column == "id"
    assert task.to_dict()["name"] == "houses"


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("name = [", "cannot be parsed"),
        ('nmae = "x"', "unknown key"),
        ('metric = "f1"', "metric"),
        ("time_limit_s = -1", "time_limit_s"),
        ('time_limit_s = "soon"', "time_limit_s"),
        ("valid_fraction = 1.5", "valid_fraction"),
        ("theoretical_min = 2\ntheoretical_max = 1", "theoretical_min"),
        ("[resources]\ncpu = 2", "resources"),
        ("[resources]\ngpus = -1", "gpus"),
    ],
)
def test_bad_task_toml_names_the_key(make_package: PackageBuilder, toml: str, needle: str) -> None:
    """A malformed task.toml raises TaskPackageError naming the file and the key."""
    root = make_package(toml=toml)
    with pytest.raises(TaskPackageError, match=r"task\.toml") as info:
        load_task(root)
    assert needle in str(info.value)


def test_load_rejects_non_directories(tmp_path: Path) -> None:
    """A missing directory raises TaskPackageError; a non-path raises a TypeError."""
    with pytest.raises(TaskPackageError, match="not a directory"):
        load_task(tmp_path / "missing")
    with pytest.raises(TypeError):
        load_task(3)  # type: ignore[arg-type]


def test_valid_view_is_a_deterministic_holdout(make_package: PackageBuilder) -> None:
    """The view splits train.csv, hides the targets and keeps its answers out of public."""
    root = make_package(n_train=50)
    task = load_task(root)
    view = task.public_dir(Split.VALID)
    assert view != task.public_dir(Split.TEST) == root / "data" / "public"
    train, test = _rows(view / "train.csv"), _rows(view / "test.csv")
    answers = _rows(task.answers_path(Split.VALID))
    assert len(test) == 10 and len(train) == 40
    assert "y" not in test[0] and set(test[0]) == {"id", "x", "k"}
    original = {r["id"] for r in _rows(root / "data/public/train.csv")}
    assert {r["id"] for r in train} | {r["id"] for r in test} == original
    assert not {r["id"] for r in train} & {r["id"] for r in test}
    assert [r["id"] for r in answers] == [r["id"] for r in test]
    assert (view / "description.txt").read_text() == task.description
    private = task.answers_path(Split.VALID).parent
    assert private in task.private_paths and not private.is_relative_to(view)
    again = load_task(root)
    assert again.public_dir(Split.VALID) == view
    assert _rows(again.answers_path(Split.VALID)) == answers


def test_valid_view_follows_edits(make_package: PackageBuilder) -> None:
    """Editing train.csv yields a fresh view (the key hashes the inputs)."""
    root = make_package()
    first = load_task(root).public_dir("valid")
    with (root / "data/public/train.csv").open("a") as f:
        f.write("1000,1.0,1,3.0\n")
    assert load_task(root).public_dir("valid") != first


def test_valid_view_needs_targets_in_train(make_package: PackageBuilder) -> None:
    """Without the target column in train.csv the view cannot be built: a clear error."""
    root = make_package()
    path = root / "data/public/train.csv"
    lines = [",".join(line.split(",")[:3]) for line in path.read_text().splitlines()]
    path.write_text("\n".join(lines) + "\n")
    task = load_task(root)
    with pytest.raises(TaskPackageError, match="lacks the column"):
        task.public_dir("valid")
    report = task.grade(root / "data/public/sample_submission.csv", "valid")
    assert not report.valid and "train.csv" in report.reason


def test_resolve_task(make_package: PackageBuilder) -> None:
    """Bundled names and paths resolve (and are cached); anything else names the choices."""
    root = make_package()
    task = resolve_task(str(root))
    assert task.root == root.resolve() and resolve_task(str(root)) is task
    assert resolve_task(bundled_names()[0]).name == bundled_names()[0]
    with pytest.raises(InvalidArgument, match="tabular-binary"):
        resolve_task("no-such-task")
    with pytest.raises(TypeError):
        resolve_task(None)  # type: ignore[arg-type]


def test_private_paths_do_not_build_the_view(
    make_package: PackageBuilder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing private paths names the view's answers without building the view."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "fresh-cache"))
    task = load_task(make_package())
    private = task.private_paths
    assert private[0] == task.root / "data" / "private"
    assert not private[1].exists()
    task.public_dir("valid")
    assert private[1].is_dir() and private[1] == task.answers_path("valid").parent
