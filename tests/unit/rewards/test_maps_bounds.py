"""Score maps, signed scores and bounds: contracts and argument errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from openmle import Outcome, RunResult, TaskMeta
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.rewards import (
    MAPPING_MODES,
    GroupMember,
    GuardVerdict,
    RewardProfile,
    Verdict,
    adaptive_bounds,
    entropic_advantage,
    entropic_advantages,
    entropic_beta,
    preferred_static_bounds,
    read_leaderboard,
    resolve_bounds,
    score_to_reward,
    signed_score,
)


def test_signed_score_scalars_arrays_and_errors() -> None:
    """Lower-is-better scores are negated; arrays stay arrays; bad input names the field."""
    assert signed_score(0.3, False) == -0.3
    assert signed_score(2, True) == 2.0
    assert np.array_equal(signed_score([1.0, -2.0], False), np.array([-1.0, 2.0]))
    with pytest.raises(InvalidArgumentType, match="higher_is_better"):
        signed_score(1.0, "yes")  # type: ignore[call-overload]
    with pytest.raises(InvalidArgument, match="score"):
        signed_score(True, True)


@pytest.mark.parametrize("mode", MAPPING_MODES)
@pytest.mark.parametrize("bounds", [(1.0, -1.0), (None, None), (2.0, 2.0)])
def test_array_path_matches_scalar_path(
    mode: str, bounds: tuple[float | None, float | None]
) -> None:
    """The vectorised array path agrees with the exact scalar path to about one ulp."""
    s = np.linspace(-3.0, 3.0, 41)
    best, worst = bounds
    arr = np.asarray(score_to_reward(s, best=best, worst=worst, mode=mode, alpha=2.0))
    one = [score_to_reward(float(v), best=best, worst=worst, mode=mode, alpha=2.0) for v in s]
    np.testing.assert_allclose(arr, one, rtol=4.5e-16, atol=2.3e-16)
    assert arr.shape == s.shape


def test_power_clip_shape_and_errors() -> None:
    """power_clip is linear with alpha 1 and clips outside the bounds; bad mode/alpha fail."""
    r = score_to_reward([-2.0, 0.0, 0.5, 2.0], best=1.0, worst=0.0)
    assert np.array_equal(r, [0.0, 0.0, 0.5, 1.0])
    assert score_to_reward(0.5, best=1.0, worst=0.0, alpha=2.0) == 0.25
    assert math.isnan(score_to_reward(math.nan, best=1.0, worst=0.0))
    with pytest.raises(InvalidArgument, match="mode"):
        score_to_reward(0.5, best=1.0, worst=0.0, mode="rank")
    with pytest.raises(InvalidArgument, match="alpha"):
        score_to_reward(0.5, best=1.0, worst=0.0, alpha=0.0)


def test_bound_helpers() -> None:
    """Range clamp, priority choice and the meta mapping form."""
    wide = {"higher_is_better": True, "theoretical_min": 0.0, "theoretical_max": 1e9}
    assert resolve_bounds(wide) == (1e9, 1e9 - 1e6)
    meta = TaskMeta(theoretical_min=0.0, theoretical_max=1.0, leaderboard_min=0.2,
                    leaderboard_max=0.9)  # fmt: skip
    assert preferred_static_bounds(meta) == (0.9, 0.2)
    assert preferred_static_bounds(meta, priority="theoretical") == (1.0, 0.0)
    assert preferred_static_bounds(TaskMeta(), fallback=None) == (None, None)
    assert adaptive_bounds([], [], meta=TaskMeta()) == (None, None)
    with pytest.raises(ValueError, match="Unsupported adaptive reward bound mode"):
        adaptive_bounds([], [1.0], meta=TaskMeta(), mode="top3")
    with pytest.raises(InvalidArgumentType):
        adaptive_bounds([], [1.0], meta=42)  # type: ignore[arg-type]


def test_entropic_argument_errors_and_beta_cap() -> None:
    """Bad shapes, masks and non-finite rewards fail clearly; default beta stays <= beta_max."""
    with pytest.raises(InvalidArgument, match="2-D"):
        entropic_advantages([1.0, 2.0])
    with pytest.raises(InvalidArgument, match="mask"):
        entropic_advantages([[1.0, 2.0]], mask=[[True]])
    with pytest.raises(InvalidArgument, match="finite"):
        entropic_advantage([1.0, math.nan])
    assert entropic_beta([0.0, 1e-9, 2e-9], beta_max=1e3) <= 1e3
    assert entropic_beta([0.5, 0.5], compat="openrsi") == 2.0**20
    assert entropic_advantage([]).shape == (0,)


def test_read_leaderboard(tmp_path: Path) -> None:
    """A leaderboard CSV is read by its score and rank columns, best first."""
    path = tmp_path / "public_leaderboard.csv"
    path.write_text(
        "\ufeffTeamName,Score,Rank\nb,0.8,2\na,0.9,1\nc,n/a,3\nd,0.5,4\n", encoding="utf-8"
    )
    assert read_leaderboard(path) == [0.9, 0.8, 0.5]
    bad = tmp_path / "bad.csv"
    bad.write_text("team,points\na,1\n")
    with pytest.raises(InvalidArgument, match="score"):
        read_leaderboard(bad)


def test_group_member_from_result() -> None:
    """Run results and guard verdicts become group members."""
    ok = RunResult(outcome=Outcome.SUCCESS, score=0.7, printed_score=0.69)
    member = GroupMember.from_result(ok)
    assert (member.score, member.outcome, member.printed_score) == (0.7, Outcome.SUCCESS, 0.69)
    hacked = GroupMember.from_result(ok, GuardVerdict(verdict=Verdict.REJECTED))
    assert hacked.outcome is Outcome.REJECTED
    unsure = GroupMember.from_result(ok, GuardVerdict(verdict=Verdict.UNCHECKED))
    assert unsure.checked is False
    with pytest.raises(InvalidArgument, match="single_finite_reward_one"):
        RewardProfile.default(single_finite_reward_one=True)
