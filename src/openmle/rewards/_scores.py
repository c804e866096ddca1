"""Signed scores and task metadata coercion.

A *signed* score is the raw metric turned so that larger is always better: ``s = score`` for a
higher-is-better metric and ``s = -score`` otherwise. Every bound in :mod:`openmle.rewards` lives
in signed space.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeAlias, overload

import numpy as np
import numpy.typing as npt

from openmle._types import TaskMeta
from openmle._validation import fail
from openmle.errors import InvalidArgumentType

__all__ = [
    "MetaLike",
    "as_float_array",
    "as_meta",
    "check_number",
    "finite_signed",
    "optional_number",
    "signed_score",
]

MetaLike: TypeAlias = TaskMeta | Mapping[str, Any]
"""A :class:`openmle.TaskMeta` or a mapping with its keys (see ``TaskMeta.from_mapping``)."""

FloatArray: TypeAlias = npt.NDArray[np.float64]


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _not_numbers(name: str, value: object, expected: str) -> InvalidArgumentType:
    return InvalidArgumentType(
        f"Expected {expected} but got {name}={_short(value)} (type={type(value).__name__}); "
        "pass floats (math.nan for a missing score)"
    )


def as_float_array(value: object, name: str) -> FloatArray:
    """``value`` as a float64 array (a copy only where numpy needs one).

    Raises:
        InvalidArgumentType: a string, a mapping, or anything numpy cannot read as numbers;
            the message names ``name``.
    """
    if isinstance(value, str | bytes | Mapping):
        raise _not_numbers(name, value, "a sequence of numbers")
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _not_numbers(name, value, "a sequence of numbers") from None


def check_number(value: object, name: str) -> float:
    """``value`` as a float: an ``int``, ``float`` or numpy number, never a bool. NaN and
    infinities pass (callers decide what they mean).

    Raises:
        InvalidArgumentType: anything else, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _not_numbers(name, value, "a number")
    return float(value)


def optional_number(value: object, name: str) -> float | None:
    """None, or ``value`` as :func:`check_number` takes it (the message says None is fine)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _not_numbers(name, value, "a number or None")
    return float(value)


def as_meta(meta: MetaLike) -> TaskMeta:
    """Return ``meta`` as a :class:`TaskMeta` (mappings go through ``TaskMeta.from_mapping``)."""
    if isinstance(meta, TaskMeta):
        return meta
    if isinstance(meta, Mapping):
        return TaskMeta.from_mapping(meta)
    raise InvalidArgumentType(
        f"Expected a TaskMeta or a mapping but got meta={meta!r} (type={type(meta).__name__})"
    )


@overload
def signed_score(score: float, higher_is_better: bool) -> float: ...
@overload
def signed_score(score: FloatArray | Sequence[float], higher_is_better: bool) -> FloatArray: ...
@overload
def signed_score(score: npt.ArrayLike, higher_is_better: bool) -> float | FloatArray: ...
def signed_score(score: npt.ArrayLike, higher_is_better: bool) -> float | FloatArray:
    """Turn a raw score (or an array of them) so that larger is better.

    Args:
        score: raw metric value(s) in task units; NaN and infinities pass through (negated).
        higher_is_better: direction of the metric.

    Returns:
        ``score`` if ``higher_is_better`` else ``-score``; a float for a scalar input, a float64
        array otherwise.

    Raises:
        InvalidArgumentType: ``higher_is_better`` is not a bool.
        InvalidArgument: ``score`` is not numeric (None, a bool or a string included).
    """
    if not isinstance(higher_is_better, bool | np.bool_):
        raise InvalidArgumentType(
            f"Expected bool but got higher_is_better={higher_is_better!r} "
            f"(type={type(higher_is_better).__name__})"
        )
    if score is None or isinstance(score, bool):
        raise fail("a number or an array of numbers", "score", score)
    if isinstance(score, int | float | np.floating | np.integer):
        v = float(score)
        return v if higher_is_better else -v
    if isinstance(score, str | bytes | Mapping):
        raise fail("a number or an array of numbers", "score", score)
    try:
        arr = np.asarray(score, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail("a number or an array of numbers", "score", score) from None
    return arr if higher_is_better else -arr


def _finite_float(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float | np.floating | np.integer):
        v = float(value)
        return v if math.isfinite(v) else None
    return None


def finite_signed(
    values: Iterable[object] | None, higher_is_better: bool, *, name: str = "scores"
) -> list[float]:
    """Signed versions of the finite numbers in ``values``; None, NaN and infinities are dropped.

    Raises:
        InvalidArgumentType: ``values`` is not an iterable of numbers (a string, a number, a
            mapping) or holds something other than a number or None; the message names ``name``.
    """
    if values is None:
        return []
    if isinstance(values, str | bytes | Mapping) or not isinstance(values, Iterable):
        raise _not_numbers(name, values, "an iterable of numbers or None")
    out: list[float] = []
    for i, value in enumerate(values):
        if value is not None and not isinstance(value, numbers.Real):
            raise _not_numbers(f"{name}[{i}]", value, "a number or None")
        v = _finite_float(value)
        if v is not None:
            out.append(v if higher_is_better else -v)
    return out
