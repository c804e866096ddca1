"""Static and adaptive reward bounds, in signed space (larger is better).

- :func:`static_bounds` reads the widest limits the task metadata allows.
- :func:`adaptive_bounds` derives a (best, worst) pair from observed scores: the best score seen
  and the k-th best (or the mean/median), pushed down by a share of the span, then clipped to the
  static limits.
- :func:`resolve_bounds` is the rule the released ``score2reward`` uses to combine an adaptive
  pair with the static limits (including the 1e6 range clamp).
- :func:`preferred_static_bounds` picks one source per side (leaderboard or theoretical) with an
  optional constant fallback pair: the released "static view".

All of them reproduce the released OpenRSI rules exactly (golden vectors ``static_bounds`` and
``adaptive_bound_pair``); departures live in :class:`openmle.rewards.RewardProfile`. One
exception: where the released arithmetic overflowed (finite scores near the largest float, whose
span or mean is beyond the float range), :func:`adaptive_bounds` computes at half scale and
saturates instead of losing the pair; :func:`released_adaptive_bounds` keeps the released
overflow for :meth:`openmle.rewards.RewardProfile.openrsi`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable
from typing import Literal, TypeAlias, get_args

import numpy as np

from openmle._validation import check_choice, fail
from openmle.errors import InvalidArgumentType
from openmle.rewards._scores import (
    MetaLike,
    as_meta,
    check_number,
    finite_signed,
    optional_number,
)

__all__ = [
    "BOUND_MODES",
    "MAX_RANGE",
    "BoundMode",
    "Bounds",
    "adaptive_bounds",
    "preferred_static_bounds",
    "released_adaptive_bounds",
    "resolve_bounds",
    "static_bounds",
]

Bounds: TypeAlias = tuple[float | None, float | None]
"""A signed ``(best, worst)`` pair; either side may be None when unknown."""

BoundMode: TypeAlias = Literal[
    "top1_top8", "top1_top16", "top1_all_mean", "top1_all_median", "theoretical"
]
BOUND_MODES: tuple[str, ...] = get_args(BoundMode)

MAX_RANGE = 1e6
"""Widest span (best - worst) a bound pair may have before it is narrowed."""


def _is_finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def static_bounds(meta: MetaLike) -> Bounds:
    """The widest static limits of a task, in signed space.

    best = max of the available best-side bounds (``theoretical_max``, ``leaderboard_max`` for a
    higher-is-better metric; ``-theoretical_min``, ``-leaderboard_min`` otherwise); worst = min of
    the worst-side bounds. Either side is None when no bound of that side is known. No range clamp
    is applied here (see :func:`resolve_bounds`).

    Args:
        meta: a :class:`openmle.TaskMeta` or a mapping with its keys.

    Returns:
        ``(best, worst)`` signed, each a float or None.
    """
    m = as_meta(meta)
    if m.higher_is_better:
        best_side = [m.theoretical_max, m.leaderboard_max]
        worst_side = [m.theoretical_min, m.leaderboard_min]
    else:
        best_side = [None if v is None else -v for v in (m.theoretical_min, m.leaderboard_min)]
        worst_side = [None if v is None else -v for v in (m.theoretical_max, m.leaderboard_max)]
    bests = [v for v in best_side if v is not None]
    worsts = [v for v in worst_side if v is not None]
    return (max(bests) if bests else None, min(worsts) if worsts else None)


def _apply_max_range(best: float, worst: float, fallback: Bounds | None) -> tuple[float, float]:
    if best - worst > MAX_RANGE:
        if fallback is not None:
            fb, fw = fallback
            if fb is not None and fw is not None and 0 < fb - fw <= MAX_RANGE:
                return fb, fw
        worst = best - MAX_RANGE
    return best, worst


def _pair(value: object, name: str) -> Bounds:
    """``value`` as a signed ``(best, worst)`` pair of numbers or None."""
    if isinstance(value, str | bytes) or not isinstance(value, tuple | list) or len(value) != 2:
        raise InvalidArgumentType(
            f"Expected a (best, worst) pair but got {name}={value!r} "
            f"(type={type(value).__name__}); pass two numbers (or None for an unknown side)"
        )
    return optional_number(value[0], f"{name}[0]"), optional_number(value[1], f"{name}[1]")


def resolve_bounds(meta: MetaLike, dynamic: Bounds | None = None) -> Bounds:
    """The bound pair the released ``score2reward`` maps with.

    A finite ``dynamic`` pair is clipped into the static limits (best down to the static best,
    worst up to the static worst); if it still has best > worst it is used. Otherwise the static
    pair is used when both sides are known. A span above :data:`MAX_RANGE` is narrowed (to the
    static pair when that fits, else by raising worst to ``best - MAX_RANGE``).

    Returns:
        ``(best, worst)`` with best > worst, or ``(None, None)`` when no usable pair exists.

    Raises:
        InvalidArgumentType: ``dynamic`` is neither None nor a ``(best, worst)`` pair of numbers
            or None.
    """
    sb, sw = static_bounds(meta)
    if dynamic is not None:
        db, dw = _pair(dynamic, "dynamic")
        if _is_finite(db) and _is_finite(dw):
            if not (db is not None and dw is not None):
                raise AssertionError("internal invariant broken: db is not None and dw is not None")
            if sb is not None:
                db = min(db, sb)
            if sw is not None:
                dw = max(dw, sw)
            if db > dw:
                return _apply_max_range(db, dw, (sb, sw))
    if _is_finite(sb) and _is_finite(sw):
        if not (sb is not None and sw is not None):
            raise AssertionError("internal invariant broken: sb is not None and sw is not None")
        if sb > sw:
            return _apply_max_range(sb, sw, None)
    return (None, None)


def preferred_static_bounds(
    meta: MetaLike,
    *,
    priority: Literal["leaderboard", "theoretical"] = "leaderboard",
    fallback: Bounds | None = (100.0, -100.0),
) -> Bounds:
    """One source per side (leaderboard or theoretical first), with a constant fallback pair.

    If either side has no bound, the whole ``fallback`` pair is used (when given). The result
    goes through the :data:`MAX_RANGE` clamp.

    Args:
        meta: task metadata.
        priority: which source to prefer on each side.
        fallback: signed ``(best, worst)`` used when a side is missing, or None for no fallback.

    Returns:
        ``(best, worst)`` signed, or ``(None, None)`` without bounds.
    """
    check_choice(priority, ("leaderboard", "theoretical"), "priority")
    m = as_meta(meta)
    if m.higher_is_better:
        lb = (m.leaderboard_max, m.leaderboard_min)
        th = (m.theoretical_max, m.theoretical_min)
    else:
        lb = tuple(None if v is None else -v for v in (m.leaderboard_min, m.leaderboard_max))  # type: ignore[assignment]
        th = tuple(None if v is None else -v for v in (m.theoretical_min, m.theoretical_max))  # type: ignore[assignment]
    if fallback is not None:
        fallback = _pair(fallback, "fallback")
    first, second = (lb, th) if priority == "leaderboard" else (th, lb)
    best = first[0] if first[0] is not None else second[0]
    worst = first[1] if first[1] is not None else second[1]
    if best is None or worst is None:
        if fallback is None or fallback[0] is None or fallback[1] is None:
            return (None, None)
        best, worst = fallback
        if not (best is not None and worst is not None):
            raise AssertionError(
                "internal invariant broken: best is not None and worst is not None"
            )
    return _apply_max_range(best, worst, fallback)


def _sanitize(best: float | None, worst: float | None, static: Bounds, min_span: float) -> Bounds:
    sb, sw = static
    if not (_is_finite(best) and _is_finite(worst)):
        # An overflowed or missing pair (e.g. a history poisoned by +-1.797e308) falls back to
        # the static pair before any clipping, as released.
        if not (_is_finite(sb) and _is_finite(sw)):
            return (None, None)
        best, worst = sb, sw
    if not (best is not None and worst is not None):
        raise AssertionError("internal invariant broken: best is not None and worst is not None")
    if sb is not None:
        best = min(best, sb)
    if sw is not None:
        worst = max(worst, sw)
    if best <= worst:
        best, worst = _widen(worst, max(min_span, 1e-12))
    return (best, worst)


def _widen(worst: float, span: float) -> tuple[float, float]:
    """A pair ``(best, worst)`` with ``best > worst``, ``best - worst`` at least ``span``.

    ``span`` is raised to four float spacings at ``worst``, so it scales with the magnitude of the
    scores: at ``|worst| = 1.7e10`` the spacing is 3.8e-6, and ``worst + 1e-6`` would round back
    to ``worst`` (a pair that gives every score reward 0). Below about 1e9 the spacing is under
    ``span / 4`` for the default ``span = 1e-6``, so ordinary scores keep the released rule
    exactly. When raising ``best`` would overflow, ``worst`` is lowered instead.
    """
    span = max(span, 4.0 * math.ulp(worst))
    best = worst + span
    if math.isfinite(best) and best > worst:
        return best, worst
    return worst, worst - span


def adaptive_bounds(
    history: Iterable[float | None] | None,
    group: Iterable[float | None] | None,
    *,
    meta: MetaLike,
    mode: BoundMode | str = "top1_top16",
    lower_shift_ratio: float = 0.25,
    min_span: float = 1e-6,
) -> Bounds:
    """Adaptive (best, worst) bounds from the scores seen so far, in signed space.

    best is the best signed score of ``history`` and ``group`` together; worst is the 8th or
    16th best (the last one when there are fewer), or the mean or median of all, by ``mode``
    (``"theoretical"`` uses the static limits only). worst is then lowered by
    ``lower_shift_ratio * (best - worst)`` (negative ratios count as 0), both are clipped into
    :func:`static_bounds`, and best is raised to ``worst + min_span`` when the pair collapsed
    (the span is at least four float spacings at ``worst``, so the pair stays ordered for scores
    of any magnitude; near the largest float, worst is lowered instead). Differences that would
    overflow (a span, a mean or a shift beyond the float range, e.g. scores of +-1e308 from a
    diverging program) are taken at half scale, and a shifted worst saturates at the most
    negative finite float; ordinary scores give the released result bit for bit.

    The raw functions reproduce the released rules, including one sharp edge: a lone first
    score is both best and worst, so :func:`adaptive_bounds` widens the pair upwards and
    :func:`openmle.rewards.score_to_reward` then gives that score reward 0.0.
    :meth:`openmle.rewards.RewardProfile.default` fixes this (reference B3: a lone or tied score
    is mapped through the task's static bounds, 0.5 without any); use the profile rather than
    composing the raw functions.

    Args:
        history: raw scores from earlier groups of the task (None/NaN/inf are ignored).
        group: raw scores of the current group (None/NaN/inf are ignored).
        meta: task metadata (direction and static bounds); a TaskMeta or a mapping.
        mode: ``top1_top8``, ``top1_top16``, ``top1_all_mean``, ``top1_all_median`` or
            ``theoretical``.
        lower_shift_ratio: share of the span to push worst down by (>= 0 to have an effect).
        min_span: smallest allowed best - worst.

    Returns:
        ``(best, worst)`` signed, both finite, with best > worst (for every finite input), or
        ``(None, None)`` when there is no finite score and no complete static pair.

    Raises:
        InvalidArgument: unknown ``mode`` (a ValueError), a ``lower_shift_ratio`` that is not
            finite, or a ``min_span`` that is not a finite number >= 0.
        InvalidArgumentType: ``history`` or ``group`` not an iterable of numbers or None (the
            message names the argument, and the index of a bad entry).
    """
    return _adaptive(history, group, meta, mode, lower_shift_ratio, min_span, saturate=True)


def released_adaptive_bounds(
    history: Iterable[float | None] | None,
    group: Iterable[float | None] | None,
    *,
    meta: MetaLike,
    mode: BoundMode | str = "top1_top16",
    lower_shift_ratio: float = 0.25,
    min_span: float = 1e-6,
) -> Bounds:
    """:func:`adaptive_bounds` as released, overflow included: where the pushed-down worst bound
    (or the mean) overflows, the pair falls back to the static pair, or ``(None, None)``
    without one. For :meth:`openmle.rewards.RewardProfile.openrsi` (golden ``pipeline.*``).
    """
    return _adaptive(history, group, meta, mode, lower_shift_ratio, min_span, saturate=False)


def _adaptive(
    history: Iterable[float | None] | None,
    group: Iterable[float | None] | None,
    meta: MetaLike,
    mode: BoundMode | str,
    lower_shift_ratio: float,
    min_span: float,
    *,
    saturate: bool,
) -> Bounds:
    if mode not in BOUND_MODES:
        raise fail(
            f"one of {list(BOUND_MODES)}",
            "mode",
            mode,
            f"Unsupported adaptive reward bound mode: {mode}",
        )
    m = as_meta(meta)
    if not math.isfinite(check_number(lower_shift_ratio, "lower_shift_ratio")):
        raise fail("a finite number (0 for no shift)", "lower_shift_ratio", lower_shift_ratio)
    span_floor = check_number(min_span, "min_span")
    if not (math.isfinite(span_floor) and span_floor >= 0):
        raise fail("a finite number >= 0", "min_span", min_span)
    static = static_bounds(m)
    if mode == "theoretical":
        return _sanitize(static[0], static[1], static, min_span)
    hib = m.higher_is_better
    scores = finite_signed(history, hib, name="history") + finite_signed(group, hib, name="group")
    if not scores:
        return _sanitize(static[0], static[1], static, min_span)
    ordered = sorted(scores, reverse=True)
    best = ordered[0]
    if mode == "top1_top8":
        worst = ordered[min(7, len(ordered) - 1)]
    elif mode == "top1_top16":
        worst = ordered[min(15, len(ordered) - 1)]
    elif mode == "top1_all_mean":
        worst = _mean(scores, saturate=saturate)
    else:
        worst = _median(scores, saturate=saturate)
    ratio = max(float(lower_shift_ratio), 0.0)
    if ratio > 0:
        worst = _lowered(best, worst, ratio, saturate=saturate)
    return _sanitize(best, worst, static, min_span)


_MAX = sys.float_info.max


def _mean(scores: list[float], *, saturate: bool) -> float:
    """The mean of finite scores; where the sum overflows, the sum of ``score / n`` instead
    (finite scores have a finite mean, so this never gives an infinity).
    """
    a = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore"):
        m = float(np.mean(a))
    return m if math.isfinite(m) or not saturate else float(np.sum(a / len(a)))


def _median(scores: list[float], *, saturate: bool) -> float:
    """The median of finite scores; two middle values are averaged at half scale where their
    sum overflows.
    """
    a = np.asarray(scores, dtype=np.float64)
    with np.errstate(over="ignore"):
        m = float(np.median(a))
    if math.isfinite(m) or not saturate:
        return m
    ordered = sorted(scores)
    k = len(ordered) // 2
    return ordered[k - 1] / 2.0 + ordered[k] / 2.0


def _lowered(best: float, worst: float, ratio: float, *, saturate: bool) -> float:
    """``worst - ratio * max(best - worst, 0)`` without overflow in the difference.

    Ordinary scores take the released expression unchanged (so the golden vectors stay exact).
    Where the span or the shift overflows (scores near the largest float, e.g. a diverging
    program printing 1e308), the same expression is evaluated at half scale (halving is exact
    there) and saturates at the most negative finite float, instead of becoming ``-inf`` and
    losing the pair. ``saturate=False`` keeps the released overflow (``-inf``).
    """
    lowered = worst - ratio * max(best - worst, 0.0)
    if math.isfinite(lowered) or not saturate:
        return lowered
    half = worst / 2.0 - ratio * max(best / 2.0 - worst / 2.0, 0.0)
    return max(half, -_MAX / 2.0) * 2.0
