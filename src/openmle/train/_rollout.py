"""Rollouts for GSPO: operator prompts -> G sampled programs -> sandbox runs -> rewards -> batches.

One *group* is G samples of the same prompt. :class:`RolloutProducer` makes a group this way:

1. pick a task (uniformly with the producer's generator, unless one is named);
2. draw the operator and its parents from the task's pool of earlier programs with
   :func:`openmle.search.plan_rl_step` (fitness-weighted :class:`~openmle.search.RLParentSelector`
   pools, an :class:`~openmle.search.OperatorMix`, fallbacks to Draft);
3. build the operator prompt with :func:`openmle.operators.build_request` (parents shown with
   their validation feedback only), or with a ``prompt`` hook you pass;
4. sample G answers from a :class:`Policy`: :class:`LocalPolicy` (a torch model through
   :func:`~openmle.train.sample_completions`, with the sampler's log-probs for truncated
   importance sampling) or :class:`ModelPolicy` (any :class:`~openmle.OperatorModel`, e.g. a
   vLLM/SGLang server, with the server's token log-probs and ids where it returns them);
5. parse each answer with :func:`openmle.operators.parse_response`, check each program with the
   reward-hacking guard (:class:`~openmle.rewards.RewardGuard`, static checks by default) and run
   the programs it does not reject in any :class:`~openmle.Sandbox` concurrently; a rejected
   program is never executed and gets the profile's hack penalty (its verdict is recorded per
   sample in :attr:`RolloutGroup.verdicts`); an answer without a program is ``MISSING_CODE``;
6. turn the group into rewards and advantages with a :class:`~openmle.rewards.RewardProfile`
   (the task's score history feeds the adaptive bounds; INFRA_ERROR members are masked);
7. add the programs to the task's pool (reward, children's rewards, visits) for later parents.

:func:`rollout_batch` packs groups into one :class:`~openmle.train.RolloutBatch`; a masked
member (infrastructure error, unchecked judge, discarded group) gets an all-False response mask,
so it neither contributes nor counts.

:class:`AsyncRollouts` is the asynchronous mode: ``concurrency`` groups are in flight at once,
each launched with the policy version current at its start and consumed from a queue as it
finishes, so a slow sandbox job does not stall the step. A group older than ``max_staleness``
optimiser steps when consumed is dropped (and counted). Finished, consumed and dropped groups
per task are recorded (:attr:`AsyncRollouts.exposure`) so over-sampling of fast tasks is
visible. Sampling
from a local model and the optimiser step share :attr:`RolloutProducer.weights_lock`, so the
weights never change under a running sampler.

Departures from the released system: its asynchronous launcher counts only successful groups and
can train on arbitrarily stale samples; here staleness is bounded and every drop is counted.
Concurrency is anyio only; blocking torch calls run in worker threads.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple, Protocol, final, runtime_checkable

import anyio
import attrs
import numpy as np
import torch
from attrs import define, evolve, field, frozen
from torch import nn

from openmle._protocols import OperatorModel, Sandbox, Trainer
from openmle._types import (
    Candidate,
    Job,
    ModelRequest,
    ModelResponse,
    Operator,
    Outcome,
    Resources,
    RunResult,
    TaskMeta,
)
from openmle._validation import check_positive, check_type, fail
from openmle.errors import InvalidArgument
from openmle.operators import ParentView, TaskBrief, build_request, parse_response, same_program
from openmle.rewards import (
    GroupMember,
    GroupRewards,
    GuardVerdict,
    RewardGuard,
    RewardProfile,
    Verdict,
)
from openmle.search import DEFAULT_MIX, OperatorMix, plan_rl_step

from ._batch import RolloutBatch
from ._model import sample_completions
from ._tokenizer import Tokenizer, encode_chat

__all__ = [
    "AsyncRollouts",
    "LocalPolicy",
    "ModelPolicy",
    "Policy",
    "PolicySample",
    "RolloutGroup",
    "RolloutProducer",
    "RolloutStep",
    "RolloutTask",
    "rollout_batch",
    "train_on_policy",
]

log = logging.getLogger("openmle.train")

_PAPER_GROUP_SIZE = 16
"""Samples per prompt in the paper's RL run (G)."""
_PAPER_MAX_NEW_TOKENS = 24_576
"""The paper's rollout length limit (tokens of one answer)."""
_PAPER_TEMPERATURE = 1.0
"""The paper's rollout sampling temperature."""


