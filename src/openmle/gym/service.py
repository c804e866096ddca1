"""Deprecated alias of :mod:`openmle.service` (the job service moved there); removed in openmle
0.2.0.

Importing this module, or any name from it, warns with a ``DeprecationWarning`` that names the
new import; the names are the very objects of :mod:`openmle.service`.
"""

from __future__ import annotations

import importlib
from typing import Any

from openmle._exports import warn_deprecated

__all__: list[str] = []  # nothing for `import *`: every name here is deprecated

_NEW = "openmle.service"


def _warn(what: str) -> None:
    warn_deprecated(
        f"openmle.gym.service{what} (moved to {_NEW}{what})",
        f"import it as `{'from ' + _NEW + ' import ' + what[1:] if what else 'import ' + _NEW}`",
        stacklevel=3,
    )


def __getattr__(name: str) -> Any:
    new = importlib.import_module(_NEW)
    if name in new.__all__:
        _warn(f".{name}")
        return getattr(new, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(importlib.import_module(_NEW).__all__)


_warn("")
