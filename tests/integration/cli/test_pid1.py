"""``openmle`` as PID 1 of a PID namespace (a container's entry point without ``--init``):
orphans are reaped, signals reach the command, its exit status comes out.

Each test starts the real command line with ``unshare --pid --fork --mount-proc`` (skipped
where the kernel or the user refuses a PID namespace) and looks at the namespace's PID 1 from
this side, by its host pid (``/proc/PID/task/*/children``, ``/proc/PID/stat``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import openmle

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_ORPHANING_MODEL = '''
"""A model factory that leaves 3 orphans (background jobs of a shell that exits at once),
waits until they have exited, then a model that answers nothing: the search waits."""
import os, subprocess, time
from pathlib import Path

import anyio


class Waiting:
    async def complete(self, request):
        await anyio.sleep(600)
        raise AssertionError("unreachable")


def make():
    pids = subprocess.run(
        ["sh", "-c", "for i in 1 2 3; do sleep 0.2 & echo $!; done"],
        check=True, capture_output=True, text=True,
    ).stdout.split()
    for pid in pids:  # /proc is the namespace's (--mount-proc): its pids
        while Path(f"/proc/{pid}/stat").exists():
            if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
                break
            time.sleep(0.01)
    Path(os.environ["ORPHANS_GONE"]).write_text(" ".join(pids))
    return Waiting()
'''


def _children(pid: int) -> list[int]:
    """The live and zombie children of host process ``pid`` (none once it has exited)."""
    out: list[int] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            out += [int(p) for p in (task / "children").read_text().split()]
    except OSError:
        return []
    return out


def _state(pid: int) -> str:
    """``R``, ``S``, ``Z``, ... of host process ``pid`` (``-`` once it is gone)."""
    try:
        return _stat(pid)[0]
    except OSError:
        return "-"


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command name: state, ppid, pgrp, session,
    tty_nr, tpgid (the terminal's foreground group), ..."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def _until(what: Callable[[], bool], seconds: float) -> bool:
    """``what()`` became true within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not what():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture(scope="module")
def pid_namespaces() -> None:
    """Skip unless ``unshare --pid --fork --mount-proc`` works and /proc lists children."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        pytest.skip("needs Linux and unshare(1)")
    ok = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, check=False
    )
    if ok.returncode != 0:
        pytest.skip(f"unshare --pid refused here: {ok.stderr.decode().strip()}")
    if not Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").exists():
        pytest.skip("the kernel does not list /proc/PID/task/TID/children")


_DEFAULT_SIGHUP = (
    "import os, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)
"""Runs its arguments with SIGHUP at its default: a test run under nohup (or by a CI runner
that ignores SIGHUP) would pass the ignored disposition down to the command."""

_AS_PID1 = (
    *(sys.executable, "-c", _DEFAULT_SIGHUP),
    *("unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-m", "openmle"),
)


class Namespace:
    """``python -m openmle ARGS`` as PID 1 of a new PID namespace."""

    def __init__(self, tmp: Path, args: list[str], env: dict[str, str]) -> None:
        self.err = tmp / f"stderr-{time.monotonic_ns()}.txt"
        full = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1]), **env}
        with self.err.open("wb") as err:
            self.unshare = subprocess.Popen(
                [*_AS_PID1, *args],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err, env=full,
            )  # fmt: skip
        started = _until(lambda: bool(_children(self.unshare.pid)), 30)
        assert started, f"no namespace: {self.unshare.wait(timeout=30)} {self.err.read_text()}"
        (self.init,) = _children(self.unshare.pid)
        """The host pid of the namespace's PID 1."""

    def zombies(self) -> list[int]:
        """The zombie children of the namespace's PID 1."""
        return [p for p in _children(self.init) if _state(p) == "Z"]

    def command(self) -> int:
        """The host pid of the process that runs the command: PID 1's one live child."""
        kids = _children(self.init)
        live = [p for p in kids if _state(p) not in {"Z", "-"}]
        assert len(live) == 1, f"PID 1 ({self.init}) runs no command of its own: {kids}"
        return live[0]

    def wait(self, timeout: float = 60) -> int:
        """The exit status of the namespace's PID 1 (``unshare`` passes it on)."""
        return self.unshare.wait(timeout=timeout)

    def close(self) -> None:
        """SIGKILL the namespace's PID 1 (and so everything in it) if it still runs."""
        if self.unshare.poll() is None:
            if _state(self.init) not in {"-", "Z"}:
                os.kill(self.init, signal.SIGKILL)
            self.unshare.wait(timeout=60)


