"""The NatureBench grading container's input archive (``openmle.bench.naturebench._container``)
is streamed (issue 25, item 5): chunks of at most 1 MiB plus headers, never the whole tree in
memory, and only directories and regular files."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from openmle.bench.naturebench._container import CHUNK, tar_stream


def test_an_output_tree_streams_in_bounded_chunks(tmp_path: Path) -> None:
    out = tmp_path / "output"
    (out / "inst1").mkdir(parents=True)
    big = os.urandom(3 * CHUNK + 123)
    (out / "inst1" / "pred.bin").write_bytes(big)
    (out / "submission.csv").write_text("id,label\n1,0\n")
    chunks = list(tar_stream(out))
    assert max(len(c) for c in chunks) <= CHUNK + 4 * tarfile.BLOCKSIZE
    with tarfile.open(fileobj=io.BytesIO(b"".join(chunks))) as tar:
        names = sorted(tar.getnames())
        assert names == [
            "nb", "nb/output", "nb/output/inst1", "nb/output/inst1/pred.bin",
            "nb/output/submission.csv",
        ]  # fmt: skip
        member = tar.extractfile("nb/output/inst1/pred.bin")
        assert member is not None and member.read() == big


def test_a_lone_submission_streams_as_submission_csv(tmp_path: Path) -> None:
    sub = tmp_path / "anything.csv"
    sub.write_text("id,label\n")
    with tarfile.open(fileobj=io.BytesIO(b"".join(tar_stream(sub)))) as tar:
        member = tar.extractfile("nb/output/submission.csv")
        assert member is not None and member.read() == b"id,label\n"


def test_links_are_never_archived(tmp_path: Path) -> None:
    out = tmp_path / "output"
    out.mkdir()
    (out / "x").symlink_to("/etc/passwd")
    with pytest.raises(OSError, match="link"):
        list(tar_stream(out))
