"""How a public package presents the names it re-exports from its private modules.

- :func:`publish` (a package's ``__init__``) and :func:`publish_one` (a name loaded lazily, or a
  class that must show its public path even when its private module is imported directly): the
  one way to set ``__module__`` of re-exported classes and functions to the public package, so
  reprs, ``help()`` and the reference name the public path.
- :func:`deprecated_aliases`: a module ``__getattr__`` that still serves a name that left the
  public API, for one release, with a ``DeprecationWarning`` saying where it went.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any, TypeVar

__all__ = ["deprecated_aliases", "publish", "publish_one"]

_T = TypeVar("_T")


def publish(namespace: dict[str, Any], *, private: tuple[str, ...] = ()) -> None:
    """Give every class and function named in ``namespace["__all__"]`` that is defined in a
    private submodule of the package (``namespace["__name__"]`` + ``"._"``, or one of the
    prefixes in ``private``) the package as its ``__module__`` (names from public submodules,
    such as ``openmle.errors``, keep theirs).
    """
    package = namespace["__name__"]
    for name in namespace["__all__"]:
        publish_one(namespace[name], package, private=private)


def publish_one(obj: _T, package: str, *, private: tuple[str, ...] = ()) -> _T:
    """Set ``obj.__module__`` to ``package`` when ``obj`` is a class or function (or an object
    with its own ``__module__``, such as a ``NewType``) defined under ``package + "._"`` or one
    of the prefixes in ``private``; returns ``obj``. The one place that rewrites ``__module__``:
    for packages that load names lazily (a module ``__getattr__``) and for classes whose
    repr must name the public path even when their private module is imported directly.
    """
    where = getattr(obj, "__module__", None)
    prefixes = (package + "._", *private)
    if not isinstance(where, str) or not where.startswith(prefixes):
        return obj
    if isinstance(obj, type | FunctionType) or "__module__" in getattr(obj, "__dict__", {}):
        obj.__module__ = package
    return obj


def deprecated_aliases(
    package: str,
    aliases: Mapping[str, tuple[str, str]],
    *,
    removed_in: str,
    reason: str = "it is an internal helper now ({module}.{attr})",
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving ``aliases``: old public name ->
    (module, name) where it lives now, with a ``DeprecationWarning`` (``reason`` is formatted
    with ``module`` and ``attr``).
    """

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = aliases[name]
        warnings.warn(
            f"{package}.{name} is no longer public and will be removed in {removed_in}; "
            + reason.format(module=module, attr=attr),
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), attr)

    return __getattr__
