"""Every wrong input to openmle.rewards is one OpenMLEError naming the argument.

Found by a new-user trial of the library: strings, mappings, None and other wrong types used to
escape as bare ``ValueError``/``TypeError``/``AttributeError`` from numpy or ``float()``, or to
be accepted silently (a string score read as "no score", a negative coefficient raising a
reward, a leaderboard mapping without a leaderboard giving every member 0.0).
"""

from __future__ import annotations

import math

import pytest
from tests._errors import Case, X, one_error_test

from openmle import TaskMeta
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.rewards import (
    GroupMember,
    RewardGuard,
    RewardProfile,
    adaptive_bounds,
    entropic_advantage,
    entropic_advantages,
    entropic_beta,
    group_normalized_advantage,
    leaderboard_rank,
    medal_binary,
    preferred_static_bounds,
    resolve_bounds,
    score_to_reward,
    score_to_reward_from_meta,
    signed_score,
    static_view_reward,
    validation_gap,
    validation_gap_penalty,
)

META = TaskMeta(higher_is_better=True, theoretical_min=0.0, theoretical_max=1.0)
GAP = validation_gap(0.5, 0.9, META)
DEFAULT = RewardProfile.default()


IT = InvalidArgumentType
IA = InvalidArgument
MEMBER = [GroupMember(score=1.0)]
CASES: list[Case] = [
    ("grpo str", lambda: group_normalized_advantage(X("abc")), IT, "rewards"),
    ("grpo dict", lambda: group_normalized_advantage(X({"a": 1})), IT, "rewards"),
    ("grpo eps<0", lambda: group_normalized_advantage([0.0, 1.0], eps=-1), IA, "eps"),
    ("entropic str", lambda: entropic_advantage(X("abc")), IT, "rewards"),
    ("entropic dict", lambda: entropic_advantage(X({"a": 1})), IT, "rewards"),
    ("entropic None", lambda: entropic_advantage(X([None, 1.0])), IA, "rewards="),
    ("beta str", lambda: entropic_beta(X("abc")), IT, "rewards"),
    ("batch str", lambda: entropic_advantages(X("ab")), IT, "matrix"),
    ("map str", lambda: score_to_reward(X("abc"), best=1.0, worst=0.0), IT, "score"),
    ("map None", lambda: score_to_reward(X(None), best=1.0, worst=0.0), IA, "score"),
    ("map bool", lambda: score_to_reward(X(True), best=1.0, worst=0.0), IA, "score"),
    ("map best", lambda: score_to_reward(0.5, best=X("x"), worst=0.0), IT, "best"),
    ("map worst", lambda: score_to_reward(0.5, best=1.0, worst=X([0])), IT, "worst"),
    ("signed None", lambda: signed_score(X(None), True), IA, "score"),
    ("signed str", lambda: signed_score(X("1.5"), True), IA, "score"),
    ("bounds int", lambda: adaptive_bounds(X(5), [], meta=META), IT, "history"),
    ("bounds str", lambda: adaptive_bounds(X("abc"), [], meta=META), IT, "history"),
    ("bounds item", lambda: adaptive_bounds([], X([1.0, "x"]), meta=META), IT, "group[1]"),
    ("span nan", lambda: adaptive_bounds([1.0], [], meta=META, min_span=math.nan), IA, "min_span"),
    ("span<0", lambda: adaptive_bounds([1.0], [], meta=META, min_span=-1), IA, "min_span"),
    ("shift", lambda: adaptive_bounds([1.0], [], meta=META, lower_shift_ratio=X("x")), IT, "ratio"),
    ("dynamic short", lambda: resolve_bounds(META, X((1.0,))), IT, "dynamic"),
    ("dynamic str", lambda: resolve_bounds(META, X(("a", "b"))), IT, "dynamic[0]"),
    ("fallback", lambda: preferred_static_bounds(TaskMeta(), fallback=X((1.0,))), IT, "fallback"),
    ("meta score", lambda: score_to_reward_from_meta(X("abc"), META), IT, "score"),
    ("view score", lambda: static_view_reward(X("abc"), META), IT, "score"),
    ("rank board", lambda: leaderboard_rank(1.0, X("abc")), IT, "leaderboard"),
    ("rank None", lambda: leaderboard_rank(1.0, X(None)), IT, "leaderboard"),
    ("rank score", lambda: leaderboard_rank(X("1"), [1.0, 2.0]), IT, "score"),
    ("medal entry", lambda: medal_binary(1.0, X([1.0, "b"])), IT, "leaderboard[1]"),
    ("gap None", lambda: validation_gap_penalty(1.0, X(None)), IT, "gap"),
    ("gap coef<0", lambda: validation_gap_penalty(1.0, GAP, coef=-1), IA, "coef"),
    ("gap high<0", lambda: validation_gap_penalty(1.0, GAP, high_coef=-1), IA, "high_coef"),
    ("member score", lambda: GroupMember(score=X("1")), IT, "GroupMember.score"),
    ("member outcome", lambda: GroupMember(outcome=X("ok")), IA, "outcome"),
    ("member flag", lambda: GroupMember(checked=X("no")), IA, "GroupMember.checked"),
    ("group dicts", lambda: DEFAULT.group(X([{"score": 1.0}]), meta=META), IT, "members[0]"),
    ("group floats", lambda: DEFAULT.group(X([0.5]), meta=META), IT, "GroupMember("),
    (
        "parents str",
        lambda: DEFAULT.group(MEMBER, meta=META, operator="improve", parent_rewards=X("ab")),
        IT,
        "parent_rewards",
    ),
    ("profile shift", lambda: RewardProfile(lower_shift_ratio=X("x")), IT, "lower_shift_ratio"),
    ("profile kl", lambda: RewardProfile(target_kl=-1), IA, "target_kl"),
    ("profile gap", lambda: RewardProfile(gap_coef=-0.1), IA, "gap_coef"),
    ("profile span", lambda: RewardProfile(min_span=math.nan), IA, "min_span"),
    ("guard judge", lambda: RewardGuard(judge=X("x")), IT, "judge"),
    ("guard timeout", lambda: RewardGuard(judge_timeout_s=-1), IA, "judge_timeout_s"),
]


test_one_error_naming_the_argument = one_error_test(CASES)


def test_a_leaderboard_mapping_needs_a_leaderboard() -> None:
    """Without ``leaderboard=`` every member silently got 0.0 (and a zero advantage)."""
    profile = RewardProfile.default(mapping="leaderboard_rank", adaptive=False, advantage="grpo")
    members = [GroupMember(score=0.9), GroupMember(score=0.1)]
    with pytest.raises(InvalidArgument, match="leaderboard=None"):
        profile.group(members, meta=META)
    assert profile.group(members, meta=META, leaderboard=[]).rewards == (0.0, 0.0)
    # the released profile reproduces the released behaviour (0.0 without a leaderboard)
    released = RewardProfile.openrsi(mapping="leaderboard_rank", adaptive=False, advantage="grpo")
    assert released.group(members, meta=META).rewards == (0.0, 0.0)


def test_a_gap_penalty_never_raises_a_reward() -> None:
    """``coef`` is a shrink rate: the documented contract is ``0 <= reward' <= reward``."""
    out = validation_gap_penalty(0.8, GAP, coef=0.0)
    assert out.reward == 0.8 and out.multiplier == 1.0
