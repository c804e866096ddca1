"""Programs kept as real modules and written out as text: slots, parts, and the shipped ones."""

from __future__ import annotations

import ast
import hashlib
import uuid
from pathlib import Path

import pytest

from openmle._embedded import fill, parts, source
from openmle.gym._bundled import GENERATION

TEMPLATE = """\
import os  # <<imports>>

def f(x):
    y = x
    return y  # <<body>>
"""


def test_fill_replaces_slot_lines_indented_like_the_slot() -> None:
    """A slot's whole line (stand-in included) becomes the block; an empty block drops it."""
    out = fill(TEMPLATE, {"imports": "", "body": "z = x + 1\n\nreturn z\n"})
    assert out == "\ndef f(x):\n    y = x\n    z = x + 1\n\n    return z\n"
    ast.parse(out)


@pytest.mark.parametrize(
    ("blocks", "match"),
    [
        ({"imports": ""}, "no block for the template slot 'body'"),
        ({"imports": "", "body": "x\n", "extra": "y\n"}, r"without a slot.*'extra'"),
        ({"imports": "", "body": "return 1"}, "must end with a newline"),
    ],
)
def test_fill_refuses_a_template_and_writer_that_disagree(
    blocks: dict[str, str], match: str
) -> None:
    """A missing block, a block without a slot, or a block without its newline is an error."""
    with pytest.raises(ValueError, match=match):
        fill(TEMPLATE, blocks)


def _package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> str:
    name = f"embedded_{uuid.uuid4().hex}"
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / name / "parts.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_parts_are_cut_dedented(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines between ``# [name]`` and ``# [/name]``, dedented; duplicates are an error."""
    text = "def host(a):\n    # [one]\n    if a:\n        a = 2\n    # [/one]\n    return a\n"
    pkg = _package(tmp_path, monkeypatch, text)
    assert source(pkg, "parts.py") == text
    assert dict(parts(pkg, "parts.py")) == {"one": "if a:\n    a = 2\n"}
    twice = _package(tmp_path, monkeypatch, "# [a]\nx = 1\n# [/a]\n# [a]\nx = 2\n# [/a]\n")
    with pytest.raises(ValueError, match="appears twice"):
        parts(twice, "parts.py")


def test_bundled_sources_are_pinned_to_the_generation() -> None:
    """Bundled packages are cached by GENERATION: changing their sources must bump it."""
    digest = hashlib.sha256()
    for name in ("prepare.py", "metric.py", "metric_parts.py"):
        digest.update(source("openmle.gym._bundled_sources", name).encode())
    assert (GENERATION, digest.hexdigest()) == (
        1,
        "3c4efca15cd470face83b1e3349e94643ede928a0991a0ad3507ff0f988e92cc",
    ), "the bundled tasks' sources changed: bump openmle.gym._bundled.GENERATION and this pin"


def test_offline_programs_render_without_markers() -> None:
    """Every part of the offline model's programs is used by some recipe and leaves no marker."""
    from openmle.backends._offline import NUMPY_MODELS, SKLEARN_MODELS, render_program
    from openmle.backends._offline_builder import offline_prepare

    names = (*NUMPY_MODELS, *SKLEARN_MODELS)
    code = render_program(
        {
            "models": [{"name": n, "params": {}} for n in names],
            "features": ["missing_flags", "log1p", "poly2", "standardize", "log"],
            "impute": "median",
            "cat": "onehot",
        },
        "plan",
    )
    prepare = offline_prepare({"target": "y"})
    for program in (code, prepare.removeprefix("```python\n").removesuffix("```\n")):
        ast.parse(program)
        assert "# <<" not in program and "# [" not in program
    assert code.startswith('# recipe: {"cat": "onehot"') and '"""plan"""' in code
    for n in names:
        assert f"def {n}(" in code