@pytest.fixture
def namespace(pid_namespaces: None, tmp_path: Path) -> Iterator[Callable[..., Namespace]]:
    """Start ``python -m openmle ARGS`` as PID 1 of a PID namespace; closed at the end."""
    started: list[Namespace] = []

    def start(*args: str, **env: str) -> Namespace:
        started.append(Namespace(tmp_path, list(args), env))
        return started[-1]

    yield start
    for ns in started:
        ns.close()


def _waiting_search(tmp_path: Path, namespace: Callable[..., Namespace], **env: str) -> Namespace:
    """A search whose model factory left 3 orphans that have exited, now waiting for its model."""
    app = tmp_path / "app"
    app.mkdir(parents=True)
    (app / "orphaning_model.py").write_text(_ORPHANING_MODEL)
    gone = tmp_path / "orphans-gone"
    ns = namespace(
        "search", "--task", "tabular-binary", "--model", "orphaning_model:make", "--app-dir",
        str(app), "--steps", "1", "--workers", "1", "--out", str(tmp_path / "run"),
        ORPHANS_GONE=str(gone), **env,
    )  # fmt: skip
    _until(lambda: gone.exists() or ns.unshare.poll() is not None, 120)
    assert gone.exists(), ns.err.read_text()
    return ns


def test_pid1_reaps_the_orphans_and_passes_sigterm_on(
    tmp_path: Path, namespace: Callable[..., Namespace]
) -> None:
    """The orphans of the command (re-parented to PID 1) were zombies until the namespace
    ended, run after run (3 here; the pod's pids.max the limit); now PID 1 reaps them. SIGTERM
    to PID 1 reaches the command, which stops as on SIGTERM (130), and 130 is PID 1's status."""
    ns = _waiting_search(tmp_path, namespace)
    assert _until(lambda: not ns.zombies(), 10), f"zombies of PID 1: {ns.zombies()}"
    assert _children(ns.init) == [ns.command()]
    cmdline = Path(f"/proc/{ns.init}/cmdline").read_bytes().split(b"\0")
    assert cmdline[1:3] == [b"-I", b"-S"] and cmdline[3].endswith(b"_pid1.py"), cmdline
    os.kill(ns.init, signal.SIGTERM)
    assert ns.wait() == 130
    assert "openmle: interrupted (SIGTERM)" in ns.err.read_text()


def test_the_off_switch_runs_the_command_as_pid1_itself(
    tmp_path: Path, namespace: Callable[..., Namespace]
) -> None:
    """OPENMLE_NO_INIT=1 (a container with its own init): the command is PID 1 itself, so
    nothing reaps its orphans (the behaviour without the init); SIGTERM still works, handled by
    the command (it installs a handler, so the kernel delivers it to PID 1)."""
    ns = _waiting_search(tmp_path, namespace, OPENMLE_NO_INIT="1")
    assert _until(lambda: len(ns.zombies()) == 3, 10), ns.zombies()
    assert all(_state(p) == "Z" for p in _children(ns.init))  # no command process below
    os.kill(ns.init, signal.SIGTERM)
    assert ns.wait() == 130