class PolicySample(NamedTuple):
    """One sampled answer.

    Attributes:
        text: the decoded answer.
        prompt_ids: the prompt's token ids.
        token_ids: the answer's token ids (as sampled, EOS included when emitted).
        logprobs: the sampler's log-prob of each answer token, or None when unknown.
    """

    text: str
    prompt_ids: list[int]
    token_ids: list[int]
    logprobs: list[float] | None


@runtime_checkable
class Policy(Protocol):
    """What the producer samples from."""

    async def sample(self, request: ModelRequest, n: int, *, seed: int) -> list[PolicySample]:
        """``n`` answers to ``request``, reproducible for a given ``seed``."""
        ...


@final
@define(eq=False)
class LocalPolicy(Policy):
    """A local torch causal LM sampled with :func:`~openmle.train.sample_completions`.

    Args:
        model: any model with a Hugging Face style forward (the one the trainer trains).
        tokenizer: renders the request's messages through its chat template.
        max_new_tokens: length limit of an answer (tokens).
        temperature: sampling temperature (> 0).
    """

    model: nn.Module
    tokenizer: Tokenizer
    max_new_tokens: int = 512
    temperature: float = 1.0

    @classmethod
    def paper(cls, model: nn.Module, tokenizer: Tokenizer, **overrides: Any) -> LocalPolicy:
        """The paper's rollout sampling: temperature 1.0, at most 24,576 new tokens."""
        kw: dict[str, Any] = {
            "max_new_tokens": _PAPER_MAX_NEW_TOKENS, "temperature": _PAPER_TEMPERATURE,
        }  # fmt: skip
        kw.update(overrides)
        return cls(model=model, tokenizer=tokenizer, **kw)

    async def sample(self, request: ModelRequest, n: int, *, seed: int) -> list[PolicySample]:
        """See :class:`Policy`; sampling runs in a worker thread."""
        prompt, _ = encode_chat(self.tokenizer, request.messages)
        gen = torch.Generator(device=next(self.model.parameters()).device)
        gen.manual_seed(seed)
        completions = await anyio.to_thread.run_sync(
            partial(
                sample_completions,
                self.model,
                [prompt] * n,
                max_new_tokens=self.max_new_tokens,
                eos_token_id=self.tokenizer.eos_token_id,
                temperature=self.temperature,
                generator=gen,
            )
        )
        return [
            PolicySample(self.tokenizer.decode(c.token_ids), list(prompt), c.token_ids, c.logprobs)
            for c in completions
        ]


