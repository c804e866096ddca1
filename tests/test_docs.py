"""The docs keep up with the code: references are current, links resolve, examples run.

Every fenced ``python`` block in ``docs/**/*.md`` runs here, in page order, in one namespace per
page (a later block may use what an earlier one defined) and in a fresh working directory per
page. A block that cannot run on a test machine says so in the Markdown, on the line just above
its fence, and is reported as skipped with that reason:

- ``<!-- skip: reason -->``: never runs here (a GPU, a remote server, hours of training, a
  fragment with placeholders the reader fills in);
- ``<!-- needs: torch, transformers -->``: runs when those modules import, else skips naming
  the extra that is missing.

A block may ``await`` at top level (it then runs on an asyncio event loop).
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openmle.errors import MissingDependency

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
SKIP = re.compile(r"^<!--\s*skip:\s*(?P<reason>.+?)\s*-->$")
NEEDS = re.compile(r"^<!--\s*needs:\s*(?P<modules>[\w.,\s]+?)\s*-->$")


def _load_script(name: str) -> Any:
    """Import ``scripts/<name>.py`` as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("script", "page"),
    [("gen_reference", "api.md"), ("gen_reference", "cli.md"), ("gen_reference", "formats.md")],
)
def test_reference_is_current(script: str, page: str) -> None:
    """Each generated page of docs/reference/ equals what its generator renders now."""
    gen = _load_script(script)
    try:
        expected = gen.PAGES[page]()
    except MissingDependency as exc:  # api.md documents every backend, extras included
        pytest.skip(f"{page} is rendered from every extra: {exc}")
    actual = (DOCS / "reference" / page).read_text()
    assert actual == expected, f"run: python scripts/{script}.py"


def test_every_doc_link_resolves() -> None:
    """Relative links between Markdown pages point at files that exist."""
    missing = [
        f"{page.relative_to(REPO)} -> {target}"
        for page in [*REPO.glob("docs/**/*.md"), REPO / "README.md"]
        for target in re.findall(r"\]\(([^)#:\s]+\.md)(?:#[^)]*)?\)", page.read_text())
        if not (page.parent / target).resolve().exists()
    ]
    assert not missing, missing


@dataclass(frozen=True)
class Block:
    """One fenced ``python`` block of a docs page."""

    page: Path
    line: int  # 1-based line of the opening fence
    code: str
    skip: str | None  # the reason of a ``<!-- skip: ... -->`` marker
    needs: tuple[str, ...]  # modules of a ``<!-- needs: ... -->`` marker

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(DOCS)}:{self.line}"


def _blocks(page: Path) -> Iterator[Block]:
    """The page's python blocks, with the marker on the last non-blank line above each."""
    lines = page.read_text().splitlines()
    above = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```"):
            lang = line[3:].strip()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if lang == "python":
                skip = SKIP.match(above)
                needs = NEEDS.match(above)
                yield Block(
                    page=page,
                    line=i + 1,
                    code="\n".join(lines[i + 1 : end]) + "\n",
                    skip=skip["reason"] if skip else None,
                    needs=tuple(m.strip() for m in needs["modules"].split(",")) if needs else (),
                )
            above = ""
            i = end + 1
            continue
        if line.strip():
            above = line.strip()
        i += 1


BLOCKS = [block for page in sorted(DOCS.glob("**/*.md")) for block in _blocks(page)]


@dataclass
class _PageState:
    """What a page's blocks share: one namespace, one working directory, the blocks run."""

    cwd: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "docs_example"})
    done: set[int] = field(default_factory=set)


_PAGES: dict[Path, _PageState] = {}


def _runnable(block: Block) -> str | None:
    """Why ``block`` cannot run here, or None."""
    if block.skip is not None:
        return block.skip
    for module in block.needs:
        if importlib.util.find_spec(module) is None:
            return f"needs {module} (an optional extra; see the page)"
    return None


def _has(module: object, name: str) -> bool:
    try:
        getattr(module, name)
    except MissingDependency:  # the name exists behind an extra that is not installed
        return True
    except AttributeError:
        return False
    return True


def _check_openmle_imports(block: Block) -> None:
    """A block that cannot run still parses, and the openmle names it imports exist."""
    tree = ast.parse("\n" * block.line + block.code, str(block.page))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("openmle"):
            assert node.module is not None
            module = importlib.import_module(node.module)
            missing = [a.name for a in node.names if not _has(module, a.name)]
            assert not missing, f"line {node.lineno}: {node.module} has no {missing}"


def _execute(block: Block, state: _PageState) -> None:
    source = "\n" * block.line + block.code  # tracebacks name the page's own line numbers
    code = compile(source, str(block.page), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if code.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(code, state.namespace))
    else:
        exec(code, state.namespace)
    state.done.add(block.line)


def _marks(block: Block) -> list[pytest.MarkDecorator]:
    # The torch example trains two tiny models (about 20 s on 2 cores).
    return [pytest.mark.torch, pytest.mark.slow] if "torch" in block.needs else []


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=_marks(b)) for b in BLOCKS])
def test_doc_block_runs(
    block: Block, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The block runs as written, after the runnable blocks above it on its page."""
    reason = _runnable(block)
    if reason is not None:
        _check_openmle_imports(block)
        pytest.skip(f"{block.id}: {reason}")
    state = _PAGES.setdefault(block.page, _PageState(cwd=tmp_path_factory.mktemp("docs")))
    monkeypatch.chdir(state.cwd)
    for earlier in BLOCKS:
        if (
            earlier.page == block.page
            and earlier.line < block.line
            and earlier.line not in state.done
            and _runnable(earlier) is None
        ):
            _execute(earlier, state)
    _execute(block, state)


def test_doc_markers_are_well_formed() -> None:
    """A marker that is mistyped would silently not apply: every ``<!-- skip``/``needs`` parses."""
    bad = [
        f"{page.relative_to(REPO)}:{n}: {line.strip()}"
        for page in DOCS.glob("**/*.md")
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if re.match(r"\s*<!--\s*(skip|needs)\b", line)
        and not (SKIP.match(line.strip()) or NEEDS.match(line.strip()))
    ]
    assert not bad, bad