def test_pid1_exits_with_the_commands_status(
    tmp_path: Path, namespace: Callable[..., Namespace]
) -> None:
    """A usage error's 2 comes out of PID 1; a command killed by signal N gives 128 + N, as a
    shell reports it (SIGKILL: 137)."""
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    done = subprocess.run(
        [*_AS_PID1, "search", "--workers", "0"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("openmle search: error: argument --workers"), done.stderr
    ns = _waiting_search(tmp_path / "killed", namespace)
    os.kill(ns.command(), signal.SIGKILL)
    assert ns.wait() == 128 + signal.SIGKILL


def test_the_status_comes_out_when_sigchld_was_inherited_ignored(pid_namespaces: None) -> None:
    """A PID 1 started with SIGCHLD ignored (dispositions survive ``exec``) had the kernel
    reap its child unasked, found no status and exited 1; it takes SIGCHLD back: 2 is 2."""
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    exec_ignoring = (
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
        "os.execv(sys.executable, [sys.executable, '-m', 'openmle', 'search', '--workers', '0'])"
    )
    done = subprocess.run(
        [*_AS_PID1[:-2], "-c", exec_ignoring],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr


def test_without_an_interpreter_to_execute_pid1_supervises_from_its_fork(
    pid_namespaces: None,
) -> None:
    """No ``sys.executable`` to run the small init with: the forked copy of the command line
    is PID 1's init instead, and passes the status on just the same."""
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    no_executable = (
        "import sys; sys.executable = ''; from openmle._cli import main; sys.exit(main())"
    )
    done = subprocess.run(
        [*_AS_PID1[:-2], "-c", no_executable, "search", "--workers", "0"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("openmle search: error: argument --workers"), done.stderr


def test_a_signal_the_command_does_not_handle_is_not_lost(
    tmp_path: Path, namespace: Callable[..., Namespace]
) -> None:
    """The kernel drops a signal PID 1 has no handler for: SIGHUP to a command that is PID 1
    did nothing. Now PID 1 passes it on, the command dies of it, and PID 1 exits 129."""
    ns = _waiting_search(tmp_path, namespace)
    os.kill(ns.init, signal.SIGHUP)
    assert ns.wait(timeout=10) == 128 + signal.SIGHUP


def test_ctrl_c_at_a_terminal_reaches_the_command_once(
    tmp_path: Path, pid_namespaces: None
) -> None:
    """``docker run -it``: the terminal sends Ctrl-C's SIGINT to its foreground group. The
    command has the terminal in a group of its own, so it is interrupted once (not also by PID
    1's forwarding, a second SIGINT that struck during its cleanup) and exits 130."""
    if shutil.which("setsid") is None:
        pytest.skip("needs setsid(1) to give the namespace a controlling terminal")
    app = tmp_path / "app"
    app.mkdir()
    (app / "orphaning_model.py").write_text(_ORPHANING_MODEL)
    gone = tmp_path / "orphans-gone"
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1]),
           "ORPHANS_GONE": str(gone)}  # fmt: skip
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen(
            ["setsid", "--wait", "--ctty", *_AS_PID1, "search", "--task", "tabular-binary",
             "--model", "orphaning_model:make", "--app-dir", str(app), "--steps", "1",
             "--out", str(tmp_path / "run")],
            stdin=slave, stdout=slave, stderr=slave, env=env,
        )  # fmt: skip
        os.close(slave)
        try:
            _until(lambda: gone.exists() or proc.poll() is not None, 120)
            if not gone.exists():
                proc.wait(timeout=60)
                pytest.fail(f"the search stopped ({proc.returncode}): {_drain(master)}")
            (init,) = _children(proc.pid)  # setsid execs unshare, whose child is PID 1
            command = [p for p in _children(init) if _state(p) != "Z"]
            assert len(command) == 1, _children(init)
            # The command's group, not PID 1's, is the terminal's foreground group.
            pgrp, tpgid = _stat(command[0])[2], _stat(command[0])[5]
            assert pgrp == tpgid != _stat(init)[2]
            os.write(master, b"\x03")
            assert proc.wait(timeout=60) == 130
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        out = _drain(master)
    finally:
        os.close(master)
    assert out.count("openmle: interrupted (Ctrl-C)") == 1, out


def _drain(fd: int) -> str:
    """What the terminal's other end holds to read (until its last writer has closed it)."""
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: every writer closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")
