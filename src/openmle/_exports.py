"""How a public package presents the names it re-exports from its private modules.

- :func:`publish`: the one place that sets ``__module__`` of re-exported classes and functions
  to the public package, so reprs, ``help()`` and the reference name the public path.
- :func:`deprecated_aliases`: a module ``__getattr__`` that still serves a name that left the
  public API, for one release, with a ``DeprecationWarning`` saying where it went.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any

__all__ = ["deprecated_aliases", "publish"]


def publish(namespace: dict[str, Any]) -> None:
    """Give every class and function named in ``namespace["__all__"]`` that is defined in a
    private submodule of the package (``namespace["__name__"]`` + ``"._"``) the package as its
    ``__module__`` (names from public submodules, such as ``openmle.errors``, keep theirs).
    """
    package = namespace["__name__"]
    for name in namespace["__all__"]:
        obj = namespace[name]
        if isinstance(obj, type | FunctionType) and obj.__module__.startswith(package + "._"):
            obj.__module__ = package


def deprecated_aliases(
    package: str, aliases: Mapping[str, tuple[str, str]], *, removed_in: str
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving ``aliases``: old public name ->
    (module, name) where it lives now, with a ``DeprecationWarning``.
    """

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = aliases[name]
        warnings.warn(
            f"{package}.{name} is no longer public and will be removed in {removed_in}; "
            f"it is an internal helper now ({module}.{attr})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), attr)

    return __getattr__
