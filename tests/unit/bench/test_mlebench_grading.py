"""MLE-bench grading runs in gym's confined grading process (issue 25, items 1 and 10).

A tiny registry whose ``grade.py`` is hostile in one way per test: it looks for a host secret,
allocates past the memory limit, hangs with a child of its own, or quotes hidden answers in
its InvalidSubmissionError. Each would pass on a bare ``python -I`` child.
"""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest
from tests._files import public_private

from openmle import Split
from openmle.bench import MLEBench
from openmle.bench.mlebench import mask_reason

pytest.importorskip("yaml")
pytest.importorskip("pandas")

CONFIG = """\
id: toy
name: Toy
competition_type: simple
description: mlebench/competitions/toy/description.md
dataset:
  answers: toy/prepared/private/test.csv
  sample_submission: toy/prepared/public/sample_submission.csv
grader:
  name: accuracy
  grade_fn: mlebench.competitions.toy.grade:grade
preparer: mlebench.competitions.toy.prepare:prepare
"""


def make(tmp: Path, grade_py: str) -> MLEBench:
    reg, data = tmp / "reg", tmp / "data"
    comp = reg / "mlebench" / "competitions" / "toy"
    comp.mkdir(parents=True)
    (reg / "mlebench" / "__init__.py").write_text("")
    (reg / "mlebench" / "competitions" / "__init__.py").write_text("")
    (reg / "mlebench" / "grade_helpers.py").write_text(
        "class InvalidSubmissionError(Exception):\n    pass\n"
    )
    (comp / "__init__.py").write_text("")
    (comp / "config.yaml").write_text(CONFIG)
    (comp / "description.md").write_text("# Toy\n")
    (comp / "grade.py").write_text(textwrap.dedent(grade_py))
    (comp / "leaderboard.csv").write_text("teamId,score\n1,0.9\n2,0.5\n")
    prepared = data / "toy" / "prepared"
    public_private(prepared, "id,label\n1,0\n2,0\n", "test.csv", "id,label\n1,1\n2,0\n")
    return MLEBench.locate(reg, data, valid_dir=tmp / "valid")


def submission(tmp: Path, text: str = "id,label\n1,1\n2,0\n") -> Path:
    p = tmp / "work" / "submission.csv"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_host_secret_is_invisible_to_grade_py(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENMLE_TEST_HOST_SECRET", "hunter2")
    bench = make(
        tmp_path,
        """
        import os

        def grade(submission, answers):
            return 1.0 if "OPENMLE_TEST_HOST_SECRET" in os.environ else 0.5
        """,
    )
    g = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    assert g.valid and g.score == 0.5


def test_grade_past_the_memory_limit_is_an_invalid_submission_naming_it(tmp_path: Path) -> None:
    bench = make(
        tmp_path,
        """
        def grade(submission, answers):
            hog = bytearray(6 * 1024 ** 3)
            return float(len(hog))
        """,
    )
    bench.grade_memory_mb = 2048
    g = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    assert not g.valid and g.score is None
    assert "memory" in g.reason and "2048 MiB" in g.reason


def test_huge_submission_is_refused_at_the_size_limit(tmp_path: Path) -> None:
    bench = make(tmp_path, "def grade(submission, answers):\n    return 1.0\n")
    bench.grade_max_bytes = 1000
    big = submission(tmp_path, "id,label\n" + "".join(f"{i},0\n" for i in range(500)))
    g = bench.task("toy").grade(big, Split.TEST)
    assert not g.valid and "max_bytes" in g.reason and "1000 bytes" in g.reason


def test_hanging_grade_py_is_killed_with_its_children_at_the_deadline(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    bench = make(
        tmp_path,
        f"""
        import subprocess, sys, time

        def grade(submission, answers):
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
            open({str(pid_file)!r}, "w").write(str(p.pid))
            time.sleep(120)
            return 1.0
        """,
    )
    bench.grade_timeout_s = 8.0
    start = time.monotonic()
    g = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    assert not g.valid and "longer than 8 s" in g.reason
    assert time.monotonic() - start < 100
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    alive = True
    while alive and time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as fh:  # a zombie awaiting its reaper is dead
                alive = fh.read().split(")")[-1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            alive = False
        if alive:
            time.sleep(0.2)
    assert not alive


def test_invalid_submission_reasons_are_masked(tmp_path: Path) -> None:
    bench = make(
        tmp_path,
        """
        from mlebench.grade_helpers import InvalidSubmissionError

        def grade(submission, answers):
            raise InvalidSubmissionError(
                f"Expected {len(answers) * 617} rows but got 3; missing id 'hidden_4711' "
                f"in column 'label'\\nsecond line {list(answers['label'])}"
            )
        """,
    )
    g = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    assert not g.valid and g.reason.startswith("invalid submission:")
    assert "1234" not in g.reason and "hidden_4711" not in g.reason and "4711" not in g.reason
    assert "second line" not in g.reason and "'label'" in g.reason


def test_mask_reason() -> None:
    assert mask_reason("Expected 9914 rows, got 12") == "Expected <n> rows, got <n>"
    assert mask_reason("missing 'f_27' and 'x9'", ["f_27"]) == "missing 'f_27' and <v>"
    assert mask_reason("a\nb 3") == "a"
    long = "ids " + "[" + ", ".join(str(i) for i in range(100)) + "]"
    assert mask_reason(long) == "ids <...>"


def test_the_jobs_deadline_bounds_grading(tmp_path: Path) -> None:
    """A sandbox grades through gym's grade_in_thread with the job's timeout: a hanging
    grade.py is cut at the job's deadline, not the bench's longer grading limit."""
    import anyio

    from openmle.gym._grader import grade_in_thread

    bench = make(
        tmp_path,
        """
        import time

        def grade(submission, answers):
            time.sleep(300)
            return 1.0
        """,
    )
    assert bench.grade_timeout_s == 600.0
    task = bench.task("toy")
    start = time.monotonic()
    g = anyio.run(lambda: grade_in_thread(task, submission(tmp_path), Split.TEST, timeout_s=5))
    assert not g.valid and "longer than 5 s" in g.reason
    assert time.monotonic() - start < 120


@pytest.mark.parametrize("kind", ["fifo", "huge", "link"])
def test_grade_py_cannot_hang_or_flood_the_host_through_its_result_file(
    tmp_path: Path, kind: str
) -> None:
    """grade.py can find the result file's path; replacing it with a FIFO, a huge file or a
    link gives "no result", never a hung or flooded host."""
    bench = make(
        tmp_path,
        f"""
        import json, os, sys

        def grade(submission, answers):
            result = json.load(open(sys.argv[1]))["result"]
            if {kind!r} == "fifo":
                os.mkfifo(result)
            elif {kind!r} == "huge":
                with open(result, "w") as fh:
                    fh.write('{{"score": 1.0, "pad": "' + "x" * (8 * 1024 * 1024) + '"}}')
            else:
                os.symlink("/etc/hostname", result)
            os._exit(0)
        """,
    )
    bench.grade_timeout_s = 60.0
    start = time.monotonic()
    g = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    assert not g.valid and "without a result" in g.reason
    assert time.monotonic() - start < 60
