"""``python -m openmle`` runs the command line."""

from __future__ import annotations

import sys

from openmle._cli import main

if __name__ == "__main__":
    sys.exit(main())
