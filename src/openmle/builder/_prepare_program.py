"""The program the builder's prepare stage runs in a sandbox (a real module, run as ``main.py``).

It is standard library only and imports nothing of openmle: the sandbox runs its source as the
job's ``main.py`` followed by one call, ``main(<the model's prepare.py source>)`` (see
:func:`openmle.builder._prepare.prepare_program`). It compiles the model's source as
``prepare.py``, calls ``prepare(raw, public, private)`` with the job's read-only
``$DATA_DIR`` as ``raw`` and ``./prepared/public`` and ``./prepared/private`` (in its own
working directory) as the outputs, and writes nothing else: the sandbox hands
``./prepared/`` back as the task's output directory (the stage's ``outputs``), copied out of
the workspace bounded and never following a link, and the stage moves it into the package.
"""

from __future__ import annotations

import os
import pathlib

OUTPUTS = "prepared"
"""The directory, in the job's working directory, that the prepared files are written under."""


def main(source: str) -> None:
    """Run ``source``'s ``prepare(raw, public, private)`` into ``./prepared/``.

    Raises whatever ``prepare.py`` raises (the sandbox reports it as the program's failure,
    with its traceback in the logs).
    """
    namespace: dict[str, object] = {"__name__": "prepare"}
    exec(compile(source, "prepare.py", "exec"), namespace)
    prepare = namespace.get("prepare")
    if not callable(prepare):
        raise SystemExit("prepare.py defines no function prepare(raw, public, private)")
    out = pathlib.Path(OUTPUTS).absolute()
    (out / "public").mkdir(parents=True, exist_ok=True)
    (out / "private").mkdir(parents=True, exist_ok=True)
    prepare(pathlib.Path(os.environ["DATA_DIR"]), out / "public", out / "private")
