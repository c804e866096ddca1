"""The NatureBench evaluator process: ``python -I -m openmle.bench.naturebench.child CONFIG``.

Started by :func:`openmle.gym.run_child` (fixed environment, own session, killed at its
deadline); it confines itself (:func:`openmle.gym.confine_child`: parent-death signal,
``RLIMIT_AS``, ``RLIMIT_CPU``) before it imports the case's evaluator, then runs the case's
``evaluation/evaluator.py``: ``run_evaluation()`` (or ``main()``) with ``OUTPUT_DIR`` set, as
the harness does.

It writes one JSON object to ``config["result"]``: ``{"raw": dict}`` (the evaluator's returned
result, numbers as floats) or ``{"error": text}``, plus ``"limit": "memory"`` when it ran out
of memory. Nothing it writes is trusted by the host (:meth:`NatureBenchTask.evaluate` checks it
and scores it as the gap ``g``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = ["main", "run_case_evaluator"]


def _jsonable(value: Any) -> Any:
    """A number-like value (numpy scalars) as a float, anything else as its text."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)[:200]


def run_case_evaluator(config: dict[str, Any]) -> dict[str, Any]:
    """A NatureBench case's ``evaluator.py``: ``run_evaluation()`` (or ``main()``) with
    ``OUTPUT_DIR`` set; returns ``{"raw": dict}`` or ``{"error": text}``.

    The evaluator's own directory goes first on ``sys.path`` (it may import its helpers);
    its printing goes nowhere (the result is its return value, never parsed from stdout).
    """
    import os

    evaluator = Path(config["evaluator"])
    os.environ["OUTPUT_DIR"] = str(config["output_dir"])
    sys.path.insert(0, str(evaluator.parent))
    spec = importlib.util.spec_from_file_location("naturebench_case_evaluator", evaluator)
    if spec is None or spec.loader is None:
        return {"error": "evaluator.py cannot be loaded"}
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        entry = getattr(module, "run_evaluation", None) or getattr(module, "main", None)
        if not callable(entry):
            return {"error": "evaluator.py defines neither run_evaluation() nor main()"}
        raw = entry()
    except MemoryError:
        raise
    except BaseException as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" at {Path(last[0].filename).name}:{last[0].lineno}" if last else ""
        return {"error": f"the evaluator raised {type(exc).__name__}{where}"}
    if not isinstance(raw, dict):
        return {"error": f"the evaluator returned {type(raw).__name__}, not a dict"}
    return {"raw": json.loads(json.dumps(raw, default=_jsonable))}


def main(argv: list[str]) -> int:
    """Entry point: read the configuration, confine, run the evaluator, write the result."""
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    from openmle.gym import confine_child

    confine_child(config)
    try:
        found = run_case_evaluator(config)
    except MemoryError:
        found = {"error": "the evaluator ran out of memory", "limit": "memory"}
    Path(config["result"]).write_text(json.dumps(found), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
