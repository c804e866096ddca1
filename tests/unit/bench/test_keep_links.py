"""A bench keeps the submission its test grade graded: a link left at the kept path (in a bench
directory from elsewhere) is replaced, never copied through."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from attrs import define, field

from openmle import Split


@define
class _Inner:
    """A task that records what it was asked to grade."""

    grades_kept_copy: bool = False
    graded: list[Path] = field(factory=list)

    def grade(self, submission: Path, split: Split, **_: Any) -> None:
        self.graded.append(Path(submission))


@pytest.mark.parametrize("as_dir", [False, True], ids=["file", "output-dir"])
def test_a_link_at_the_kept_submission_is_replaced_not_written_through(
    tmp_path: Path, as_dir: bool
) -> None:
    from openmle.bench._runner import _KeepingTask

    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    keep = tmp_path / "bench" / "submissions" / "c" / "seed-0" / "submission.csv"
    keep.parent.mkdir(parents=True)
    keep.symlink_to(outside)
    work = tmp_path / "work"
    work.mkdir()
    if as_dir:
        src = work / "output"
        src.mkdir()
        (src / "submission.csv").write_text("id,y\n1,0\n")
    else:
        src = work / "submission.csv"
        src.write_text("id,y\n1,0\n")
    task = _KeepingTask(inner=_Inner(), ref="c@seed-0", keep=keep)  # type: ignore[arg-type]
    task.grade(src, Split.TEST)
    assert outside.read_text() == "precious\n"
    assert not keep.is_symlink() and keep.read_text() == "id,y\n1,0\n"


def test_a_linked_submissions_folder_is_refused_not_written_through(tmp_path: Path) -> None:
    """Another bench's kept submission stays untouched when this bench's ``submissions`` is a
    link to it (a bench directory from another key of a shared job service)."""
    from openmle.bench._runner import _KeepingTask

    theirs = tmp_path / "team-a" / "submissions" / "c" / "seed-0" / "submission.csv"
    theirs.parent.mkdir(parents=True)
    theirs.write_text("id,y\n1,0.5\n")
    home = tmp_path / "team-b"
    home.mkdir()
    (home / "submissions").symlink_to(tmp_path / "team-a" / "submissions")
    src = tmp_path / "submission.csv"
    src.write_text("id,y\n1,0.999\n")
    inner = _Inner()
    keep = home / "submissions" / "c" / "seed-0" / "submission.csv"
    task = _KeepingTask(inner=inner, ref="c@seed-0", keep=keep, home=home)  # type: ignore[arg-type]
    with pytest.raises(OSError, match="is a symbolic link"):
        task.grade(src, Split.TEST)
    assert theirs.read_text() == "id,y\n1,0.5\n" and inner.graded == []


def test_a_hard_link_at_the_kept_submission_keeps_its_old_content(tmp_path: Path) -> None:
    """A kept path that is a hard link to another bench's file is replaced, not written into."""
    from openmle.bench._runner import _KeepingTask

    theirs = tmp_path / "theirs.csv"
    theirs.write_text("id,y\n1,0.5\n")
    home = tmp_path / "bench"
    keep = home / "submissions" / "c" / "seed-0" / "submission.csv"
    keep.parent.mkdir(parents=True)
    keep.hardlink_to(theirs)
    src = tmp_path / "submission.csv"
    src.write_text("id,y\n1,0.999\n")
    task = _KeepingTask(inner=_Inner(), ref="c@seed-0", keep=keep, home=home)  # type: ignore[arg-type]
    task.grade(src, Split.TEST)
    assert theirs.read_text() == "id,y\n1,0.5\n" and keep.read_text() == "id,y\n1,0.999\n"
