"""Reward transforms: signed scores, bounds, score-to-reward maps, advantages, the reward guard.

Everything here is a pure function or a frozen value. The released OpenRSI rules are reproduced
exactly (golden vectors) by the functions themselves and by ``RewardProfile.openrsi()``; the
fixes to its bugs (reference B1-B5) live in ``RewardProfile.default()`` and in ``compat="default"``
of the entropic advantage.
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.rewards._advantages import (
    entropic_advantage,
    entropic_advantages,
    entropic_beta,
    group_normalized_advantage,
)
from openmle.rewards._bounds import (
    BOUND_MODES,
    MAX_RANGE,
    adaptive_bounds,
    preferred_static_bounds,
    resolve_bounds,
    static_bounds,
)
from openmle.rewards._guard import GuardVerdict, RewardGuard, Verdict
from openmle.rewards._leaderboard_rewards import (
    leaderboard_rank,
    medal_binary,
    read_leaderboard,
)
from openmle.rewards._maps import (
    MAPPING_MODES,
    score_to_reward,
    score_to_reward_from_meta,
    static_view_reward,
)
from openmle.rewards._penalties import (
    GENERATION_ABORT_PENALTY,
    HACK_PENALTY,
    MISSING_VALIDATION_PENALTY,
    NO_CODE_PENALTY,
    NO_SCORE_REWARD,
    GapInfo,
    GapPenalty,
    validation_gap,
    validation_gap_penalty,
)
from openmle.rewards._profile import GroupMember, GroupRewards, MemberReward, RewardProfile
from openmle.rewards._scores import signed_score

__all__ = [
    "BOUND_MODES",
    "GENERATION_ABORT_PENALTY",
    "HACK_PENALTY",
    "MAPPING_MODES",
    "MAX_RANGE",
    "MISSING_VALIDATION_PENALTY",
    "NO_CODE_PENALTY",
    "NO_SCORE_REWARD",
    "GapInfo",
    "GapPenalty",
    "GroupMember",
    "GroupRewards",
    "GuardVerdict",
    "MemberReward",
    "RewardGuard",
    "RewardProfile",
    "Verdict",
    "adaptive_bounds",
    "entropic_advantage",
    "entropic_advantages",
    "entropic_beta",
    "group_normalized_advantage",
    "leaderboard_rank",
    "medal_binary",
    "preferred_static_bounds",
    "read_leaderboard",
    "resolve_bounds",
    "score_to_reward",
    "score_to_reward_from_meta",
    "signed_score",
    "static_bounds",
    "static_view_reward",
    "validation_gap",
    "validation_gap_penalty",
]

publish(globals(), private=("openmle._leaderboard",))
