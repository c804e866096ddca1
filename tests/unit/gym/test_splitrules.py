"""Split rules: deterministic by seed, each rule's property holds, and check_split catches it."""

from __future__ import annotations

import pytest

from openmle.gym._splitrules import SPLIT_KINDS, check_split, split_indices

N = 100
LABELS = ["a"] * 50 + ["b"] * 30 + ["c"] * 20
GROUPS = [f"g{k % 13}" for k in range(N)]
TIMES = [f"2024-01-{1 + (k * 7) % 28:02d}" for k in range(N)]


def _split(kind: str, seed: int = 0, **kw: object) -> tuple[list[int], list[int]]:
    test = split_indices(
        N,
        kind=kind,
        fraction=0.2,
        seed=seed,
        labels=LABELS,
        keys=kw.get("keys"),  # type: ignore[arg-type]
        column="c",
    )
    chosen = set(test)
    return [i for i in range(N) if i not in chosen], test


@pytest.mark.parametrize(
    ("kind", "keys"), [("random", None), ("stratified", None), ("group", GROUPS), ("time", TIMES)]
)
def test_same_seed_same_split(kind: str, keys: list[str] | None) -> None:
    """Every rule is a function of its inputs and the seed."""
    assert _split(kind, 5, keys=keys) == _split(kind, 5, keys=keys)


@pytest.mark.parametrize(
    ("kind", "keys"), [("random", None), ("stratified", None), ("group", GROUPS)]
)
def test_seed_changes_the_split(kind: str, keys: list[str] | None) -> None:
    """The seeded rules give another split for another seed (time is the column's order)."""
    assert _split(kind, 1, keys=keys) != _split(kind, 2, keys=keys)
    if kind != "group":
        assert len(_split(kind, 1, keys=keys)[1]) == 20


def test_random_matches_a_seeded_shuffle() -> None:
    """random: the first n_test of random.Random(seed).shuffle(range(n)), in file order."""
    import random

    order = list(range(N))
    random.Random(7).shuffle(order)
    assert _split("random", 7)[1] == sorted(order[:20])


def test_stratified_keeps_each_class_in_proportion() -> None:
    """10 a, 6 b, 4 c of 50/30/20 at 0.2; check_split agrees."""
    train, test = _split("stratified", 4)
    counts = {c: sum(LABELS[i] == c for i in test) for c in "abc"}
    assert counts == {"a": 10, "b": 6, "c": 4}
    assert (
        check_split("stratified", 0.2, [LABELS[i] for i in train], [LABELS[i] for i in test]) == ""
    )


def test_group_never_splits_a_group() -> None:
    """No group on both sides; at least 20 test rows; check_split agrees."""
    train, test = _split("group", 9, keys=GROUPS)
    assert {GROUPS[i] for i in train}.isdisjoint({GROUPS[i] for i in test})
    assert len(test) >= 20 and train
    assert check_split("group", 0.2, [GROUPS[i] for i in train], [GROUPS[i] for i in test]) == ""


def test_time_puts_the_latest_rows_in_test() -> None:
    """Every test date is later than every training date (ISO text order); ties stay together."""
    train, test = _split("time", keys=TIMES)
    assert max(TIMES[i] for i in train) < min(TIMES[i] for i in test)
    assert len(test) >= 20
    assert check_split("time", 0.2, [TIMES[i] for i in train], [TIMES[i] for i in test]) == ""


def test_time_orders_numbers_as_numbers() -> None:
    """'9' is earlier than '10' when every value is a number."""
    keys = [str(k) for k in range(N)]
    test = split_indices(N, kind="time", fraction=0.2, seed=0, keys=keys, column="t")
    assert test == list(range(80, 100))


def test_check_split_reports_violations() -> None:
    """A random split of grouped or timed rows is caught, naming the column."""
    train, test = _split("random", 0)
    assert "are in both train and test" in check_split(
        "group", 0.2, [GROUPS[i] for i in train], [GROUPS[i] for i in test], "shop"
    )
    assert "later in 'day'" in check_split(
        "time", 0.2, [TIMES[i] for i in train], [TIMES[i] for i in test], "day"
    )
    assert "not split in proportion" in check_split(
        "stratified", 0.2, ["a"] * 50 + ["b"] * 30, ["c"] * 20, "y"
    )
    assert check_split("random", 0.2, ["x"], ["x"]) == ""
    assert "not one of" in check_split("other", 0.2, [], [])


@pytest.mark.parametrize(
    ("kind", "kw", "message"),
    [
        ("shuffle", {}, "is not one of"),
        ("group", {"keys": ["g"] * N}, "fewer than 2 groups"),
        ("time", {"keys": ["1"] * N}, "one value for the test rows"),
        ("time", {"keys": [""] + ["1"] * (N - 1)}, "has empty values"),
        ("time", {"keys": ["nan"] * N}, "has NaN values"),
        ("group", {}, "needs the column's value"),
        ("stratified", {"labels": ["a"] * N, "fraction": 0.001}, "leaves one side empty"),
    ],
)
def test_rules_that_cannot_apply_raise(kind: str, kw: dict[str, object], message: str) -> None:
    """A rule that cannot be applied is a ValueError naming the column and the fix."""
    args: dict[str, object] = {"fraction": 0.2, "seed": 0, "column": "c", **kw}
    with pytest.raises(ValueError, match=message):
        split_indices(N, kind=kind, **args)  # type: ignore[arg-type]


def test_kinds() -> None:
    """The four rules."""
    assert SPLIT_KINDS == ("random", "stratified", "group", "time")
