"""Small file and process helpers the tests share: a CSV writer, a /proc liveness check, a
tree made readable to a container's user, and trees to remove: one deeper than any recursion,
one locked with outward links."""

from __future__ import annotations

import csv
import os
from collections.abc import Sequence
from pathlib import Path

__all__ = ["alive", "deep_tree", "locked_tree", "open_up", "public_private", "write_csv"]


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Write a CSV with a header (``\\n`` line ends), making the parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (Linux ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def open_up(root: Path) -> None:
    """Make ``root`` and everything below it readable by any user (folders 0o755, files
    0o644): what a container's unprivileged user needs to read a task made by the tests."""
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            os.chmod(os.path.join(dirpath, d), 0o755)
        for f in files:
            os.chmod(os.path.join(dirpath, f), 0o644)
    os.chmod(root, 0o755)


def deep_tree(root: Path, depth: int, name: str = "d") -> Path:
    """``depth`` nested directories ``name`` under ``root``, made through relative paths (any
    depth: past ``PATH_MAX`` and Python's recursion limit), with a file ``leaf`` at the bottom;
    returns ``root``. Remove it with :func:`openmle._trees.remove_tree`."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("leaf", os.O_CREAT | os.O_WRONLY, dir_fd=fd), "w") as f:
            f.write("x")
    finally:
        os.close(fd)
    return root


def locked_tree(tmp: Path) -> tuple[Path, Path]:
    """``(root, outside)``: a tree ``tmp/run`` a remover must delete without following it:
    ``a/b/f`` with ``f`` unreadable, ``a/b`` unsearchable and ``a`` read-only, and symlinks
    ``link`` (to ``outside``, ``tmp/outside.txt`` holding ``keep``) and ``dirlink`` (to
    ``tmp``). ``root`` itself stays writable."""
    outside = tmp / "outside.txt"
    outside.write_text("keep")
    root = tmp / "run"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    (root / "link").symlink_to(outside)
    (root / "dirlink").symlink_to(tmp)
    os.chmod(root / "a" / "b" / "f", 0)
    os.chmod(root / "a" / "b", 0)
    os.chmod(root / "a", 0o500)
    return root, outside


def public_private(view: Path, sample: str, answer_file: str, answers: str) -> tuple[Path, Path]:
    """``(view/public, view/private)``, made (with their parents), holding the text
    ``sample`` as ``public/sample_submission.csv`` and ``answers`` as ``private/answer_file``."""
    pub, priv = view / "public", view / "private"
    pub.mkdir(parents=True)
    priv.mkdir(parents=True)
    (pub / "sample_submission.csv").write_text(sample)
    (priv / answer_file).write_text(answers)
    return pub, priv
