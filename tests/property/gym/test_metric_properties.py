"""The built-in metrics agree with scikit-learn's on random inputs."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.gym._gradeproc import accuracy, log_loss, mae, rmse, roc_auc

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
