"""The prepare stage's result channel, end to end through a LocalSandbox (issue 25, item 2).

prepare.py's files come back only through the sandbox's bounded copy of ``./prepared/``: a
prepare.py that writes a packed file list of its own (the old channel, a grader's submission)
creates no host file, and one that writes more entries than the output limits is refused
before anything reaches the package.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from openmle.backends import LocalSandbox
from openmle.builder._prepare import PrepareRun, StageResolver, run_prepare

pytestmark = [pytest.mark.integration]

HONEST = """
from pathlib import Path
def prepare(raw, public, private):
    (public / "train.csv").write_text((raw / "data.csv").read_text())
    (private / "test_answer.csv").write_text("id,y\\n1,2\\n")
"""

OWN_LIST = """
import base64, os
def prepare(raw, public, private):
    with open("submission.csv", "w") as f:
        f.write("kind,path,data\\n")
        for i in range(20000):
            f.write(f"file,public/f{i}.csv,{base64.b64encode(b'x').decode()}\\n")
    os._exit(0)  # before anything else could pack the real outputs
"""

MANY = """
def prepare(raw, public, private):
    for i in range(10_050):
        (public / f"f{i}.csv").write_text("x")
"""


def _prepare(tmp_path: Path, source: str) -> tuple[PrepareRun, Path]:
    raw, dest = tmp_path / "raw", tmp_path / "dest"
    raw.mkdir(exist_ok=True)
    (raw / "data.csv").write_text("a\n1\n")

    async def main() -> PrepareRun:
        resolver = StageResolver()
        sandbox = LocalSandbox(resolver=resolver, max_concurrency=1)
        try:
            return await run_prepare(sandbox, resolver, source, raw, dest, timeout_s=120)
        finally:
            await sandbox.aclose()

    return anyio.run(main), dest


def _files(dest: Path) -> list[Path]:
    return [p for p in dest.rglob("*") if p.is_file()] if dest.exists() else []


def test_prepared_files_come_back_through_the_output_directory(tmp_path: Path) -> None:
    run, dest = _prepare(tmp_path, HONEST)
    assert run.ok, run.error_text()
    assert (dest / "public" / "train.csv").read_text() == "a\n1\n"
    assert (dest / "private" / "test_answer.csv").is_file()


def test_a_packed_file_list_of_its_own_creates_no_host_file(tmp_path: Path) -> None:
    run, dest = _prepare(tmp_path, OWN_LIST)
    assert not run.ok
    assert _files(dest) == []


def test_too_many_prepared_entries_are_refused_whole(tmp_path: Path) -> None:
    run, dest = _prepare(tmp_path, MANY)
    assert not run.ok and "more than 10000" in run.detail, run.detail
    assert _files(dest) == []
