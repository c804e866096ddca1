"""Evidence for the builder (issue 17): the three bundled tasks' raw data builds, with the
offline model and no network, into packages `openmle task validate` accepts; and a short
offline-model search on a bundled task's built package beats the package's constant baseline
on the validation split (the search on scikit-learn's iris, wine and diabetes packages runs on
the packages test_build.py builds from them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.integration.builder._steps import build as _build
from tests.integration.builder._steps import search_beats_constant
from tests.integration.builder._steps import validate as _validate

from openmle.builder import BuildResult, load_blocklist
from openmle.gym import bundled_names, bundled_raw

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_CLEAN = load_blocklist(shipped=False)
"""The bundled tasks are evaluation data, on the shipped blocklist: these checks opt out."""


@pytest.mark.parametrize("name", bundled_names())
def test_bundled_raw_data_builds_a_valid_package(tmp_path: Path, name: str) -> None:
    """`bundled_raw` writes the raw directory; the shipped blocklist refuses it (evaluation
    data); without it the offline model builds a package that validates."""
    raw = bundled_raw(name, tmp_path / name)
    assert sorted(p.name for p in raw.iterdir()) == ["data.csv", "description.txt"]
    refused = _build(raw, tmp_path / "refused", solvability=False)
    assert refused.status == "rejected" and refused.stage == "decontam", refused
    assert any("sha256 of data.csv" in m for m in refused.record["decontam"]["matches"])
    pkg = tmp_path / "pkg"
    result = _build(raw, pkg, blocklist=_CLEAN, solvability=name == "tabular-binary")
    assert result.status == "built", result.reason
    _validate(pkg)
    if name == "tabular-binary":
        _beats(pkg, result)


def test_bundled_raw_refuses_an_existing_directory_and_unknown_names(tmp_path: Path) -> None:
    """The destination must be new; the name must be a bundled task."""
    from openmle.errors import InvalidArgument

    (tmp_path / "x").mkdir()
    with pytest.raises(InvalidArgument, match="exists"):
        bundled_raw("tabular-binary", tmp_path / "x")
    with pytest.raises(InvalidArgument, match="bundled task name"):
        bundled_raw("nope", tmp_path / "y")


def test_cli_raw_then_build(tmp_path: Path) -> None:
    """`openmle task raw` writes the raw directory; `task build` refuses it with the shipped
    blocklist (exit 1, contaminated) and builds it with --no-shipped-blocklist."""

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "openmle", "task", *args],
            capture_output=True,
            text=True,
            check=False,
        )

    raw = tmp_path / "raw"
    made = cli("raw", "tabular-regression", "--out", str(raw))
    assert made.returncode == 0 and f"wrote {raw}" in made.stdout, made.stderr
    again = cli("raw", "tabular-regression", "--out", str(raw))
    assert again.returncode == 2 and "exists" in again.stderr
    build = ["build", str(raw), "--no-solvability", "--json"]
    refused = cli(*build, "--out", str(tmp_path / "a"))
    assert refused.returncode == 1 and json.loads(refused.stdout)["findings"] == ["contaminated"]
    built = cli(*build, "--out", str(tmp_path / "b"), "--no-shipped-blocklist")
    assert built.returncode == 0, built.stdout + built.stderr
    _validate(tmp_path / "b")


def _beats(pkg: Path, result: BuildResult) -> None:
    search_beats_constant(pkg, result, steps=3)
