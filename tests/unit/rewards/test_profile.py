"""``RewardProfile.default()`` fixes reference bugs B1-B5; shaping and validation work."""

from __future__ import annotations

import math

import numpy as np
import pytest

from openmle import Outcome, TaskMeta
from openmle.errors import InvalidArgument
from openmle.rewards import (
    HACK_PENALTY,
    MISSING_VALIDATION_PENALTY,
    NO_CODE_PENALTY,
    GroupMember,
    RewardProfile,
    entropic_advantage,
)

UNIT = TaskMeta(higher_is_better=True, theoretical_min=0.0, theoretical_max=1.0)
OPENRSI = RewardProfile.openrsi()
DEFAULT = RewardProfile.default()


def _scored(*scores: float | None) -> list[GroupMember]:
    return [GroupMember(score=s) for s in scores]


def test_b1_poisoned_history_is_ignored() -> None:
    """B1: a history holding the released NaN clamp (1.797e308) no longer collapses the bounds."""
    poisoned = [0.3, 0.5, 1.7976931348623157e308]
    members = _scored(0.4, 0.6, 0.55)
    bad = OPENRSI.group(members, meta=TaskMeta(higher_is_better=True), history=poisoned)
    good = DEFAULT.group(members, meta=TaskMeta(higher_is_better=True), history=poisoned)
    clean = DEFAULT.group(members, meta=TaskMeta(higher_is_better=True), history=[0.3, 0.5])
    assert good.rewards == clean.rewards
    assert bad.rewards != good.rewards
    out = DEFAULT.group(_scored(0.4, math.nan, math.inf), meta=UNIT)
    assert out.history_update == (0.4,)


def test_b2_two_member_groups_are_bounded() -> None:
    """B2: the released k=2 blow-up (~1e12) becomes a bounded advantage."""
    assert entropic_advantage([1.0, 0.0], compat="openrsi")[0] > 1e11
    adv = entropic_advantage([1.0, 0.0])
    assert adv[0] < 10 and adv[1] >= -1
    out = DEFAULT.group(_scored(0.9, 0.2), meta=UNIT)
    assert max(out.advantages) < 10


def test_b3_lone_or_tied_scores_use_static_bounds() -> None:
    """B3: a lone score is not 1.0 by fiat and tied scores are not all 0: static bounds decide."""
    lone = DEFAULT.group(_scored(0.25, None), meta=UNIT)
    assert lone.rewards[0] == pytest.approx(0.25)
    assert OPENRSI.group(_scored(0.25, None), meta=UNIT).rewards[0] == 1.0
    tied = DEFAULT.group(_scored(0.7, 0.7, 0.7), meta=UNIT)
    assert tied.rewards == pytest.approx((0.7, 0.7, 0.7))
    no_bounds = DEFAULT.group(_scored(3.0), meta=TaskMeta())
    assert no_bounds.rewards == (0.5,)


def test_b4_scores_beyond_the_static_best_keep_a_signal() -> None:
    """B4: a group entirely above the static best still ranks its members."""
    above = _scored(1.2, 1.5, 1.3)
    assert len(set(OPENRSI.group(above, meta=UNIT).rewards)) == 1
    out = DEFAULT.group(above, meta=UNIT)
    assert out.rewards[1] > out.rewards[2] > out.rewards[0]
    below = _scored(-0.3, -0.1, -0.2)
    out = DEFAULT.group(below, meta=UNIT)
    assert out.rewards[1] > out.rewards[2] > out.rewards[0]


def test_b5_infra_errors_are_masked() -> None:
    """B5: INFRA_ERROR members get no reward and no advantage and do not shape the others."""
    members = [
        GroupMember(outcome=Outcome.MISSING_CODE),
        GroupMember(outcome=Outcome.REJECTED),
        GroupMember(outcome=Outcome.INFRA_ERROR),
        GroupMember(outcome=Outcome.RUNTIME_ERROR),
    ]
    released = OPENRSI.group(members, meta=UNIT)
    assert released.advantages[2] > 0  # an infra failure rewarded over penalised members
    out = DEFAULT.group(members, meta=UNIT)
    assert out.included == (True, True, False, True)
    assert out.advantages[2] == 0.0 and out.rewards[2] == 0.0
    without = DEFAULT.group([members[0], members[1], members[3]], meta=UNIT)
    assert (out.advantages[0], out.advantages[1], out.advantages[3]) == without.advantages


