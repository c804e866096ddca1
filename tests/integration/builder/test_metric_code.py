"""The model's metric.py is checked in gym's confined grading process before a task uses it:
deterministic, finite, ordering the constant baseline below a better one, and touching
nothing but its inputs; hostile metrics (network, files, processes, endless loops, NaN,
randomness, a swallowed refusal) are rejected with the reason."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import pytest

from openmle.builder._metric import check_metric_code
from openmle.gym import GradeLimits

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.needs("pandas")]

_HEAD = """import numpy as np


class TaskMetrics:
    higher_is_better = {hib}

    def evaluate(self, y_true, y_pred):
"""
_ACCURACY = (
    "        return float((y_true['label'].to_numpy() == y_pred['label'].to_numpy()).mean())\n"
)


def _metric(body: str = _ACCURACY, hib: bool = True, prelude: str = "") -> str:
    return prelude + _HEAD.format(hib=hib) + body


def _files(tmp: Path) -> tuple[Path, dict[str, Path]]:
    labels = ["a", "b", "a", "b", "b", "a", "b", "b"]
    answers = tmp / "answers.csv"
    answers.write_text("id,label\n" + "".join(f"{k},{v}\n" for k, v in enumerate(labels)))
    constant = tmp / "constant.csv"
    constant.write_text("id,label\n" + "".join(f"{k},a\n" for k in range(len(labels))))
    return answers, {"constant": constant, "answers": answers}


def _check(tmp: Path, source: str, timeout_s: float = 60.0):  # type: ignore[no-untyped-def]
    answers, subs = _files(tmp)
    return check_metric_code(
        source,
        answers,
        subs,
        constant="constant",
        better="answers",
        limits=GradeLimits(timeout_s=timeout_s, memory_mb=2048),
    )


def test_a_sound_metric_is_accepted(tmp_path: Path) -> None:
    got = _check(tmp_path, _metric())
    assert got.ok, got.reason
    assert got.higher_is_better is True
    assert got.scores == {"constant": 0.375, "answers": 1.0}
    # Imports inside evaluate read the Python installation only: allowed.
    got = _check(tmp_path, _metric("        import statistics\n" + _ACCURACY))
    assert got.ok, got.reason


def test_a_metric_opening_a_connection_is_rejected(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def serve() -> None:
        with contextlib.suppress(OSError):
            accepted.append(listener.accept())

    thread = threading.Thread(target=serve)
    thread.start()
    body = f"        import socket\n        socket.create_connection(('127.0.0.1', {port}))\n"
    got = _check(tmp_path, _metric(body + _ACCURACY))
    thread.join()
    listener.close()
    assert not got.ok and "may not" in got.reason and "socket" in got.reason
    assert accepted == []


@pytest.mark.parametrize(
    ("body", "word"),
    [
        ("        open('/etc/hostname').read()\n", "open"),
        ("        import os\n        os.listdir('/tmp')\n", "listdir"),
        ("        import os\n        os.system('true')\n", "os.system"),
        ("        import subprocess\n        subprocess.run(['true'])\n", "subprocess"),
        ("        import ctypes\n        ctypes.CDLL(None)\n", "ctypes"),
    ],
    ids=["read", "listdir", "system", "subprocess", "ctypes"],
)
def test_a_metric_reaching_outside_is_rejected(tmp_path: Path, body: str, word: str) -> None:
    got = _check(tmp_path, _metric(body + _ACCURACY))
    assert not got.ok and word in got.reason, got.reason


def test_a_metric_writing_a_file_is_rejected_and_writes_nothing(tmp_path: Path) -> None:
    target = tmp_path / "leak.txt"
    got = _check(tmp_path, _metric(f"        open({str(target)!r}, 'w').write('x')\n" + _ACCURACY))
    assert not got.ok and "may not" in got.reason
    assert not target.exists()


def test_a_swallowed_refusal_is_still_rejected(tmp_path: Path) -> None:
    body = "        try:\n            open('/etc/hostname').read()\n        except OSError:\n"
    got = _check(tmp_path, _metric(body + "            pass\n" + _ACCURACY))
    assert not got.ok and "may not" in got.reason


def test_a_metric_that_never_ends_is_stopped(tmp_path: Path) -> None:
    got = _check(tmp_path, _metric("        while True:\n            pass\n"), timeout_s=3.0)
    assert not got.ok
    assert "within 3 s" in got.reason or "limit" in got.reason, got.reason


@pytest.mark.parametrize(
    ("body", "hib", "word"),
    [
        ("        return float('nan')\n", True, "finite"),
        ("        return 'high'\n", True, "finite"),
        ("        import random\n        return random.random()\n", True, "deterministic"),
        ("        return float(hash('salt') % 1000)\n", True, "deterministic"),
        ("        return 0.5\n", True, "does not order"),
        (_ACCURACY, False, "does not order"),
        ("        raise SystemExit(3)\n", True, "SystemExit"),
        ("        return 1 / 0\n", True, "ZeroDivisionError"),
    ],
    ids=["nan", "text", "random", "hash-seed", "flat", "wrong-direction", "exit", "raises"],
)
def test_an_unsound_metric_is_rejected_with_the_reason(
    tmp_path: Path, body: str, hib: bool, word: str
) -> None:
    got = _check(tmp_path, _metric(body, hib=hib))
    assert not got.ok and word in got.reason, got.reason


def test_a_metric_without_one_metrics_class_is_rejected(tmp_path: Path) -> None:
    got = _check(tmp_path, "x = 1\n")
    assert not got.ok and "exactly one class" in got.reason
    got = _check(tmp_path, _metric().replace("higher_is_better = True", "higher_is_better = 1"))
    assert not got.ok and "higher_is_better" in got.reason
