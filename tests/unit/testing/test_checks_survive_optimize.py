"""The conformance checks hold under ``python -O``, which strips ``assert`` statements."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src"

PROGRAM = """
import anyio
from openmle import ModelResponse, Usage
from openmle.testing import check_operator_model


class Broken:
    model = "broken"

    async def complete(self, request):
        return ModelResponse(text="print(1)", usage=Usage(prompt_tokens=1, completion_tokens=1),
                             model="broken", latency_s=-1.0)


try:
    anyio.run(check_operator_model, Broken())
except AssertionError as exc:
    print("caught:", exc)
else:
    print("passed")
"""


def test_check_operator_model_fails_under_python_O() -> None:
    """A model reporting a negative latency fails the check even with asserts stripped."""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-O", "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("caught: latency_s must be >= 0"), done.stdout
