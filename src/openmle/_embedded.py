"""Programs that openmle writes out (task files, generated solutions), kept as real modules.

A program openmle writes for another process (a bundled task's ``prepare.py`` and
``metric.py``, the offline model's solutions, the offline task builder's ``prepare.py``) lives
in a ``.py`` file of the package, so ruff and mypy check it like any other code, and is read
back as text here; nothing imports it. Two conventions make a template of such a file while it
stays valid Python:

- a line ending in ``# <<name>>`` is a *slot*: :func:`fill` replaces the whole line (the code
  before the marker is a stand-in that keeps the template valid) with a block of lines,
  indented like the slot; an empty block removes the line;
- lines between ``# [name]`` and ``# [/name]`` are a *part*: :func:`parts` cuts them out
  (dedented) to fill a slot elsewhere.

The written text is exactly the file's text with its slots filled, so the bytes of a written
program are pinned by the file.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Mapping
from importlib import resources

__all__ = ["fill", "parts", "source"]

_SLOT = re.compile(r"^(?P<indent>[ ]*)(?:.*?[ ]+)?# <<(?P<name>[a-z_]+)>>\n", re.MULTILINE)
_PART = re.compile(
    r"^[ ]*# \[(?P<name>[a-z_:0-9]+)\]\n(?P<body>.*?)^[ ]*# \[/(?P=name)\]\n",
    re.MULTILINE | re.DOTALL,
)


@functools.cache
def source(package: str, name: str) -> str:
    """The text of the file ``name`` in ``package`` (read once, UTF-8)."""
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


@functools.cache
def parts(package: str, name: str) -> Mapping[str, str]:
    """The parts of a file, by name: the lines between ``# [name]`` and ``# [/name]``."""
    found: dict[str, str] = {}
    for m in _PART.finditer(source(package, name)):
        if m["name"] in found:
            raise ValueError(f"{package}/{name}: part {m['name']!r} appears twice")
        found[m["name"]] = textwrap.dedent(m["body"])
    return found


def fill(template: str, blocks: Mapping[str, str]) -> str:
    """``template`` with each slot line replaced by its block, indented like the slot.

    Args:
        template: the text with slots (lines ending in ``# <<name>>``).
        blocks: the lines for each slot (each ending in a newline), or ``""`` to drop the line.

    Raises:
        ValueError: a slot has no block or a block has no slot (a template and its writer
            disagree).
    """
    used: set[str] = set()

    def one(m: re.Match[str]) -> str:
        name = m["name"]
        if name not in blocks:
            raise ValueError(f"no block for the template slot {name!r}")
        used.add(name)
        block = blocks[name]
        if block and not block.endswith("\n"):
            raise ValueError(f"the block for slot {name!r} must end with a newline")
        return textwrap.indent(block, m["indent"])

    out = _SLOT.sub(one, template)
    unused = sorted(set(blocks) - used)
    if unused:
        raise ValueError(f"blocks without a slot in the template: {unused}")
    return out