@final
@define(eq=False)
class ModelPolicy(Policy):
    """Any :class:`~openmle.OperatorModel` (an inference server), with the server's log-probs.

    The sampler's log-probs make truncated importance sampling work for server rollouts. An
    :class:`~openmle.backends.OpenAIModel` (any attrs model value with a ``logprobs: bool``
    field) is asked for them (``logprobs=True`` is set on a copy unless
    ``request_logprobs=False``); any model may return them in
    :attr:`ModelResponse.logprobs <openmle.ModelResponse.logprobs>`. Each answer's tokens are:

    1. the server's own ids with their log-probs, when it returns both (vLLM with
       ``extra_body={"return_token_ids": True}`` or ``{"return_tokens_as_token_ids": True}``);
    2. else the re-tokenised text (plus EOS when the answer stopped) with the server's
       log-probs, when the counts agree (one log-prob per re-tokenised token, the EOS's
       included when the server reports it);
    3. else the re-tokenised text plus EOS without log-probs, as before: truncated importance
       sampling is then off for the batch (:func:`rollout_batch` uses log-probs only when every
       row has them). This fallback is logged once per reason on the ``openmle.train`` logger.

    Args:
        model: the operator model; called ``n`` times concurrently with seeds ``seed + i``.
        tokenizer: the tokenizer of the model being trained.
        request_logprobs: ask an ``OpenAIModel`` for log-probs (the default).
        temperature: when set, every request is sent with this temperature (None: the
            request's own, usually the model's default).
        max_tokens: when set, every request is sent with this answer length limit (tokens).

    Attributes:
        fallbacks: per reason, how many answers were re-tokenised without log-probs.
    """

    model: OperatorModel
    tokenizer: Tokenizer
    request_logprobs: bool = True
    temperature: float | None = None
    max_tokens: int | None = None
    fallbacks: Counter[str] = field(factory=Counter, init=False)

    @classmethod
    def paper(cls, model: OperatorModel, tokenizer: Tokenizer, **overrides: Any) -> ModelPolicy:
        """The paper's rollout sampling: temperature 1.0, at most 24,576 new tokens."""
        kw: dict[str, Any] = {
            "temperature": _PAPER_TEMPERATURE,
            "max_tokens": _PAPER_MAX_NEW_TOKENS,
        }
        kw.update(overrides)
        return cls(model=model, tokenizer=tokenizer, **kw)

    def __attrs_post_init__(self) -> None:
        # A model value with a ``logprobs`` switch (OpenAIModel, or your own attrs model) is
        # asked for them; duck-typed, so the recipes import no backend.
        model: Any = self.model
        switch = getattr(model, "logprobs", None)
        if self.request_logprobs and switch is False and attrs.has(type(model)):
            self.model = evolve(model, logprobs=True)
        if self.temperature is not None and not self.temperature > 0:
            raise fail("a number > 0 or None", "temperature", self.temperature)
        if self.max_tokens is not None:
            check_positive(check_type(self.max_tokens, int, "max_tokens"), "max_tokens")

    async def sample(self, request: ModelRequest, n: int, *, seed: int) -> list[PolicySample]:
        """See :class:`Policy`."""
        prompt, _ = encode_chat(self.tokenizer, request.messages)
        answers: list[ModelResponse | None] = [None] * n
        if self.temperature is not None:
            request = evolve(request, temperature=self.temperature)
        if self.max_tokens is not None:
            request = evolve(request, max_tokens=self.max_tokens)

        async def one(i: int) -> None:
            answers[i] = await self.model.complete(evolve(request, seed=seed + i))

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        out = []
        for a in (a for a in answers if a is not None):  # every task filled its slot
            ids, lps = self._tokens(a)
            out.append(PolicySample(a.text, list(prompt), ids, lps))
        return out

    def _tokens(self, answer: ModelResponse) -> tuple[list[int], list[float] | None]:
        eos = self.tokenizer.eos_token_id
        lps = None if answer.logprobs is None else list(answer.logprobs)
        if lps is not None and answer.token_ids is not None and len(answer.token_ids) == len(lps):
            return list(answer.token_ids), lps
        ids = list(self.tokenizer.encode(answer.text))
        stopped = answer.finish_reason != "length"
        if lps is None:
            reason = "the server returned no log-probs"
        elif len(lps) == len(ids) + 1:
            return [*ids, eos], lps
        elif len(lps) == len(ids) and not stopped:
            return ids, lps
        else:
            reason = "the server's log-probs do not match the re-tokenised answer"
        if self.fallbacks[reason] == 0:
            log.warning(
                "ModelPolicy: %s; these rows train without rollout log-probs (truncated "
                "importance sampling off). Use a server that returns log-probs and token ids "
                "(vLLM: OpenAIModel(extra_body={'return_token_ids': True}))", reason,
            )  # fmt: skip
        self.fallbacks[reason] += 1
        return [*ids, eos], None


def _scores_or_none(value: Iterable[float] | None) -> tuple[float, ...] | None:
    """A leaderboard as a tuple of floats (None stays None)."""
    return None if value is None else tuple(float(v) for v in value)


