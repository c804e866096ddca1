"""Rollouts: RL parent selection, operator prompts, sandbox rewards, masking, batches, async."""

from __future__ import annotations

import re
from collections.abc import Sequence

import anyio
import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle import Job, Message, ModelRequest, Operator, Outcome, RunResult  # noqa: E402
from openmle.errors import InvalidArgument  # noqa: E402
from openmle.operators import ParentView  # noqa: E402
from openmle.search import OperatorMix  # noqa: E402
from openmle.testing import FunctionSandbox, RecordingTrainer, ScriptedModel  # noqa: E402
from openmle.train import (  # noqa: E402
    AsyncRollouts,
    ByteTokenizer,
    LocalPolicy,
    ModelPolicy,
    RolloutBatch,
    RolloutProducer,
    RolloutTask,
    TinyCausalLM,
    TinyLMConfig,
    rollout_batch,
    train_on_policy,
)

pytestmark = [pytest.mark.torch, pytest.mark.anyio]


def answer(request: ModelRequest) -> str:
    """A program printing a value derived from the seed; seed % 5 == 0 is marked infra."""
    seed = request.seed or 0
    if seed % 7 == 3:
        return "I have no program for this."
    return f"Plan: print a number.\n```python\nvalue = {seed % 10}\nprint(value)\n```"


def grade(job: Job) -> RunResult:
    """Score = the printed value / 10; a value of 5 is an infrastructure failure."""
    m = re.search(r"value = (\d+)", job.code)
    assert m is not None
    v = int(m.group(1))
    if v == 5:
        return RunResult(outcome=Outcome.INFRA_ERROR, split=job.split, detail="node lost")
    return RunResult(outcome=Outcome.SUCCESS, score=v / 10, split=job.split)


def producer(**kw: object) -> RolloutProducer:
    """A producer over a scripted model and a function sandbox."""
    tok = ByteTokenizer()
    args: dict[str, object] = {
        "policy": ModelPolicy(ScriptedModel(answer), tok),
        "sandbox": FunctionSandbox(grade),
        "tasks": [RolloutTask(name="toy", description="Print a number.")],
        "group_size": 8,
        "seed": 3,
    }
    args.update(kw)
    return RolloutProducer(**args)  # type: ignore[arg-type]


async def test_group_rewards_and_infra_masking() -> None:
    """Every member is run and rewarded; INFRA_ERROR members are masked out of the batch."""
    prod = producer(mix=OperatorMix(draft=1, improve=0, debug=0, crossover=0))
    g = await prod.group()
    assert g.operator is Operator.DRAFT and g.parent_ids == ()
    assert len(g.samples) == len(g.results) == 8
    outcomes = [None if r is None else r.outcome for r in g.results]
    infra = [o is Outcome.INFRA_ERROR for o in outcomes]
    missing = [r is None for r in g.results]
    assert any(infra) and any(missing) and any(o is Outcome.SUCCESS for o in outcomes)
    assert g.rewards.included == tuple(not x for x in infra)
    batch = rollout_batch([g], pad_token_id=ByteTokenizer().pad_token_id)
    assert isinstance(batch, RolloutBatch) and batch.size == 8
    for i, is_infra in enumerate(infra):
        assert bool(batch.response_mask[i].any()) is (not is_infra)
        if is_infra:
            assert float(batch.advantages[i]) == 0.0
    assert batch.rollout_logprobs is None  # a served model gives no sampler log-probs
    # Better programs get larger advantages.
    scored = [
        (r.score, a)
        for r, a, inc in zip(g.results, g.rewards.advantages, g.rewards.included, strict=True)
        if r is not None and r.score is not None and inc
    ]
    best = max(scored)[1]
    worst = min(scored)[1]
    assert best > worst


async def test_later_groups_use_parents_from_the_pool() -> None:
    """After a Draft group, Improve groups take a rewarded parent and show its program."""
    model = ScriptedModel(answer)
    prod = producer(policy=ModelPolicy(model, ByteTokenizer()))
    await prod.group(task="toy")  # the pool is empty: always a Draft
    prod.mix = OperatorMix(draft=0, improve=1, debug=0, crossover=0)
    g = await prod.group(task="toy")
    assert g.operator is Operator.IMPROVE and len(g.parent_ids) == 1
    cands = {c.node_id: c for c in prod.candidates("toy")}
    parent = cands[g.parent_ids[0]]
    assert parent.reward is not None and parent.reward > 0
    children = sum(x is not None for x in g.program_ids)  # each rewarded child is a visit
    assert parent.visits == len(parent.children_rewards) == children
    prompt = model.requests[-1].messages[-1].content
    assert "value = " in prompt and "Validation score" in prompt
    assert prod.history["toy"]  # scores feed the adaptive bounds


async def test_local_policy_samples_with_logprobs() -> None:
    """A local tiny model: G samples of one prompt with one log-prob per sampled token."""
    tok = ByteTokenizer()
    model = TinyCausalLM(TinyLMConfig(dim=32, n_layers=1, n_heads=2, max_seq_len=128))
    policy = LocalPolicy(model, tok, max_new_tokens=12)
    request = ModelRequest(messages=(Message(role="user", content="hi"),))
    a = await policy.sample(request, 4, seed=1)
    b = await policy.sample(request, 4, seed=1)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    for s in a:
        assert s.logprobs is not None and len(s.logprobs) == len(s.token_ids) <= 12

    def short(task: RolloutTask, op: Operator, parents: Sequence[ParentView]) -> ModelRequest:
        return ModelRequest(messages=(Message(role="user", content="go"),), operator=op)

    prod = producer(policy=policy, prompt=short, group_size=3)
    g = await prod.group()
    batch = rollout_batch([g], pad_token_id=tok.pad_token_id)
    assert batch.rollout_logprobs is not None
    assert all(r is None for r in g.results)  # random bytes hold no program: MISSING_CODE