def test_penalties_and_unchecked_policy() -> None:
    """Named penalties apply; an UNCHECKED verdict is masked by default, never rewarded."""
    members = [
        GroupMember(outcome=Outcome.MISSING_CODE),
        GroupMember(outcome=Outcome.REJECTED),
        GroupMember(outcome=Outcome.REJECTED, reason="missing_validation_line"),
        GroupMember(score=0.9, checked=False),
        GroupMember(score=0.5),
        GroupMember(score=0.7),
    ]
    out = DEFAULT.group(members, meta=UNIT)
    assert out.base_rewards[:3] == (NO_CODE_PENALTY, HACK_PENALTY, MISSING_VALIDATION_PENALTY)
    assert out.included[3] is False and out.rewards[3] == 0.0
    pen = RewardProfile.default(unchecked="penalize").group(members, meta=UNIT)
    assert pen.rewards[3] == HACK_PENALTY
    trust = RewardProfile.default(unchecked="trust").group(members, meta=UNIT)
    assert trust.rewards[3] == 1.0


def test_improve_shaping_and_abort() -> None:
    """Improve adds 0.5 x the gain over the parent; same-code children get 0; aborts discard."""
    members = [GroupMember(score=0.9, same_as_parent=True), *_scored(0.9, 0.3, 0.5)]
    out = DEFAULT.group(members, meta=UNIT, operator="improve", parent_rewards=[0.4])
    assert out.rewards[0] == 0.0
    base = out.base_rewards[1]
    assert out.rewards[1] == pytest.approx(base + 0.5 * (base - 0.4))
    assert out.improve_deltas[1] == pytest.approx(base - 0.4)
    gated = RewardProfile.default(improve_strategy="gate_parent").group(
        members, meta=UNIT, operator="improve", parent_rewards=[10.0]
    )
    assert gated.rewards[1:] == (0.0, 0.0, 0.0)
    aborted = DEFAULT.group([*members, GroupMember(aborted=True)], meta=UNIT)
    assert aborted.discarded and set(aborted.advantages) == {0.0}


def test_constant_group_has_zero_advantage_and_validation() -> None:
    """A constant group gets zero advantages; bad settings fail with InvalidArgument."""
    out = DEFAULT.group(_scored(0.5, 0.5, 0.5, 0.5), meta=TaskMeta())
    assert np.allclose(out.advantages, 0.0)
    with pytest.raises(InvalidArgument, match="mapping"):
        RewardProfile(mapping="nope")
    with pytest.raises(InvalidArgument, match="alpha"):
        RewardProfile(alpha=0)


def test_static_mappings_without_the_barrier() -> None:
    """Without adaptive bounds the default profile maps through the static pair for any mode;
    the released RL code cannot map power_sigmoid at all."""
    members = _scored(0.25, 0.75)
    out = RewardProfile.default(adaptive=False).group(members, meta=UNIT)
    assert out.base_rewards == (0.25, 0.75)
    sig = RewardProfile.default(mapping="power_sigmoid").group(members, meta=UNIT)
    assert 0 < sig.base_rewards[0] < sig.base_rewards[1] < 1
    with pytest.raises(NotImplementedError):
        RewardProfile.openrsi(mapping="power_sigmoid", adaptive=False).group(members, meta=UNIT)
    with pytest.raises(InvalidArgument, match="operator"):
        DEFAULT.group(members, meta=UNIT, operator="mutate")


def test_leaderboard_profiles() -> None:
    """medal_binary and leaderboard_rank profiles reward from the leaderboard table."""
    board = [0.95, 0.9, 0.85, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
    medal = RewardProfile.default(mapping="medal_binary", adaptive=False, advantage="grpo")
    out = medal.group(_scored(0.96, 0.1, None), meta=UNIT, leaderboard=board)
    assert out.rewards == (1.0, 0.0, 0.0)
    rank = RewardProfile.default(mapping="leaderboard_rank", adaptive=False, advantage="grpo")
    out = rank.group(_scored(0.96, 0.75), meta=UNIT, leaderboard=board)
    assert out.rewards[0] == 1.0
    assert out.rewards[1] == pytest.approx(1 - 4 / 9)


def test_the_old_mapping_name_is_refused_with_the_new_one() -> None:
    """``human_rank`` names the evaluation metric; the reward mapping is ``leaderboard_rank``."""
    with pytest.raises(InvalidArgument, match="leaderboard_rank"):
        RewardProfile.default(mapping="human_rank", adaptive=False, advantage="grpo")
