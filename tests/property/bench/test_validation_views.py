"""Properties of the validation split: any pool, any rule fraction and cap."""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from openmle.bench.mlebench import SplitRule, build_validation_view


def rule(fraction: float, cap: int | None, group: bool) -> SplitRule:
    return SplitRule(
        competition="prop",
        pool="train.csv",
        id_column="id",
        targets=("y",),
        fraction=fraction,
        cap=cap,
        group="g" if group else None,
        answer_columns=("*",),
    )


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@settings(max_examples=40)
@given(
    n=st.integers(2, 60),
    fraction=st.floats(0.01, 0.5),
    cap=st.none() | st.integers(1, 80),
    group=st.booleans(),
    data=st.data(),
)
def test_split_partitions_the_pool(
    tmp_path_factory: object,
    n: int,
    fraction: float,
    cap: int | None,
    group: bool,
    data: st.DataObject,
) -> None:
    """Every row lands on exactly one side; the held-out part has 1 to ``min(cap, n-1)`` units
    (never the whole pool, never more than the cap); groups never straddle; the same inputs
    give the same split."""
    groups = data.draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    with tempfile.TemporaryDirectory() as tmp:
        check(Path(tmp), n, fraction, cap, group, groups)


def check(
    root: Path, n: int, fraction: float, cap: int | None, group: bool, groups: list[int]
) -> None:
    pub = root / "public"
    pub.mkdir()
    with (pub / "train.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "g", "y"])
        w.writerows([(f"r{i}", groups[i], i % 2) for i in range(n)])
    (pub / "sample_submission.csv").write_text("id,y\nz,0\n")
    r = rule(fraction, cap, group)
    units = len(set(groups)) if group else n
    if units < 2:
        return
    info = build_validation_view("prop", pub, root / "a", rule=r)
    build_validation_view("prop", pub, root / "b", rule=r)
    train = rows(root / "a" / "public" / "train.csv")
    held = rows(root / "a" / "private" / "test.csv")
    assert sorted(x["id"] for x in train + held) == sorted(f"r{i}" for i in range(n))
    assert info["valid"] == len(held) and info["train"] == len(train)
    held_units = {x["g"] for x in held} if group else {x["id"] for x in held}
    assert 1 <= len(held_units) <= min(cap or units, units - 1)
    if group:
        assert held_units.isdisjoint({x["g"] for x in train})
    assert (root / "a" / "private" / "test.csv").read_bytes() == (
        root / "b" / "private" / "test.csv"
    ).read_bytes()
