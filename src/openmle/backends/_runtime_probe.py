"""Run by :func:`openmle.backends._runtime.runtime_info` in the interpreter it asks about
(``python -I -c <this source>``): prints one JSON object with the interpreter's path and the
directories it reads from (prefixes, ``sys.path``, site-packages). Standard library only: the
interpreter may be another Python than openmle's.
"""

from __future__ import annotations

import json
import os
import site
import sys


def main() -> None:
    """Print ``{"exe": ..., "paths": [...]}`` on stdout."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(p for p in sys.path if p)
    paths.update(site.getsitepackages())
    exe = os.path.abspath(sys.executable)
    paths.add(os.path.dirname(exe))
    paths.add(os.path.dirname(os.path.dirname(os.path.realpath(exe))))
    sys.stdout.write(json.dumps({"exe": exe, "paths": sorted(paths)}) + "\n")


if __name__ == "__main__":
    main()
