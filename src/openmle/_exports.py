"""How a public package presents the names it re-exports from its private modules.

- :func:`publish` (a package's ``__init__``) and :func:`publish_one` (a name loaded lazily, or a
  class that must show its public path even when its private module is imported directly): the
  one way to set ``__module__`` of re-exported classes and functions to the public package, so
  reprs, ``help()`` and the reference name the public path.
- :func:`warn_deprecated`: the one deprecation mechanism. Every deprecated name, module path or
  call form warns through it, with a ``DeprecationWarning`` that says what to use instead and
  the release that removes it (:data:`REMOVED_IN`, also stated in the CHANGELOG).
- :func:`deprecated_aliases`: a module ``__getattr__`` that still serves a name that left the
  public API, for one release, warning through :func:`warn_deprecated`.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any, Final, TypeVar

__all__ = ["REMOVED_IN", "deprecated_aliases", "publish", "publish_one", "warn_deprecated"]

REMOVED_IN: Final = "0.2.0"
"""The release that removes everything deprecated now (the CHANGELOG's "Deprecated" section)."""

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


def warn_deprecated(what: str, instead: str, *, stacklevel: int = 2) -> None:
    """Warn that ``what`` is deprecated: a ``DeprecationWarning`` reading
    ``"{what} is deprecated and will be removed in openmle {REMOVED_IN}; {instead}"``.

    Args:
        what: the deprecated thing, as the caller wrote it (a name, a path, a call form).
        instead: what to write instead, in words (a full sentence part, e.g. "import it as
            `from openmle.train import X`").
        stacklevel: as for :func:`warnings.warn`, counted from the caller of this function
            (2: the warning points at the caller's caller).
    """
    warnings.warn(
        f"{what} is deprecated and will be removed in openmle {REMOVED_IN}; {instead}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


def deprecated_aliases(
    package: str,
    aliases: Mapping[str, tuple[str, str]],
    *,
    reason: str = "it is an internal helper now ({module}.{attr})",
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` serving ``aliases``: old public name ->
    (module, name) where it lives now, warning through :func:`warn_deprecated` (``reason``
    is formatted with ``module`` and ``attr``).
    """

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attr = aliases[name]
        warn_deprecated(
            f"{package}.{name} (no longer public)",
            reason.format(module=module, attr=attr),
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), attr)

    return __getattr__
