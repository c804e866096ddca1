"""``openmle._cli._pid1`` in this process: when it forks (only the ``openmle`` program as PID
1, unless switched off), the fallback when it cannot, and the exit status it passes on. The
real PID 1 runs are in ``tests/integration/cli/test_pid1.py``."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from openmle._cli import _pid1, main


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """``os.fork`` counts its calls and fails (no process to spare) instead of forking."""
    calls: list[int] = []

    def fork() -> int:
        calls.append(1)
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", fork)
    return calls


def test_not_pid1_changes_nothing(forks: list[int]) -> None:
    """Not PID 1: no fork, no signal handler, no mask changed."""
    handlers = [signal.getsignal(s) for s in _pid1.FORWARDED]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    _pid1.init_if_pid1()
    assert forks == []
    assert [signal.getsignal(s) for s in _pid1.FORWARDED] == handlers
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_the_off_switch_keeps_pid1_from_forking(
    value: str, forks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``OPENMLE_NO_INIT`` set to a true value: PID 1 runs the command itself."""
    monkeypatch.setattr(os, "getpid", lambda: 1)
    monkeypatch.setenv(_pid1.NO_INIT_ENV, value)
    _pid1.init_if_pid1()
    assert forks == []


def test_pid1_runs_the_command_itself_when_fork_fails(
    forks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pid limit already reached: the fork fails, the signal mask and the SIGCHLD handling
    are the command's again, and it runs (here: a usage error, exit 2) as without an init."""
    monkeypatch.setattr(os, "getpid", lambda: 1)
    monkeypatch.delenv(_pid1.NO_INIT_ENV, raising=False)
    monkeypatch.setattr(sys, "argv", ["openmle", "search", "--workers", "0"])
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # as a runtime may leave it
    try:
        with pytest.raises(SystemExit) as exited:
            main()
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGCHLD, previous)
    assert forks == [1] and exited.value.code == 2
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == mask


def test_an_in_process_caller_is_never_forked(
    forks: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``main(argv)`` (a test runner or a program that is PID 1 and calls the CLI) stays one
    process: only the ``openmle`` program itself (``main()``) may become an init."""
    monkeypatch.setattr(os, "getpid", lambda: 1)
    monkeypatch.delenv(_pid1.NO_INIT_ENV, raising=False)
    with pytest.raises(SystemExit):
        main(["search", "--workers", "0"])
    assert forks == []


@pytest.mark.parametrize(
    ("status", "code"),
    [(0, 0), (3 << 8, 3), (130 << 8, 130), (signal.SIGKILL, 137), (signal.SIGTERM, 143)],
)
def test_the_exit_status_is_what_a_shell_reports(status: int, code: int) -> None:
    """An exit code as it is; a death by signal N as 128 + N."""
    assert _pid1.exit_code(status) == code