@frozen(kw_only=True)
class RolloutTask:
    """A task rollouts are drawn for.

    Args:
        name: the task reference given to the sandbox (``Job.task``).
        description: what the prompt says about the task.
        meta: metric direction and bounds (for the reward map).
        timeout_s: the per-program limit in the sandbox.
        resources: the per-program resources.
        leaderboard: the task's leaderboard scores, best first, for a reward profile that
            rewards from one (``mapping="medal_binary"`` or ``"leaderboard_rank"``,
            :func:`openmle.rewards.read_leaderboard` reads a file); None for other profiles.
    """

    name: str
    description: str = ""
    meta: TaskMeta = field(factory=TaskMeta)
    timeout_s: float = 60.0
    resources: Resources = field(factory=Resources)
    leaderboard: tuple[float, ...] | None = field(default=None, converter=_scores_or_none)


PromptHook = Callable[[RolloutTask, Operator, Sequence[ParentView]], ModelRequest]
"""Builds the request for ``(task, operator, parents)`` (replaces the operator prompts)."""


@define(eq=False)
class _Program:
    code: str
    result: RunResult
    reward: float
    parent_ids: tuple[str, ...]
    children_rewards: list[float] = field(factory=list)


@frozen(kw_only=True, eq=False)
class RolloutGroup:
    """One finished group.

    Attributes:
        task: the task name; operator: the operator after fallbacks; requested: the one drawn.
        parent_ids: the parents' program ids in the task's pool.
        samples: the G answers; results: their sandbox results (None without a program).
        rewards: rewards and advantages from the reward profile.
        version: the policy version the group was sampled with.
        program_ids: the ids the programs got in the pool (None for masked members).
        verdicts: per sample, the reward guard's verdict (None without a program or without a
            guard); a REJECTED program was not executed.
    """

    task: str
    operator: Operator
    requested: Operator
    parent_ids: tuple[str, ...]
    samples: tuple[PolicySample, ...]
    results: tuple[RunResult | None, ...]
    rewards: GroupRewards
    version: int
    program_ids: tuple[str | None, ...]
    verdicts: tuple[GuardVerdict | None, ...] = ()

    @property
    def mean_reward(self) -> float:
        """Mean reward of the included members (nan when none is)."""
        vals = [r for r, ok in zip(self.rewards.rewards, self.rewards.included, strict=True) if ok]
        return float(np.mean(vals)) if vals else math.nan


def rollout_batch(groups: Sequence[RolloutGroup], *, pad_token_id: int) -> RolloutBatch:
    """Pack groups into one batch (members in group order); masked members train on nothing.

    Raises:
        InvalidArgument: no groups.
    """
    if not groups:
        raise fail("at least one group", "groups", 0)
    prompts, responses, advantages, logprobs, keep = [], [], [], [], []
    with_lp = all(s.logprobs is not None for g in groups for s in g.samples)
    for g in groups:
        for s, adv, inc in zip(g.samples, g.rewards.advantages, g.rewards.included, strict=True):
            prompts.append(s.prompt_ids)
            responses.append(s.token_ids)
            ok = inc and not g.rewards.discarded
            advantages.append(adv if ok else 0.0)
            keep.append(ok)
            if with_lp:
                if s.logprobs is None:
                    raise AssertionError("internal invariant broken: s.logprobs is not None")
                logprobs.append(s.logprobs)
    batch = RolloutBatch.from_sequences(
        prompts, responses, advantages, pad_token_id=pad_token_id,
        rollout_logprobs=logprobs if with_lp else None,
    )  # fmt: skip
    mask = batch.response_mask & torch.tensor(keep, dtype=torch.bool)[:, None]
    return evolve(batch, response_mask=mask)


def _default_prompt(
    task: RolloutTask, operator: Operator, parents: Sequence[ParentView]
) -> ModelRequest:
    return build_request(
        operator,
        task=TaskBrief(description=task.description.strip() or task.name),
        parents=parents,
        execution_timeout_s=task.timeout_s,
        metadata={"task": task.name},
    )


def _task_tuple(value: Sequence[RolloutTask]) -> tuple[RolloutTask, ...]:
    return tuple(value)


