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
from tests._files import alive, public_private

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


# ------------------------------------------------------------------------- the grading server

_PIDS_GRADE_PY = """
import os, resource

with open({log!r}, "a") as fh:  # the top level: runs wherever the module is imported
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    fh.write(f"import {{os.getpid()}} {{os.getppid()}} {{soft}}\\n")

def grade(submission, answers):
    with open({log!r}, "a") as fh:
        fh.write(f"grade {{os.getpid()}} {{os.getppid()}} {{os.getpgid(0)}} {{os.getcwd()}}\\n")
    return 1.0
"""


def _log_rows(log: Path, kind: str) -> list[list[str]]:
    return [r.split()[1:] for r in log.read_text().splitlines() if r.startswith(kind + " ")]


def test_grades_fork_from_one_reused_server_that_never_imports_grade_py(tmp_path: Path) -> None:
    """The MLE-bench child program is served: each grade is a process of its own session,
    forked by one reused server (single-threaded, so safe to fork) that has imported pandas
    but never the registry's grade.py, whose top level runs in each confined child only."""
    from openmle.gym import _grader

    log = tmp_path / "pids.txt"
    bench = make(tmp_path, _PIDS_GRADE_PY.format(log=str(log)))
    bench.grade_memory_mb = 3000
    _grader.close_grade_servers()
    for _ in range(2):
        g = bench.task("toy").grade(submission(tmp_path), Split.TEST)
        assert g.valid and g.score == 1.0, g
    grades, imports = _log_rows(log, "grade"), _log_rows(log, "import")
    assert len(grades) == 2 and len(imports) == 2  # imported once per grade, in the grade
    servers = {int(r[1]) for r in grades}
    assert len(servers) == 1 and os.getpid() not in servers  # one server, reused
    server = servers.pop()
    assert len({int(r[0]) for r in grades}) == 2  # a process per grade
    assert all(r[0] == r[2] for r in grades)  # each leads its own process group
    assert all(Path(r[3]).name == "home" for r in grades)  # the grade's own home
    assert [int(r[0]) for r in imports] == [int(r[0]) for r in grades]  # never the server
    assert all(int(r[2]) == 3000 * 1024 * 1024 for r in imports)  # confined before the import
    assert alive(server) and len(os.listdir(f"/proc/{server}/task")) == 1
    assert "pandas" in Path(f"/proc/{server}/maps").read_text()  # preloaded
    _grader.close_grade_servers()
    deadline = time.monotonic() + 10
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server)


@pytest.mark.parametrize("how", ["kill_parent", "garbage"])
def test_a_hostile_grade_cannot_break_the_next_grade(tmp_path: Path, how: str) -> None:
    """A grade.py that kills its grading server, or writes garbage to its output and to every
    descriptor it may have inherited, spoils at most its own grade (the killer's child may
    still write its result before the parent-death signal reaches it): the next one is
    graded, by a new server when the last one was killed."""
    from openmle.gym import _grader

    flag = tmp_path / "first"
    flag.write_text("")
    bench = make(
        tmp_path,
        f"""
        import os, signal

        def grade(submission, answers):
            if os.path.exists({str(flag)!r}):
                os.remove({str(flag)!r})
                if {how!r} == "kill_parent":
                    os.kill(os.getppid(), signal.SIGKILL)
                for fd in range(1, 64):
                    try:
                        os.write(fd, b'{{"exit": 0}}\\n{{"pid": 1}}\\ngarbage\\n')
                    except OSError:
                        pass
            return 1.0
        """,
    )
    bench.grade_timeout_s = 60.0
    _grader.close_grade_servers()
    start = time.monotonic()
    first = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    second = bench.task("toy").grade(submission(tmp_path), Split.TEST)
    assert time.monotonic() - start < 60
    assert second.valid and second.score == 1.0, second
    if how == "garbage":  # nothing reached the server's replies
        assert first.valid and first.score == 1.0, first
    _grader.close_grade_servers()


_HOST = """
import sys
from pathlib import Path
from openmle import Split
from openmle.bench import MLEBench

reg, data, valid, sub = map(Path, sys.argv[1:])
MLEBench.locate(reg, data, valid_dir=valid).task("toy").grade(sub, Split.TEST)
"""


def test_a_served_grade_dies_with_its_host(tmp_path: Path) -> None:
    """A host killed with SIGKILL takes its grading server along, and the server's grade."""
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "grade.pid"
    make(
        tmp_path,
        f"""
        import os, time

        def grade(submission, answers):
            open({str(pid_file)!r}, "w").write(f"{{os.getpid()}} {{os.getppid()}}")
            time.sleep(120)
            return 1.0
        """,
    )
    sub = submission(tmp_path)
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, *(str(tmp_path / n) for n in ("reg", "data", "valid")), sub],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while len(pid_file.read_text().split() if pid_file.exists() else []) < 2:
            assert time.monotonic() < deadline and host.poll() is None, "the grade never started"
            time.sleep(0.1)
        child, server = map(int, pid_file.read_text().split())
        assert server != host.pid and alive(child)
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=30)
        deadline = time.monotonic() + 10
        while (alive(child) or alive(server)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child) and not alive(server), "the grade outlived its host"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def test_idle_servers_are_bounded_in_all_least_recently_used_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Servers of gym's grading and of the MLE-bench program share one bound: the least
    recently used idle server is closed for the latest one."""
    from openmle.gym import GradeLimits, _grader, run_child

    bench = make(tmp_path, "def grade(submission, answers):\n    return 1.0\n")
    monkeypatch.setattr(_grader, "MAX_IDLE_SERVERS", 1)
    _grader.close_grade_servers()
    try:
        metric = tmp_path / "metric.py"
        metric.write_text("")
        run_child({"mode": "inspect", "metric_py": str(metric)}, limits=GradeLimits())
        assert [s.module for s in _grader._idle] == [None]
        gym_server = _grader._idle[0].proc
        assert bench.task("toy").grade(submission(tmp_path), Split.TEST).valid
        assert [s.module for s in _grader._idle] == ["openmle.bench.mlebench.child"]
        assert gym_server.poll() is not None  # closed, not left behind
    finally:
        _grader.close_grade_servers()
