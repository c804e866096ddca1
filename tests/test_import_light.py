"""``import openmle`` (and each subpackage) must not import heavy optional dependencies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import openmle

HEAVY = {
    "torch",
    "ray",
    "docker",
    "openai",
    "starlette",
    "uvicorn",
    "transformers",
    "trl",
    "pandas",
    "pyarrow",
    "sklearn",
    "matplotlib",
    "scipy",
}


def test_import_is_light() -> None:
    """Importing the package and its subpackages pulls in none of the heavy dependencies."""
    code = (
        "import sys, json\n"
        "import openmle, openmle.rewards, openmle.search, openmle.operators, openmle.gym,"
        " openmle.backends, openmle.testing, openmle.errors, openmle.service, openmle.priors\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    )
    loaded = set(json.loads(out.stdout))
    assert not (loaded & HEAVY), f"heavy modules imported: {sorted(loaded & HEAVY)}"
