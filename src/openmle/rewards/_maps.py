"""Score-to-reward maps.

:func:`score_to_reward` maps a signed score to a reward given signed ``(best, worst)`` bounds
(its docstring has the table of modes).

:func:`score_to_reward_from_meta` reproduces the released ``score2reward`` of the RL code
(``flavour="rl"``) and of the Evo code (``flavour="evo"``), including where each reads its bounds
from; :func:`static_view_reward` reproduces ``score2reward_with_static_priority``.

Scalars go through Python's ``math`` (libm), so results are bit-identical to the released
pure-Python code; arrays go through numpy ufuncs in one vectorised pass, which may differ from
the scalar result by about one ulp (at most 2.3e-16 absolute for rewards in [0, 1]) where a
mode uses ``exp``, ``tanh`` or a power, because numpy's SIMD kernels round differently from
libm; the arithmetic-only cases (``power_clip`` with alpha 1, ``linear_sign``) are identical.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal, TypeAlias, get_args, overload

import numpy as np
import numpy.typing as npt

from openmle._validation import check_choice, fail
from openmle.errors import Unsupported
from openmle.rewards._bounds import Bounds, preferred_static_bounds, resolve_bounds, static_bounds
from openmle.rewards._scores import (
    MetaLike,
    as_float_array,
    as_meta,
    check_number,
    optional_number,
)

__all__ = [
    "MAPPING_MODES",
    "MappingMode",
    "score_to_reward",
    "score_to_reward_from_meta",
    "sigmoid",
    "static_view_reward",
]

MappingMode: TypeAlias = Literal[
    "power_clip", "margin_tanh", "logistic", "linear_sign", "power_sigmoid"
]
MAPPING_MODES: tuple[str, ...] = get_args(MappingMode)
FloatArray: TypeAlias = npt.NDArray[np.float64]


def sigmoid(x: float) -> float:
    """The logistic function, overflow-free for any float (NaN gives NaN)."""
    z = math.exp(-abs(x))
    return 1.0 / (1.0 + z) if x >= 0 else z / (1.0 + z)


def _check_mode(mode: str) -> None:
    check_choice(mode, MAPPING_MODES, "mode")


def _clip01(p: float) -> float:
    return min(max(p, 0.0), 1.0)


def _position(s: float, best: float, worst: float, floor: float | None) -> float:
    """``(s - worst) / max(best - worst, floor)``, scale-aware (``floor`` None: the span as
    it is, also when negative: reversed bounds).

    Ordinary values take exactly that expression (the golden vectors stay exact). Where a
    difference overflows (bounds or scores near the largest float), the same ratio is taken at
    half scale, which is exact there: finite inputs never give an infinity over an infinity.
    """
    num, span = s - worst, best - worst
    if math.isfinite(num) and math.isfinite(span):
        return num / (span if floor is None else max(span, floor))
    half = best / 2.0 - worst / 2.0
    return (s / 2.0 - worst / 2.0) / (half if floor is None else max(half, floor / 2.0))


def _margin_z(s: float, best: float, worst: float) -> float:
    """``margin_tanh``'s ``2 (s - centre) / half_range``, scale-aware (see :func:`_position`)."""
    center = (best + worst) / 2.0
    scale = max((best - worst) / 2.0, 1e-9)
    # an overflowing span is rescued too, even where the floor makes ``scale`` finite (as the
    # array map does: the two agreed on no reversed span near the float limit)
    if math.isfinite(center) and math.isfinite(best - worst) and math.isfinite(s - center):
        return ((s - center) / scale) / 0.5
    # (s - centre) / half-range is 2 p - 1 with p the position between the bounds
    return (2.0 * _position(s, best, worst, 2e-9) - 1.0) / 0.5


def _logistic_z(s: float, best: float, worst: float) -> float:
    """``logistic``'s ``2 (s - worst) / (best - worst)``, scale-aware (see :func:`_position`)."""
    twice, span = 2.0 * (s - worst), best - worst
    if math.isfinite(twice) and math.isfinite(span):
        return twice / span
    return 2.0 * _position(s, best, worst, None)


