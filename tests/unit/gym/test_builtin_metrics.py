"""The vetted metric library: RMSLE, macro-F1 and MAP@k, hand-computed, and their edge cases."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from openmle import Split
from openmle.errors import TaskPackageError
from openmle.gym import load_task
from openmle.gym._gradeproc import (
    BUILTIN_METRICS,
    CsvError,
    Table,
    builtin_direction,
    builtin_score,
    macro_f1,
    map_at_k,
    parse_metric,
    rmsle,
)

from .conftest import PackageBuilder, write_csv

_IDS = ["1", "2", "3", "4"]
_DIRECTION_CASES: dict[str, tuple[list[str], list[str], list[str]]] = {
    # metric: (answers, a perfect submission, a wrong one), one target column
    "accuracy": (["a", "b", "a", "b"], ["a", "b", "a", "b"], ["b", "a", "b", "a"]),
    "auc": (["0", "1", "0", "1"], ["0.1", "0.9", "0.2", "0.8"], ["0.9", "0.1", "0.8", "0.2"]),
    "log_loss": (["a", "b", "a", "b"], ["a", "b", "a", "b"], ["b", "a", "b", "a"]),
    "macro_f1": (["a", "b", "a", "b"], ["a", "b", "a", "b"], ["b", "b", "b", "b"]),
    "mae": (["1", "2", "3", "4"], ["1", "2", "3", "4"], ["4", "3", "2", "1"]),
    "map@k": (["a", "b", "c", "a"], ["a x y", "b x y", "c x y", "a x y"], ["x y a"] * 4),
    "rmse": (["1", "2", "3", "4"], ["1", "2", "3", "4"], ["4", "3", "2", "1"]),
    "rmsle": (["1", "2", "3", "4"], ["1", "2", "3", "4"], ["4", "3", "2", "1"]),
}


def _score(name: str, answers: list[str], pred: list[str]) -> float:
    if name == "log_loss":  # a probability column per class, 0.9 on the predicted one
        probs = [["0.9", "0.1"] if p == "a" else ["0.1", "0.9"] for p in pred]
        sub = Table(["id", "a", "b"], [[i, *row] for i, row in zip(_IDS, probs, strict=True)])
    else:
        sub = Table(["id", "y"], [list(r) for r in zip(_IDS, pred, strict=True)])
    truth = Table(["id", "y"], [list(r) for r in zip(_IDS, answers, strict=True)])
    return builtin_score(name.replace("@k", "@3"), truth, sub, "id")


@pytest.mark.parametrize("name", sorted(BUILTIN_METRICS))
def test_each_metric_s_direction_ranks_a_perfect_submission_first(name: str) -> None:
    """Every vetted metric (AUC, accuracy, log loss, RMSE, MAE, RMSLE, macro-F1, MAP@k) has a
    direction, and it is the metric's own: a perfect submission beats a wrong one.
    """
    answers, perfect, wrong = _DIRECTION_CASES[name]
    good, bad = _score(name, answers, perfect), _score(name, answers, wrong)
    assert good != bad
    assert BUILTIN_METRICS[name] is (good > bad)


def test_library_holds_every_vetted_metric() -> None:
    """The library's names; ``map@k`` is a family that needs a number."""
    assert set(BUILTIN_METRICS) == set(_DIRECTION_CASES)
    assert builtin_direction("map@5") is True
    assert builtin_direction("rmsle") is False
    assert builtin_direction("map@k") is None  # the family needs a number
    assert builtin_direction("f1") is None


def test_rmsle_by_hand() -> None:
    """log1p: answers (0, ln 2, ln 4), predictions (0, ln 4, ln 2): sqrt(2 ln(2)^2 / 3)."""
    got = rmsle([0.0, 1.0, 3.0], [0.0, 3.0, 1.0], columns=("y", "y"))
    assert got == pytest.approx(math.log(2) * math.sqrt(2 / 3), rel=1e-12)
    assert rmsle([5.0, 7.0], [5.0, 7.0], columns=("y", "y")) == 0.0


@pytest.mark.parametrize(
    ("truth", "pred", "where"),
    [
        ([1.0, -0.5], [1.0, 1.0], "the answers column 'price'"),
        ([1.0, 2.0], [-1e-9, 2.0], "the submission column 'pred'"),
    ],
)
def test_rmsle_with_negatives_names_the_column(
    truth: list[float], pred: list[float], where: str
) -> None:
    """A negative answer or prediction is an error that names its column and the fix."""
    with pytest.raises(CsvError, match="RMSLE needs values >= 0") as info:
        rmsle(truth, pred, columns=("price", "pred"))
    assert where in str(info.value) and "1 negative value" in str(info.value)


def test_macro_f1_by_hand() -> None:
    """a: 2/(2+0+1); b: 2/(2+2+0); c: 0 -> (2/3 + 1/2 + 0) / 3 = 7/18."""
    assert macro_f1(["a", "a", "b", "c"], ["a", "b", "b", "b"]) == pytest.approx(7 / 18)


def test_macro_f1_counts_a_predicted_unknown_class_and_normalises_labels() -> None:
    """A predicted label no answer has is a class with F1 0; "1" and "1.0" are one class."""
    assert macro_f1(["x", "y"], ["x", "z"]) == pytest.approx(1 / 3)
    assert macro_f1(["1", "0", "Cat"], ["1.0", "0", " cat "]) == 1.0
    with pytest.raises(CsvError, match="at least one row"):
        macro_f1([], [])


