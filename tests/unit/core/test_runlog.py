"""The shared run classification, log cap and printed-score parser."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import attrs
import pytest

from openmle import Outcome, Split
from openmle._runlog import (
    LogCap,
    RefusedGrade,
    classify_run,
    parse_printed_score,
    take_submission,
)


@attrs.frozen
class _Grade:
    score: float | None
    valid: bool
    reason: str = ""


def test_logcap_keeps_head_and_tail() -> None:
    """Bounded memory: head and tail kept, the middle counted as dropped."""
    cap = LogCap(head=40, tail=40)
    for chunk in (b"a" * 30, b"b" * 30, b"c" * 40):
        cap.feed(chunk)
    assert cap.total == 100
    # the marker's room (29 bytes, sized for the total's digits) comes out of the tail
    assert cap.text() == "a" * 30 + "b" * 10 + "\n[... 49 bytes dropped ...]\n" + "c" * 11
    assert cap.dropped == 49
    assert len(cap.text().encode()) == 79
    small = LogCap(head=10, tail=10)
    small.feed(b"hello")
    assert small.text() == "hello" and small.dropped == 0


def test_logcap_text_fits_its_cap_marker_included() -> None:
    """The kit's own cap passes the kit's own check: LogCap(head=512 KiB, tail=512 KiB) fed
    8 MiB shows at most 1 MiB, marker line included (it showed 1,048,609 bytes)."""
    cap = LogCap(head=512 * 1024, tail=512 * 1024)
    line = b"x" * 1023 + b"\n"
    for _ in range(8 * 1024):
        cap.feed(line)
    text = cap.text()
    assert len(text.encode()) <= 1024 * 1024
    assert cap.dropped == cap.total - len(text.encode()) + len(
        "\n[... 7340065 bytes dropped ...]\n"
    )
    assert "[... 7340065 bytes dropped ...]" in text and text.endswith("x\n")


@pytest.mark.parametrize("data", [b"\xff" * 150, "é".encode() * 75, b"ab\xe2\x82" * 40])
def test_logcap_invalid_utf8_never_grows_past_the_cap(data: bytes) -> None:
    """Each invalid byte becomes a 3-byte U+FFFD; the text still fits head + tail bytes, and
    what it does not show is counted."""
    cap = LogCap(head=64, tail=64)
    cap.feed(data)
    text = cap.text()
    assert len(text.encode()) <= 128
    assert 0 < cap.dropped < len(data)


def test_printed_score_last_finite_match() -> None:
    """The last printed validation score wins; non-finite gives None."""
    assert parse_printed_score("Final Validation Score: 0.5\nFinal Validation Score: 0.75") == 0.75
    assert parse_printed_score("Final Validation Score = -1e-3") == -0.001
    assert parse_printed_score("nothing here") is None


@pytest.mark.parametrize(
    ("kwargs", "outcome"),
    [
        ({"timed_out": True, "exit_code": -9}, Outcome.TIMEOUT),
        ({"oom": True, "exit_code": -9}, Outcome.OOM),
        ({"exit_code": 1}, Outcome.RUNTIME_ERROR),
        ({"exit_code": 0}, Outcome.MISSING_SUBMISSION),
        (
            {"exit_code": 0, "sub": True, "grade": _Grade(None, False, "3 rows, expected 5")},
            Outcome.INVALID_SUBMISSION,
        ),
        (
            {"exit_code": 0, "sub": True, "grade": _Grade(float("nan"), True)},
            Outcome.INVALID_SUBMISSION,
        ),
        ({"exit_code": 0, "sub": True, "grade": _Grade(0.9, True)}, Outcome.SUCCESS),
    ],
)
def test_classification_precedence(kwargs: dict[str, object], outcome: Outcome) -> None:
    """Each way a run ends maps to exactly one outcome; only SUCCESS carries a score."""
    res = classify_run(
        split=Split.VALID,
        exit_code=kwargs.get("exit_code"),  # type: ignore[arg-type]
        timed_out=bool(kwargs.get("timed_out")),
        oom=bool(kwargs.get("oom")),
        submission=Path("submission.csv") if kwargs.get("sub") else None,
        grade=kwargs.get("grade"),  # type: ignore[arg-type]
        logs="Traceback (most recent call last):\nValueError: bad 3\n",
    )
    assert res.outcome is outcome
    assert (res.score is not None) == (outcome is Outcome.SUCCESS)
    if outcome is Outcome.RUNTIME_ERROR:
        assert res.error_signature == "ValueError: bad <n>"
    if outcome is Outcome.INVALID_SUBMISSION and "rows" in res.detail:
        assert res.error_signature == "invalid_submission: <n> rows, expected <n>"


def test_take_submission_refuses_links(tmp_path: Path) -> None:
    """Symlinks and hard links (maybe to the answers) are never handed to the grader."""
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    answers = tmp_path / "answers.csv"
    answers.write_text("id,target\n0,1\n")
    assert take_submission(ws, out) == (None, None)
    os.symlink(answers, ws / "submission.csv")
    path, refused = take_submission(ws, out)
    assert path is None and refused is not None and "symlink" in refused.reason
    assert not refused.valid and refused.score is None
    (ws / "submission.csv").unlink()
    os.link(answers, ws / "submission.csv")
    path, refused = take_submission(ws, out)
    assert path is None and refused is not None and "hard link" in refused.reason
    (ws / "submission.csv").unlink()
    (ws / "submission.csv").write_text("id,target\n0,0\n")
    path, refused = take_submission(ws, out)
    assert refused is None and path == out / "submission.csv"
    assert path.read_text() == "id,target\n0,0\n"


def test_take_submission_does_not_block_on_a_fifo_swapped_in_after_its_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that outlived the run swaps a FIFO in after the ``lstat``: the grader's open
    blocked forever (no ``O_NONBLOCK``); it is refused as replaced, at once."""
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    decoy = tmp_path / "decoy.csv"
    decoy.write_text("id,target\n0,0\n")
    os.mkfifo(ws / "submission.csv")
    real_lstat = os.lstat

    def checked_then_swapped(p: str | os.PathLike[str]) -> os.stat_result:
        """What the ``lstat`` saw before the swap: a regular file."""
        return real_lstat(decoy if str(p).endswith("submission.csv") else p)

    monkeypatch.setattr(os, "lstat", checked_then_swapped)
    result: list[tuple[Path | None, RefusedGrade | None]] = []
    worker = threading.Thread(target=lambda: result.append(take_submission(ws, out)), daemon=True)
    worker.start()
    worker.join(timeout=10)
    if worker.is_alive():  # the old code: release the blocked open before failing
        os.close(os.open(ws / "submission.csv", os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=10)
        pytest.fail("take_submission blocked on a FIFO")
    path, refused = result[0]
    assert path is None and refused is not None and "replaced" in refused.reason
