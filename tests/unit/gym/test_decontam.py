"""One decontamination for the task builder and the priors: ids, names, data hashes and a
user's exclusion list, with the same answers on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest

import openmle.builder as builder
import openmle.priors as priors
from openmle.bench import LITE_IDS
from openmle.builder import check_contamination, intake, load_blocklist
from openmle.errors import InvalidArgument
from openmle.gym._decontam import SHIPPED, Exclusions, load_exclusions, normalise_name


def test_both_packages_use_the_one_implementation() -> None:
    """The public names of both packages are the shared objects."""
    assert builder.Blocklist is priors.Exclusions is Exclusions
    assert priors.normalise_name is normalise_name
    assert isinstance(load_blocklist(), Exclusions)
    assert load_blocklist().hashes == load_blocklist().data_hashes


def test_shipped_list_holds_all_75_mlebench_competitions_and_the_bundled_tasks() -> None:
    """All 75 MLE-bench ids (low 22, medium 38, high 15) with their names and MD5s, the
    bundled tasks' names and their three SHA-256 data hashes."""
    shipped = load_exclusions()
    assert {normalise_name(i) for i in LITE_IDS} <= shipped.ids
    assert len(shipped.ids) == 75 + 90  # MLE-bench, NatureBench
    assert {"tabular-binary", "tabular-regression", "tabular-multiclass"} <= shipped.names
    assert "spooky-author-identification" in shipped.ids
    assert "aptos-2019-blindness-detection" in shipped.names  # config.yaml: APTOS 2019 ...
    md5 = {h for h in shipped.data_hashes if h.startswith("md5:")}
    assert len(shipped.data_hashes) - len(md5) == 3 and len(md5) >= 75
    # spooky-author-identification's checksums.yaml `public/train.csv`
    assert "md5:1124166bf7b8b1e337a32fe568732447" in md5 and shipped.suite == "openmle"
    assert SHIPPED.name == "exclusions.txt"
    ex = priors.default_exclusions()
    assert ex.match(name="x", data_hashes=["md5:1124166BF7B8B1E337A32FE568732447"]) is not None
    assert ex.match(source_id="AI4Code") is not None  # a medium-split competition
    assert ex.match(name="tabular-binary") is None  # bundled runs may become priors


def test_shipped_list_holds_the_90_naturebench_cases_by_id_and_name() -> None:
    """NatureBench's release cases (task-set/all.txt): each id and task name is refused."""
    shipped = load_exclusions()
    nature = {i for i in shipped.ids if i.startswith(("s41", "s42", "s43"))}
    assert len(nature) == 90
    assert "s41467-025-63412-3" in shipped.ids
    assert "lasso-peptide-property-prediction" in shipped.names
    assert shipped.match(source_id="s41467-025-63412-3") is not None
    assert shipped.match(name="lasso_peptide_property_prediction") is not None


def test_md5_lines_are_a_format_extension(tmp_path: Path) -> None:
    mine = tmp_path / "mine.txt"
    mine.write_text("md5:0123456789ABCDEF0123456789abcdef\n")
    assert load_exclusions([mine], shipped=False).data_hashes == {
        "md5:0123456789abcdef0123456789abcdef"
    }
    mine.write_text("md5:0123\n")
    with pytest.raises(InvalidArgument, match="md5:<32 hex digits>"):
        load_exclusions([mine], shipped=False)


def _raw(tmp_path: Path, file: str = "data.csv") -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / file).write_text("a,b\n1,2\n")
    return raw


def test_builder_refuses_a_source_that_mentions_an_evaluation_task(tmp_path: Path) -> None:
    """A Kaggle URL of an MLE-bench Lite competition as provenance is refused (by mention)."""
    rec = intake(
        _raw(tmp_path), source="https://www.kaggle.com/c/spooky-author-identification/data"
    )
    result = check_contamination(rec, load_blocklist())
    assert result.matches == ("'spooky-author-identification' mentioned in the source",)


def test_builder_compares_names_normalised(tmp_path: Path) -> None:
    """A raw file called "Spooky Author Identification.csv" is the competition's name."""
    rec = intake(_raw(tmp_path, "Spooky Author Identification.csv"))
    result = check_contamination(rec, load_blocklist())
    assert result.matches == ("name 'spooky-author-identification'",)


def test_one_user_list_serves_both_sides(tmp_path: Path) -> None:
    """A user's file (sha256:, name:, id: lines) refuses the same data in both packages."""
    raw = _raw(tmp_path)
    rec = intake(raw, source="my lab's holdout")
    digest = rec.files[0].sha256
    mine = tmp_path / "mine.txt"
    mine.write_text(f"sha256:{digest.upper()}  # my eval set\nid:My_Holdout\nname: Secret Set\n")
    user = load_exclusions([mine], shipped=False)
    assert user.suite == "user" and user.ids == {"my-holdout"} and user.names == {"secret-set"}
    result = check_contamination(rec, load_blocklist([mine], shipped=False))
    assert result.matches == ("sha256 of data.csv",)
    ex = priors.default_exclusions(extra=user)
    assert ex.match(name="x", data_hashes=[digest]) == f"data hash {digest!r}"
    assert ex.match(related_ids=["my holdout"]) == "id 'my-holdout'"
    assert ex.match(name="notes", text="tuned on the secret set") is not None
    assert "mle-bench" in ex.suite and "user" in ex.suite


@pytest.mark.parametrize("line", ["md5:abc", "sha256:xyz", "name:", "id: --- ", "holdout"])
def test_bad_lines_name_the_file_and_line(tmp_path: Path, line: str) -> None:
    """Every malformed entry is an error naming the file, the line and the forms."""
    bad = tmp_path / "bad.txt"
    bad.write_text("# fine\n" + line + "\n")
    with pytest.raises(InvalidArgument, match=r"bad.txt:2: expected 'sha256"):
        load_exclusions([bad])


def test_builder_refuses_a_raw_file_by_its_md5(tmp_path: Path) -> None:
    """An ``md5:`` entry (the shipped list's MLE-bench checksums are MD5s) refuses a raw file
    with those bytes."""
    import hashlib

    raw = _raw(tmp_path)
    digest = hashlib.md5((raw / "data.csv").read_bytes(), usedforsecurity=False).hexdigest()
    mine = tmp_path / "mine.txt"
    mine.write_text(f"md5:{digest}\n")
    rec = intake(raw, source="somewhere")
    assert rec.files[0].md5 == digest
    result = check_contamination(rec, load_blocklist([mine], shipped=False))
    assert result.matches == ("md5 of data.csv",)
