"""The toy task's grader, run as a child process (``python -I _toy_grader.py ANSWERS SUBMISSION``).

It prints one JSON object ``{"score", "valid", "reason"}``: accuracy of the rounded ``target``
column against the answers. The submission is untrusted: the grader reads at most
:data:`MAX_SUBMISSION_BYTES` of it, refuses a line longer than :data:`MAX_LINE_BYTES`, and caps
its own address space at :data:`MAX_MEMORY_BYTES`, so a hostile file (a 60 MiB line of commas
took 88 s and 6.5 GB) is invalid at once. Standard library only.
"""

from __future__ import annotations

import csv
import io
import json
import math
import resource
import sys
from typing import NoReturn

MAX_SUBMISSION_BYTES = 16 * 1024 * 1024
"""The largest submission read (the toy tasks' have a few hundred rows)."""
MAX_LINE_BYTES = 64 * 1024
"""The longest line read (a toy row is ``id,target``)."""
MAX_MEMORY_BYTES = 1 << 30
"""The grader's own address-space cap."""


def say(score: float | None, reason: str) -> NoReturn:
    """Print the grade and exit 0."""
    grade = {"score": score, "valid": score is not None, "reason": reason}
    sys.stdout.write(json.dumps(grade) + "\n")
    sys.exit(0)


def rows(path: str) -> list[list[str]]:
    """The CSV rows of ``path``, bounded; raises ValueError past a bound."""
    with open(path, "rb") as f:
        data = f.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise ValueError(f"larger than {MAX_SUBMISSION_BYTES} bytes")
    if any(len(line) > MAX_LINE_BYTES for line in data.split(b"\n")):
        raise ValueError(f"a line longer than {MAX_LINE_BYTES} bytes")
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def main(argv: list[str]) -> None:
    """Grade ``argv[1]`` (the submission) against ``argv[0]`` (the answers)."""
    resource.setrlimit(resource.RLIMIT_AS, (MAX_MEMORY_BYTES, MAX_MEMORY_BYTES))
    answers_path, submission_path = argv
    try:
        ans, sub = rows(answers_path), rows(submission_path)
    except (OSError, ValueError, csv.Error) as exc:
        say(None, f"unreadable submission: {type(exc).__name__}: {exc}")
    if not sub or sub[0] != ["id", "target"]:
        say(None, f"expected columns ['id', 'target'], got {sub[0][:4] if sub else []}")
    if len(sub) != len(ans):
        say(None, f"expected {len(ans) - 1} rows, got {len(sub) - 1}")
    if any(len(r) != 2 for r in sub[1:]) or [r[0] for r in sub[1:]] != [r[0] for r in ans[1:]]:
        say(None, "ids differ from the sample submission")
    try:
        pred = [float(r[1]) for r in sub[1:]]
    except ValueError:
        say(None, "non-numeric target values")
    if not all(math.isfinite(p) for p in pred):
        say(None, "NaN or infinite predictions")
    hits = sum(round(p) == int(a[1]) for p, a in zip(pred, ans[1:], strict=True))
    say(hits / len(pred) if pred else None, "" if pred else "no rows")


if __name__ == "__main__":
    main(sys.argv[1:])
