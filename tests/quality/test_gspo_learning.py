"""GSPO learns from real program execution: the tiny byte-level policy, warm-started by SFT on
the answer format, raises its mean validation score on a verifiable task across seeds.

The task (``digit``): write one digit to ``submission.csv``; the grade, computed by the test
process outside the sandbox, is ``1 - |digit - 7| / 9`` (1.0 for a 7). The policy only sees
``"Write the digit."``; it never sees the target. SFT teaches the program's shape with every
digit equally often (start: mean score about 0.66); GSPO must find the 7 from rewards alone.
Every program is run by :class:`~openmle.backends.LocalSandbox` as a real process.

Run with ``-s`` to see the curve (mean score of each step, per seed).

Status (measured on a 2-core CPU): NOT yet passing, so the test is an ``xfail``. Curves at
lr 7e-4, G=8, two groups per step (mean validation score per step, failures count 0)::

    seed 0: 0.59 0.59 0.60 0.61 0.60 0.55 0.67 0.69 0.63 0.67 0.71 0.38 ... 0.66 0.62 0.64 0.64
    seed 1: 0.58 0.67 0.60 0.71 0.64 0.55 0.67 0.62 0.57 0.80 0.69 0.56 ... 0.70 0.62 0.65 0.81

(first four steps 0.619, last six 0.641). With lr 1.5e-3 or more the format collapses to
zero valid programs within two or three steps. A first guess (a fresh AdamW moves every
parameter by about ``lr`` on its first steps) is not the whole story: a linear warm-up (peak
3e-3 over 10 steps) only delays the collapse (valid programs fall from 14/16 to 0/16 by step
13). The cause is not yet found. With the default adaptive rewards (``top1_top16`` over the
score history) every member below the best score seen so far maps to 0 once a 7 has been seen,
so the test uses raw scores (``map_scores=False``).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import anyio
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from openmle import Message, ModelRequest, Operator  # noqa: E402
from openmle.backends import (  # noqa: E402
    ByteTokenizer,
    GSPOConfig,
    GSPOTrainer,
    LocalPolicy,
    LocalSandbox,
    RolloutProducer,
    RolloutTask,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
    train_on_policy,
)
from openmle.operators import ParentView  # noqa: E402
from openmle.rewards import RewardProfile  # noqa: E402
from openmle.search import OperatorMix  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.slow, pytest.mark.quality]

# The digit task, its grader and the answer shape are the example's (one definition).
_spec = importlib.util.spec_from_file_location(
    "meta_evolution", Path(__file__).parents[2] / "examples" / "meta_evolution.py"
)
assert _spec is not None and _spec.loader is not None
_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_example)
PROMPT: str = _example.PROMPT
DigitTask = _example.DigitTask
program = _example.program


def prompt(task: RolloutTask, op: Operator, parents: Sequence[ParentView]) -> ModelRequest:
    """The short Draft prompt (a byte-level model's context is small)."""
    return ModelRequest(messages=(Message(role="user", content=PROMPT),), operator=op)


def warm_start(model: TinyCausalLM, tok: ByteTokenizer, seed: int) -> None:
    """SFT on the answer shape with every digit equally often."""
    convs = [
        [Message(role="user", content=PROMPT), Message(role="assistant", content=program(d))]
        for d in range(10)
    ]
    batch = SFTBatch.from_messages(tok, convs)
    sft = SFTTrainer(model, SFTConfig(lr=3e-3, weight_decay=0.0))
    for _ in range(200):
        sft.step(batch)


def learn(tmp: Path, seed: int, steps: int) -> list[float]:
    """Warm start, then ``steps`` GSPO steps; the mean validation score of each step."""
    torch.manual_seed(seed)
    tok = ByteTokenizer()
    model = TinyCausalLM(TinyLMConfig(dim=64, n_layers=2, n_heads=4, max_seq_len=128, seed=seed))
    warm_start(model, tok, seed)
    task = DigitTask.create(tmp / f"task{seed}")
    trainer = GSPOTrainer(model, GSPOConfig(lr=7e-4, weight_decay=0.0, max_grad_norm=1.0))
    curve: list[float] = []

    async def main() -> None:
        sandbox = LocalSandbox(resolver=lambda ref: task, max_concurrency=4)
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
            for st in await train_on_policy(
                producer, trainer, steps=steps, groups_per_step=2, pad_token_id=tok.pad_token_id
            ):
                scores = [
                    0.0 if r is None or r.score is None else r.score
                    for g in st.groups
                    for r in g.results
                ]
                curve.append(float(np.mean(scores)))
        finally:
            await sandbox.aclose()

    anyio.run(main)
    return curve


@pytest.mark.xfail(
    strict=False,
    raises=AssertionError,  # only "did not learn" is expected; a crash is a real failure
    reason=(
        "not yet learning clearly: at lr 7e-4 the curve rises only about 0.02 in 24 steps; at "
        "lr >= 1.5e-3 the SFT'd answer format collapses to no valid program "
        "(see the module docstring); cause not yet found"
    ),
)
def test_gspo_raises_mean_score_across_seeds(tmp_path: Path) -> None:
    """Across two seeds the last steps' mean score is clearly above the first steps'."""
    steps = 24
    curves = {seed: learn(tmp_path, seed, steps) for seed in (0, 1)}
    for seed, curve in curves.items():
        print(f"seed {seed}: " + " ".join(f"{x:.2f}" for x in curve))
    start = np.mean([np.mean(c[:4]) for c in curves.values()])
    end = np.mean([np.mean(c[-6:]) for c in curves.values()])
    print(f"mean score: first four steps {start:.3f}, last six steps {end:.3f}")
    assert end > start + 0.05
    assert all(np.mean(c[-6:]) > np.mean(c[:4]) for c in curves.values())
