"""The program the builder's metric check runs in gym's confined grading process.

Started by :func:`openmle.gym.run_child` as ``python -I -m openmle.builder._metric_program
CONFIG`` (a fixed environment, its own session, ``RLIMIT_AS``/``RLIMIT_CPU``, killed at its
deadline). It confines itself first (:func:`openmle.gym.confine_child`), reads the answers and
the baseline submissions and the model's ``metric.py`` source, then arms a guard (an audit
hook) before the metric's code runs: no network (any socket), no process (fork, exec, spawn,
``os.system``, signals), no foreign code loading (``ctypes``), no change to any file and no
reading outside the Python installation (where imports come from). Every refused event is
recorded, so a metric that swallows the ``PermissionError`` is caught all the same. It then
calls the metric class's ``evaluate(y_true, y_pred)`` twice on each submission and writes
``{"higher_is_better", "scores": {name: [first, second]}, "denied": [...]}`` or
``{"error": ...}`` as its result.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import sys
from pathlib import Path
from typing import Any

_DENIED_PREFIXES = (
    "socket.",
    "subprocess.",
    "os.system",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.fork",
    "os.forkpty",
    "os.kill",
    "os.killpg",
    "os.remove",
    "os.rename",
    "os.rmdir",
    "os.mkdir",
    "os.chmod",
    "os.chown",
    "os.link",
    "os.symlink",
    "os.truncate",
    "os.utime",
    "shutil.",
    "ctypes.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "webbrowser.",
    "pty.",
    "sys.addaudithook",
)
_MAX_DENIED = 20


def _roots() -> tuple[str, ...]:
    """Where imports may read from: the interpreter's prefixes and its import path."""
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    found.update(p for p in sys.path if p and os.path.isdir(p))
    return tuple(sorted(os.path.realpath(p) + os.sep for p in found))


def arm_guard(denied: list[str]) -> None:
    """Install the audit hook (for the rest of the process: it cannot be removed)."""
    roots = _roots()

    def refuse(what: str) -> None:
        if len(denied) < _MAX_DENIED:
            denied.append(what[:200])
        raise PermissionError(f"the builder's metric check refuses {what[:200]}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(_DENIED_PREFIXES):
            refuse(event)
        elif event in ("open", "os.listdir", "os.scandir", "glob.glob"):
            path = args[0] if args else None
            mode = args[1] if event == "open" and len(args) > 1 else "r"
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if not isinstance(path, str):
                refuse(f"{event} of a file descriptor")
                return
            real = os.path.realpath(path) + ("" if event == "open" else os.sep)
            flags = args[2] if event == "open" and len(args) > 2 else 0
            writes = isinstance(mode, str) and any(c in mode for c in "wax+")
            writes = writes or bool(isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR))
            if writes or not real.startswith(roots):
                refuse(f"{event} {path!r}")

    sys.addaudithook(hook)


def _metric_class(code: Any) -> Any:
    namespace: dict[str, Any] = {"__name__": "metric"}
    exec(code, namespace)
    found = [
        v
        for k, v in namespace.items()
        if k.endswith("Metrics") and isinstance(v, type) and v.__module__ == "metric"
    ]
    if len(found) != 1:
        raise ValueError(
            "metric.py must define exactly one class whose name ends in 'Metrics'; found "
            f"{sorted(v.__name__ for v in found)}"
        )
    return found[0]


def evaluate(config: dict[str, Any], denied: list[str]) -> dict[str, Any]:
    """Read the inputs, arm the guard, run the metric; the result (never raises)."""
    import pandas as pd

    source = Path(config["metric_source"]).read_text(encoding="utf-8")
    y_true = pd.read_csv(config["answers"])
    preds = {name: pd.read_csv(path) for name, path in sorted(config["submissions"].items())}
    try:  # before the guard: a SyntaxError's report reads the source file by its name
        code = compile(source, "metric.py", "exec")
    except (SyntaxError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "denied": denied}
    arm_guard(denied)
    try:
        metric = _metric_class(code)()
        hib = getattr(metric, "higher_is_better", None)
        scores: dict[str, list[float | None]] = {}
        for name, y_pred in preds.items():
            values: list[float | None] = []
            for _ in range(2):
                value = metric.evaluate(y_true.copy(), y_pred.copy())
                ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
                values.append(float(value) if ok and math.isfinite(float(value)) else None)
            scores[name] = values
    except BaseException as exc:  # the metric's own failure (SystemExit included) is data
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}", "denied": denied}
    hib_ok = isinstance(hib, bool) or type(hib).__name__ == "bool_"
    return {
        "higher_is_better": bool(hib) if hib_ok else None,
        "scores": scores,
        "denied": denied,
    }


def main(argv: list[str]) -> int:
    """Entry point: read the configuration, confine, evaluate, write the result (through a
    descriptor opened before the guard is armed: the guard refuses every file write).
    """
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    from openmle.gym import confine_child

    confine_child(config)
    fd = os.open(config["result"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    denied: list[str] = []
    try:
        result = evaluate(config, denied)
    except MemoryError:
        result = {"error": "the metric ran out of memory", "denied": denied}
    try:
        os.write(fd, json.dumps(result).encode("utf-8"))
    finally:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
