"""Reward profiles: the scores of one group -> rewards -> advantages.

A :class:`RewardProfile` composes the pieces of :mod:`openmle.rewards` the way a trainer needs
them: failure penalties, the group barrier (one set of adaptive bounds per group), the score map,
Improve/Debug/Crossover shaping against the parent's reward, and the group advantage.

Two presets:

- :meth:`RewardProfile.openrsi` reproduces the released launchers exactly, bugs included
  (power_clip, alpha 1, top1_top16, lower shift 0.25, single-finite-reward-one on, entropic
  advantage with its k=2 blow-up). It matches the golden ``pipeline.paper_async`` groups.
- :meth:`RewardProfile.default` fixes reference bugs B1-B5 (listed in its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np
from attrs import Attribute, field, frozen

from openmle._leaderboard import infer_higher_is_better
from openmle._types import (
    Operator,
    Outcome,
    RunResult,
    TaskMeta,
    check_operator,
    check_outcome,
)
from openmle._validation import check_choice, check_finite, check_positive, fail, finite_or_none
from openmle.errors import InvalidArgument, InvalidArgumentType
from openmle.rewards._advantages import entropic_advantage, group_normalized_advantage
from openmle.rewards._bounds import (
    BOUND_MODES,
    Bounds,
    adaptive_bounds,
    released_adaptive_bounds,
    resolve_bounds,
    static_bounds,
)
from openmle.rewards._guard import GuardVerdict, Verdict
from openmle.rewards._leaderboard_rewards import leaderboard_rank, medal_binary
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
    validation_gap,
    validation_gap_penalty,
)
from openmle.rewards._scores import (
    MetaLike,
    as_float_array,
    as_meta,
    finite_signed,
    optional_number,
)

__all__ = ["GroupMember", "GroupRewards", "MemberReward", "RewardProfile"]

_FLOAT_LIMIT = 1.7976931348623157e308
_LEADERBOARD_MAPS = ("medal_binary", "leaderboard_rank")


def _score_field(attribute: Attribute[float | None], value: object) -> None:
    optional_number(value, f"GroupMember.{attribute.name}")


def _bool_field(attribute: Attribute[bool], value: object) -> None:
    if not isinstance(value, bool):
        raise fail("True or False", f"GroupMember.{attribute.name}", value)


@frozen(kw_only=True)
class GroupMember:
    """One sample of a group, as the reward profile sees it.

    Args:
        score: the graded score in task units (None when there is none).
        outcome: how the run ended; only SUCCESS members are mapped from their score.
        reason: for ``REJECTED``, ``"missing_validation_line"`` selects that penalty; anything
            else is a reward-hacking rejection.
        checked: False when the reward-hacking judge could not decide (UNCHECKED).
        same_as_parent: the program is identical to its parent (or crossover partner).
        aborted: the model's generation was aborted (the whole group is discarded).
        printed_score: the validation score the program printed itself, used only by the
            validation/test gap penalty.
    """

    score: float | None = field(default=None, validator=lambda _, a, v: _score_field(a, v))
    outcome: Outcome = field(default=Outcome.SUCCESS, converter=check_outcome)
    reason: str | None = None
    checked: bool = field(default=True, validator=lambda _, a, v: _bool_field(a, v))
    same_as_parent: bool = field(default=False, validator=lambda _, a, v: _bool_field(a, v))
    aborted: bool = field(default=False, validator=lambda _, a, v: _bool_field(a, v))
    printed_score: float | None = field(default=None, validator=lambda _, a, v: _score_field(a, v))

    @classmethod
    def from_result(
        cls,
        result: RunResult,
        verdict: GuardVerdict | None = None,
        *,
        same_as_parent: bool = False,
    ) -> GroupMember:
        """A member from a run result and, optionally, the reward guard's verdict.

        A REJECTED verdict makes the member REJECTED; an UNCHECKED one marks it unchecked.
        """
        outcome = result.outcome
        checked = True
        if verdict is not None:
            if verdict.verdict is Verdict.REJECTED:
                outcome = Outcome.REJECTED
            elif verdict.verdict is Verdict.UNCHECKED:
                checked = False
        return cls(
            score=result.score,
            outcome=outcome,
            checked=checked,
            same_as_parent=same_as_parent,
            printed_score=result.printed_score,
        )


@frozen(kw_only=True)
class MemberReward:
    """The adaptive reward of one score and the bounds it used (signed space)."""

    reward: float
    best: float | None
    worst: float | None
    enabled: bool
    single_finite_applied: bool = False


@frozen(kw_only=True)
class GroupRewards:
    """Rewards and advantages of one group (same order as the members).

    Attributes:
        rewards: final (training) rewards; 0.0 for members left out.
        base_rewards: rewards before Improve/Debug/Crossover shaping.
        advantages: the group advantages; 0.0 for members left out.
        included: False for members masked out of the group (infrastructure failures and,
            by default, unchecked members); always all True for ``openrsi``.
        improve_deltas: ``max(base - parent reference, 0)`` per shaped member, else None.
        bounds: the signed (best, worst) pair the scores were mapped with, if any.
        discarded: a generation abort discarded the whole group (every reward is the abort
            penalty and every advantage 0; regenerate the group). ``openrsi`` without the
            entropic advantage only penalises the aborted member, as released.
        history_update: the raw scores to add to the task's score history.
    """

    rewards: tuple[float, ...]
    base_rewards: tuple[float, ...]
    advantages: tuple[float, ...]
    included: tuple[bool, ...]
    improve_deltas: tuple[float | None, ...]
    bounds: tuple[float, float] | None
    discarded: bool
    history_update: tuple[float, ...]


@frozen(kw_only=True)
class RewardProfile:
    """How the scores of one group become rewards and advantages.

    Args:
        mapping: score map (one of :data:`MAPPING_MODES`, or ``"medal_binary"`` /
            ``"leaderboard_rank"`` to reward from a leaderboard; the released reward
            ``1 - B / (N - 1)``, not the Human Rank that reports print).
        alpha: ``power_clip`` exponent.
        adaptive: use adaptive (per-group) bounds; only with ``mapping="power_clip"``.
        bound_mode, lower_shift_ratio, min_span: see :func:`adaptive_bounds`.
        single_finite_reward_one: the released rule giving 1.0 to a lone finite score
            (``compat="openrsi"`` only).
        static_fallback: signed (best, worst) for the static view when a side is missing.
        improve_strategy: ``"base"``, ``"gate_parent"`` or ``"diff_parent"``.
        improve_bonus_coef: bonus per unit of gain over the parent reference.
        advantage: ``"entropic"`` or ``"grpo"``.
        target_kl: KL budget of the entropic advantage.
        compat: ``"openrsi"`` (released behaviour) or ``"default"`` (B1-B5 fixed).
        unchecked: what an UNCHECKED guard verdict gets: ``"mask"``, ``"penalize"``, ``"trust"``.
        map_scores: map scores to rewards; False rewards the raw score (released
            ``USE_SCORE2REWARD=0``).
        gap_penalty: shrink positive rewards by the printed-vs-graded score gap
            (:func:`validation_gap_penalty`; off in every released launcher).
        gap_coef, gap_high_coef, gap_tolerance, gap_piecewise: its parameters.
    """

    mapping: str = "power_clip"
    alpha: float = 1.0
    adaptive: bool = True
    bound_mode: str = "top1_top16"
    lower_shift_ratio: float = 0.25
    min_span: float = 1e-6
    single_finite_reward_one: bool = False
    static_fallback: Bounds | None = (100.0, -100.0)
    improve_strategy: str = "base"
    improve_bonus_coef: float = 0.5
    advantage: str = "entropic"
    target_kl: float = math.log(2.0)
    compat: Literal["openrsi", "default"] = "default"
    unchecked: Literal["mask", "penalize", "trust"] = "mask"
    map_scores: bool = True
    gap_penalty: bool = False
    gap_coef: float = 0.05
    gap_high_coef: float = 0.25
    gap_tolerance: float = 0.12
    gap_piecewise: bool = False

    def __attrs_post_init__(self) -> None:
        if self.mapping == "human_rank":
            raise InvalidArgument(
                "RewardProfile.mapping='human_rank' is now 'leaderboard_rank' (the released "
                "reward 1 - B/(N-1)); Human Rank is the evaluation metric, not a reward"
            )
        check_choice(self.mapping, (*MAPPING_MODES, *_LEADERBOARD_MAPS), "RewardProfile.mapping")
        check_choice(self.bound_mode, BOUND_MODES, "RewardProfile.bound_mode")
        check_choice(
            self.improve_strategy,
            ("base", "gate_parent", "diff_parent"),
            "RewardProfile.improve_strategy",
        )
        check_choice(self.advantage, ("entropic", "grpo"), "RewardProfile.advantage")
        check_choice(self.compat, ("openrsi", "default"), "RewardProfile.compat")
        check_choice(self.unchecked, ("mask", "penalize", "trust"), "RewardProfile.unchecked")
        if not self.alpha > 0:
            raise fail("a number > 0", "RewardProfile.alpha", self.alpha)
        self._check_numbers()
        if self.single_finite_reward_one and self.compat != "openrsi":
            raise fail(
                "False with compat='default' (the released rule is reference bug B3)",
                "RewardProfile.single_finite_reward_one",
                self.single_finite_reward_one,
                "Use RewardProfile.openrsi() to reproduce the released behaviour.",
            )

    def _check_numbers(self) -> None:
        """The numeric settings: finite, and >= 0 (> 0 for the KL budget) where a sign would
        turn the rule around; each error names the field.
        """
        check_finite(self.lower_shift_ratio, "RewardProfile.lower_shift_ratio")
        check_positive(self.min_span, "RewardProfile.min_span", allow_zero=True)
        check_finite(self.improve_bonus_coef, "RewardProfile.improve_bonus_coef")
        check_positive(self.target_kl, "RewardProfile.target_kl")
        check_positive(self.gap_coef, "RewardProfile.gap_coef", allow_zero=True)
        check_positive(self.gap_high_coef, "RewardProfile.gap_high_coef", allow_zero=True)
        check_finite(self.gap_tolerance, "RewardProfile.gap_tolerance")

    @classmethod
    def openrsi(cls, **overrides: object) -> RewardProfile:
        """The released launcher profile (``paper_async``), bugs included."""
        kw: dict[str, object] = {
            "mapping": "power_clip",
            "alpha": 1.0,
            "adaptive": True,
            "bound_mode": "top1_top16",
            "lower_shift_ratio": 0.25,
            "min_span": 1e-6,
            "single_finite_reward_one": True,
            "advantage": "entropic",
            "compat": "openrsi",
            "unchecked": "trust",
        }
        kw.update(overrides)
        return cls(**kw)  # type: ignore[arg-type]

    @classmethod
    def default(cls, **overrides: object) -> RewardProfile:
        """The recommended profile: the paper's rewards with B1-B5 fixed.

        Fixes reference bugs B1-B5 of the released launchers:

        * **B1** (poisoned history): history values that are not finite, or that sit at the float
          limit where the released database clamps NaN/inf (``|x| >= 1.797e308``), are ignored, and
          :attr:`GroupRewards.history_update` holds only finite scores.
        * **B2** (entropic blow-up): the entropic advantage runs with ``compat="default"`` (beta
          never above ``beta_max``; the KL target is capped at half of what the group can reach), so
          a two-member group gets bounded advantages.
        * **B3** (lone or tied score): when history and group hold fewer than two distinct finite
          scores, the score is mapped through the static bounds of the task (0.5 without any), never
          1.0 or 0 by construction.
        * **B4** (all scores beyond a static bound): when clipping the adaptive pair into the static
          limits would invert it, the unclipped pair of observed scores is used, so the group keeps
          a ranking signal. Scores beyond the static best in a normal group still map to 1.0 (the
          ceiling), a documented choice: the static limits say nothing can be better.
        * **B5** (infrastructure failures scored 0): ``INFRA_ERROR`` members are masked out of the
          group: no reward, no advantage, and they do not enter the advantage of the others.

        Finite scores of any size (a diverging program can print 1e308) keep an ordered, finite
        adaptive pair and rewards in [0, 1]: a difference that would overflow is taken at half
        scale (:func:`openmle.rewards.adaptive_bounds`); ``openrsi`` keeps the released overflow.

        A guard verdict of UNCHECKED (the judge failed) is handled explicitly by ``unchecked``:
        ``"mask"`` (default: not rewarded, like an infrastructure failure), ``"penalize"`` (the hack
        penalty) or ``"trust"`` (the released fail-open behaviour, used by ``openrsi``).
        """
        kw: dict[str, object] = {"compat": "default", "single_finite_reward_one": False}
        kw.update(overrides)
        return cls(**kw)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ one score

    def _history(self, history: Iterable[float | None] | None) -> list[float]:
        out = []
        for v in history or ():
            f = finite_or_none(v)
            if f is None:
                continue
            if self.compat == "default" and abs(f) >= _FLOAT_LIMIT:
                continue
            out.append(f)
        return out

    def _adaptive_bounds(self, hist: list[float], grp: list[float], meta: TaskMeta) -> Bounds:
        """The adaptive ``(best, worst)`` pair with this profile's bound settings: as released
        (:func:`released_adaptive_bounds`) under ``compat="openrsi"``, else
        :func:`adaptive_bounds`.
        """
        bounds = released_adaptive_bounds if self.compat == "openrsi" else adaptive_bounds
        return bounds(
            hist,
            grp,
            meta=meta,
            mode=self.bound_mode,
            lower_shift_ratio=self.lower_shift_ratio,
            min_span=self.min_span,
        )

    def member_reward(
        self,
        score: float | None,
        *,
        meta: MetaLike,
        history: Iterable[float | None] | None = (),
        group: Iterable[float | None] | None = (),
        default: float = NO_SCORE_REWARD,
    ) -> MemberReward:
        """The adaptive reward of one score given the task history and its group's scores.

        Args:
            score: the raw score; None or non-finite gives ``default`` (bounds disabled).
            meta: task metadata.
            history: raw scores of earlier groups of the task.
            group: raw scores of this group (including ``score``).
            default: reward for a missing score.
        """
        m = as_meta(meta)
        s = finite_or_none(score)
        if s is None:
            return MemberReward(reward=float(default), best=None, worst=None, enabled=False)
        if not self.map_scores:
            return MemberReward(reward=s, best=None, worst=None, enabled=False)
        hist = self._history(history)
        grp = [g for g in (finite_or_none(v) for v in group or ()) if g is not None]
        signed = m.signed(s)
        if self.compat == "openrsi":
            if self.single_finite_reward_one and len(hist) + len(grp) == 1:
                return MemberReward(
                    reward=1.0, best=signed, worst=signed, enabled=True, single_finite_applied=True
                )
            best, worst = self._adaptive_bounds(hist, grp, m)
            reward = score_to_reward_from_meta(
                s, m, mode=self.mapping, alpha=self.alpha, dynamic=(best, worst)
            )
            return MemberReward(reward=reward, best=best, worst=worst, enabled=True)
        # default: B3 and B4 fixed
        distinct = set(finite_signed(hist + grp, m.higher_is_better))
        if len(distinct) < 2:
            sb, sw = resolve_bounds(m)
            if sb is None or sw is None:
                return MemberReward(reward=0.5, best=None, worst=None, enabled=True)
            r = score_to_reward(signed, best=sb, worst=sw, mode=self.mapping, alpha=self.alpha)
            return MemberReward(reward=r, best=sb, worst=sw, enabled=True)
        bare = TaskMeta(higher_is_better=m.higher_is_better)
        best, worst = self._adaptive_bounds(hist, grp, bare)
        if not (best is not None and worst is not None):
            raise AssertionError(
                "internal invariant broken: best is not None and worst is not None"
            )
        sb, sw = static_bounds(m)
        cb = best if sb is None else min(best, sb)
        cw = worst if sw is None else max(worst, sw)
        if cb > cw:
            best, worst = cb, cw
        r = score_to_reward(signed, best=best, worst=worst, mode=self.mapping, alpha=self.alpha)
        return MemberReward(reward=r, best=best, worst=worst, enabled=True)

    # ------------------------------------------------------------------ one group

    def _static_reward(self, score: float, meta: TaskMeta) -> float:
        """A score mapped with static bounds only (no group barrier)."""
        if self.compat == "openrsi":
            return score_to_reward_from_meta(score, meta, mode=self.mapping, alpha=self.alpha)
        sb, sw = resolve_bounds(meta)
        signed = meta.signed(score)
        return score_to_reward(signed, best=sb, worst=sw, mode=self.mapping, alpha=self.alpha)

    def _leaderboard_reward(
        self, score: float | None, meta: TaskMeta, leaderboard: Sequence[float] | None
    ) -> float:
        if score is None or not leaderboard:
            return 0.0
        hib = infer_higher_is_better(leaderboard) if self.compat == "openrsi" else None
        direction = hib if hib is not None else meta.higher_is_better
        fn = medal_binary if self.mapping == "medal_binary" else leaderboard_rank
        return fn(score, leaderboard, higher_is_better=direction)

    def group(
        self,
        members: Sequence[GroupMember],
        *,
        meta: MetaLike,
        history: Iterable[float | None] | None = (),
        operator: Operator | str = Operator.DRAFT,
        parent_rewards: Sequence[float] = (),
        leaderboard: Sequence[float] | None = None,
    ) -> GroupRewards:
        """Rewards and advantages of one group of samples of the same prompt.

        Args:
            members: the group, in sample order.
            meta: task metadata.
            history: raw scores of earlier groups of the task (all time).
            operator: the operator that produced the group; Improve/Debug/Crossover are
                shaped against ``parent_rewards``.
            parent_rewards: base rewards of the parent(s); the reference is their maximum.
            leaderboard: the task's leaderboard scores, best first (leaderboard mappings only).

        Returns:
            A :class:`GroupRewards`.

        Raises:
            InvalidArgumentType: a member that is not a :class:`GroupMember`, or
                ``parent_rewards`` that are not numbers.
            InvalidArgument: an unknown operator, a non-finite parent reward, or (with
                ``compat="default"``) a leaderboard mapping without ``leaderboard``.
        """
        m = as_meta(meta)
        op = check_operator(operator)
        self._check_group_inputs(members, parent_rewards, leaderboard)
        n = len(members)
        if any(mb.aborted for mb in members) and (
            self.compat == "default" or self.advantage == "entropic"
        ):
            return GroupRewards(
                rewards=(GENERATION_ABORT_PENALTY,) * n,
                base_rewards=(GENERATION_ABORT_PENALTY,) * n,
                advantages=(0.0,) * n,
                included=(True,) * n,
                improve_deltas=(None,) * n,
                bounds=None,
                discarded=True,
                history_update=(),
            )
        base, included, valid, valid_scores = self._triage(members)
        finite_group = [s for s in valid_scores if s is not None]
        bounds = self._score_rewards(
            base, valid, valid_scores, m, self._history(history), finite_group, leaderboard
        )
        bases = [0.0 if b is None else float(b) for b in base]
        if self.gap_penalty:
            self._gap_penalties(members, bases, valid, valid_scores, m)
        finals, deltas = self._shape(members, bases, valid, op, parent_rewards)
        advantages = self._advantages(finals, included)
        return GroupRewards(
            rewards=tuple(f if inc else 0.0 for f, inc in zip(finals, included, strict=True)),
            base_rewards=tuple(bases),
            advantages=tuple(advantages),
            included=tuple(included),
            improve_deltas=tuple(deltas),
            bounds=bounds,
            discarded=False,
            history_update=tuple(finite_group),
        )

    def _check_group_inputs(
        self,
        members: Sequence[GroupMember],
        parent_rewards: Sequence[float],
        leaderboard: Sequence[float] | None,
    ) -> None:
        """Refuse what :meth:`group` cannot use, naming the argument and the fix."""
        if isinstance(members, str | bytes) or not isinstance(members, Sequence):
            raise InvalidArgumentType(
                f"Expected a sequence of GroupMember but got members={members!r:.80} "
                f"(type={type(members).__name__})"
            )
        for i, mb in enumerate(members):
            if not isinstance(mb, GroupMember):
                raise InvalidArgumentType(
                    f"Expected a GroupMember but got members[{i}]={mb!r:.80} "
                    f"(type={type(mb).__name__}); wrap each sample as "
                    "GroupMember(score=..., outcome=...) or GroupMember.from_result(result)"
                )
        parents = as_float_array(parent_rewards, "parent_rewards")
        if parents.ndim != 1 or not np.all(np.isfinite(parents)):
            raise fail("a flat sequence of finite rewards", "parent_rewards", parent_rewards)
        if self.mapping in _LEADERBOARD_MAPS and leaderboard is None and self.compat == "default":
            raise InvalidArgument(
                f"RewardProfile.mapping={self.mapping!r} rewards from a leaderboard, but "
                "group() got leaderboard=None; pass the task's leaderboard scores, best first "
                "(openmle.rewards.read_leaderboard), or [] to give every member 0.0"
            )

    def _triage(
        self, members: Sequence[GroupMember]
    ) -> tuple[list[float | None], list[bool], list[bool], list[float | None]]:
        """(fixed rewards of the members that get no score reward, included, valid, score)."""
        n = len(members)
        base: list[float | None] = [None] * n
        included = [True] * n
        valid_scores: list[float | None] = [None] * n
        valid = [False] * n
        for i, mb in enumerate(members):
            if mb.aborted:
                base[i] = GENERATION_ABORT_PENALTY
            elif mb.outcome is Outcome.MISSING_CODE:
                base[i] = NO_CODE_PENALTY
            elif mb.outcome is Outcome.REJECTED:
                missing = mb.reason == "missing_validation_line"
                base[i] = MISSING_VALIDATION_PENALTY if missing else HACK_PENALTY
            elif not mb.checked and self.unchecked != "trust":
                if self.unchecked == "penalize":
                    base[i] = HACK_PENALTY
                else:
                    base[i], included[i] = 0.0, False
            elif mb.outcome is Outcome.INFRA_ERROR and self.compat == "default":
                base[i], included[i] = 0.0, False
            else:
                valid[i] = True
                if mb.outcome is Outcome.SUCCESS:
                    valid_scores[i] = finite_or_none(mb.score)
        return base, included, valid, valid_scores

    def _score_rewards(
        self,
        base: list[float | None],
        valid: list[bool],
        valid_scores: list[float | None],
        m: TaskMeta,
        hist: list[float],
        finite_group: list[float],
        leaderboard: Sequence[float] | None,
    ) -> tuple[float, float] | None:
        """Fill ``base`` for the valid members; returns the adaptive bounds used, if any."""
        bounds: tuple[float, float] | None = None
        barrier = self.adaptive and self.mapping == "power_clip"
        for i, ok in enumerate(valid):
            if not ok:
                continue
            s = valid_scores[i]
            if self.mapping in _LEADERBOARD_MAPS:
                base[i] = self._leaderboard_reward(s, m, leaderboard)
            elif s is None:
                base[i] = NO_SCORE_REWARD
            elif not self.map_scores:
                base[i] = s
            elif not barrier:
                base[i] = self._static_reward(s, m)
            elif (
                self.compat == "openrsi"
                and not hist
                and len(finite_group) <= 1
                and not (self.single_finite_reward_one and len(finite_group) == 1)
            ):
                # the released barrier's static fallback (leaderboard priority, +-100 pair)
                base[i] = static_view_reward(
                    s, m, mode="power_clip", alpha=self.alpha, fallback=self.static_fallback
                )[0]
            else:
                mr = self.member_reward(s, meta=m, history=hist, group=finite_group)
                base[i] = mr.reward
                if mr.best is not None and mr.worst is not None:
                    bounds = (mr.best, mr.worst)
        return bounds

    def _gap_penalties(
        self,
        members: Sequence[GroupMember],
        bases: list[float],
        valid: list[bool],
        valid_scores: list[float | None],
        m: TaskMeta,
    ) -> None:
        """Apply the validation-gap penalty to ``bases`` in place."""
        for i, mb in enumerate(members):
            if valid[i] and valid_scores[i] is not None:
                gap = validation_gap(mb.printed_score, valid_scores[i], m)
                bases[i] = validation_gap_penalty(
                    bases[i],
                    gap,
                    coef=self.gap_coef,
                    high_coef=self.gap_high_coef,
                    tolerance=self.gap_tolerance,
                    piecewise=self.gap_piecewise,
                ).reward

    def _shape(
        self,
        members: Sequence[GroupMember],
        bases: list[float],
        valid: list[bool],
        op: Operator,
        parent_rewards: Sequence[float],
    ) -> tuple[list[float], list[float | None]]:
        finals = list(bases)
        deltas: list[float | None] = [None if not v else 0.0 for v in valid]
        if op is Operator.DRAFT or not parent_rewards:
            return finals, deltas
        ref = max(float(r) for r in parent_rewards)
        for i, mb in enumerate(members):
            if not valid[i]:
                continue
            if mb.same_as_parent:
                bases[i] = finals[i] = 0.0
                continue
            own = bases[i]
            if own == 0.0:
                finals[i] = 0.0
                continue
            if self.improve_strategy == "gate_parent":
                shaped = own if own >= ref else 0.0
            elif self.improve_strategy == "diff_parent":
                shaped = max(own - ref, 0.0)
            else:
                shaped = own
            delta = max(own - ref, 0.0)
            deltas[i] = delta
            finals[i] = shaped + self.improve_bonus_coef * delta
        return finals, deltas

    def _advantages(self, finals: list[float], included: list[bool]) -> list[float]:
        idx = [i for i, inc in enumerate(included) if inc]
        out = [0.0] * len(finals)
        if not idx:
            return out
        vals = [finals[i] for i in idx]
        if self.advantage == "entropic":
            adv = entropic_advantage(
                vals,
                target_kl=self.target_kl,
                compat="openrsi" if self.compat == "openrsi" else "default",
            )
        else:
            adv = group_normalized_advantage(vals)
        for j, i in enumerate(idx):
            out[i] = float(adv[j])
        return out
