"""Signed scores and task metadata coercion.

A *signed* score is the raw metric turned so that larger is always better: ``s = score`` for a
higher-is-better metric and ``s = -score`` otherwise. Every bound in :mod:`openmle.rewards` lives
in signed space.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias, overload

import numpy as np
import numpy.typing as npt

from openmle._types import TaskMeta
from openmle._validation import fail
from openmle.errors import InvalidArgumentType

__all__ = ["MetaLike", "as_meta", "finite_signed", "signed_score"]

MetaLike: TypeAlias = TaskMeta | Mapping[str, Any]
"""A :class:`openmle.TaskMeta` or a mapping with its keys (see ``TaskMeta.from_mapping``)."""

FloatArray: TypeAlias = npt.NDArray[np.float64]


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
        InvalidArgumentType: ``higher_is_better`` is not a bool, or ``score`` is not numeric.
    """
    if not isinstance(higher_is_better, bool | np.bool_):
        raise InvalidArgumentType(
            f"Expected bool but got higher_is_better={higher_is_better!r} "
            f"(type={type(higher_is_better).__name__})"
        )
    if isinstance(score, bool):
        raise fail("a number or an array of numbers", "score", score)
    if isinstance(score, int | float | np.floating | np.integer):
        v = float(score)
        return v if higher_is_better else -v
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


def finite_signed(values: Iterable[object] | None, higher_is_better: bool) -> list[float]:
    """Signed versions of the finite numbers in ``values``; None, NaN and infinities are dropped."""
    out: list[float] = []
    for value in values or ():
        v = _finite_float(value)
        if v is not None:
            out.append(v if higher_is_better else -v)
    return out
