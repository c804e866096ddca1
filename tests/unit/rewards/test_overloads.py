"""Static types a user's ``mypy --strict`` sees (checked by the repository's mypy run).

An array or list of scores used to come back as ``float | ndarray``, so
``signed_score(scores, True).mean()`` needed a cast in every user project.
"""

from __future__ import annotations

from typing import assert_type

import numpy as np
import numpy.typing as npt

from openmle.rewards import score_to_reward, signed_score

FloatArray = npt.NDArray[np.float64]


def test_arrays_and_lists_give_arrays_scalars_give_floats() -> None:
    arr: FloatArray = np.array([0.2, 0.4])
    a = assert_type(signed_score(arr, True), FloatArray)
    b = assert_type(signed_score([0.2, 0.4], False), FloatArray)
    c = assert_type(score_to_reward(arr, best=1.0, worst=0.0), FloatArray)
    d = assert_type(score_to_reward([0.2, 0.4], best=1.0, worst=0.0), FloatArray)
    e = assert_type(score_to_reward(0.2, best=1.0, worst=0.0), float)
    f = assert_type(signed_score(0.2, True), float)
    assert isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    assert isinstance(c, np.ndarray) and isinstance(d, np.ndarray)
    assert isinstance(e, float) and isinstance(f, float)
    assert float(c.mean()) == float(np.mean(arr))
