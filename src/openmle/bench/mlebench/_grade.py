"""Grading and view building on the host side: one confined process each, results masked.

Both run :mod:`openmle.bench.mlebench.child` through :func:`openmle.gym.run_child` (the one
grading process: fixed environment, ``RLIMIT_AS``/``RLIMIT_CPU``, parent-death signal, its own
session, killed at the deadline or on cancellation). Nothing the child writes is trusted: the
result is checked, and every reason is masked (:func:`mask_reason`) before it reaches a model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from openmle.gym import ChildRun, GradeLimits, run_child

__all__ = [
    "CHILD",
    "build_view_confined",
    "check_format_confined",
    "grade_confined",
    "limit_reason",
    "mask_reason",
]

CHILD = "openmle.bench.mlebench.child"
"""The module the grading process runs."""

MAX_REASON = 300
"""Longest reason (characters) that reaches a model."""

_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_QUOTED = re.compile(r"(?<![A-Za-z0-9])'([^'\n]{0,200})'(?![A-Za-z0-9])|\"([^\"\n]{0,200})\"")
_BRACED = re.compile(r"[\[{(][^\]})\n]{40,}[\]})]")


def mask_reason(text: str, public_words: Iterable[str] = ()) -> str:
    """``text`` with what may come from the hidden answers masked, as the gym grader masks.

    Numbers (answer counts, ids, values) become ``<n>``; quoted strings become ``<v>`` unless
    they are ``public_words`` (the sample submission's column names, which are public); long
    bracketed listings become ``<...>``; only the first line is kept, at most
    :data:`MAX_REASON` characters.
    """
    allowed = set(public_words)

    def quoted(m: re.Match[str]) -> str:
        inner = m.group(1) if m.group(1) is not None else m.group(2)
        return m.group(0) if inner in allowed else "<v>"

    first = text.splitlines()[0][:2000] if text else ""
    first = re.sub("[\ue000-\ue0ff]", "", first)
    out = _QUOTED.sub(quoted, first)
    out = _BRACED.sub("<...>", out)
    # public words (column names such as f_00) keep their digits; every other number goes
    kept: list[str] = []

    def keep(m: re.Match[str]) -> str:
        kept.append(m.group(0))
        return chr(0xE000 + len(kept) - 1)

    words = sorted((w for w in allowed if any(ch.isdigit() for ch in w)), key=len, reverse=True)
    if words:
        out = re.sub("|".join(re.escape(w) for w in words[:250]), keep, out)
    out = _NUMBER.sub("<n>", out)
    out = re.sub("[\ue000-\ue0ff]", lambda m: kept[ord(m.group(0)) - 0xE000], out)
    return out[:MAX_REASON]


def limit_reason(run: ChildRun, limits: GradeLimits, what: str) -> str | None:
    """The reason a confined process ended at a limit, naming the limit; None otherwise."""
    if run.limit == "time":
        return f"{what} took longer than {limits.timeout_s:g} s (the time limit, timeout_s)"
    if run.limit == "cpu":
        cpu = limits.cpu_s if limits.cpu_s is not None else limits.timeout_s
        return f"{what} used more than {cpu:g} s of CPU (the CPU limit, cpu_s)"
    if run.limit == "memory":
        return f"{what} ran out of memory (the limit is {limits.memory_mb} MiB, memory_mb)"
    if run.limit == "killed":
        return (
            f"{what} was killed (the memory limit of {limits.memory_mb} MiB, memory_mb, or a "
            "cancellation)"
        )
    return None


def grade_confined(
    *,
    repo_root: Path,
    grade_fn: str,
    submission: Path,
    answers: Path,
    limits: GradeLimits,
    public_words: Iterable[str] = (),
    mlebench_round: bool = True,
) -> tuple[float | None, str, bool]:
    """Run ``grade_fn`` on ``submission`` in the confined grading process; with
    ``mlebench_round`` (a test grade) its value is rounded there as MLE-bench's grader rounds
    it (``round(score, 5)`` on the returned object: a NumPy score by NumPy's rule).

    Returns:
        ``(score, reason, broken)``: a finite score and ``""``, or None and a masked reason;
        ``broken`` is True when the task itself is at fault (the grader cannot be imported, the
        answers cannot be read).
    """
    run = run_child(
        {
            "mode": "grade",
            "repo_root": str(repo_root),
            "grade_fn": grade_fn,
            "submission": str(submission),
            "answers": str(answers),
            "mlebench_round": mlebench_round,
        },
        limits=limits,
        module=CHILD,
    )
    at_limit = limit_reason(run, limits, "grading")
    out: Mapping[str, Any] = run.result or {}
    if at_limit is not None and not out.get("reason"):
        return None, at_limit, False
    if run.result is None:
        return None, "the grading process died without a result", False
    if "error" in out:
        return None, f"the task is broken: {str(out['error'])[:500]}", True
    score = out.get("score")
    if isinstance(score, int | float) and not isinstance(score, bool) and math.isfinite(score):
        return float(score), "", False
    reason = out.get("reason")
    if out.get("limit") in {"size", "memory"} and isinstance(reason, str):
        return None, reason[:MAX_REASON], False
    text = reason if isinstance(reason, str) and reason else "no score"
    return None, mask_reason(text, public_words), False


def build_view_confined(
    *,
    competition: str,
    public: Path,
    out: Path,
    answers: str,
    sample: str,
    answer_header: list[str] | None,
    limits: GradeLimits,
) -> tuple[dict[str, Any] | None, str]:
    """Build the validation view in the confined process; ``(info, "")`` or ``(None, why)``."""
    run = run_child(
        {
            "mode": "view",
            "competition": competition,
            "public": str(public),
            "out": str(out),
            "answers": answers,
            "sample": sample,
            "answer_header": answer_header,
        },
        limits=limits,
        module=CHILD,
    )
    res: Mapping[str, Any] = run.result or {}
    if isinstance(res.get("view"), dict):
        return dict(res["view"]), ""
    if "error" in res:
        return None, str(res["error"])[:800]
    return None, limit_reason(run, limits, "building the validation view") or (
        "the process building the validation view died without a result"
    )


def check_format_confined(
    *, submission: Path, sample: Path, limits: GradeLimits
) -> tuple[bool, str]:
    """Check ``submission`` against the public sample submission in the confined process:
    ``(True, "")`` or ``(False, why)`` (no answers are read).
    """
    run = run_child(
        {"mode": "format", "submission": str(submission), "sample": str(sample)},
        limits=limits,
        module=CHILD,
    )
    res: Mapping[str, Any] = run.result or {}
    if res.get("format_ok") is True:
        return True, ""
    if "error" in res:
        return False, f"the task is broken: {str(res['error'])[:300]}"
    if isinstance(res.get("reason"), str):
        return False, mask_reason(str(res["reason"]))
    return False, limit_reason(run, limits, "checking the submission") or (
        "the grading process died without a result"
    )
