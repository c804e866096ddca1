"""Validation views of the 22 Lite competitions, on public folders shaped like MLE-bench's.

Each case builds the view of a tiny ``prepared/public`` made exactly as that competition's
``prepare.py`` lays it out (``_lite_public``) and checks what the competition's ``grade.py``
needs: the answers' header as the preparer writes it, the sample submission's header and ids
matching the answers, the same public file names, a deterministic and disjoint split.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import pytest
from tests.unit.bench._lite_public import ANSWER_HEADERS, make_public, write_csv

from openmle.bench import LITE_IDS
from openmle.bench.mlebench import (
    LITE_RULES,
    SplitRule,
    build_validation_view,
    generic_rule,
    rule_for,
)
from openmle.errors import TaskPackageError


def read(path: Path, member: str | None = None) -> list[dict[str, str]]:
    if member is None:
        with path.open(newline="", encoding="utf-8") as fh:
            return list(csv.DictReader(fh))
    with zipfile.ZipFile(path) as zf:
        return list(csv.DictReader(io.TextIOWrapper(zf.open(member), encoding="utf-8", newline="")))


def header(path: Path, member: str | None = None) -> list[str]:
    if member is None:
        with path.open(newline="", encoding="utf-8") as fh:
            return next(csv.reader(fh))
    with zipfile.ZipFile(path) as zf:
        return next(csv.reader(io.TextIOWrapper(zf.open(member), encoding="utf-8", newline="")))


def sample_of(rule: SplitRule, root: Path) -> tuple[Path, str | None]:
    outer, _, member = rule.sample.partition("!")
    return root / outer, member or None


def test_every_lite_competition_has_a_rule() -> None:
    assert set(LITE_RULES) == set(LITE_IDS)
    for rule in LITE_RULES.values():
        assert rule.checked and rule.checked[0].endswith(f"{rule.competition}/prepare.py")
        assert rule.instruction and 0 < rule.fraction <= 0.5


_DENOISING = "denoising-dirty-documents"  # its images are read with Pillow (the data extra)


@pytest.mark.parametrize(
    "cid",
    [pytest.param(c, marks=pytest.mark.needs("PIL")) if c == _DENOISING else c for c in LITE_IDS],
)
def test_lite_view_has_public_names_and_grader_answers(cid: str, tmp_path: Path) -> None:
    pub = make_public(cid, tmp_path / "data")
    rule = LITE_RULES[cid]
    info = build_validation_view(cid, pub, tmp_path / "v1")
    view, private = tmp_path / "v1" / "public", tmp_path / "v1" / "private"
    assert info["valid"] >= 1 and info["train"] >= 1
    # the same public entries (less those that would leak held-out labels)
    assert {p.name for p in view.iterdir()} == {p.name for p in pub.iterdir()} - set(rule.drop)
    # answers: the preparer's header, outside the public view
    answers = private / rule.answers
    assert answers.is_file() and header(answers) == ANSWER_HEADERS[cid]
    secret = answers.read_bytes()
    assert all(f.read_bytes() != secret for f in view.rglob("*") if f.is_file())
    rows = read(answers)
    # the sample submission: the public header, one row per answer, the same ids
    s_path, s_member = sample_of(rule, pub)
    v_path, _ = sample_of(rule, view)
    assert header(v_path, s_member) == header(s_path, s_member)
    sample = read(v_path, s_member)
    key = rule.id_column
    assert [r[key] for r in sample] == [r[key] for r in rows]
    assert len({r[key] for r in rows}) == len(rows)  # graders match rows by this column
    # deterministic
    build_validation_view(cid, pub, tmp_path / "v2")
    assert (tmp_path / "v2" / "private" / rule.answers).read_bytes() == answers.read_bytes()
    if rule.private_sample:
        assert header(private / rule.private_sample) == header(s_path, s_member)


@pytest.mark.parametrize("cid", [c for c in LITE_IDS if LITE_RULES[c].kind == "rows"])
def test_rows_split_is_disjoint_and_media_follow(cid: str, tmp_path: Path) -> None:
    pub = make_public(cid, tmp_path / "data")
    rule = LITE_RULES[cid]
    build_validation_view(cid, pub, tmp_path / "v")
    view = tmp_path / "v" / "public"
    outer, _, member = rule.pool.partition("!")
    pool = read(pub / outer, member or None)
    train = read(view / outer, member or None)
    held = read(tmp_path / "v" / "private" / rule.answers)
    assert header(view / outer, member or None) == header(pub / outer, member or None)
    assert len(train) + len(held) == len(pool)
    assert 1 <= len(held) <= max(1, round(rule.fraction * len(pool))) + 3
    if rule.group:
        g_train = {r[rule.group] for r in train}
        held_keys = {r.get(rule.id_column) for r in held}
        g_held = {r[rule.group] for r in pool if r.get(rule.id_column) in held_keys}
        assert g_train.isdisjoint(g_held)
    if rule.test_file:
        t_outer, _, t_member = rule.test_file.partition("!")
        test = read(view / t_outer, t_member or None)
        assert len(test) == len(held)
        assert not set(rule.targets) & set(test[0])
    held_ids = [r[rule.id_column] for r in read(*sample_of(rule, view))]
    train_ids = [r[rule.id_column] for r in train] if rule.id_column in train[0] else []
    for m in rule.media:
        for ids, where in ((held_ids, m.test), (train_ids, m.train)):
            names = {m.name.format(id=i) for i in ids}
            if where.endswith(".zip"):
                with zipfile.ZipFile(view / where) as zf:
                    got = {Path(n).name for n in zf.namelist()}
                assert names <= got
            else:
                assert all((view / where / n).exists() for n in names)
        if m.train != m.test and not m.test.endswith(".zip"):
            assert len(list((view / m.test).iterdir())) == len(held_ids)


def test_taxi_cap_and_tiny_pool(tmp_path: Path) -> None:
    """A preparer's fixed test size is a cap, never more than the pool; a pool of one row is
    refused with the fix."""
    cid = "new-york-city-taxi-fare-prediction"
    pub = make_public(cid, tmp_path / "data")
    info = build_validation_view(cid, pub, tmp_path / "v")
    assert info["valid"] == 2 and info["train"] == 18
    lines = (pub / "labels.csv").read_text().splitlines()
    (pub / "labels.csv").write_text("\n".join(lines[:2]) + "\n")
    with pytest.raises(TaskPackageError, match="--validation self"):
        build_validation_view(cid, pub, tmp_path / "v2")


@pytest.mark.needs("PIL")
def test_denoising_answers_are_pixels(tmp_path: Path) -> None:
    """Denoising answers are pixels in [0, 1], one row per pixel of each held-out image."""
    d = _DENOISING
    build_validation_view(d, make_public(d, tmp_path / "d"), tmp_path / "dv")
    ans = read(tmp_path / "dv" / "private" / "answers.csv")
    assert len(ans) == 2 * 12 and all(0.0 <= float(r["value"]) <= 1.0 for r in ans)
    assert len(list((tmp_path / "dv" / "public" / "test").glob("*.png"))) == 2


def test_special_kinds(tmp_path: Path) -> None:
    """Dogs vs cats renumbers and hides the label in the test names; the whale holds out the
    latest day; birds keep labelled fold-0 recordings."""
    c = "dogs-vs-cats-redux-kernels-edition"
    build_validation_view(c, make_public(c, tmp_path / "c"), tmp_path / "cv")
    with zipfile.ZipFile(tmp_path / "cv" / "public" / "test.zip") as zf:
        assert sorted(zf.namelist()) == ["1.jpg", "2.jpg"]
    with zipfile.ZipFile(tmp_path / "cv" / "public" / "train.zip") as zf:
        names = zf.namelist()
    assert len(names) == 18 and {n.split(".")[0] for n in names} == {"cat", "dog"}
    w = "the-icml-2013-whale-challenge-right-whale-redux"
    build_validation_view(w, make_public(w, tmp_path / "w"), tmp_path / "wv")
    with zipfile.ZipFile(tmp_path / "wv" / "public" / "test2.zip") as zf:
        tests = [n for n in zf.namelist() if n.endswith(".aif")]
    assert len(tests) == 10 and all(n.startswith("test2/20090329_") for n in tests)
    b = "mlsp-2013-birds"
    build_validation_view(b, make_public(b, tmp_path / "b"), tmp_path / "bv")
    labels = tmp_path / "bv" / "public" / "essential_data" / "rec_labels_test_hidden.txt"
    held = [ln.split(",")[0] for ln in labels.read_text().splitlines()[1:] if ln.endswith(",?")]
    assert len(held) == 4  # 20% of the 20 labelled fold-0 recordings
    assert not (
        tmp_path / "bv" / "public" / "essential_data" / "src_wavs" / "PC3_2009_0003.wav"
    ).exists()
    p = "random-acts-of-pizza"
    build_validation_view(p, make_public(p, tmp_path / "p"), tmp_path / "pv")
    test = json.loads((tmp_path / "pv" / "public" / "test.json").read_text())
    assert test and all("requester_received_pizza" not in r for r in test)


def test_generic_rule_and_refusal(tmp_path: Path) -> None:
    """Outside Lite: one labelled CSV whose columns hold the sample's id and targets gets the
    generic rule; anything else is refused naming --validation self and prepared/valid."""
    pub = tmp_path / "x" / "prepared" / "public"
    write_csv(pub / "train.csv", ["row_id", "f", "y"], [(i, i * 2, i % 2) for i in range(30)])
    write_csv(pub / "test.csv", ["row_id", "f"], [(99, 1)])
    write_csv(pub / "sample_submission.csv", ["row_id", "y"], [(99, 0)])
    rule = rule_for("some-other-competition", pub)
    assert rule.pool == "train.csv" and rule.targets == ("y",)
    info = build_validation_view("some-other-competition", pub, tmp_path / "v")
    assert info["valid"] == 3 and header(tmp_path / "v" / "private" / "test.csv") == ["row_id", "y"]
    (pub / "train.csv").unlink()
    (pub / "train.json").write_text("[]")
    with pytest.raises(TaskPackageError, match=r"--validation self") as err:
        generic_rule("some-other-competition", pub)
    assert "prepared/valid" in str(err.value)


def test_symbolic_links_in_public_never_reach_the_view(tmp_path: Path) -> None:
    """A link planted in prepared/public (to the answers, say) is neither followed nor copied."""
    cid = "histopathologic-cancer-detection"
    pub = make_public(cid, tmp_path / "data")
    secret = tmp_path / "data" / cid / "prepared" / "private" / "answers.csv"
    secret.parent.mkdir(parents=True)
    secret.write_text("id,label\nsecret,1\n")
    (pub / "leak.csv").symlink_to(secret)
    (pub / "extra").mkdir()
    (pub / "extra" / "leak.csv").symlink_to(secret)
    build_validation_view(cid, pub, tmp_path / "v")
    view = tmp_path / "v" / "public"
    assert not (view / "leak.csv").exists() and not (view / "leak.csv").is_symlink()
    assert (view / "extra").is_dir() and not list((view / "extra").iterdir())
    assert not any(f.is_symlink() for f in view.rglob("*"))
