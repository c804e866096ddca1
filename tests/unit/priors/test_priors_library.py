"""Prior records and libraries: validation, JSONL round trip, pandas, content hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openmle.errors import InvalidArgument
from openmle.priors import (
    PRIOR_SCHEMA_VERSION,
    Prior,
    PriorLibrary,
    load_library,
    save_library,
)


def prior(i: int = 0, **kw: object) -> Prior:
    base: dict[str, object] = {
        "prior_id": f"p{i}",
        "kind": "method",
        "text": f"Use gradient boosting with early stopping ({i}).",
        "source": "write-up",
        "task_type": "Classification",
        "modality": "tabular",
        "effect": 0.01 * i,
        "n": 3,
        "source_ids": ["some-competition"],
        "licence": "CC-BY-4.0",
    }
    base.update(kw)
    return Prior(**base)  # type: ignore[arg-type]


def test_round_trip_hash_and_pandas(tmp_path: Path) -> None:
    """save/load round-trips, the hash is stable and order-sensitive, pandas reads the file."""
    lib = PriorLibrary([prior(1), prior(2, kind="pitfall", effect=None, n=0)])
    path = tmp_path / "lib.jsonl"
    digest = save_library(lib, path)
    assert digest == lib.content_hash and len(digest) == 64
    back = load_library(path)
    assert back == lib and back.content_hash == digest
    assert back.priors[0].task_type == "classification"  # labels are normalised
    pd = pytest.importorskip("pandas", reason="needs pandas: pip install 'openmle[data]'")
    frame = pd.read_json(path, lines=True)
    assert list(frame["prior_id"]) == ["p1", "p2"]
    assert set(frame["schema_version"]) == {PRIOR_SCHEMA_VERSION}
    swapped = PriorLibrary([prior(2, kind="pitfall", effect=None, n=0), prior(1)])
    assert swapped.content_hash != digest
    edited = PriorLibrary([prior(1, text="other advice")])
    assert edited.content_hash != PriorLibrary([prior(1)]).content_hash


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.update(kind="hint"), "Prior.kind"),
        (lambda d: d.pop("text"), "'text'"),
        (lambda d: d.update(effect="big"), "Prior.effect"),
        (lambda d: d.update(schema_version=99), "schema_version"),
        (lambda d: d.pop("schema_version"), "schema_version"),
        (lambda d: d.update(surprise=1), "'surprise'"),
        (lambda d: d.update(source_ids="one-string"), "source_ids"),
        (lambda d: d.update(text="x" * 5000), "Prior.text"),
        (lambda d: d.update(n=-1), "Prior.n"),
    ],
)
def test_load_names_line_and_field(tmp_path: Path, edit: object, needle: str) -> None:
    """A bad record fails to load with the file, the line number and the field."""
    good = json.dumps(prior(1).to_dict())
    bad = prior(2).to_dict()
    edit(bad)  # type: ignore[operator]
    path = tmp_path / "lib.jsonl"
    path.write_text(good + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(InvalidArgument) as err:
        load_library(path)
    assert "line 3" in str(err.value) and needle in str(err.value) and str(path) in str(err.value)


def test_load_rejects_junk_and_duplicates(tmp_path: Path) -> None:
    """Non-JSON lines, non-objects, NaN effects and duplicate ids are refused with the line."""
    path = tmp_path / "lib.jsonl"
    for body, needle in [
        ("not json", "line 1"),
        ("[1, 2]", "JSON object"),
        (json.dumps(prior(1).to_dict()).replace('"effect": 0.01', '"effect": NaN'), "effect"),
        (json.dumps(prior(1).to_dict()) + "\n" + json.dumps(prior(1).to_dict()), "line 2"),
    ]:
        path.write_text(body + "\n")
        with pytest.raises(InvalidArgument, match=needle):
            load_library(path)
    with pytest.raises(InvalidArgument, match="appears twice"):
        PriorLibrary([prior(1), prior(1)])
    with pytest.raises(InvalidArgument, match="cannot read"):
        load_library(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("how", ["dev-zero", "fifo", "huge"])
def test_a_library_that_is_no_bounded_regular_file_is_refused_in_one_line(
    tmp_path: Path, how: str
) -> None:
    """A bench manifest or a flag naming ``-> /dev/zero`` read until MemoryError; a FIFO hung."""
    import os

    from openmle.priors import load_library

    p = tmp_path / "lib.jsonl"
    if how == "dev-zero":
        p.symlink_to("/dev/zero")
    elif how == "fifo":
        os.mkfifo(p)
    else:
        with p.open("wb") as f:
            f.truncate((256 << 20) + 1)  # sparse: no disk used
    with pytest.raises(InvalidArgument, match=r"cannot read prior library .*at most 256 MiB"):
        load_library(p)


def test_a_library_the_user_linked_to_is_still_read(tmp_path: Path) -> None:
    from openmle.priors import PriorLibrary, load_library, save_library

    save_library(PriorLibrary([]), tmp_path / "real.jsonl")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "real.jsonl")
    assert len(load_library(tmp_path / "link.jsonl")) == 0