def _scalar(s: float, best: float | None, worst: float | None, mode: str, alpha: float) -> float:
    has = best is not None and worst is not None
    if mode == "linear_sign":
        return s
    if mode == "power_clip":
        if not has:
            return sigmoid(s)
        if not (best is not None and worst is not None):
            raise AssertionError(
                "internal invariant broken: best is not None and worst is not None"
            )
        p = _clip01(_position(s, best, worst, 1e-9))
        return float(p**alpha)
    if mode == "margin_tanh":
        if not has:
            return 0.5 + 0.5 * math.tanh(s)
        if not (best is not None and worst is not None):
            raise AssertionError(
                "internal invariant broken: best is not None and worst is not None"
            )
        r = 0.5 + 0.5 * math.tanh(_margin_z(s, best, worst))
        return r * r
    if mode == "logistic":
        if not has:
            return 0.5
        if not (best is not None and worst is not None):
            raise AssertionError(
                "internal invariant broken: best is not None and worst is not None"
            )
        if best - worst == 0:
            return 0.5
        return sigmoid(_logistic_z(s, best, worst))
    # power_sigmoid
    if not has:
        return sigmoid(s)
    if not (best is not None and worst is not None):
        raise AssertionError("internal invariant broken: best is not None and worst is not None")
    p = _clip01(_position(s, best, worst, 1e-9))
    r = sigmoid((p - 0.5) / 0.5)
    return r * r


@overload
def score_to_reward(
    score: float,
    *,
    best: float | None,
    worst: float | None,
    mode: MappingMode | str = "power_clip",
    alpha: float = 1.0,
) -> float: ...
@overload
def score_to_reward(
    score: FloatArray | Sequence[float],
    *,
    best: float | None,
    worst: float | None,
    mode: MappingMode | str = "power_clip",
    alpha: float = 1.0,
) -> FloatArray: ...
@overload
def score_to_reward(
    score: npt.ArrayLike,
    *,
    best: float | None,
    worst: float | None,
    mode: MappingMode | str = "power_clip",
    alpha: float = 1.0,
) -> float | FloatArray: ...
def score_to_reward(
    score: npt.ArrayLike,
    *,
    best: float | None,
    worst: float | None,
    mode: MappingMode | str = "power_clip",
    alpha: float = 1.0,
) -> float | FloatArray:
    """Map signed score(s) to reward(s) with signed ``(best, worst)`` bounds.

    This is the raw released map. Composed with the raw :func:`adaptive_bounds`, a lone first
    score is its own worst bound and gets reward 0.0 (the released bug); the default
    :class:`openmle.rewards.RewardProfile` (``RewardProfile.default()``) maps a lone or tied
    score through the task's static bounds instead (0.5 without any; reference B3). Prefer the
    profile unless you reproduce the released maths on purpose.

    Modes (``s`` the signed score):

    =================  ==========================================================================
    mode               reward
    =================  ==========================================================================
    ``power_clip``     ``clip((s - worst) / max(best - worst, 1e-9), 0, 1) ** alpha`` (the paper's
                       map; alpha 1 is linear). Without bounds: ``sigmoid(s)``.
    ``margin_tanh``    ``(0.5 + 0.5 tanh(2 (s - centre) / half_range)) ** 2``. Without bounds:
                       ``0.5 + 0.5 tanh(s)``.
    ``logistic``       ``sigmoid(2 (s - worst) / (best - worst))``. Without bounds or with a zero
                       span: 0.5.
    ``linear_sign``    the signed score itself (the released RL code maps ``|score| < 1e-7`` to
                       -100; that quirk lives only in :func:`score_to_reward_from_meta`).
    ``power_sigmoid``  ``sigmoid((p - 0.5) / 0.5) ** 2`` with ``p`` the clipped position between
                       the bounds (the released Evo map). Without bounds: ``sigmoid(s)``.
    =================  ==========================================================================

    Args:
        score: a signed score (see :func:`signed_score`) or an array of them.
        best, worst: signed bounds, or None when unknown (each mode's no-bounds rule applies
            unless both are given).
        mode: one of :data:`MAPPING_MODES` (table above).
        alpha: exponent of ``power_clip`` (> 0; 1 is linear).

    Returns:
        A float for a scalar score, else a float64 array of the same shape. ``power_clip``,
        ``margin_tanh``, ``logistic`` and ``power_sigmoid`` rewards lie in [0, 1] for every
        finite score and bounds, also near the largest float (a difference that would overflow
        is taken at half scale); a NaN score gives NaN (but 0.5 in ``logistic`` without
        bounds or with a zero span, which ignores the score).

    Raises:
        InvalidArgument: unknown mode, or ``alpha <= 0``; ``score`` None or a bool.
        InvalidArgumentType: ``score`` not numeric (a string included), or ``best``/``worst``
            neither a number nor None.
    """
    _check_mode(str(mode))
    if not (isinstance(alpha, int | float) and not isinstance(alpha, bool) and alpha > 0):
        raise fail("a number > 0", "alpha", alpha)
    b = optional_number(best, "best")
    w = optional_number(worst, "worst")
    if isinstance(score, int | float | np.floating | np.integer) and not isinstance(score, bool):
        return _scalar(float(score), b, w, str(mode), float(alpha))
    if score is None or isinstance(score, bool):
        raise fail("a number or an array of numbers (math.nan for a missing score)", "score", score)
    return _vector(as_float_array(score, "score"), b, w, str(mode), float(alpha))


