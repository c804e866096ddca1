"""Every "pip install 'openmle[EXTRA]'" line the library prints names an extra that exists."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_require_calls_name_real_extras() -> None:
    """``require(module, extra)`` calls name an extra of pyproject.toml (a typo misleads users)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = set(project["optional-dependencies"])
    bad = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.args[1].value!r}"
        for path in sorted((ROOT / "src/openmle").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "require"
        and len(node.args) == 2
        and isinstance(node.args[1], ast.Constant)
        and node.args[1].value not in extras
    ]
    assert not bad, f"unknown extras (known: {sorted(extras)}): {bad}"
