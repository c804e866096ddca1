"""How to install is said in one place, and the extras mean what it says."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _extras() -> dict[str, list[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return extras


def test_dev_is_the_test_tools_not_every_extra() -> None:
    """`[dev]` holds the test and lint tools only; the whole suite installs `.[all,dev]`."""
    dev = _extras()["dev"]
    names = {re.split(r"[<>=\[ ]", d)[0] for d in dev}
    assert {"pytest", "hypothesis", "mypy", "ruff"} <= names
    assert not any(d.startswith("openmle[") for d in dev), dev
    assert "-e '.[all,dev]'" in (REPO / "scripts" / "test.sh").read_text()


def test_one_page_says_every_way_to_install() -> None:
    """PyPI, a clone, the test tools, CPU-only and CUDA torch: one page, linked from the README,
    whose first command installs no pytest (the README names the command that does)."""
    page = (REPO / "docs" / "how-to" / "install.md").read_text()
    for needed in (
        "pip install openmle",
        "-e '.[dev]'",
        "-e '.[all,dev]'",
        "https://download.pytorch.org/whl/cpu",
        "CUDA",
    ):
        assert needed in page, needed
    readme = (REPO / "README.md").read_text()
    assert "docs/how-to/install.md" in readme
    assert "-e '.[dev]'" in readme and "pytest" in readme


def test_the_constraints_file_describes_what_anyone_gets() -> None:
    """Its comment no longer describes a wheel only one workplace has."""
    text = (REPO / "constraints.txt").read_text()
    assert "workplace" not in text and "on disk" not in text
    assert "docs/how-to/install.md" in text
