"""The built-in metrics agree with scikit-learn's on random inputs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.gym._gradeproc import (
    accuracy,
    log_loss,
    macro_f1,
    mae,
    map_at_k,
    rmse,
    rmsle,
    roc_auc,
)

metrics = pytest.importorskip(
    "sklearn.metrics", reason="needs sklearn: pip install 'openmle[data]'"
)

values = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(st.lists(st.tuples(values, values), min_size=1, max_size=50))
def test_rmse_and_mae(pairs: list[tuple[float, float]]) -> None:
    """RMSE and MAE match scikit-learn's."""
    t, p = [a for a, _ in pairs], [b for _, b in pairs]
    assert math.isclose(
        rmse(t, p), math.sqrt(metrics.mean_squared_error(t, p)), rel_tol=1e-9, abs_tol=1e-9
    )
    assert math.isclose(mae(t, p), metrics.mean_absolute_error(t, p), rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 5)), min_size=2, max_size=60))
def test_auc_with_ties(rows: list[tuple[bool, int]]) -> None:
    """AUC (ties averaged) matches roc_auc_score whenever both classes are present."""
    labels = [int(y) for y, _ in rows]
    if len(set(labels)) < 2:
        return
    scores = [float(s) for _, s in rows]
    ours = roc_auc([str(y) for y in labels], scores)
    assert math.isclose(ours, metrics.roc_auc_score(labels, scores), rel_tol=1e-12)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c"]),
            st.lists(st.floats(0.001, 1.0), min_size=3, max_size=3),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_log_loss(rows: list[tuple[str, list[float]]]) -> None:
    """Log loss (rows renormalised) matches scikit-learn's."""
    labels = [y for y, _ in rows]
    probs = [[p / sum(r) for p in r] for _, r in rows]
    ours = log_loss(labels, ["a", "b", "c"], [r for _, r in rows])
    ref = metrics.log_loss(labels, probs, labels=["a", "b", "c"])
    assert math.isclose(ours, ref, rel_tol=1e-7, abs_tol=1e-9)


def test_accuracy_normalises_numbers() -> None:
    """Labels compare as numbers when both parse ("1" == "1.0") and as text otherwise."""
    assert accuracy(["1", "0", "cat"], ["1.0", "1", "Cat"]) == pytest.approx(2 / 3)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(
    st.lists(
        st.tuples(st.floats(0.0, 1e3, allow_nan=False), st.floats(0.0, 1e3, allow_nan=False)),
        min_size=1,
        max_size=50,
    )
)
def test_rmsle(pairs: list[tuple[float, float]]) -> None:
    """RMSLE matches scikit-learn's root_mean_squared_log_error."""
    t, p = [a for a, _ in pairs], [b for _, b in pairs]
    theirs = math.sqrt(metrics.mean_squared_log_error(t, p))
    assert math.isclose(rmsle(t, p, columns=("y", "y")), theirs, rel_tol=1e-9, abs_tol=1e-9)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcde")), min_size=1, max_size=60)
)
def test_macro_f1(rows: list[tuple[str, str]]) -> None:
    """macro-F1 matches f1_score(average="macro") over the labels of answers and predictions."""
    t, p = [a for a, _ in rows], [b for _, b in rows]
    theirs = metrics.f1_score(t, p, average="macro", zero_division=0)
    assert math.isclose(macro_f1(t, p), theirs, rel_tol=1e-12, abs_tol=1e-12)


@settings(deadline=None)  # speed lives in benchmarks, not in pass/fail
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from("abcdef"), min_size=1, max_size=3, unique=True),
            st.lists(st.sampled_from("abcdef"), max_size=6),
        ),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 6),
)
def test_map_at_k_bounds_and_perfect(rows: list[tuple[list[str], list[str]]], k: int) -> None:
    """MAP@k lies in [0, 1]; predicting the (distinct) relevant labels first scores 1."""
    truth = [" ".join(a) for a, _ in rows]
    pred = [" ".join(b) for _, b in rows]
    assert 0.0 <= map_at_k(truth, pred, k) <= 1.0
    assert map_at_k(truth, truth, k) == pytest.approx(1.0)
