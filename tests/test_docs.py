"""The docs keep up with the code: the API reference lists every public name."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_api_reference_is_current() -> None:
    """docs/reference/api.md equals what scripts/gen_reference.py renders now."""
    spec = importlib.util.spec_from_file_location(
        "gen_reference", REPO / "scripts/gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    expected = gen.render()
    actual = (REPO / "docs/reference/api.md").read_text()
    assert actual == expected, "run: python scripts/gen_reference.py"


def test_every_doc_link_resolves() -> None:
    """Relative links between Markdown pages point at files that exist."""
    import re

    missing = [
        f"{page.relative_to(REPO)} -> {target}"
        for page in [*REPO.glob("docs/**/*.md"), REPO / "README.md"]
        for target in re.findall(r"\]\(([^)#:\s]+\.md)(?:#[^)]*)?\)", page.read_text())
        if not (page.parent / target).resolve().exists()
    ]
    assert not missing, missing
