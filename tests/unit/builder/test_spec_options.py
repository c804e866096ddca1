"""Spec options: the metric library (with parameters) and the split rules, validated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openmle.builder import TaskSpec, intake, inventory
from openmle.builder._inventory import Inventory
from openmle.builder._spec import METRIC_LIBRARY, SCHEMA_TEXT, SplitRule, parse_spec


def _inv(tmp_path: Path) -> Inventory:
    raw = tmp_path / "raw"
    raw.mkdir()
    lines = ["key,day,shop,x,cls,gain,price,holey"]
    for k in range(60):
        holey = "" if k == 7 else str(k)
        lines.append(f"{k},{k // 3},s{k % 6},{k - 30},{'abc'[k % 3]},{k - 20},{k * 2},{holey}")
    (raw / "data.csv").write_text("\n".join(lines) + "\n")
    return inventory(intake(raw))


_BASE: dict[str, Any] = {
    "title": "T",
    "data_file": "data.csv",
    "target": "cls",
    "id_column": "key",
    "task_type": "multiclass",
    "metric": "macro_f1",
    "test_fraction": 0.2,
    "seed": 3,
    "description": "Predict cls.",
}


def test_library_names_and_schema_list_every_metric() -> None:
    """The spec library holds the eight vetted metrics; the prompt names each."""
    assert set(METRIC_LIBRARY) == {
        "accuracy",
        "auc",
        "log_loss",
        "macro_f1",
        "map@k",
        "rmse",
        "rmsle",
        "mae",
    }
    for name in METRIC_LIBRARY:
        assert name in SCHEMA_TEXT


def test_map_at_k_takes_k_and_writes_map_k(tmp_path: Path) -> None:
    """metric_params.k becomes the package's metric name; the direction is from the library."""
    spec = parse_spec(dict(_BASE, metric="map@k", metric_params={"k": 3}), _inv(tmp_path))
    assert spec.grader_metric == "map@3" and spec.higher_is_better is True
    assert spec.to_dict()["metric_params"] == {"k": 3}
    assert spec.split == SplitRule()  # random by default


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"metric": "map@k"}, "needs 'metric_params'"),
        ({"metric": "map@k", "metric_params": {"k": 0}}, r"'metric_params.k' must be an integer"),
        ({"metric": "map@k", "metric_params": {"k": 101}}, r"in \[1, 100\]"),
        ({"metric": "map@k", "metric_params": {"k": True}}, "'metric_params.k'"),
        ({"metric": "map@k", "metric_params": {"k": 2, "j": 1}}, "needs 'metric_params'"),
        ({"metric_params": {"k": 2}}, "takes no 'metric_params'"),
        ({"metric_params": [2]}, "must be a JSON object"),
        ({"metric": "map@5"}, "'metric' must be one of"),
        ({"task_type": "binary", "target": "cls", "metric": "map@k"}, "binary"),
        (
            {"task_type": "regression", "target": "gain", "metric": "rmsle"},
            "'rmsle' needs a target >= 0 but 'gain' has negative values",
        ),
        ({"split": {"kind": "shuffle"}}, "'split.kind' must be one of"),
        ({"split": "random"}, "'split' must be an object"),
        ({"split": {"kind": "random", "column": "day"}}, "must be null for a random split"),
        ({"split": {"kind": "stratified", "column": "cls"}}, "must be null"),
        (
            {
                "task_type": "regression",
                "target": "price",
                "metric": "rmse",
                "split": {"kind": "stratified"},
            },
            "stratified split needs a classification task",
        ),
        ({"split": {"kind": "group"}}, "a group split needs 'split.column'"),
        ({"split": {"kind": "time", "column": "when"}}, "a time split needs 'split.column'"),
        ({"split": {"kind": "group", "column": "cls"}}, "is the target or the id column"),
        ({"split": {"kind": "time", "column": "key"}}, "is the target or the id column"),
        ({"split": {"kind": "time", "column": "holey"}}, "has missing values"),
        ({"split": {"kind": "group", "column": "x", "seed": 1}}, "'split' must be an object"),
    ],
)
def test_bad_options_name_the_field(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """Every invalid metric parameter or split rule is a ValueError naming the field."""
    with pytest.raises(ValueError, match=message):
        parse_spec(dict(_BASE, **change), _inv(tmp_path))


@pytest.mark.parametrize(
    ("split", "expected"),
    [
        ({"kind": "stratified", "column": None}, SplitRule(kind="stratified")),
        ({"kind": "group", "column": "shop"}, SplitRule(kind="group", column="shop")),
        ({"kind": "time", "column": "day"}, SplitRule(kind="time", column="day")),
        ({"kind": "random"}, SplitRule()),
    ],
)
def test_split_rules_parse(tmp_path: Path, split: dict[str, Any], expected: SplitRule) -> None:
    """Each rule parses and round-trips through the record."""
    spec = parse_spec(dict(_BASE, split=split), _inv(tmp_path))
    assert spec.split == expected
    assert isinstance(spec, TaskSpec)
    assert json.loads(json.dumps(spec.to_dict()))["split"] == expected.to_dict()


def test_id_column_is_found_beyond_the_unique_cap(tmp_path: Path) -> None:
    """A 1,500-row id column (the distinct count is capped at 1,000) is an id candidate and
    accepted as id_column; a repeated value anywhere is not."""
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = ["id,x,y"] + [f"{k},{k % 7},{k % 2}" for k in range(1500)]
    (raw / "t.csv").write_text("\n".join(rows) + "\n")
    inv = inventory(intake(raw))
    assert inv.id_candidates == ("t.csv:id",)
    col = inv.tables[0].column("id")
    assert col is not None and col.unique_capped and col.all_unique
    good = dict(_BASE, data_file="t.csv", target="y", id_column="id", task_type="binary")
    assert parse_spec(dict(good, metric="auc"), inv).id_column == "id"
    rows[-1] = "0,1,1"
    (raw / "t.csv").write_text("\n".join(rows) + "\n")
    inv = inventory(intake(raw))
    assert inv.id_candidates == ()
    with pytest.raises(ValueError, match="not unique"):
        parse_spec(dict(good, metric="auc"), inv)


def test_spec_stays_hashable(tmp_path: Path) -> None:
    """A spec with metric parameters is a hashable value (the parameters are left out of it)."""
    spec = parse_spec(dict(_BASE, metric="map@k", metric_params={"k": 3}), _inv(tmp_path))
    assert hash(spec) == hash(spec) and spec in {spec}
