"""Scratch directories that untrusted code writes: removed whatever they hold, however the
block ends (the tree remover's own cases are in ``tests/unit/backends/test_workspace.py``)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest
from tests._files import deep_tree

from openmle._trees import remove_tree, scratch_dir, walk


def test_temporary_directory_cannot_remove_a_deep_tree(deep_tmp_path: Path) -> None:
    """Why scratch_dir exists: the standard library's cleanup recurses and raises."""
    tmp = tempfile.TemporaryDirectory(dir=deep_tmp_path)
    deep_tree(Path(tmp.name), sys.getrecursionlimit() + 500)
    with pytest.raises(RecursionError):
        tmp.cleanup()
    assert remove_tree(tmp.name)


def test_scratch_dir_is_private_and_removed_with_a_deep_tree(deep_tmp_path: Path) -> None:
    tmp_path = deep_tmp_path
    with scratch_dir(prefix="s-", dir=tmp_path) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith("s-")
        assert tmp.stat().st_mode & 0o777 == 0o700
        deep_tree(tmp, sys.getrecursionlimit() + 500)
        (tmp / "unreadable").mkdir()
        (tmp / "unreadable" / "f").write_text("x")
        os.chmod(tmp / "unreadable", 0)
        (tmp / "out").symlink_to(tmp_path)  # removed, never followed
    assert list(tmp_path.iterdir()) == []


def test_scratch_dir_is_removed_when_the_block_raises(tmp_path: Path) -> None:
    def use() -> None:
        with scratch_dir(dir=tmp_path) as tmp:
            (tmp / "f").write_text("x")
            raise KeyError("boom")

    with pytest.raises(KeyError):
        use()
    assert list(tmp_path.iterdir()) == []


def test_walk_is_os_walk_without_recursion(deep_tmp_path: Path) -> None:
    """Same triples as ``os.walk(followlinks=False)`` on an ordinary tree, pruning included;
    any depth where ``os.walk`` raises ``RecursionError``."""
    root = deep_tmp_path / "t"
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    (root / "f").write_text("x")
    (root / "a" / "g").write_text("x")
    (root / "link").symlink_to(root / "a")  # a link to a directory: listed, never entered
    expected = [(p, sorted(d), sorted(f)) for p, d, f in os.walk(root)]
    assert [(p, sorted(d), sorted(f)) for p, d, f in walk(root)] == expected
    pruned = []
    for p, d, _ in walk(root):
        pruned.append(p)
        d[:] = [x for x in d if x != "a"]
    assert pruned == [str(root), str(root / "c")]
    (deep_tmp_path / "deep").mkdir()
    deep = deep_tree(deep_tmp_path / "deep", sys.getrecursionlimit() + 500)
    with pytest.raises(RecursionError):
        list(os.walk(deep))
    assert sum(1 for _ in walk(deep)) == sys.getrecursionlimit() + 501
    assert list(walk(deep_tmp_path / "missing")) == []
