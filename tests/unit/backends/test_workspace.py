"""Workspace walking and removal survive whatever a program leaves behind."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from tests._files import deep_tree, locked_tree

from openmle._trees import remove_tree
from openmle.backends._workspace import ArtifactLimits, list_artifacts, over_quota


def test_deeper_than_recursion_limit_and_path_max_is_listed_and_removed(tmp_path: Path) -> None:
    """3,000 levels of 100-character names (300 KB paths) neither crash nor stop removal."""
    depth = max(3000, sys.getrecursionlimit() + 500)
    (tmp_path / "run").mkdir()
    root = deep_tree(tmp_path / "run", depth, "d" * 100)
    (root / "top.txt").write_text("x")
    assert list_artifacts(root) == ("top.txt",)  # beyond max_depth: not entered
    assert remove_tree(root)
    assert not root.exists()


def test_odd_names_locked_dirs_and_links_are_removed_never_followed(tmp_path: Path) -> None:
    """Non-UTF-8 names, unsearchable directories and outward symlinks: gone, target kept."""
    root, outside = locked_tree(tmp_path)
    with open(os.path.join(os.fsencode(root), b"bad-\xff\xfe"), "w") as f:
        f.write("x")
    (root / "-rf").write_text("x")
    listed = list_artifacts(root)
    assert "bad-\\xff\\xfe" in listed  # printable, storable as UTF-8
    assert {"-rf", "link", "dirlink"} <= set(listed)
    "\n".join(listed).encode("utf-8")
    assert remove_tree(root)
    assert not root.exists()
    assert outside.read_text() == "keep"
    assert remove_tree(root)  # already gone: fine


def test_artifact_list_is_bounded(tmp_path: Path) -> None:
    """Count, total path bytes, depth and entries visited are all capped; shallow paths first."""
    for i in range(50):
        (tmp_path / f"f{i:02d}").write_text("")
    deep = tmp_path / "x" / "y"
    deep.mkdir(parents=True)
    (deep / "z").write_text("")
    assert len(list_artifacts(tmp_path, limits=ArtifactLimits(max_count=10))) == 10
    small = list_artifacts(tmp_path, limits=ArtifactLimits(max_path_bytes=30))
    assert sum(len(p) for p in small) <= 30
    assert "x/y/z" not in list_artifacts(tmp_path, limits=ArtifactLimits(max_depth=2))
    assert "x/y/z" in list_artifacts(tmp_path)
    assert len(list_artifacts(tmp_path, limits=ArtifactLimits(max_visited=5))) <= 5
    assert list_artifacts(tmp_path / "missing") == ()
    assert "f00" not in list_artifacts(tmp_path, exclude=("f00",))


def test_over_quota_counts_files_and_allocated_bytes(tmp_path: Path) -> None:
    """The watchdog's check: entries and allocated blocks, stopping at the first limit."""
    for i in range(20):
        (tmp_path / str(i)).write_text("")
    assert over_quota(tmp_path, max_bytes=1 << 30, max_files=100) is None
    assert "files" in (over_quota(tmp_path, max_bytes=1 << 30, max_files=10) or "")
    with open(tmp_path / "big", "wb") as f:
        os.posix_fallocate(f.fileno(), 0, 4 << 20)
    assert "MiB" in (over_quota(tmp_path, max_bytes=1 << 20, max_files=100) or "")


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_directories_are_made_writable(tmp_path: Path) -> None:
    """As an ordinary user, read-only and unsearchable directories are opened up and removed."""
    root = tmp_path / "run"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    os.chmod(root / "a" / "b", 0)
    os.chmod(root / "a", 0o500)
    assert remove_tree(root)
