"""The score maps on *any* finite pair, reversed and equal bounds included (hypothesis).

``score_to_reward`` promises a reward in [0, 1] "for every finite score and bounds", scalar and
array alike; the ordered pairs are covered in ``test_reward_properties``. A reversed pair
(best below worst) near the float limit divided by zero in ``logistic`` and made the array form
of ``margin_tanh`` disagree with the scalar form.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from openmle.rewards import MAPPING_MODES, score_to_reward

_any = st.floats(allow_nan=False, allow_infinity=False)
_BOUNDED = [m for m in MAPPING_MODES if m != "linear_sign"]


@settings(deadline=None, max_examples=400)
@given(_any, _any, _any, st.sampled_from(_BOUNDED), st.floats(0.05, 5.0))
@example(0.0, 0.0, 8.98846567431158e307, "logistic", 1.0)  # raised ZeroDivisionError
@example(1.797693134862316e299, 0.0, 1.797693134862316e299, "margin_tanh", 1.0)  # 1.0 vs 3e-4
@example(0.0, -1.7976931348623157e308, 9.9792015476736e291, "margin_tanh", 1.0)  # 1.0 vs 0.0
def test_any_finite_pair_maps_into_the_unit_range_alike(
    s: float, best: float, worst: float, mode: str, alpha: float
) -> None:
    """Scalar and array give the same reward in [0, 1] (to the documented ulp)."""
    r = score_to_reward(s, best=best, worst=worst, mode=mode, alpha=alpha)
    assert 0.0 <= r <= 1.0
    v = score_to_reward(np.array([s]), best=best, worst=worst, mode=mode, alpha=alpha)
    assert abs(float(v[0]) - r) <= 2.3e-16


@settings(deadline=None)
@given(_any, st.sampled_from(_BOUNDED))
def test_a_nan_score_gives_nan_for_any_pair(b: float, mode: str) -> None:
    """NaN in, NaN out, whatever the pair; ``logistic`` with a zero span ignores the score
    and gives 0.5 (both documented)."""
    r = score_to_reward(math.nan, best=b, worst=-b, mode=mode)
    if mode == "logistic" and b == -b:
        assert r == 0.5
    else:
        assert math.isnan(r)
