"""The constant baseline: the task's sample submission, copied as the submission.

Run as a sandbox job's ``main.py`` (see :mod:`openmle.builder._baselines`); reads
``$DATA_DIR/sample_submission.csv`` and writes ``./submission.csv``.
"""

from __future__ import annotations

import os
import shutil


def main() -> None:
    """Copy the sample submission to ``submission.csv`` in the working directory."""
    shutil.copyfile(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), "submission.csv")


if __name__ == "__main__":
    main()
