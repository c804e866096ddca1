"""The public API is pinned: ``__all__`` of every public module, and public objects
report their public module (``openmle.Job``, not ``openmle._types.Job``).

The pinned surface is one golden data file, ``tests/golden/public_api.json`` (public module ->
sorted ``__all__``). A deliberate change to the public API rewrites it on purpose:
``.venv/bin/python tests/test_exports.py --update`` takes every pinned module's ``__all__`` as it
is now (name a new public module after ``--update`` to pin it too); review the file's diff,
regenerate the references (``scripts/gen_reference.py``) and add a CHANGELOG line.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import openmle
from openmle.errors import MissingDependency

PUBLIC_API = Path(__file__).resolve().parent / "golden" / "public_api.json"
UPDATE_HINT = (
    "if the change to the public API is deliberate, rewrite the golden file with "
    "`.venv/bin/python tests/test_exports.py --update` (a new public module: "
    "`... --update openmle.newmodule`), review its diff, regenerate the references "
    "(scripts/gen_reference.py) and add a CHANGELOG line"
)


def _load_public() -> dict[str, list[str]]:
    """The pinned public surface: module name -> sorted ``__all__`` (the golden file)."""
    data = json.loads(PUBLIC_API.read_text(encoding="utf-8"))
    assert isinstance(data, dict), PUBLIC_API
    return {str(module): [str(name) for name in names] for module, names in data.items()}


PUBLIC = _load_public()


def _needs_missing_extra(mod: object, name: str) -> bool:
    """True when ``name`` lives behind an extra that is not installed (a core-only install).

    Such a name raises MissingDependency naming the ``pip install`` line, as documented.
    """
    try:
        getattr(mod, name)
    except MissingDependency as exc:
        message = str(exc)
    else:
        return False
    assert "pip install 'openmle[" in message, (name, message)
    return True


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_all_is_pinned(module: str) -> None:
    """Each public module exports exactly the pinned names, once each (ruff keeps them sorted)."""
    mod = importlib.import_module(module)
    pinned = PUBLIC[module]
    assert pinned == sorted(set(pinned)), f"{PUBLIC_API}: {module} is not sorted and unique"
    added = sorted(set(mod.__all__) - set(pinned))
    removed = sorted(set(pinned) - set(mod.__all__))
    assert sorted(mod.__all__) == pinned, (
        f"{module}.__all__ differs from {PUBLIC_API.name}: added {added}, removed {removed}; "
        + UPDATE_HINT
    )
    assert len(set(mod.__all__)) == len(mod.__all__)
    for name in mod.__all__:
        if _needs_missing_extra(mod, name):
            continue
        assert hasattr(mod, name), name


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_objects_report_public_module(module: str) -> None:
    """Reprs and docs name the public module, never a private ``_module``."""
    mod = importlib.import_module(module)
    for name in mod.__all__:
        if _needs_missing_extra(mod, name):
            continue
        obj = getattr(mod, name)
        where = getattr(obj, "__module__", None)
        if callable(obj) and isinstance(where, str) and where.startswith("openmle."):
            assert "._" not in where, (module, name, where)


# Names that moved on purpose, with their deprecated alias (kept for one release).
NEW_IN_TRAIN = {
    "LoRAConfig",
    "OpenMLEGRPOTrainer",
    "OptimConfig",
    "SandboxReward",
    "StepTracker",
    "apply_lora",
    "prompt_dataset",
    "quantization_config",
    "sft_dataset",
}
MOVED = {
    ("openmle.backends", name): ("openmle.train", name)
    for name in PUBLIC["openmle.train"]
    if name not in NEW_IN_TRAIN  # added after the move: no old path
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_moved_names_keep_a_deprecated_alias(old: tuple[str, str], new: tuple[str, str]) -> None:
    """The old import path still works for one release, warns, and names the new path."""
    pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")
    old_mod = importlib.import_module(old[0])
    assert old[1] not in old_mod.__all__
    with pytest.warns(DeprecationWarning, match=rf"from {new[0]} import {new[1]}"):
        obj = getattr(old_mod, old[1])
    assert obj is getattr(importlib.import_module(new[0]), new[1])


@pytest.mark.parametrize("name", PUBLIC["openmle.service"])
def test_gym_service_is_a_deprecated_alias_of_service(name: str) -> None:
    """``openmle.gym.service`` (moved to ``openmle.service``) still works for one release: the
    import and each name warn, naming the new import, and give the very same objects."""
    new = importlib.import_module("openmle.service")
    sys.modules.pop("openmle.gym.service", None)
    with pytest.warns(DeprecationWarning, match=r"import openmle\.service"):
        old = importlib.import_module("openmle.gym.service")
    assert old.__all__ == []
    with pytest.warns(DeprecationWarning, match=rf"from openmle\.service import {name}"):
        obj = getattr(old, name)
    assert obj is getattr(new, name)
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018


def test_service_imports_nothing_from_gym() -> None:
    """``openmle.service`` is a package of its own: importing it loads no ``openmle.gym``."""
    code = (
        "import sys, openmle.service\n"
        "print(sorted(m for m in sys.modules if m.startswith('openmle.gym')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    )
    assert out.stdout.strip() == "[]"


def test_names_that_left_the_search_api_are_deprecated_aliases() -> None:
    """Helpers that left openmle.search (softmax, draw_without_replacement, card_line,
    novelty_of, extract_imports, FAMILY_TAGS, PRESETS, Recorder): the old import still works for
    one release, with a DeprecationWarning naming the new home."""
    import warnings

    import openmle.search
    from openmle.search import _cards, _driver, _families, _memory, _select

    moved = {
        "FAMILY_TAGS": _families.FAMILY_TAGS,
        "PRESETS": _select.PRESETS,
        "Recorder": _driver.Recorder,
        "extract_imports": _families.extract_imports,
        "softmax": _select.softmax,
        "draw_without_replacement": _select.draw_without_replacement,
        "card_line": _memory.card_line,
        "novelty_of": _cards.novelty_of,
    }
    for name, obj in moved.items():
        assert name not in openmle.search.__all__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(openmle.search, name) is obj
        assert [w.category for w in caught] == [DeprecationWarning]
        assert "no longer public" in str(caught[0].message)
    with pytest.raises(AttributeError, match="not_a_name"):
        openmle.search.not_a_name  # noqa: B018


def test_one_way_to_rewrite_module() -> None:
    """Only openmle._exports (publish / publish_one) assigns ``__module__``: no package or module
    rewrites it by hand."""
    import ast

    src = Path(openmle.__file__).parent
    bad = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "_exports.py" and path.parent == src:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bad += [
                f"{path.relative_to(src)}:{node.lineno}"
                for t in targets
                if isinstance(t, ast.Attribute) and t.attr == "__module__"
            ]
    assert not bad, "set __module__ with openmle._exports.publish/publish_one:\n" + "\n".join(bad)


def test_operators_proposal_is_a_deprecated_alias_of_parsed_answer() -> None:
    """operators.Proposal (a parsed model answer) was renamed ParsedAnswer, so that Proposal
    means one thing (openmle.search.Proposal); the old name works for one release, warning."""
    import openmle.operators
    import openmle.search

    assert "Proposal" not in openmle.operators.__all__
    with pytest.warns(DeprecationWarning, match=r"renamed openmle\.operators\.ParsedAnswer"):
        old: object = openmle.operators.Proposal
    assert old is openmle.operators.ParsedAnswer
    assert openmle.operators.ParsedAnswer.__module__ == "openmle.operators"
    search_proposal: object = openmle.search.Proposal
    assert old is not search_proposal  # two names, two things


def test_one_deprecation_mechanism() -> None:
    """Every deprecation warns through openmle._exports.warn_deprecated (which states the
    removal release): no other module names DeprecationWarning."""
    import ast

    from openmle._exports import REMOVED_IN

    src = Path(openmle.__file__).parent
    bad = [
        f"{path.relative_to(src)}:{node.lineno}"
        for path in sorted(src.rglob("*.py"))
        if not (path.name == "_exports.py" and path.parent == src)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Name) and node.id == "DeprecationWarning"
    ]
    assert not bad, "warn with openmle._exports.warn_deprecated:\n" + "\n".join(bad)
    changelog = (Path(__file__).parents[1] / "CHANGELOG.md").read_text()
    assert f"removed in {REMOVED_IN}" in changelog


def _update(new_modules: list[str]) -> None:
    """Rewrite the golden file from the live ``__all__`` of every pinned module (and the named
    new ones): only for a deliberate public API change (see the module docstring)."""
    modules = sorted({*PUBLIC, *new_modules})
    surface = {m: sorted(importlib.import_module(m).__all__) for m in modules}
    PUBLIC_API.write_text(json.dumps(surface, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {PUBLIC_API} ({len(surface)} modules); review its diff before committing")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--update"]:
        sys.exit("usage: python tests/test_exports.py --update [openmle.newmodule ...]")
    _update(sys.argv[2:])
