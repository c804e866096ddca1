"""Split rules: which labelled rows become a task's test set, deterministically.

Standard library only and without ``from __future__`` on purpose: the offline model embeds this
module's source in the ``prepare.py`` it writes (which runs in a sandbox where openmle may not
be installed), and the task builder's gate checks any ``prepare.py``'s split with
:func:`check_split`. So one implementation makes the splits and one checks them.

The rules (``fraction`` is the test share, ``seed`` the seed; ``n_test = max(1,
floor(n * fraction + 0.5))``):

- ``random``: a seeded shuffle of the row numbers (``random.Random(seed)``); the first
  ``n_test`` are the test rows.
- ``stratified`` (classification): per class (labels compared stripped, classes in sorted
  order, one seeded generator for all), ``floor(n_c * fraction + 0.5)`` rows of each class of
  ``n_c`` rows, chosen by a seeded shuffle; so every class's test share is within one row of
  ``fraction``.
- ``group`` (by a column): the distinct values of the column, sorted then shuffled with the
  seed; whole groups go to the test set in that order until it holds at least ``n_test`` rows;
  at least one group stays in training. No group is on both sides.
- ``time`` (by a column): rows ordered by the column (as numbers when every value is one,
  else as text, which orders ISO dates); the rows at or after the time of the ``n_test``-th
  latest row are the test rows, so every test row is at least as late as every training row
  and rows of one time are never split. The seed is not used.

Every rule returns the test rows' numbers in file order and raises ``ValueError`` (naming the
column and the fix) when it cannot be applied.
"""

import math
import random
from collections.abc import Sequence

SPLIT_KINDS = ("random", "stratified", "group", "time")
"""The split rules a task spec may name."""


def _n_test(n: int, fraction: float) -> int:
    return max(1, math.floor(n * fraction + 0.5))


def _time_keys(values: Sequence[str], column: str | None) -> list[tuple[float, str]]:
    """Sort keys: ``(number, "")`` when every value is a number, else ``(0.0, text)``."""
    cells = [v.strip() for v in values]
    if any(not c for c in cells):
        raise ValueError(f"time column {column!r} has empty values; pick a column filled in")
    try:
        nums = [float(c) for c in cells]
    except ValueError:
        return [(0.0, c) for c in cells]
    if any(math.isnan(x) for x in nums):
        raise ValueError(f"time column {column!r} has NaN values; pick a column filled in")
    return [(x, "") for x in nums]


def split_indices(
    n: int,
    *,
    kind: str,
    fraction: float,
    seed: int,
    labels: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    column: str | None = None,
) -> list[int]:
    """The test rows' numbers (sorted) of ``n`` labelled rows under one split rule.

    Args:
        n: number of labelled rows.
        kind: one of :data:`SPLIT_KINDS`.
        fraction: the test share, in (0, 1).
        seed: the seed (not used by ``time``).
        labels: the rows' labels (``stratified``).
        keys: the rows' values of the split column (``group``, ``time``).
        column: the split column's name, for messages.

    Raises:
        ValueError: the rule cannot be applied (names the column and the fix).
    """
    if kind not in SPLIT_KINDS:
        raise ValueError(f"split kind {kind!r} is not one of {list(SPLIT_KINDS)}")
    if n < 2:
        raise ValueError("a split needs at least 2 labelled rows")
    rng = random.Random(seed)
    target = _n_test(n, fraction)
    if kind == "random":
        order = list(range(n))
        rng.shuffle(order)
        return sorted(order[:target])
    if kind == "stratified":
        return _stratified_test(n, fraction, rng, labels)
    if keys is None or len(keys) != n:
        raise ValueError(f"a {kind} split needs the column's value of every row")
    if kind == "group":
        return _group_test(keys, target, rng, column)
    return _time_test(n, target, keys, column)


def _stratified_test(
    n: int, fraction: float, rng: random.Random, labels: Sequence[str] | None
) -> list[int]:
    """The test rows of a ``stratified`` split: the same share of every class."""
    if labels is None or len(labels) != n:
        raise ValueError("a stratified split needs one label per row")
    classes: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        classes.setdefault(lab.strip(), []).append(i)
    test: list[int] = []
    for c in sorted(classes):
        rows = classes[c]
        rng.shuffle(rows)
        test.extend(rows[: math.floor(len(rows) * fraction + 0.5)])
    if not test or len(test) == n:
        raise ValueError(
            "a stratified split of these classes leaves one side empty; "
            "use a larger test_fraction or a random split"
        )
    return sorted(test)


def _group_test(
    keys: Sequence[str], target: int, rng: random.Random, column: str | None
) -> list[int]:
    """The test rows of a ``group`` split: whole groups until ``target`` rows are reached."""
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k.strip(), []).append(i)
    if len(groups) < 2:
        raise ValueError(
            f"group column {column!r} has fewer than 2 groups; pick a column with more"
        )
    names = sorted(groups)
    rng.shuffle(names)
    test: list[int] = []
    for g in names[:-1]:
        if len(test) >= target:
            break
        test.extend(groups[g])
    return sorted(test)


def _time_test(n: int, target: int, keys: Sequence[str], column: str | None) -> list[int]:
    """The test rows of a ``time`` split: the latest ``target`` rows (ties kept together)."""
    times = _time_keys(keys, column)
    order = sorted(range(n), key=lambda i: (times[i], i))
    cut = times[order[n - target]]
    test = [i for i in range(n) if times[i] >= cut]
    if len(test) == n:
        raise ValueError(
            f"time column {column!r} has one value for the test rows and all the others; "
            "pick a column with more distinct times or a smaller test_fraction"
        )
    return sorted(test)


def check_split(
    kind: str,
    fraction: float,
    train_values: Sequence[str],
    test_values: Sequence[str],
    column: str | None = None,
) -> str:
    """Whether a split obeys its rule; returns the violation in words, or ``""``.

    Args:
        kind: one of :data:`SPLIT_KINDS`.
        fraction: the intended test share.
        train_values: the training rows' labels (``stratified``) or split-column values.
        test_values: the test rows' labels or split-column values.
        column: the column's name, for the message.
    """
    if kind == "random":
        return ""
    if kind == "stratified":
        counts: dict[str, list[int]] = {}
        for v in train_values:
            counts.setdefault(v.strip(), [0, 0])[0] += 1
        for v in test_values:
            counts.setdefault(v.strip(), [0, 0])[1] += 1
        off = sorted(
            c for c, (tr, te) in counts.items() if abs(te - (tr + te) * fraction) > 1 + 1e-9
        )
        if off:
            return (
                f"{len(off)} class(es) of {column!r} are not split in proportion "
                f"{fraction:g} (within one row)"
            )
        return ""
    if kind == "group":
        both = {v.strip() for v in train_values} & {v.strip() for v in test_values}
        if both:
            return f"{len(both)} group(s) of {column!r} are in both train and test"
        return ""
    if kind == "time":
        try:
            times = _time_keys([*train_values, *test_values], column)
        except ValueError as exc:
            return str(exc)
        train, test = times[: len(train_values)], times[len(train_values) :]
        if train and test and max(train) > min(test):
            late = sum(t > min(test) for t in train)
            return f"{late} training row(s) are later in {column!r} than the earliest test row"
        return ""
    return f"split kind {kind!r} is not one of {list(SPLIT_KINDS)}"
