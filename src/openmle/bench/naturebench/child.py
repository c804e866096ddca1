"""The NatureBench evaluator runner: the one program that runs a case's ``evaluator.py``.

It runs the case's ``evaluation/evaluator.py``: ``run_evaluation()`` (or ``main()``) with
``OUTPUT_DIR`` set, as the harness does (:func:`run_case_evaluator`), in one of two places:

- **the local grading process**: ``python -I -m openmle.bench.naturebench.child CONFIG``, started
  by :func:`openmle.gym.run_child` (fixed environment, own session, killed at its deadline;
  forked by a reused grading server that has imported this module and :data:`PRELOAD`); it
  confines itself (:func:`openmle.gym.confine_child`: parent-death signal, ``RLIMIT_AS``,
  ``RLIMIT_CPU``) before it imports the case's evaluator, and writes one JSON object to
  ``config["result"]``;
- **a grading container** (:class:`~openmle.bench.naturebench.ContainerGrader`): this module's
  source run with the image's ``python -I -c SOURCE --container`` (:data:`CONTAINER_FLAG`); the
  evaluator is ``/nb/evaluation/evaluator.py`` (:data:`CONTAINER_EVALUATION`, mounted
  read-only) and ``OUTPUT_DIR`` is ``/nb/output`` (:data:`CONTAINER_OUTPUT_DIR`); the
  evaluator's own printing goes to stderr, and the last line on stdout is :data:`MARK`
  followed by the result as JSON (the last such line counts). The image has no openmle: this
  module's top level is standard library only, and its one openmle import (the confinement)
  is in the local path.

The result, in both places: ``{"raw": dict}`` (the evaluator's returned result, numbers as
floats, anything else as its text) or ``{"error": text}``, plus ``"limit": "memory"`` when it
ran out of memory. Nothing it writes is trusted by the host (:meth:`NatureBenchTask.evaluate`
checks it and scores it as the gap ``g``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

__all__ = [
    "CONTAINER_EVALUATION",
    "CONTAINER_FLAG",
    "CONTAINER_OUTPUT_DIR",
    "MARK",
    "PRELOAD",
    "evaluate",
    "main",
    "run_case_evaluator",
]

MARK = "@@OPENMLE_NB_RESULT@@"
"""What precedes the result on a grading container's stdout (the last such line counts)."""
CONTAINER_FLAG = "--container"
"""The argument that selects the container mode (``python -I -c SOURCE --container``)."""
CONTAINER_EVALUATION = "/nb/evaluation"
"""The case's ``evaluation/`` in a grading container (mounted read-only)."""
CONTAINER_OUTPUT_DIR = "/nb/output"
"""The program's output directory (``OUTPUT_DIR``) in a grading container (copied in)."""
PRELOAD = ("openmle.gym",)
"""Modules a reused grading server imports once before it forks the local grades' children
(see :func:`openmle.gym.run_child`): openmle only, never a case's ``evaluator.py`` (imported in
the child, after :func:`openmle.gym.confine_child`)."""


def _jsonable(value: Any) -> Any:
    """A number-like value (numpy scalars) as a float, anything else as its text."""
    try:
        return float(value)
    except Exception:
        return str(value)[:200]


def run_case_evaluator(config: dict[str, Any]) -> dict[str, Any]:
    """A NatureBench case's ``evaluator.py``: ``run_evaluation()`` (or ``main()``) with
    ``OUTPUT_DIR`` set; returns ``{"raw": dict}`` or ``{"error": text}``; a
    :class:`MemoryError` propagates (:func:`evaluate` turns it into the memory limit's result).

    The evaluator's own directory goes first on ``sys.path`` (it may import its helpers);
    its printing is never parsed (the result is its return value).
    """
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


def evaluate(config: dict[str, Any]) -> dict[str, Any]:
    """:func:`run_case_evaluator`'s result, a :class:`MemoryError` as
    ``{"error": ..., "limit": "memory"}``.
    """
    try:
        return run_case_evaluator(config)
    except MemoryError:
        return {"error": "the evaluator ran out of memory", "limit": "memory"}


def _container_main() -> int:
    """The container mode: the evaluator's printing goes to stderr; the marked result is
    printed last on stdout.
    """
    real = sys.stdout
    sys.stdout = sys.stderr
    found = evaluate(
        {
            "evaluator": CONTAINER_EVALUATION + "/evaluator.py",
            "output_dir": CONTAINER_OUTPUT_DIR,
        }
    )
    real.write("\n" + MARK + json.dumps(found, default=_jsonable) + "\n")
    real.flush()
    return 0


def main(argv: list[str]) -> int:
    """Entry point: ``CONFIG`` (the local grading process: read the configuration, confine,
    run the evaluator, write the result) or :data:`CONTAINER_FLAG` (a grading container).
    """
    if argv[1:] == [CONTAINER_FLAG]:
        return _container_main()
    config = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    from openmle.gym import confine_child

    confine_child(config)
    found = evaluate(config)
    Path(config["result"]).write_text(json.dumps(found), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
