"""Pieces every sandbox shares: capped log capture, printed-score parsing, outcome classification.

Keeping these in one place means the local, Docker, Ray and job-service sandboxes classify the
same run the same way.
"""

from __future__ import annotations

import errno
import math
import os
import re
import shutil
import stat
from pathlib import Path

from attrs import define, field, frozen

from openmle._readback import is_sparse
from openmle._signature import error_signature, normalise_message
from openmle._task_protocol import GradeLike
from openmle._types import Outcome, RunResult, Split

__all__ = ["LogCap", "RefusedGrade", "classify_run", "parse_printed_score", "take_submission"]

_PRINTED = re.compile(
    r"Final Validation Score\s*[:=]\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
)


_MARKER = "\n[... {} bytes dropped ...]\n"


@define(eq=False)
class LogCap:
    """Keeps the first ``head`` and last ``tail`` bytes of a stream and counts what it drops.

    Feed it chunks as they arrive; memory stays bounded whatever the program prints.
    :meth:`text` is at most ``head + tail`` bytes of UTF-8, the marker line included (its room
    is taken from the tail, then the head; a cap smaller than the marker, about 40 bytes, keeps
    the marker alone), and invalid UTF-8 replaced by U+FFFD never makes it longer.
    :attr:`dropped` counts every fed byte :meth:`text` does not show.
    """

    head: int = 64 * 1024
    tail: int = 64 * 1024
    _head: bytearray = field(factory=bytearray, init=False)
    _tail: bytearray = field(factory=bytearray, init=False)
    total: int = field(default=0, init=False)

    def feed(self, chunk: bytes) -> None:
        """Add a chunk of output."""
        self.total += len(chunk)
        room = self.head - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > self.tail:
                del self._tail[: len(self._tail) - self.tail]

    @property
    def dropped(self) -> int:
        """Bytes fed but not shown by :meth:`text`."""
        return self._render()[1]

    def text(self) -> str:
        """The kept output, with a marker line where bytes were dropped."""
        return self._render()[0]

    def _render(self) -> tuple[str, int]:
        limit = max(self.head, 0) + max(self.tail, 0)
        if len(self._head) + len(self._tail) == self.total:  # nothing dropped yet
            whole = bytes(self._head + self._tail)
            text = whole.decode("utf-8", errors="replace")
            if len(text.encode("utf-8")) <= limit:
                return text, 0
            head_raw, tail_raw = whole[: self.head], whole[self.head :]
        else:
            head_raw, tail_raw = bytes(self._head), bytes(self._tail)
        room = len(_MARKER.format(self.total))  # dropped <= total: its digits fit
        tail_budget = max(self.tail - room, 0)
        head_budget = max(self.head - max(room - max(self.tail, 0), 0), 0)
        head, head_used = _fit(head_raw, head_budget, from_end=False)
        tail, tail_used = _fit(tail_raw, tail_budget, from_end=True)
        dropped = self.total - head_used - tail_used
        return head + _MARKER.format(dropped) + tail, dropped


def _fit(raw: bytes, budget: int, *, from_end: bool) -> tuple[str, int]:
    """The longest start (or end) of ``raw`` whose decoded text is at most ``budget`` bytes of
    UTF-8: ``(text, bytes of raw used)``.
    """

    def piece(n: int) -> bytes:
        return raw[len(raw) - n :] if from_end else raw[:n]

    def size(n: int) -> int:
        return len(piece(n).decode("utf-8", errors="replace").encode("utf-8"))

    lo, hi = 0, min(len(raw), budget)
    if size(hi) > budget:  # replacement characters grew it: the longest piece that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if size(mid) <= budget else (lo, mid - 1)
    else:
        lo = hi
    return piece(lo).decode("utf-8", errors="replace"), lo


def parse_printed_score(logs: str) -> float | None:
    """The last ``Final Validation Score: x`` the program printed, if finite (else None).

    The released search took the last match, the released RL the first (sharp edge S5); we take
    the last, since programs print their final number at the end.
    """
    matches = _PRINTED.findall(logs)
    for raw in reversed(matches):
        try:
            v = float(raw)
        except ValueError:  # pragma: no cover - the regex only admits numbers
            continue
        return v if math.isfinite(v) else None
    return None


