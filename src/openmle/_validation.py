"""Argument checks that all produce one message shape.

Every message reads ``Expected <what> but got <name>=<value!r> (type=<type>)`` followed by a hint,
so users see the field, the expectation and the fix.

The attrs validator and converter factories used across the packages live here once:
:func:`int_at_least` (counts and limits), :func:`str_tuple` and :func:`finite_or_none`.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar, cast

from openmle.errors import InvalidArgument, InvalidArgumentType

T = TypeVar("T")


def _describe(name: str, value: object) -> str:
    return f"{name}={value!r} (type={type(value).__name__})"


def fail(expected: str, name: str, value: object, hint: str = "") -> InvalidArgument:
    """Build (not raise) an :class:`InvalidArgument` in the shared message shape."""
    msg = f"Expected {expected} but got {_describe(name, value)}"
    return InvalidArgument(f"{msg}. {hint}" if hint else msg)


def check_type(value: Any, types: type[T] | tuple[type, ...], name: str) -> T:
    """Return ``value`` if it is an instance of ``types`` else raise ``InvalidArgumentType``.

    ``bool`` is rejected where a number is expected unless ``bool`` itself is listed.
    """
    tup = types if isinstance(types, tuple) else (types,)
    if isinstance(value, tup) and (bool in tup or not isinstance(value, bool)):
        return cast(T, value)
    names = " or ".join(t.__name__ for t in tup)
    raise InvalidArgumentType(f"Expected {names} but got {_describe(name, value)}")


def check_finite(value: float, name: str) -> float:
    """Return ``float(value)`` if it is a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentType(f"Expected a finite number but got {_describe(name, value)}")
    if not math.isfinite(value):
        raise fail("a finite number", name, value)
    return float(value)


def check_positive(value: float, name: str, *, allow_zero: bool = False) -> float:
    """Return ``float(value)`` if it is finite and > 0 (or >= 0 with ``allow_zero``)."""
    v = check_finite(value, name)
    if v < 0 or (v == 0 and not allow_zero):
        raise fail("a number >= 0" if allow_zero else "a number > 0", name, value)
    return v


def check_probability(value: float, name: str) -> float:
    """Return ``float(value)`` if it lies in [0, 1]."""
    v = check_finite(value, name)
    if not 0.0 <= v <= 1.0:
        raise fail("a float in [0, 1]", name, value)
    return v


def check_choice(value: str, choices: Collection[str], name: str) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        raise fail(f"one of {sorted(choices)!r}", name, value)
    return value


def int_at_least(
    minimum: int, name: str, *, most: int | None = None, hint: str = ""
) -> Callable[[Any, Any, Any], None]:
    """An attrs validator: an integer (never a bool) ``>= minimum`` (and ``<= most`` when
    given); otherwise :class:`InvalidArgument` naming ``name`` (e.g. ``"SearchConfig.seed"``).
    """
    expected = f"an integer >= {minimum}" if most is None else f"an integer in [{minimum}, {most}]"

    def check(instance: Any, attribute: Any, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise fail(expected, name, value, hint)
        if most is not None and value > most:
            raise fail(expected, name, value, hint)

    return check


def str_tuple(value: Iterable[object]) -> tuple[str, ...]:
    """An attrs converter: any iterable of values as a tuple of strings."""
    if type(value) is tuple and set(map(type, value)) <= {str}:
        return value  # already a tuple of strings (the type check runs in C)
    return tuple(map(str, value))


def optional_finite(value: object, name: str) -> float | None:
    """``value`` for an attrs converter: None stays None, an ``int`` or ``float`` (never a bool)
    becomes a float, None when it is NaN or an infinity; anything else raises
    :class:`InvalidArgument` naming ``name`` (e.g. ``"RunResult.score"``).
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail("a number or None", name, value)
    v = float(value)
    return v if math.isfinite(v) else None


def finite_or_none(value: object) -> float | None:
    """An attrs converter: ``value`` as a float when it is a finite real number (``int``,
    ``float``, numpy scalars: any :class:`numbers.Real` but a bool); None for anything else
    (None, a bool, a string, NaN, an infinity).
    """
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    v = float(value)
    return v if math.isfinite(v) else None
