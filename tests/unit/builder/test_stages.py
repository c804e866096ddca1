"""Unit tests of the builder's deterministic stages and the model-facing spec stage."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from openmle import Message, ModelRequest, ModelResponse
from openmle.backends import OfflineModel
from openmle.builder import (
    PURPOSE_KEY,
    PURPOSE_SPEC,
    BuildOptions,
    SpecError,
    build_task,
    check_contamination,
    intake,
    inventory,
    load_blocklist,
)
from openmle.builder._spec import parse_spec, request_spec
from openmle.errors import InvalidArgument


def _raw(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = ["row_id,size,colour,label"] + [
        f"{k},{k * 1.5},{'red' if k % 3 else 'blue'},{'a' if k % 2 else 'b'}" for k in range(40)
    ]
    rows[5] = "3,,red,"  # a repeated id, a missing size and an unlabelled row
    (raw / "train.csv").write_text("\n".join(rows) + "\n")
    (raw / "readme.txt").write_text("about the data\n")
    return raw


def test_inventory_is_deterministic_with_schemas_stats_and_candidates(tmp_path: Path) -> None:
    rec = intake(_raw(tmp_path), source="unit", licence="CC0")
    assert [f.path for f in rec.files] == ["readme.txt", "train.csv"]
    inv = inventory(rec)
    assert inv.to_dict() == inventory(intake(rec.raw_dir)).to_dict()
    table = inv.file("train.csv")
    assert table is not None and table.rows == 40
    size = table.column("size")
    assert size is not None and size.kind == "numeric" and size.missing == 1
    label = table.column("label")
    assert label is not None and label.kind == "categorical" and label.missing == 1
    assert label.unique == 2
    assert inv.id_candidates == ()  # row_id repeats 3
    assert inv.target_candidates[0] == "train.csv:label"
    assert inv.file("readme.txt") is not None and inv.file("readme.txt").rows is None  # type: ignore[union-attr]
    assert "train.csv (csv" in inv.text()


def test_inventory_text_is_bounded_against_hostile_names(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    header = ",".join(f"{'x' * 5000}{k}\x1b[2J" for k in range(300))
    (raw / "wide.csv").write_text(header + "\n" + ",".join("1" for _ in range(300)) + "\n")
    text = inventory(intake(raw)).text(limit=3000)
    assert len(text) <= 3000
    assert "\x1b" not in text


class _Scripted:
    """Answers spec requests from a script, recording what it was sent."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = answers
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(text=self.answers[len(self.requests) - 1])


_GOOD = {
    "title": "Labels",
    "data_file": "train.csv",
    "target": "label",
    "id_column": None,
    "task_type": "binary",
    "metric": "auc",
    "test_fraction": 0.25,
    "seed": 1,
    "description": "Predict the label.",
}


def test_invalid_spec_is_retried_with_the_validation_error(tmp_path: Path) -> None:
    inv = inventory(intake(_raw(tmp_path)))
    bad_metric = dict(_GOOD, metric="rmse")
    model = _Scripted(
        ["no json here", json.dumps(bad_metric), f"```json\n{json.dumps(_GOOD)}\n```"]
    )
    result = anyio.run(lambda: request_spec(model, inv, max_attempts=3))
    assert result.spec.metric == "auc" and result.spec.higher_is_better is True
    assert [a.error != "" for a in result.attempts] == [True, True, False]
    assert "no JSON object" in result.attempts[0].error
    assert "does not fit task_type" in result.attempts[1].error
    # The retry carries the error back to the model; every request says what it asks for.
    assert "does not fit task_type" in model.requests[2].messages[-1].content
    assert all(r.metadata[PURPOSE_KEY] == PURPOSE_SPEC for r in model.requests)


def test_spec_attempts_are_bounded(tmp_path: Path) -> None:
    inv = inventory(intake(_raw(tmp_path)))
    model = _Scripted(["{}", "{}"])
    with pytest.raises(SpecError, match="2 attempt"):
        anyio.run(lambda: request_spec(model, inv, max_attempts=2))
    assert len(model.requests) == 2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"target": "nope"}, "'target'"),
        ({"data_file": "readme.txt"}, "'data_file'"),
        ({"metric": "my_metric"}, "'metric' must be one of"),
        ({"higher_is_better": False}, "contradicts"),
        ({"id_column": "row_id"}, "not unique"),
        ({"test_fraction": 0.9}, "test_fraction"),
        ({"metric_code": "def f(): ..."}, "unknown field"),
        ({"task_type": "regression", "metric": "rmse"}, "categorical"),
    ],
)
def test_spec_schema_names_the_field(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    inv = inventory(intake(_raw(tmp_path)))
    with pytest.raises(ValueError, match=message):
        parse_spec(dict(_GOOD, **change), inv)


def test_offline_model_answers_builder_requests_by_kind_only(tmp_path: Path) -> None:
    inv = inventory(intake(_raw(tmp_path)))
    model = OfflineModel()
    request = ModelRequest(
        messages=[Message(role="user", content="x")],
        metadata={PURPOSE_KEY: PURPOSE_SPEC, "inventory": inv.to_dict()},
    )
    first = anyio.run(model.complete, request).text
    assert first == anyio.run(model.complete, request).text
    spec = parse_spec(json.loads(first), inv)
    assert (spec.target, spec.task_type, spec.metric) == ("label", "binary", "auc")
    # The same words in a prompt without the metadata kind are an ordinary program request.
    plain = ModelRequest(messages=[Message(role="user", content=f"{PURPOSE_SPEC} inventory")])
    assert "```python" in anyio.run(model.complete, plain).text


def test_blocklist_matches_hashes_and_names_and_names_bad_lines(tmp_path: Path) -> None:
    rec = intake(_raw(tmp_path))
    digest = next(f.sha256 for f in rec.files if f.path == "train.csv")
    mine = tmp_path / "mine.txt"
    mine.write_text(f"sha256:{digest}  # my eval set\nname:Readme\n")
    result = check_contamination(rec, load_blocklist([mine], shipped=False))
    assert result.matches == ("sha256 of train.csv", "name 'readme'")
    assert check_contamination(rec, load_blocklist()).clean
    shipped = load_blocklist()
    assert "spooky-author-identification" in shipped.names and len(shipped.hashes) >= 3
    bad = tmp_path / "bad.txt"
    bad.write_text("md5:abc\n")
    with pytest.raises(InvalidArgument, match=r"bad.txt:1"):
        load_blocklist([bad])


def test_intake_refuses_symlinks_and_empty_dirs(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    with pytest.raises(InvalidArgument, match="holds no file"):
        intake(raw)
    (raw / "link.csv").symlink_to("/etc/passwd")
    with pytest.raises(InvalidArgument, match="symbolic link"):
        intake(raw)


def test_raw_data_without_a_table_is_rejected_at_the_inventory(tmp_path: Path) -> None:
    """No table and no per-class image folder: nothing holds labels, so the build stops
    (rejected, ``no_table``) before any model is asked or any sandbox runs."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "notes.bin").write_bytes(bytes(range(256)))
    (raw / "pics").mkdir()
    (raw / "pics" / "a.png").write_bytes(b"not a class folder: one folder only")

    model = _Scripted([])  # asked once, it would fail: no answer is scripted

    result = anyio.run(
        lambda: build_task(
            raw, tmp_path / "pkg", model, options=BuildOptions(blocklist=load_blocklist())
        )
    )
    assert (result.status, result.stage, result.findings) == (
        "rejected",
        "inventory",
        ("no_table",),
    )
    assert "no readable table" in result.reason and not (tmp_path / "pkg").exists()
    assert model.requests == []