@define(eq=False)
class RolloutProducer:
    """Makes groups: RL parent selection, operator prompts, G samples, sandbox, rewards.

    Args:
        policy: what answers are sampled from.
        sandbox: where programs run (any :class:`~openmle.Sandbox`).
        tasks: the tasks (at least one, distinct names).
        group_size: G, samples per group (>= 2 for a group advantage).
        profile: rewards and advantages (default :meth:`RewardProfile.default`).
        mix: operator probabilities.
        prompt: builds the request; default :func:`openmle.operators.build_request`.
        seed: seeds task, operator and parent draws and the samplers.
        max_pool: programs kept per task for parent selection (the most recent).
        guard: checks each program before the sandbox (default: the static checks of
            :class:`~openmle.rewards.RewardGuard`; pass one with a ``judge`` for the model check,
            or None to run every program). REJECTED: not executed, the hack penalty;
            UNCHECKED (the judge failed): executed and handled by the profile's ``unchecked``.

    Attributes:
        weights_lock: held while a local policy samples and while the optimiser steps.
        policy_version: the version recorded on groups when ``group`` gets none (a trainer
            loop bumps it under ``weights_lock`` after each optimiser step).
        history: per task, the raw validation scores seen so far (adaptive bounds).
    """

    policy: Policy
    sandbox: Sandbox
    tasks: Sequence[RolloutTask] = field(converter=_task_tuple)
    group_size: int = 8
    profile: RewardProfile = field(factory=RewardProfile.default)
    mix: OperatorMix = DEFAULT_MIX
    prompt: PromptHook = _default_prompt
    seed: int = 0
    max_pool: int = 512
    guard: RewardGuard | None = field(factory=RewardGuard)
    weights_lock: anyio.Lock = field(factory=anyio.Lock, init=False)
    policy_version: int = field(default=0, init=False)
    history: dict[str, list[float]] = field(factory=dict, init=False)
    _rng: np.random.Generator = field(init=False)
    _pools: dict[str, dict[str, _Program]] = field(factory=dict, init=False)
    _count: int = field(default=0, init=False)

    @classmethod
    def paper(
        cls,
        *,
        policy: Policy,
        sandbox: Sandbox,
        tasks: Sequence[RolloutTask],
        **overrides: Any,
    ) -> RolloutProducer:
        """The paper's rollout shape: groups of 16 samples and the operator mix Draft 0.50,
        Improve 0.17, Debug 0.17, Crossover 0.16 (:data:`~openmle.search.DEFAULT_MIX`).

        Pair it with a policy's ``paper()`` preset (temperature 1.0, 24,576 new tokens) and, for
        :meth:`GSPOConfig.paper() <openmle.train.GSPOConfig.paper>`, 16 groups per optimiser
        call (``groups_per_step=16``): 256 sequences, the batch that preset checks for.
        """
        kw: dict[str, Any] = {"group_size": _PAPER_GROUP_SIZE, "mix": DEFAULT_MIX}
        kw.update(overrides)
        return cls(policy=policy, sandbox=sandbox, tasks=tasks, **kw)

    def __attrs_post_init__(self) -> None:
        if not self.tasks:
            raise fail("at least one RolloutTask", "tasks", self.tasks)
        names = [t.name for t in self.tasks]
        if len(set(names)) != len(names):
            raise fail("distinct task names", "tasks", names)
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int):
            raise fail("an integer >= 2", "group_size", self.group_size)
        if self.group_size < 2:
            raise fail("an integer >= 2", "group_size", self.group_size)
        self._rng = np.random.default_rng(self.seed)
        for t in self.tasks:
            self._pools[t.name] = {}
            self.history[t.name] = []

    def state_dict(self) -> dict[str, Any]:
        """The producer's state as JSON-ready data: its random generator, policy version, score
        history, program pools and id counter (what :meth:`load_state_dict` restores, so that a
        resumed run draws the tasks, operators, parents and sampler seeds an uninterrupted run
        draws). The policy, sandbox, tasks and settings are not included: rebuild them the same
        way.
        """
        return {
            "rng": self._rng.bit_generator.state,
            "policy_version": self.policy_version,
            "history": {k: list(v) for k, v in self.history.items()},
            "count": self._count,
            "pools": {
                task: [_program_dict(pid, p) for pid, p in pool.items()]
                for task, pool in self._pools.items()
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned (e.g. read back from a checkpoint).

        Raises:
            InvalidArgument: the state is malformed or names a task this producer does not have
                (the message names the field).
        """
        try:
            pools: dict[str, dict[str, _Program]] = {t.name: {} for t in self.tasks}
            for task, rows in dict(state["pools"]).items():
                if task not in pools:
                    raise fail(f"one of {sorted(pools)}", "state['pools']", task)
                for r in rows:
                    pools[task][str(r["id"])] = _Program(
                        code=str(r["code"]), result=RunResult.from_dict(r["result"]),
                        reward=float(r["reward"]),
                        parent_ids=tuple(str(x) for x in r["parent_ids"]),
                        children_rewards=[float(x) for x in r["children_rewards"]],
                    )  # fmt: skip
            history: dict[str, list[float]] = {t.name: [] for t in self.tasks}
            for task, scores in dict(state["history"]).items():
                if task not in history:
                    raise fail(f"one of {sorted(history)}", "state['history']", task)
                history[task] = [float(x) for x in scores]
            rng = np.random.default_rng()
            rng.bit_generator.state = dict(state["rng"])
            version, count = int(state["policy_version"]), int(state["count"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, InvalidArgument):
                raise
            raise fail("a RolloutProducer.state_dict()", "state", type(state).__name__,
                       f"{type(exc).__name__}: {exc}") from exc  # fmt: skip
        self._pools, self.history, self._rng = pools, history, rng
        self.policy_version, self._count = version, count

    def candidates(self, task: str) -> list[Candidate]:
        """The task's pool as RL candidates (base reward, children's rewards, visits)."""
        return [
            Candidate(
                node_id=pid,
                score=p.result.score,
                parent_ids=p.parent_ids,
                reward=p.reward,
                children_rewards=tuple(p.children_rewards),
                visits=len(p.children_rewards),
            )
            for pid, p in self._pools[task].items()
        ]

    async def group(self, task: str | None = None, *, version: int | None = None) -> RolloutGroup:
        """Make one group (see the module docstring).

        Args:
            task: a task name, or None to draw one.
            version: the policy version recorded on the group; None records
                :attr:`policy_version` as read while sampling.

        Raises:
            InvalidArgument: an unknown task name.
        """
        by_name = {t.name: t for t in self.tasks}
        if task is None:
            spec = self.tasks[int(self._rng.integers(len(self.tasks)))]
        elif task in by_name:
            spec = by_name[task]
        else:
            raise fail(f"one of {sorted(by_name)}", "task", task)
        pool = self._pools[spec.name]
        step = plan_rl_step(self.candidates(spec.name), self._rng, mix=self.mix)
        parent_ids = () if step.selection is None else step.selection.chosen
        parents = [pool[p] for p in parent_ids]
        views = [ParentView.from_result(p, pool[p].code, pool[p].result) for p in parent_ids]
        request = self.prompt(spec, step.operator, views)
        seed = int(self._rng.integers(2**31))
        async with self.weights_lock:
            if version is None:
                version = self.policy_version
            samples = await self.policy.sample(request, self.group_size, seed=seed)
        if len(samples) != self.group_size:
            raise fail(f"{self.group_size} samples", "policy.sample()", len(samples))
        results, members, verdicts = await self._run(spec, samples, parents)
        prof = self.profile
        rewards = prof.group(
            members, meta=spec.meta, history=self.history[spec.name], operator=step.operator,
            parent_rewards=[p.reward for p in parents], leaderboard=spec.leaderboard,
        )  # fmt: skip
        self.history[spec.name].extend(rewards.history_update)
        ids = self._remember(spec.name, parent_ids, samples, results, rewards)
        return RolloutGroup(
            task=spec.name, operator=step.operator, requested=step.requested,
            parent_ids=tuple(parent_ids), samples=tuple(samples), results=tuple(results),
            rewards=rewards, version=version, program_ids=ids, verdicts=tuple(verdicts),
        )  # fmt: skip

    async def groups(self, n: int, *, version: int | None = None) -> list[RolloutGroup]:
        """``n`` groups made concurrently (tasks and operators drawn in launch order)."""
        out: list[RolloutGroup | None] = [None] * n

        async def one(i: int) -> None:
            out[i] = await self.group(version=version)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)
        return [g for g in out if g is not None]

    async def _run(
        self, spec: RolloutTask, samples: Sequence[PolicySample], parents: Sequence[_Program]
    ) -> tuple[list[RunResult | None], list[GroupMember], list[GuardVerdict | None]]:
        results: list[RunResult | None] = [None] * len(samples)
        verdicts: list[GuardVerdict | None] = [None] * len(samples)
        codes = [parse_response(s.text).code for s in samples]

        async def run(i: int, code: str) -> None:
            if self.guard is not None:
                verdicts[i] = v = await self.guard.check(code, task_description=spec.description)
                if v.verdict is Verdict.REJECTED:
                    return  # a flagged program is never executed
            job = Job(code=code, task=spec.name, timeout_s=spec.timeout_s,
                      resources=spec.resources, name=f"rollout-{i}")  # fmt: skip
            results[i] = await self.sandbox.run(job)

        async with anyio.create_task_group() as tg:
            for i, code in enumerate(codes):
                if code is not None:
                    tg.start_soon(run, i, code)
        members = []
        for code, res, verdict in zip(codes, results, verdicts, strict=True):
            if verdict is not None and verdict.verdict is Verdict.REJECTED:
                reason = ",".join(verdict.reasons) or "reward_hacking"
                members.append(GroupMember(score=None, outcome=Outcome.REJECTED, reason=reason))
            elif code is None or res is None:
                members.append(GroupMember(score=None, outcome=Outcome.MISSING_CODE))
            else:
                same = any(same_program(code, p.code) for p in parents)
                members.append(GroupMember.from_result(res, verdict, same_as_parent=same))
        return results, members, verdicts

    def _remember(
        self,
        task: str,
        parent_ids: Sequence[str],
        samples: Sequence[PolicySample],
        results: Sequence[RunResult | None],
        rewards: GroupRewards,
    ) -> tuple[str | None, ...]:
        pool = self._pools[task]
        ids: list[str | None] = []
        for s, res, base, inc in zip(
            samples, results, rewards.base_rewards, rewards.included, strict=True
        ):
            code = parse_response(s.text).code
            if not inc or rewards.discarded or res is None or code is None:
                ids.append(None)
                continue
            pid = f"{task}:{self._count}"
            self._count += 1
            pool[pid] = _Program(code=code, result=res, reward=base, parent_ids=tuple(parent_ids))
            for parent in parent_ids:
                if parent in pool:
                    pool[parent].children_rewards.append(base)
            ids.append(pid)
        while len(pool) > self.max_pool:
            del pool[next(iter(pool))]
        return tuple(ids)


def _program_dict(pid: str, p: _Program) -> dict[str, Any]:
    return {
        "id": pid,
        "code": p.code,
        "result": p.result.to_dict(),
        "reward": p.reward,
        "parent_ids": list(p.parent_ids),
        "children_rewards": list(p.children_rewards),
    }


@frozen(kw_only=True)
class RolloutStep:
    """What one optimiser step of :class:`AsyncRollouts` consumed and reported.

    Attributes:
        step: 0-based step index (the policy version after it is ``step + 1``).
        groups: the groups trained on.
        staleness: per group, the optimiser steps between its launch and this step.
        mean_reward: mean reward of the included members.
        metrics: what :meth:`Trainer.step` returned.
    """

    step: int
    groups: tuple[RolloutGroup, ...]
    staleness: tuple[int, ...]
    mean_reward: float
    metrics: Mapping[str, float]


@define(eq=False)
class AsyncRollouts:
    """The asynchronous mode: groups launched independently, trained on as they finish.

    Args:
        producer: makes groups.
        trainer: the trainer (e.g. :class:`~openmle.train.GSPOTrainer`); ``step`` runs in a
            worker thread while holding :attr:`RolloutProducer.weights_lock`.
        pad_token_id: padding id of the batches.
        groups_per_step: groups per optimiser step.
        concurrency: groups in flight at once.
        max_staleness: drop a group launched more than this many optimiser steps before it is
            consumed (0: only groups of the current policy).

    Attributes:
        version: optimiser steps taken (the policy version).
        exposure: per task, ``{"finished": n, "consumed": n, "dropped_stale": n}`` (groups
            finished, trained on, and dropped as too stale).

    The policy version starts at the producer's :attr:`~RolloutProducer.policy_version`.
    """

    producer: RolloutProducer
    trainer: Trainer[RolloutBatch]
    pad_token_id: int
    groups_per_step: int = 4
    concurrency: int = 4
    max_staleness: int = 1
    version: int = field(default=0, init=False)
    exposure: dict[str, Counter[str]] = field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        for name in ("groups_per_step", "concurrency"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise fail("an integer >= 1", name, v)
        if isinstance(self.max_staleness, bool) or not isinstance(self.max_staleness, int):
            raise fail("an integer >= 0", "max_staleness", self.max_staleness)
        if self.max_staleness < 0:
            raise fail("an integer >= 0", "max_staleness", self.max_staleness)

    def _count(self, task: str, key: str) -> None:
        self.exposure.setdefault(task, Counter())[key] += 1

    async def run(
        self, steps: int, *, on_step: Callable[[RolloutStep], Any] | None = None
    ) -> list[RolloutStep]:
        """Take ``steps`` optimiser steps; groups in flight at the end are cancelled.

        Returns:
            One :class:`RolloutStep` per step, in order.
        """
        self.version = self.producer.policy_version
        send, receive = anyio.create_memory_object_stream[RolloutGroup](self.concurrency)
        out: list[RolloutStep] = []

        async def worker() -> None:
            while True:
                g = await self.producer.group()
                self._count(g.task, "finished")
                await send.send(g)

        async with send, receive, anyio.create_task_group() as tg:
            for _ in range(self.concurrency):
                tg.start_soon(worker)
            buf: list[RolloutGroup] = []
            while len(out) < steps:
                g = await receive.receive()
                if self.version - g.version > self.max_staleness:
                    self._count(g.task, "dropped_stale")
                    continue
                self._count(g.task, "consumed")
                buf.append(g)
                if len(buf) < self.groups_per_step:
                    continue
                batch = rollout_batch(buf, pad_token_id=self.pad_token_id)
                async with self.producer.weights_lock:
                    metrics = await anyio.to_thread.run_sync(self.trainer.step, batch)
                    self.producer.policy_version = self.version + 1
                rewards = [g.mean_reward for g in buf]
                finite = [r for r in rewards if math.isfinite(r)]
                report = RolloutStep(
                    step=self.version, groups=tuple(buf),
                    staleness=tuple(self.version - b.version for b in buf),
                    mean_reward=float(np.mean(finite)) if finite else math.nan,
                    metrics=dict(metrics),
                )  # fmt: skip
                self.version += 1
                buf = []
                out.append(report)
                if on_step is not None:
                    on_step(report)
            tg.cancel_scope.cancel()
        return out


async def train_on_policy(
    producer: RolloutProducer,
    trainer: Trainer[RolloutBatch],
    *,
    steps: int,
    groups_per_step: int,
    pad_token_id: int,
    on_step: Callable[[RolloutStep], Any] | None = None,
) -> list[RolloutStep]:
    """The synchronous mode: each step makes ``groups_per_step`` groups concurrently with the
    current policy, then takes one :meth:`Trainer.step` on them (staleness always 0).

    Returns:
        One :class:`RolloutStep` per step, in order.
    """
    out: list[RolloutStep] = []
    for _ in range(steps):
        version = producer.policy_version
        groups = await producer.groups(groups_per_step, version=version)
        batch = rollout_batch(groups, pad_token_id=pad_token_id)
        async with producer.weights_lock:
            metrics = await anyio.to_thread.run_sync(trainer.step, batch)
            producer.policy_version = version + 1
        finite = [g.mean_reward for g in groups if math.isfinite(g.mean_reward)]
        report = RolloutStep(
            step=version, groups=tuple(groups), staleness=(0,) * len(groups),
            mean_reward=float(np.mean(finite)) if finite else math.nan, metrics=dict(metrics),
        )  # fmt: skip
        out.append(report)
        if on_step is not None:
            on_step(report)
    return out
