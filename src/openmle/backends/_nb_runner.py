"""The program a NatureBench grading container runs (a real module; standard library only).

:class:`~openmle.backends._docker_grade.ContainerGrader` runs this module's source with the
image's ``python3 -I -c``: it imports ``/nb/evaluation/evaluator.py``, calls its
``run_evaluation()`` (or ``main()``) with ``OUTPUT_DIR`` set, sends the evaluator's own printing
to stderr, and writes one line to stdout, :data:`MARK` followed by the result as JSON:
``{"raw": dict}``, ``{"error": text}`` or ``{"error": ..., "limit": "memory"}``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from typing import Any

MARK = "@@OPENMLE_NB_RESULT@@"
"""What precedes the result on the container's stdout (the last such line counts)."""
EVALUATOR = "/nb/evaluation/evaluator.py"


def _number(value: Any) -> Any:
    try:
        return float(value)
    except Exception:
        return str(value)[:200]


def evaluate() -> dict[str, Any]:
    """The evaluator's result, or why there is none (never raises)."""
    sys.path.insert(0, os.path.dirname(EVALUATOR))
    try:
        spec = importlib.util.spec_from_file_location("naturebench_case_evaluator", EVALUATOR)
        if spec is None or spec.loader is None:
            return {"error": "evaluator.py cannot be loaded"}
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        entry = getattr(module, "run_evaluation", None) or getattr(module, "main", None)
        if not callable(entry):
            return {"error": "evaluator.py defines neither run_evaluation() nor main()"}
        raw = entry()
    except MemoryError:
        return {"error": "the evaluator ran out of memory", "limit": "memory"}
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = (
            f" at {os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
            if tb is not None
            else ""
        )
        return {"error": f"the evaluator raised {type(exc).__name__}{where}"}
    if not isinstance(raw, dict):
        return {"error": f"the evaluator returned {type(raw).__name__}, not a dict"}
    return {"raw": raw}


def main() -> None:
    """Run the evaluator with stdout sent to stderr; print the marked result last."""
    real = sys.stdout
    sys.stdout = sys.stderr
    out = evaluate()
    real.write("\n" + MARK + json.dumps(out, default=_number) + "\n")
    real.flush()


if __name__ == "__main__":
    main()
