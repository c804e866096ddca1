"""prepare.py's output comes back through the sandbox's output directory (``./prepared/``),
never as a packed file list in a submission; the stage moves plain files under public/ and
private/ only (a hostile prepare.py cannot write elsewhere on the host, smuggle a link, a
hidden or unprintable name, or an unbounded tree into the package)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from openmle import Split
from openmle.builder._prepare import MAX_DEPTH, StageHandle, prepare_program


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def _handle(tmp_path: Path) -> StageHandle:
    dest = tmp_path / "dest"
    dest.mkdir()
    return StageHandle(name="prepare", raw_dir=tmp_path, dest=dest)


def test_plain_files_are_moved_not_copied(tmp_path: Path) -> None:
    handle = _handle(tmp_path)
    assert handle.outputs == "prepared"
    out = _tree(
        tmp_path / "g" / "prepared",
        {"public/train.csv": b"a,b\n1,2\n", "private/x.csv": b"", "public/img/1.png": b"\x89"},
    )
    inode = (out / "public" / "train.csv").stat().st_ino
    report = handle.grade(out, Split.TEST)
    assert report.valid and report.score == 0.0
    assert (handle.dest / "public" / "train.csv").read_bytes() == b"a,b\n1,2\n"
    assert (handle.dest / "public" / "train.csv").stat().st_ino == inode
    assert (handle.dest / "public" / "img" / "1.png").is_file()
    assert handle.private_paths == () and handle.public_dir(Split.VALID) == tmp_path


def _with(root: Path, make: Callable[[Path], object]) -> None:
    _tree(root, {"public/a": b""})
    make(root / "public")


def _deep(root: Path) -> None:
    (root / "public" / "/".join(["d"] * (MAX_DEPTH + 1))).mkdir(parents=True)


SETUPS: list[tuple[str, Callable[[Path], object], str]] = [
    ("outside", lambda o: _tree(o, {"elsewhere/x.csv": b"x"}), "outside public/"),
    ("its own list", lambda o: _tree(o, {"submission.csv": b"kind,path,data\n"}), "outside"),
    ("link", lambda o: _with(o, lambda p: os.symlink("/etc/passwd", p / "b")),
     "link or special file"),
    ("fifo", lambda o: _with(o, lambda p: os.mkfifo(p / "f")), "link or special file"),
    ("hidden", lambda o: _tree(o, {"public/.bashrc": b""}), "not hidden"),
    ("control", lambda o: _tree(o, {"public/a\nb.csv": b""}), "printable"),
    ("long", lambda o: _tree(o, {"public/" + "n" * 200 + "/" + "m" * 250: b""}), "printable"),
    ("deep", _deep, "deeper than"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "setup", "reason"), SETUPS, ids=[s[0] for s in SETUPS])
def test_hostile_trees_are_refused_whole(
    tmp_path: Path, name: str, setup: Callable[[Path], object], reason: str
) -> None:
    handle = _handle(tmp_path)
    out = tmp_path / "g" / "prepared"
    (out / "public").mkdir(parents=True)
    (out / "public" / "train.csv").write_text("a\n1\n")
    setup(out)
    report = handle.grade(out, Split.TEST)
    assert not report.valid and reason in report.reason, report.reason
    assert not [p for p in handle.dest.rglob("*")]  # nothing moved


def test_no_output_directory_is_refused(tmp_path: Path) -> None:
    handle = _handle(tmp_path)
    assert "no ./prepared/" in handle.grade(tmp_path / "missing", Split.TEST).reason


def test_the_program_is_a_real_module_with_one_call(tmp_path: Path) -> None:
    """The job's code is the module's own source plus ``main(<source>)``; it writes only
    ``./prepared/`` (run here in a temporary working directory)."""
    import subprocess
    import sys

    source = (
        "def prepare(raw, public, private):\n"
        "    (public / 'train.csv').write_text((raw / 'r.csv').read_text())\n"
    )
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "r.csv").write_text("a\n1\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "main.py").write_text(prepare_program(source))
    env = {"DATA_DIR": str(raw), "PATH": os.environ.get("PATH", "")}
    subprocess.run([sys.executable, "main.py"], cwd=work, env=env, check=True, timeout=60)
    assert (work / "prepared" / "public" / "train.csv").read_text() == "a\n1\n"
    assert sorted(p.name for p in work.iterdir()) == ["main.py", "prepared"]
