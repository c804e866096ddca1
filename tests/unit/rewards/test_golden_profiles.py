"""``RewardProfile.openrsi()`` against the released reward pipeline (golden ``pipeline.*``).

Each golden group ran the released ``reward_func`` for a whole group (barrier, static fallback,
adaptive bounds, history, mode shaping, penalties) and then the advantage hook. We rebuild the
members from the scripted specs and compare every member's returned reward, base reward,
logged adaptive bounds and Improve delta exactly (the delta to 1e-15) and its advantage with
rel 1e-9.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from tests._golden import decode, load_golden, records

from openmle import Outcome
from openmle.rewards import GroupMember, RewardProfile

_SCORED = {"valid", "outside_hi", "outside_lo", "score_none", "score_nan", "score_inf"}

PROFILES: dict[str, RewardProfile] = {
    "paper_async": RewardProfile.openrsi(),
    "paper_sync": RewardProfile.openrsi(),
    "no_single_finite_flag": RewardProfile.openrsi(single_finite_reward_one=False),
    "medal_binary": RewardProfile.openrsi(mapping="medal_binary", adaptive=False, advantage="grpo"),
    "human_rank": RewardProfile.openrsi(
        mapping="leaderboard_rank", adaptive=False, advantage="grpo"
    ),
    # generate_mle import defaults: dynamic bounds off, alpha 2, top1_top8, no shift, gap
    # penalty on (coef 0.05), group-normalised advantage.
    "module_defaults": RewardProfile.openrsi(
        adaptive=False,
        alpha=2.0,
        bound_mode="top1_top8",
        lower_shift_ratio=0.0,
        single_finite_reward_one=False,
        advantage="grpo",
        gap_penalty=True,
    ),
}
# Profiles run without ENABLE_SELF_VALIDATION: a missing print line is not penalised there.
_NO_SELF_VALIDATION = {"paper_sync", "module_defaults"}


def _member(profile: str, spec: dict[str, Any], same_as_parent: bool) -> GroupMember:
    outcome = spec["outcome"]
    kw: dict[str, Any] = {
        "same_as_parent": same_as_parent,
        "printed_score": decode(spec["printed_validation_score"]),
    }
    score = decode(spec["sandbox_score"])
    if outcome in _SCORED or (outcome == "no_verify" and profile in _NO_SELF_VALIDATION):
        return GroupMember(score=score, **kw)
    if outcome in {"sandbox_503", "sandbox_504"}:
        return GroupMember(outcome=Outcome.INFRA_ERROR, **kw)
    if outcome == "empty":
        return GroupMember(outcome=Outcome.MISSING_CODE, **kw)
    if outcome == "no_verify":
        return GroupMember(outcome=Outcome.REJECTED, reason="missing_validation_line", **kw)
    if outcome in {"hack", "hack_verify"}:
        return GroupMember(outcome=Outcome.REJECTED, **kw)
    assert outcome == "generation_abort", outcome
    return GroupMember(aborted=True, **kw)


def _parent_rewards(parent: dict[str, Any]) -> list[float]:
    if not parent:
        return []
    first: float = parent.get("parent_dynamic_base_reward", parent["parent_dynamic_raw_reward"])
    out: list[float] = [float(first)]
    if "crossover_parent_dynamic_base_reward" in parent:
        out.append(parent["crossover_parent_dynamic_base_reward"])
    return out


def _groups() -> list[tuple[str, dict[str, Any]]]:
    pipeline = load_golden()["pipeline"]
    return [(name, g) for name in PROFILES for g in pipeline[name]["groups"]]


@pytest.mark.parametrize(
    ("profile", "group"),
    _groups(),
    ids=lambda v: v if isinstance(v, str) else f"{v['scenario']}-{v['group_index']}",
)
def test_pipeline_group(profile: str, group: dict[str, Any]) -> None:
    """Every member's reward, base reward and advantage equal the released pipeline's."""
    same_idx = group["parent"].get("_same_code_as_parent_for_idx")
    members = [_member(profile, m["spec"], k == same_idx) for k, m in enumerate(group["members"])]
    out = PROFILES[profile].group(
        members,
        meta=group["task_metadata"],
        history=decode(group["history_scores_before"]),
        operator=group["generation_mode"],
        parent_rewards=_parent_rewards(group["parent"]),
        leaderboard=group.get("leaderboard_scores_in_rank_order"),
    )
    for k, m in enumerate(group["members"]):
        meta_out = m["metadata_out"]
        assert out.rewards[k] == m["returned_reward"], (k, m["spec"])
        assert out.base_rewards[k] == meta_out["base_reward"], (k, m["spec"])
        assert math.isclose(out.advantages[k], m["advantage"], rel_tol=1e-9, abs_tol=1e-12), k
        if meta_out["code_category"] == "generation_abort":
            continue
        bounds = out.bounds or (None, None)
        logged = (meta_out["dynamic_bound_best_signed"], meta_out["dynamic_bound_worst_signed"])
        assert bounds == logged, k
        delta = meta_out["improve_delta"]
        assert (delta is None) == (out.improve_deltas[k] is None), k
        if delta is not None:
            assert out.improve_deltas[k] == pytest.approx(delta, abs=1e-15), k


@pytest.mark.parametrize("rec", records("group_adaptive_reward"), ids=lambda r: r["id"])
def test_group_adaptive_reward(rec: dict[str, Any]) -> None:
    """``member_reward`` reproduces ``score_to_group_adaptive_reward`` and its context."""
    i, f = decode(rec["inputs"]), rec["flags"]
    assert f["reward_mapping_mode"] == "power_clip"
    profile = RewardProfile.openrsi(
        bound_mode=f["mode"],
        lower_shift_ratio=f["lower_shift_ratio"],
        min_span=f["min_span"],
        single_finite_reward_one=f["single_finite_reward_one"],
        alpha=f["POWER_CLIP_ALPHA"],
        map_scores=f["use_score2reward"],
    )
    for score, out in zip(i["group_scores"], rec["output"]["per_member"], strict=True):
        exp_reward, ctx = decode(out["value"])
        got = profile.member_reward(
            score,
            meta=i["metadata"],
            history=i["historical_scores"],
            group=i["current_group_scores_passed"],
            default=f["default_reward"],
        )
        assert got.reward == pytest.approx(exp_reward, rel=1e-12, abs=0)
        assert got.enabled is ctx["enabled"]
        assert got.single_finite_applied is ctx["single_finite_reward_one_applied"]
        for mine, theirs in ((got.best, ctx["best_signed"]), (got.worst, ctx["worst_signed"])):
            assert (mine is None) == (theirs is None)
            if mine is not None:
                assert mine == pytest.approx(theirs, rel=1e-12, abs=0)