def _np_sigmoid(x: FloatArray) -> FloatArray:
    z = np.exp(-np.abs(x))
    out: FloatArray = np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))
    return out


def _vector(
    s: FloatArray, best: float | None, worst: float | None, mode: str, alpha: float
) -> FloatArray:
    """The same maps as :func:`_scalar`, as numpy ufuncs over an array."""
    has = best is not None and worst is not None
    if mode == "linear_sign":
        return s.copy()
    if mode in ("power_clip", "power_sigmoid") and not has:
        return _np_sigmoid(s)
    if mode == "margin_tanh" and not has:
        out0: FloatArray = 0.5 + 0.5 * np.tanh(s)
        return out0
    if mode == "logistic" and (not has or best == worst):
        return np.full(s.shape, 0.5)
    if not (best is not None and worst is not None):
        raise AssertionError("internal invariant broken: best is not None and worst is not None")
    span = best - worst
    if mode == "logistic":
        with np.errstate(over="ignore", invalid="ignore"):
            twice = 2.0 * (s - worst)
            z = twice / span
        z = _np_rescue(z, ~np.isfinite(twice), s, best, worst, None, lambda p: 2.0 * p)
        return _np_sigmoid(z)
    if mode == "margin_tanh":
        center = (best + worst) / 2.0
        scale = max(span / 2.0, 1e-9)
        with np.errstate(over="ignore", invalid="ignore"):
            off = s - center
            z = (off / scale) / 0.5
        z = _np_rescue(z, ~np.isfinite(off), s, best, worst, 2e-9, lambda p: (2.0 * p - 1.0) / 0.5)
        r = 0.5 + 0.5 * np.tanh(z)
        out1: FloatArray = r * r
        return out1
    with np.errstate(over="ignore", invalid="ignore"):
        num = s - worst
        pos = num / max(span, 1e-9)
    pos = _np_rescue(pos, ~np.isfinite(num), s, best, worst, 1e-9, lambda p: p)
    p = np.clip(pos, 0.0, 1.0)
    if mode == "power_clip":
        out2: FloatArray = p if alpha == 1.0 else np.power(p, alpha)
        return out2
    r = _np_sigmoid((p - 0.5) / 0.5)
    out3: FloatArray = r * r
    return out3


def _np_rescue(
    z: FloatArray,
    overflowed: npt.NDArray[np.bool_],
    s: FloatArray,
    best: float,
    worst: float,
    floor: float | None,
    of_position: Callable[[FloatArray], FloatArray],
) -> FloatArray:
    """``z`` where it is what finite arithmetic gives; where a difference overflowed (a finite
    score whose difference from a bound is ``overflowed``, or bounds whose span or centre is not
    finite), ``z`` recomputed from the position taken at half scale (as :func:`_position`).

    Only an overflowed *difference* is rescued, exactly where the scalar map rescues: a ``z``
    that is infinite because a finite difference was divided by a floored span (reversed
    bounds) saturates the map as it does for a scalar.
    """
    finite_bounds = all(math.isfinite(v) for v in (best - worst, (best + worst) / 2.0))
    bad = np.isfinite(s) & overflowed if finite_bounds else np.isfinite(s)
    if not bad.any():
        return z
    with np.errstate(over="ignore", divide="ignore"):
        half = best / 2.0 - worst / 2.0
        pos = (s / 2.0 - worst / 2.0) / (half if floor is None else max(half, floor / 2.0))
        # a position near the float limit maps to +-inf here: the map saturates it
        fixed: FloatArray = np.where(bad, of_position(pos), z)
    return fixed


def _logistic_raw_bounds(meta: MetaLike) -> tuple[float | None, float | None]:
    """Raw-unit (best, worst) of the released logistic branch, including its +-100 clamp."""
    m = as_meta(meta)
    if m.higher_is_better:
        best = m.theoretical_max if m.theoretical_max is not None else m.leaderboard_max
        worst_c = [v for v in (m.leaderboard_min, m.theoretical_min) if v is not None]
        worst = max([*worst_c, -100.0])
    else:
        best = m.theoretical_min if m.theoretical_min is not None else m.leaderboard_min
        worst_c = [v for v in (m.leaderboard_max, m.theoretical_max) if v is not None]
        worst = min([*worst_c, 100.0])
    return best, worst


