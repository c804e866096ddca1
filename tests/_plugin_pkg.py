"""A tiny third-party package, written into a directory, that plugs parts into openmle.

:func:`write_plugin_package` writes ``DIR/<name>/__init__.py`` and ``DIR/<name>-0.1.dist-info``
with an ``entry_points.txt`` registering a sandbox and an operator model by name, as ``pip
install`` of a real package would; put ``DIR`` on ``sys.path`` (or ``PYTHONPATH`` of a
subprocess) and ``importlib.metadata`` finds it. No network, nothing installed for real.

The sandbox grades nothing: it answers every job with a fixed score at once, and appends one
line per job (``<tag> <split>``) to the file named by ``$<NAME>_LOG``, so a test sees which
part served a run. The model delegates to :class:`openmle.backends.OfflineModel` (no
scikit-learn) and logs ``model``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_plugin_package"]

_SOURCE = '''\
"""A third-party openmle plugin written by tests/_plugin_pkg.py."""

import os

from openmle import Outcome, RunResult
from openmle.backends import OfflineModel


def _log(line):
    path = os.environ.get("{log_var}")
    if path:
        with open(path, "a") as f:
            f.write(line + "\\n")


class FixedSandbox:
    """Answers every job with score 0.5 (no program runs)."""

    def __init__(self, tag="sandbox", workdir=None):
        self.tag = tag
        self.workdir = workdir
        self.closed = False

    async def run(self, job):
        _log(f"{{self.tag}} {{job.split.value}}")
        return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)

    async def aclose(self):
        self.closed = True


class LoggedModel:
    def __init__(self):
        self.inner = OfflineModel(sklearn=False)

    async def complete(self, request):
        _log("model")
        return await self.inner.complete(request)


def make():
    return FixedSandbox("factory")


def make_entry(**options):
    return FixedSandbox("entry", **options)


def make_model():
    return LoggedModel()


def not_a_sandbox():
    return 42
'''

_ENTRY_POINTS = """\
[openmle.sandboxes]
{name}-box = {name}:make_entry

[openmle.models]
{name}-model = {name}:make_model
"""


def write_plugin_package(root: Path, name: str = "kitplugin") -> Path:
    """Write the package ``name`` under ``root`` (returned); ``$<NAME>_LOG`` names its log."""
    pkg = root / name
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(_SOURCE.format(log_var=f"{name.upper()}_LOG"))
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(_ENTRY_POINTS.format(name=name))
    return root
