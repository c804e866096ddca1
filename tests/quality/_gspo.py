"""GSPO on the ``digit`` task from real program execution: the shared harness of the GSPO guard
(``tests/quality/test_gspo_learning.py``) and of the GSPO learning benchmark
(``benchmarks/gspo_learning.py``, the across-seeds comparison that takes minutes).

The task (``digit``): write one digit to ``submission.csv``; the grade, computed by the test
process outside the sandbox, is ``1 - |digit - 7| / 9`` (1.0 for a 7). The policy only sees
``"Write the digit."``; it never sees the target. SFT teaches the program's shape with every
digit equally often (start: mean score about 0.65); GSPO must find the 7 from rewards alone.
Every distinct program is run by :class:`~openmle.backends.LocalSandbox` as a real process;
a program is deterministic (it writes one digit), so an identical one gets the recorded result
(:class:`~tests.quality._harness.CachedSandbox`: after the warm start a step's 16 programs are
a few of the ten shapes). The warm start of a seed is computed once per process and shared by
every run of that seed (weights and the torch random state, so a run continues exactly as if
it had warmed up itself).

What made it learn (an earlier version of the test was an xfail): the warm start trains the
shape to near certainty (600 SFT steps, about 0.999 of the mass on the ten programs, was 200
steps and 0.92). With the weak warm start, GSPO at lr >= 1e-3 broke the program shape within a
few steps, and at 7e-4 the shape decayed as fast as the digit improved. Measured with exact
sequence probabilities (:func:`digit_probabilities`, not samples): a negative advantage also
pushes down the tokens that *follow* a bad digit, and AdamW moves every weight by about ``lr``
whatever the size of its gradient (exactly ``lr`` on its first step), so the shape's least
certain tokens flip; one step can take the shape from 0.97 to 0.01, after which no valid
program is left to learn from. With the strong warm start, lr 5e-4 and 7e-4 learned on six of
six seeds (expected score 0.65 -> 0.85-0.91 after 40 steps); lr 1e-3 learned faster but
collapsed for good on one of six seeds (and fell to 0.29 valid before recovering on another),
so the synchronous runs use 7e-4. The trainer itself is unchanged: its loss and gradients equal
TRL's (``tests/unit/backends/torch/test_trl_parity.py``).

With the default adaptive rewards (``top1_top16`` over the score history) every member below
the best score seen so far maps to 0 once a 7 has been seen, so the runs use raw scores
(``map_scores=False``).

Needs torch (the callers skip without it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import numpy as np
import torch
from attrs import frozen
from tests._examples import load_example
from tests.quality._harness import CachedSandbox

from openmle import Message, ModelRequest, Operator
from openmle.backends import LocalSandbox
from openmle.operators import ParentView
from openmle.rewards import RewardProfile
from openmle.search import OperatorMix
from openmle.train import (
    AsyncRollouts,
    ByteTokenizer,
    GSPOConfig,
    GSPOTrainer,
    LocalPolicy,
    RolloutProducer,
    RolloutTask,
    SFTBatch,
    TinyCausalLM,
    TinyLMConfig,
    train_on_policy,
)

# The digit task, its grader and the answer shape are the example's (one definition).
_example = load_example("meta_evolution")
PROMPT: str = _example.PROMPT
DigitTask = _example.DigitTask
warm_start = _example.warm_start
program = _example.program

#: Per (seed, small): the warm-started weights and the torch random state right after it.
_WARM: dict[tuple[int, bool], tuple[dict[str, Any], Any]] = {}


@frozen
class Learned:
    """One run: the mean validation score of each step's programs (failures count 0), and
    the exact probability of each digit's program under the policy after the warm start and
    at the end (:func:`digit_probabilities`)."""

    curve: list[float]
    start: list[float]
    end: list[float]


def prompt(task: RolloutTask, op: Operator, parents: Sequence[ParentView]) -> ModelRequest:
    """The short Draft prompt (a byte-level model's context is small)."""
    return ModelRequest(messages=(Message(role="user", content=PROMPT),), operator=op)


@torch.no_grad()
def digit_probabilities(model: TinyCausalLM, tok: ByteTokenizer) -> list[float]:
    """``p[d]``: the exact probability that the policy answers the prompt with the program
    writing digit ``d`` (its answer tokens, end of answer included), for ``d`` in 0..9. The
    sum is the mass left on the answer shape."""
    batch = SFTBatch.from_messages(
        tok,
        [
            [Message(role="user", content=PROMPT), Message(role="assistant", content=program(d))]
            for d in range(10)
        ],
    )
    was_training = model.training
    model.eval()
    try:
        logits = model(batch.input_ids, batch.attention_mask).logits  # (10, T, V)
    finally:
        model.train(was_training)
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    token = logp.gather(-1, batch.input_ids[:, 1:, None]).squeeze(-1)  # (10, T-1)
    mask = batch.loss_mask[:, 1:].to(token.dtype)
    return [float(p) for p in torch.exp((token * mask).sum(dim=1))]


def learn(
    tmp: Path,
    seed: int,
    steps: int,
    *,
    mode: Literal["sync", "async"] = "sync",
    lr: float = 7e-4,
    small: bool = False,
) -> Learned:
    """Warm start, then ``steps`` GSPO steps of two groups of 8 programs.

    ``mode="sync"`` uses :func:`train_on_policy` (deterministic for a seed: one torch thread,
    ordered groups); ``"async"`` uses :class:`AsyncRollouts` (two groups in flight, groups at
    most one optimiser step stale). The policy has 2 layers of width 64, or with ``small`` 1
    layer of width 32 (its warm start costs about a third)."""
    torch.manual_seed(seed)
    tok = ByteTokenizer()
    width, layers, heads = (32, 1, 2) if small else (64, 2, 4)
    model = TinyCausalLM(
        TinyLMConfig(dim=width, n_layers=layers, n_heads=heads, max_seq_len=128, seed=seed)
    )
    key = (seed, small)
    if key in _WARM:  # the same policy warmed up by an earlier run: continue from its state
        weights, rng = _WARM[key]
        model.load_state_dict(weights)
        torch.set_rng_state(rng)
    else:
        warm_start(model, tok)
        weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        _WARM[key] = (weights, torch.get_rng_state())
    start = digit_probabilities(model, tok)
    task = DigitTask.create(tmp / f"task{seed}-{mode}-{steps}-{int(small)}")
    trainer = GSPOTrainer(model, GSPOConfig(lr=lr, weight_decay=0.0, max_grad_norm=1.0))
    curve: list[float] = []

    async def main() -> None:
        sandbox = CachedSandbox(LocalSandbox(resolver=lambda ref: task, max_concurrency=4))
        try:
            producer = RolloutProducer(
                policy=LocalPolicy(model, tok, max_new_tokens=64),
                sandbox=sandbox,
                tasks=[RolloutTask(name="digit", timeout_s=30)],
                group_size=8,
                mix=OperatorMix(draft=1, improve=0, debug=0, crossover=0),
                prompt=prompt,
                seed=seed,
                profile=RewardProfile.default(advantage="grpo", map_scores=False),
            )
            if mode == "sync":
                done = await train_on_policy(
                    producer, trainer, steps=steps, groups_per_step=2,
                    pad_token_id=tok.pad_token_id,
                )  # fmt: skip
            else:
                loop = AsyncRollouts(
                    producer, trainer, pad_token_id=tok.pad_token_id, groups_per_step=2,
                    concurrency=2, max_staleness=1,
                )  # fmt: skip
                done = await loop.run(steps)
            for st in done:
                scores = [
                    0.0 if r is None or r.score is None else r.score
                    for g in st.groups
                    for r in g.results
                ]
                curve.append(float(np.mean(scores)))
        finally:
            await sandbox.aclose()

    anyio.run(main)
    return Learned(curve=curve, start=start, end=digit_probabilities(model, tok))


def valid_grade(p: Sequence[float]) -> float:
    """The policy's exact expected grade given that it answers with one of the ten programs,
    from their probabilities ``p`` (:func:`digit_probabilities`; the program writing ``d``
    grades ``1 - |d - 7| / 9``): 0.656 for every digit alike, 1.0 for the 7 alone. It
    measures the preference learned for the digit apart from the mass kept on the shape."""
    return float(sum(q * (1 - abs(d - 7) / 9) for d, q in enumerate(p)) / sum(p))


def gains(curves: dict[int, list[float]]) -> dict[int, float]:
    """Per seed: the last six steps' mean score minus the first four's."""
    return {s: float(np.mean(c[-6:]) - np.mean(c[:4])) for s, c in curves.items()}
