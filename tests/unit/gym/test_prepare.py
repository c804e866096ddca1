"""Task.prepare: runs utils/prepare.py in a child process; failures leave data untouched."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from openmle.errors import TaskPackageError
from openmle.gym import load_task

from .conftest import PackageBuilder

_PREPARE = """
import os, random
from pathlib import Path
def prepare(raw, public, private):
    rows = (Path(raw) / "data.csv").read_text().splitlines()
    random.shuffle(rows)  # seeded by the runner: deterministic
    (Path(public) / "train.csv").write_text("\\n".join(rows) + "\\n")
    (Path(public) / "pid.txt").write_text(str(os.getpid()))
    (Path(private) / "test_answer.csv").write_text("id,y\\n")
"""


def test_prepare_runs_in_a_child_and_is_deterministic(make_package: PackageBuilder) -> None:
    """Two prepares give identical files, written by another process."""
    root = make_package()
    (root / "raw").mkdir()
    (root / "raw/data.csv").write_text("\n".join(f"{i},{i}" for i in range(50)) + "\n")
    (root / "utils").mkdir()
    (root / "utils/prepare.py").write_text(_PREPARE)
    task = load_task(root)
    task.prepare()
    first = (root / "data/public/train.csv").read_text()
    assert int((root / "data/public/pid.txt").read_text()) != os.getpid()
    task.prepare()
    assert (root / "data/public/train.csv").read_text() == first
    assert not (root / "data/public/test.csv").exists()  # the public dir was replaced whole
    assert sorted(p.name for p in (root / "data").iterdir()) == ["private", "public"]


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("none", "utils/prepare.py is missing"),
        ("noraw", "raw/ is missing"),
        ("raises", "ZeroDivisionError"),
        ("nofunc", "defines no function prepare"),
        ("empty", "wrote nothing"),
    ],
)
def test_prepare_failures_keep_the_data(
    make_package: PackageBuilder, setup: str, needle: str
) -> None:
    """Each failure is a TaskPackageError with the fix; data/public is left as it was."""
    root = make_package()
    before = (root / "data/public/train.csv").read_text()
    if setup != "noraw":
        (root / "raw").mkdir()
    bodies = {
        "noraw": "def prepare(raw, public, private):\n    pass\n",
        "raises": "def prepare(raw, public, private):\n    1 / 0\n",
        "nofunc": "x = 1\n",
        "empty": "def prepare(raw, public, private):\n    pass\n",
    }
    if setup in bodies:
        (root / "utils").mkdir()
        (root / "utils/prepare.py").write_text(bodies[setup])
    with pytest.raises(TaskPackageError, match=needle):
        load_task(root).prepare()
    assert (root / "data/public/train.csv").read_text() == before


def _with_prepare(make_package: PackageBuilder, body: str) -> Path:
    root = make_package()
    (root / "raw").mkdir()
    (root / "utils").mkdir()
    (root / "utils/prepare.py").write_text(body)
    return root


def test_prepare_sees_none_of_the_callers_environment(
    make_package: PackageBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package's prepare.py cannot read the caller's secrets (it got os.environ whole)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-caller")
    monkeypatch.setenv("LD_PRELOAD", "/nonexistent/evil.so")
    root = _with_prepare(
        make_package,
        "import json, os\nfrom pathlib import Path\n"
        "def prepare(raw, public, private):\n"
        "    (Path(public) / 'env.json').write_text(json.dumps(dict(os.environ)))\n",
    )
    load_task(root).prepare()
    env = json.loads((root / "data/public/env.json").read_text())
    assert "OPENAI_API_KEY" not in env
    assert "LD_PRELOAD" not in env
    assert env["PYTHONHASHSEED"] == "0"
    assert "sk-secret" not in json.dumps(env)


def test_a_daemon_forked_by_prepare_does_not_outlive_it(
    make_package: PackageBuilder, tmp_path: Path
) -> None:
    """A grandchild that detaches (double fork) and keeps stderr open is killed when prepare
    returns; the prepare does not wait for it (the old runner waited on its pipes until the
    grandchild's 300 s sleep ended, here past the 30 s timeout). The daemon writes its pid
    (its start time too, so a reused pid is not taken for it): the test looks at it alone, not
    at every prepare runner on the machine (another test's was seen there under load).
    """
    pid_file = tmp_path / "daemon.pid"
    root = _with_prepare(
        make_package,
        "import os, time\nfrom pathlib import Path\n"
        "def prepare(raw, public, private):\n"
        "    if os.fork() == 0:\n"
        "        if os.fork() == 0:\n"
        "            stat = Path('/proc/self/stat').read_text()\n"
        "            start = stat[stat.rfind(')') + 2 :].split()[19]\n"
        f"            Path({str(pid_file)!r} + '.tmp').write_text(f'{{os.getpid()}} {{start}}')\n"
        f"            os.rename({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\n"
        "            time.sleep(300)\n"
        "        os._exit(0)\n"
        f"    while not Path({str(pid_file)!r}).exists():  # the daemon is up\n"
        "        time.sleep(0.01)\n"
        "    (Path(public) / 'ok.txt').write_text('x')\n",
    )
    load_task(root).prepare(timeout_s=30)
    pid, start = pid_file.read_text().split()
    for _ in range(50):
        if not _runs(int(pid), start):
            break
        time.sleep(0.1)
    assert not _runs(int(pid), start), f"prepare left its daemon {pid} running"


def _runs(pid: int, start: str) -> bool:
    """Whether process ``pid``, started at ``start`` (clock ticks), still runs (not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[0] != "Z" and fields[19] == start


def test_prepare_memory_limit_is_enforced_with_a_clear_error(make_package: PackageBuilder) -> None:
    """A prepare.py that allocates past memory_mb fails naming the limit; data unchanged."""
    root = _with_prepare(
        make_package,
        "def prepare(raw, public, private):\n    blob = bytearray(2 * 1024**3)\n",
    )
    before = (root / "data/public/train.csv").read_text()
    with pytest.raises(TaskPackageError, match="memory_mb=512"):
        load_task(root).prepare(memory_mb=512)
    assert (root / "data/public/train.csv").read_text() == before


def test_prepare_limits_are_checked() -> None:
    """A limit that is not a positive integer is an InvalidArgument naming it."""
    from openmle.errors import InvalidArgument
    from openmle.gym._prepare import run_prepare

    with pytest.raises(InvalidArgument, match="memory_mb"):
        run_prepare(Path("/nonexistent"), memory_mb=0)


def test_prepare_dies_with_its_caller(make_package: PackageBuilder, tmp_path: Path) -> None:
    """A caller killed with SIGKILL takes its prepare process along (the parent-death signal
    of the one confined child process; issue 25 item 1): nothing keeps running the package's
    code, or holds the secrets of the caller, after ``openmle task prepare`` is killed.
    """
    import signal
    import subprocess
    import sys

    pid_file = tmp_path / "prepare.pid"
    root = _with_prepare(
        make_package,
        "import os, time\nfrom pathlib import Path\n"
        "def prepare(raw, public, private):\n"
        f"    Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "    time.sleep(300)\n",
    )
    caller = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom openmle.gym import load_task\n"
            "load_task(sys.argv[1]).prepare(timeout_s=600)\n",
            str(root),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(600):
            if pid_file.is_file() and pid_file.read_text():
                break
            time.sleep(0.1)
        child = int(pid_file.read_text())
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        for _ in range(100):
            if not Path(f"/proc/{child}").exists() or _zombie(child):
                break
            time.sleep(0.1)
        alive = Path(f"/proc/{child}").exists() and not _zombie(child)
        if alive:
            os.kill(child, signal.SIGKILL)
        assert not alive, "the prepare process outlived its SIGKILLed caller"
    finally:
        caller.kill()
        caller.wait()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


_DEEP_PREPARE = """
import os
from pathlib import Path
def _deep(root, depth=1500):
    fd = os.open(root, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        sub = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = sub
    os.close(fd)
def prepare(raw, public, private):
    (Path(public) / "train.csv").write_text("id,y\\n1,2\\n")
    (Path(private) / "test_answer.csv").write_text("id,y\\n")
    _deep(".")  # its working directory
    os.mkdir(Path(public) / "nested")
    _deep(Path(public) / "nested")  # kept as data/public, thrown away by the next prepare
"""


@pytest.mark.usefixtures("deep_tmp_path")
def test_prepare_that_leaves_deep_trees_is_cleaned_up(make_package: PackageBuilder) -> None:
    """A prepare.py leaving trees 1,500 levels deep in its working directory (and in public/,
    thrown away by the next prepare) made ``Task.prepare`` raise ``RecursionError`` from the
    cleanup (``shutil.rmtree`` and ``TemporaryDirectory`` recurse); both prepares now succeed
    and leave only ``data/public`` and ``data/private``."""
    root = _with_prepare(make_package, _DEEP_PREPARE)
    task = load_task(root)
    task.prepare()
    task.prepare()
    assert sorted(p.name for p in (root / "data").iterdir()) == ["private", "public"]
    assert (root / "data/public/train.csv").is_file()