async def test_train_on_policy_steps_the_trainer() -> None:
    """The synchronous mode makes the groups, then one trainer step each, staleness 0."""
    trainer: RecordingTrainer[RolloutBatch] = RecordingTrainer()
    prod = producer()
    steps = await train_on_policy(prod, trainer, steps=3, groups_per_step=2, pad_token_id=258)
    assert [s.step for s in steps] == [0, 1, 2] and trainer.step_count == 3
    assert all(s.staleness == (0, 0) for s in steps)
    assert all(b.size == 16 for b in trainer.batches)
    assert prod.policy_version == 3


async def test_async_rollouts_bound_staleness_and_record_exposure() -> None:
    """Groups finish out of order; stale groups are dropped, and a fast task is seen more."""

    async def slow_or_fast(job: Job) -> RunResult:
        await anyio.sleep(0.05 if job.task == "slow" else 0.0)
        return grade(job)

    trainer: RecordingTrainer[RolloutBatch] = RecordingTrainer()
    prod = producer(
        sandbox=FunctionSandbox(slow_or_fast),
        tasks=[RolloutTask(name="slow"), RolloutTask(name="fast")],
        group_size=4,
    )
    loop = AsyncRollouts(prod, trainer, pad_token_id=258, groups_per_step=2, concurrency=4,
                         max_staleness=1)  # fmt: skip
    steps = await loop.run(6)
    assert len(steps) == 6 and trainer.step_count == 6 and loop.version == 6
    assert all(0 <= s <= 1 for st in steps for s in st.staleness)
    consumed = {t: c["consumed"] for t, c in loop.exposure.items()}
    assert sum(consumed.values()) == 12
    assert loop.exposure["fast"]["consumed"] >= loop.exposure["slow"]["consumed"]


def test_bad_arguments_name_the_field() -> None:
    """Too-small groups, duplicate tasks and bad loop settings are argument errors."""
    with pytest.raises(InvalidArgument, match="group_size"):
        producer(group_size=1)
    with pytest.raises(InvalidArgument, match="tasks"):
        producer(tasks=[RolloutTask(name="a"), RolloutTask(name="a")])
    with pytest.raises(InvalidArgument, match="max_staleness"):
        AsyncRollouts(producer(), RecordingTrainer(), pad_token_id=0, max_staleness=-1)
    with pytest.raises(InvalidArgument, match="groups"):
        rollout_batch([], pad_token_id=0)


async def test_guard_rejects_before_the_sandbox_with_the_hack_penalty() -> None:
    """A flagged program is never executed, gets the hack penalty, and its verdict is kept."""
    from openmle.rewards import HACK_PENALTY, Verdict

    def hacky(request: ModelRequest) -> str:
        seed = request.seed or 0
        if seed % 2:
            return "```python\nvalue = 1\nprint(open('data/private/test_answer.csv').read())\n```"
        return f"```python\nvalue = {seed % 10 if seed % 10 != 5 else 4}\nprint(value)\n```"

    ran: list[str] = []

    def record(job: Job) -> RunResult:
        ran.append(job.code)
        return grade(job)

    prod = producer(policy=ModelPolicy(ScriptedModel(hacky), ByteTokenizer()),
                    sandbox=FunctionSandbox(record))  # fmt: skip
    g = await prod.group()
    flagged = [i for i, v in enumerate(g.verdicts) if v and v.verdict is Verdict.REJECTED]
    assert flagged and len(flagged) < len(g.samples)
    assert all("data/private" not in code for code in ran)  # never reached the sandbox
    assert len(ran) == len(g.samples) - len(flagged)
    for i in flagged:
        assert g.results[i] is None and g.program_ids[i] is None
        assert g.rewards.base_rewards[i] == HACK_PENALTY and g.rewards.included[i]
        assert "hidden_answers" in g.verdicts[i].reasons  # type: ignore[union-attr]
    assert all(v is not None and v.verdict is Verdict.VALID
               for i, v in enumerate(g.verdicts) if i not in flagged)  # fmt: skip

    unguarded = producer(policy=ModelPolicy(ScriptedModel(hacky), ByteTokenizer()),
                         sandbox=FunctionSandbox(record), guard=None)  # fmt: skip
    ran.clear()
    g2 = await unguarded.group()
    assert len(ran) == len(g2.samples) and g2.verdicts == (None,) * len(g2.samples)


async def test_a_leaderboard_profile_rewards_from_the_tasks_leaderboard() -> None:
    """``RolloutTask`` had no leaderboard to give a ``leaderboard_rank`` profile, so every
    member got 0.0 (now: the task's leaderboard; without one, an error naming it)."""
    from openmle.rewards import RewardProfile

    profile = RewardProfile.default(mapping="leaderboard_rank", adaptive=False, advantage="grpo")
    board = [0.9, 0.7, 0.5, 0.3, 0.1]
    task = RolloutTask(name="toy", description="Print a number.", leaderboard=board)
    draft = OperatorMix(draft=1, improve=0, debug=0, crossover=0)
    g = await producer(tasks=[task], profile=profile, mix=draft).group()
    scored = [
        (r.score, w)
        for r, w in zip(g.results, g.rewards.rewards, strict=True)
        if r is not None and r.score is not None
    ]
    assert scored and any(w > 0 for _, w in scored)
    assert all(w == pytest.approx(1 - sum(b > s for b in board) / 4) for s, w in scored)
    bare = RolloutTask(name="toy", description="Print a number.")
    with pytest.raises(InvalidArgument, match="leaderboard=None"):
        await producer(tasks=[bare], profile=profile, mix=draft).group()
