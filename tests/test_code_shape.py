"""The shape the code keeps (issue 26): no function or method in ``src/openmle`` of 100 lines
or more; split one that grows past it into named steps."""

from __future__ import annotations

import ast
from pathlib import Path

import openmle

SRC = Path(openmle.__file__).parent
MAX_LINES = 99


def test_no_function_of_100_lines_or_more() -> None:
    long: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name} ({lines})")
    assert not long, "functions of 100 lines or more:\n" + "\n".join(long)