def score_to_reward_from_meta(
    score: float | None,
    meta: MetaLike,
    *,
    mode: MappingMode | str = "power_clip",
    alpha: float = 1.0,
    dynamic: Bounds | None = None,
    flavour: Literal["rl", "evo"] = "rl",
) -> float:
    """The released ``score2reward``: read bounds from the task metadata, then map.

    ``flavour="rl"`` (RL/reward_func_utils.py): ``power_clip`` and ``margin_tanh`` use
    :func:`resolve_bounds` (the ``dynamic`` pair clipped into the static limits);
    ``linear_sign`` maps ``|score| < 1e-7`` to -100; ``power_sigmoid`` is not implemented.
    ``flavour="evo"`` (OpenMLE-Evo): bounds are the widest static pair (:func:`static_bounds`,
    both sides needed), ``linear_sign`` keeps 0, ``power_sigmoid`` is implemented.
    Both flavours' ``logistic`` uses raw-unit bounds: best = theoretical (else leaderboard) best,
    worst = the tighter of the worst-side bounds and a constant 100 (so wide tasks are clamped
    to +-100, a quirk kept for exactness).

    Args:
        score: raw score in task units.
        meta: task metadata.
        mode: one of :data:`MAPPING_MODES`.
        alpha: ``power_clip`` exponent.
        dynamic: signed adaptive ``(best, worst)`` pair, if any (RL flavour only).
        flavour: ``"rl"`` or ``"evo"``.

    Returns:
        The reward (a float).

    Raises:
        Unsupported: ``power_sigmoid`` with the RL flavour (as released; also a
            ``NotImplementedError``).
        InvalidArgument: unknown mode or flavour.
    """
    _check_mode(str(mode))
    check_choice(flavour, ("rl", "evo"), "flavour")
    m = as_meta(meta)
    if score is None:
        raise fail("a number", "score", score)
    raw = check_number(score, "score")
    s = m.signed(raw)
    if mode == "linear_sign":
        if flavour == "rl" and abs(raw) < 1e-7:
            return -100.0
        return s
    if mode == "logistic":
        best, worst = _logistic_raw_bounds(m)
        if best is None or worst is None or best - worst == 0:
            return 0.5
        return sigmoid(2.0 * (raw - worst) / (best - worst))
    if flavour == "rl":
        if mode == "power_sigmoid":
            raise Unsupported(
                'mode="power_sigmoid" is not implemented for flavour="rl" (as released); use '
                'mode="power_clip", or flavour="evo"'
            )
        best_s, worst_s = resolve_bounds(m, dynamic)
    else:
        sb, sw = static_bounds(m)
        best_s, worst_s = (sb, sw) if sb is not None and sw is not None else (None, None)
    return _scalar(s, best_s, worst_s, str(mode), float(alpha))


def static_view_reward(
    score: float | None,
    meta: MetaLike,
    *,
    mode: MappingMode | str = "power_clip",
    alpha: float = 1.0,
    priority: Literal["leaderboard", "theoretical"] = "leaderboard",
    fallback: Bounds | None = (100.0, -100.0),
) -> tuple[float, bool]:
    """The released static view (``score2reward_with_static_priority``) and whether it had bounds.

    Bounds come from :func:`preferred_static_bounds`. A missing or non-finite score gives 0.0;
    without bounds ``power_clip``/``margin_tanh`` give 0.0 (not a sigmoid). ``logistic`` picks
    raw-unit bounds by ``priority`` (no constant fallback) and gives 0.0 without them.

    Returns:
        ``(reward, has_bounds)``.
    """
    _check_mode(str(mode))
    m = as_meta(meta)
    best, worst = preferred_static_bounds(m, priority=priority, fallback=fallback)
    has = best is not None and worst is not None
    value = optional_number(score, "score")
    if value is None or not math.isfinite(value):
        return 0.0, has
    raw = value
    s = m.signed(raw)
    if mode == "logistic":
        lb_b, lb_w = (
            (m.leaderboard_max, m.leaderboard_min)
            if m.higher_is_better
            else (m.leaderboard_min, m.leaderboard_max)
        )
        th_b, th_w = (
            (m.theoretical_max, m.theoretical_min)
            if m.higher_is_better
            else (m.theoretical_min, m.theoretical_max)
        )
        first, second = ((lb_b, lb_w), (th_b, th_w))
        if priority == "theoretical":
            first, second = second, first
        rb = first[0] if first[0] is not None else second[0]
        rw = first[1] if first[1] is not None else second[1]
        if rb is None or rw is None or rb - rw == 0:
            return 0.0, has
        return sigmoid(2.0 * (raw - rw) / (rb - rw)), has
    if not has and mode in ("power_clip", "margin_tanh", "power_sigmoid"):
        return 0.0, has
    return _scalar(s, best, worst, str(mode), float(alpha)), has