def classify_run(
    *,
    split: Split,
    exit_code: int | None,
    timed_out: bool,
    oom: bool,
    submission: Path | None,
    grade: GradeLike | None,
    logs: str,
    logs_dropped_bytes: int = 0,
    runtime_s: float = 0.0,
    queue_s: float = 0.0,
    artifacts: tuple[str, ...] = (),
    detail: str = "",
) -> RunResult:
    """Turn how a program ended into a :class:`RunResult`.

    Precedence: timeout, then OOM, then a non-zero exit (RUNTIME_ERROR), then a missing
    submission, then an invalid or non-finite grade (INVALID_SUBMISSION), else SUCCESS.

    Args:
        exit_code: the program's exit status (negative for a signal), None if it never exited.
        timed_out: the sandbox killed it at its wall-clock limit.
        oom: the kernel or engine killed it for memory.
        submission: path of ``submission.csv`` if the program wrote one, else None.
        grade: the grader's report for that submission (None when not graded). A valid grade
            with ``self_scored=True`` (a task scored by the program's own validation) takes
            the score the program printed (:func:`parse_printed_score`); none printed is an
            invalid submission.
    """
    printed = parse_printed_score(logs)

    def result(
        outcome: Outcome, signature: str | None, why: str, score: float | None = None
    ) -> RunResult:
        return RunResult(
            outcome=outcome,
            score=score,
            split=split,
            logs=logs,
            logs_dropped_bytes=logs_dropped_bytes,
            error_signature=signature,
            detail=detail or why,
            exit_code=exit_code,
            runtime_s=runtime_s,
            queue_s=queue_s,
            printed_score=printed,
            artifacts=artifacts,
        )

    if timed_out:
        return result(Outcome.TIMEOUT, "timeout", "killed at the wall-clock limit")
    if oom:
        return result(Outcome.OOM, "out_of_memory", "killed for exceeding its memory limit")
    if exit_code is None or exit_code != 0:
        sig = error_signature(logs, fallback=f"exit_code_{exit_code}")
        return result(Outcome.RUNTIME_ERROR, sig, f"exited with status {exit_code}")
    if submission is None:
        return result(
            Outcome.MISSING_SUBMISSION,
            "submission_missing",
            "exited 0 without writing ./submission.csv",
        )
    if grade is not None and grade.valid and getattr(grade, "self_scored", False) is True:
        # The task scores this split by the program's own held-out validation (the paper's
        # protocol): the grader checked the submission's format, the score is the printed one.
        if printed is None:
            return result(
                Outcome.INVALID_SUBMISSION,
                "invalid_submission: no printed validation score",
                "the program printed no 'Final Validation Score: <number>' line; this task is "
                "scored by the program's own held-out validation",
            )
        return result(Outcome.SUCCESS, None, "", score=printed)
    if grade is None or not grade.valid or grade.score is None or not math.isfinite(grade.score):
        reason = (grade.reason if grade is not None else "") or "not graded to a finite score"
        return result(
            Outcome.INVALID_SUBMISSION,
            f"invalid_submission: {error_signature_of_reason(reason)}",
            reason,
        )
    return result(Outcome.SUCCESS, None, "", score=grade.score)


def error_signature_of_reason(reason: str) -> str:
    """A grader reason normalised like an error message (numbers, paths, quotes stripped)."""
    return normalise_message(reason) or "unknown"


@frozen(kw_only=True)
class RefusedGrade:
    """The grade of a submission the sandbox refused to hand to the grader."""

    reason: str
    score: float | None = None
    valid: bool = False


def take_submission(workspace: Path, into: Path) -> tuple[Path | None, RefusedGrade | None]:
    """Copy ``workspace/submission.csv`` to ``into/submission.csv`` without following links.

    The grader runs on the host with the answers at hand, so a program must not be able to
    point it elsewhere: symbolic links, hard links and anything but a regular file are refused.

    Returns:
        ``(None, None)`` when there is no submission, ``(copy, None)`` for a regular file, and
        ``(None, refused)`` when the file must not be graded (``refused.reason`` says why).
    """
    src = workspace / "submission.csv"
    try:
        st = os.lstat(src)
    except FileNotFoundError:
        return None, None
    if not stat.S_ISREG(st.st_mode):
        return None, RefusedGrade(
            reason="submission.csv must be a regular file, not a symlink or directory"
        )
    if st.st_nlink != 1:
        return None, RefusedGrade(reason="submission.csv must not be a hard link")
    try:
        # O_NONBLOCK: a FIFO swapped in after the lstat (by a process that outlived the run)
        # must not block the grader; the fstat below then refuses anything but that file.
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None, RefusedGrade(reason="submission.csv is a symbolic link")
        return None, RefusedGrade(reason=f"submission.csv is unreadable: {exc.strerror}")
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
        os.close(fd)
        return None, RefusedGrade(reason="submission.csv was replaced while it was being read")
    if now.st_nlink != 1:
        os.close(fd)
        return None, RefusedGrade(reason="submission.csv must not be a hard link")
    if is_sparse(fd, now):
        os.close(fd)
        return None, RefusedGrade(
            reason=f"submission.csv is a sparse file ({now.st_blocks * 512} bytes allocated of "
            f"{now.st_size}); write every byte of it"
        )
    into.mkdir(parents=True, exist_ok=True)
    dst = into / "submission.csv"
    with os.fdopen(fd, "rb") as fin, dst.open("wb") as fout:
        shutil.copyfileobj(fin, fout, 1024 * 1024)
    return dst, None