def test_map_at_k_by_hand() -> None:
    """Rows: 1/1 = 1; (1/1 + 2/3) / 2 = 5/6; 0 -> mean 11/18."""
    got = map_at_k(["a", "a b", "c"], ["a b c", "b x a", "x y z"], 3)
    assert got == pytest.approx(11 / 18)


def test_map_at_k_duplicates_and_truncation() -> None:
    """A repeated prediction counts once; only the first k predictions count."""
    assert map_at_k(["a"], ["a a a"], 3) == 1.0
    assert map_at_k(["a b"], ["a a b"], 3) == pytest.approx(5 / 6)
    assert map_at_k(["a"], ["x a"], 1) == 0.0
    assert map_at_k(["a"], [""], 3) == 0.0
    # min(k, |relevant|): two relevant labels, k = 1, the first is right -> 1.
    assert map_at_k(["a b"], ["b"], 1) == 1.0


@pytest.mark.parametrize("k", [0, -1, 101, True, 2.5])
def test_map_at_k_validates_k(k: object) -> None:
    """k is an integer in [1, 100]."""
    with pytest.raises(CsvError, match=r"map@k needs an integer k in \[1, 100\]"):
        map_at_k(["a"], ["a"], k)  # type: ignore[arg-type]


def test_map_at_k_refuses_an_answer_row_without_label() -> None:
    """An empty answer cell is a broken task, not a zero."""
    with pytest.raises(CsvError, match="without a label"):
        map_at_k(["a", " "], ["a", "a"], 2)


@pytest.mark.parametrize("name", ["map@0", "map@101", "map@", "map@k", "map@05", "MAP@5", "f1"])
def test_parse_metric_refuses_bad_names(name: str) -> None:
    """Only the library's names, and map@K with K in 1..100 written plainly."""
    with pytest.raises(CsvError):
        parse_metric(name)


def test_parse_metric_reads_k() -> None:
    """map@K gives the family and K; other names have no parameter."""
    assert parse_metric("map@5") == ("map@k", 5)
    assert parse_metric("map@100") == ("map@k", 100)
    assert parse_metric("macro_f1") == ("macro_f1", None)


def test_builtin_score_routes_the_new_metrics() -> None:
    """builtin_score grades RMSLE, macro-F1 and MAP@k from tables."""
    answers = Table(["id", "y"], [["1", "a"], ["2", "a b"], ["3", "c"]])
    sub = Table(["id", "y"], [["1", "a b c"], ["2", "b x a"], ["3", "x y z"]])
    assert builtin_score("map@3", answers, sub, "id") == pytest.approx(11 / 18)
    answers = Table(["id", "y"], [["1", "a"], ["2", "a"], ["3", "b"], ["4", "c"]])
    sub = Table(["id", "y"], [["1", "a"], ["2", "b"], ["3", "b"], ["4", "b"]])
    assert builtin_score("macro_f1", answers, sub, "id") == pytest.approx(7 / 18)
    answers = Table(["id", "y"], [["1", "0"], ["2", "1"], ["3", "3"]])
    sub = Table(["id", "y"], [["1", "0"], ["2", "3"], ["3", "1"]])
    got = builtin_score("rmsle", answers, sub, "id")
    assert got == pytest.approx(math.log(2) * math.sqrt(2 / 3))


def test_package_grades_map_at_k(make_package: PackageBuilder, tmp_path: Path) -> None:
    """task.toml metric = "map@2" loads (higher is better) and grades out of process."""
    root = make_package(toml='metric = "map@2"\n')
    task = load_task(root)
    assert task.meta.higher_is_better is True
    ids = [r[0] for r in _rows(root / "data/private/test_answer.csv")]
    answers = {r[0]: r[1] for r in _rows(root / "data/private/test_answer.csv")}
    sub = tmp_path / "sub.csv"
    write_csv(sub, ["id", "y"], [[i, f"nothing {answers[i]}"] for i in ids])
    report = task.grade(sub, Split.TEST)
    assert report.valid and report.score == pytest.approx(0.5), report.reason


def test_package_rmsle_negative_prediction_is_invalid_naming_the_column(
    make_package: PackageBuilder, tmp_path: Path
) -> None:
    """A negative prediction makes the submission invalid with a reason naming the column."""
    root = make_package(toml='metric = "rmsle"\n')
    task = load_task(root)
    assert task.meta.higher_is_better is False
    ids = [r[0] for r in _rows(root / "data/private/test_answer.csv")]
    sub = tmp_path / "sub.csv"
    write_csv(sub, ["id", "y"], [[i, -1.0] for i in ids])
    report = task.grade(sub, Split.TEST)
    assert not report.valid and "column 'y'" in report.reason and "negative" in report.reason


@pytest.mark.parametrize("metric", ["map@0", "map@500", "f1_macro"])
def test_package_refuses_an_unknown_metric_name(make_package: PackageBuilder, metric: str) -> None:
    """A bad metric name in task.toml is a TaskPackageError naming the key and the choices."""
    root = make_package(toml=f'metric = "{metric}"\n')
    with pytest.raises(TaskPackageError, match="metric") as info:
        load_task(root)
    assert "map@k with k in 1..100" in str(info.value)


def _rows(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()[1:]
    return [line.split(",") for line in lines]
