"""GSPO that visibly learns on a laptop CPU: a tiny policy learns to write sums that hit a target.

The task ("make N"): the prompt is a target number followed by ``=`` (``"17="``); the policy
writes an expression of digits and ``+`` (``"9+8"``) and stops. The grader evaluates it: a
well-formed expression with at least one ``+`` scores ``1 - |value - N| / N`` (at least 0), so
copying the target scores 0; anything else (``"+9"``, ``"98"``, ``"9++"``) scores 0. Each step
samples ``group_size`` answers for each of ``prompts_per_step`` targets from the policy (a
:class:`~openmle.train.TinyCausalLM` over a 14-token vocabulary, started from random weights),
turns each group's scores into group-normalised advantages
(:func:`openmle.rewards.group_normalized_advantage`) and takes one
:class:`~openmle.train.GSPOTrainer` step with the sampler's log-probs (truncated importance
sampling on). The mean reward of a step is the mean score of its answers.

    python examples/learn_on_cpu.py                      # 150 steps, seed 0, ~2 min on 2 cores
    python examples/learn_on_cpu.py --plot docs/how-to/img/learn-on-cpu.png

With ``--plot`` the reward curve is drawn with matplotlib (extra ``data``). Everything is seeded:
the same seed and settings give the same curve on the same torch build.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from openmle.rewards import group_normalized_advantage
from openmle.train import (
    GSPOConfig,
    GSPOTrainer,
    RolloutBatch,
    TinyCausalLM,
    TinyLMConfig,
    sample_completions,
)

# the vocabulary: ids 0-9 are the digits, then "+", "=", end of answer, padding
PLUS, EQUALS, EOS, PAD = 10, 11, 12, 13
VOCAB = 14
TARGETS = tuple(range(10, 30))


def encode(text: str) -> list[int]:
    """``"17="`` -> token ids."""
    table = {"+": PLUS, "=": EQUALS}
    return [table[c] if c in table else int(c) for c in text]


def decode(ids: Sequence[int]) -> str:
    """Token ids of an answer -> its text (EOS and padding dropped, ``?`` for a misplaced ``=``)."""
    return "".join(
        str(i) if i < 10 else "+" if i == PLUS else "?" for i in ids if i not in (EOS, PAD)
    )


def score(answer: str, target: int) -> float:
    """The grader: ``1 - |value - target| / target`` for ``d+d(+d...)``, else 0."""
    terms = answer.split("+")
    if len(terms) < 2 or not all(t.isdigit() and len(t) <= 2 for t in terms):
        return 0.0
    return max(0.0, 1.0 - abs(sum(int(t) for t in terms) - target) / target)


def train(
    *,
    seed: int = 0,
    steps: int = 150,
    prompts_per_step: int = 4,
    group_size: int = 16,
    lr: float = 3e-3,
    max_new_tokens: int = 6,
    on_step: Callable[[int, float, dict[str, float]], Any] | None = None,
) -> list[float]:
    """Train from random weights; the mean reward of each step's answers, in order."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    model = TinyCausalLM(
        TinyLMConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, max_seq_len=16, seed=seed)
    )
    trainer = GSPOTrainer(model, GSPOConfig(lr=lr, weight_decay=0.0))
    curve: list[float] = []
    for step in range(steps):
        targets = rng.choice(TARGETS, size=prompts_per_step)
        prompts, answers, advantages, logprobs, rewards = [], [], [], [], []
        for t in targets:
            prompt = encode(f"{t}=")
            group = sample_completions(
                model, [prompt] * group_size, max_new_tokens=max_new_tokens,
                eos_token_id=EOS, generator=gen,
            )  # fmt: skip
            r = [score(decode(c.token_ids), int(t)) for c in group]
            adv = group_normalized_advantage(r)
            prompts += [prompt] * group_size
            answers += [c.token_ids for c in group]
            logprobs += [c.logprobs for c in group]
            advantages += [float(a) for a in adv]
            rewards += r
        batch = RolloutBatch.from_sequences(
            prompts, answers, advantages, pad_token_id=PAD, rollout_logprobs=logprobs
        )
        metrics = trainer.step(batch)
        curve.append(float(np.mean(rewards)))
        if on_step is not None:
            on_step(step, curve[-1], metrics)
    return curve


def plot(curve: Sequence[float], path: Path, *, title: str) -> None:
    """Draw the reward curve (and a 10-step running mean) to ``path`` (PNG, extra ``data``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(1, len(curve) + 1)
    w = 10
    smooth = np.convolve(curve, np.ones(w) / w, mode="valid")
    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
    ax.plot(x, curve, color="#9bb7d4", linewidth=1, label="mean reward of the step")
    ax.plot(x[w - 1 :], smooth, color="#1f4e79", linewidth=2, label=f"{w}-step running mean")
    ax.set_xlabel("GSPO step")
    ax.set_ylabel("mean reward")
    ax.set_ylim(0, 1)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--plot", type=Path, default=None, help="write the curve to this PNG")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    t0 = time.perf_counter()

    def show(step: int, reward: float, m: dict[str, float]) -> None:
        if step % 10 == 0 or step == a.steps - 1:
            print(f"step {step:4d}  mean reward {reward:.3f}  loss {m['loss']:+.4f}", flush=True)

    curve = train(seed=a.seed, steps=a.steps, lr=a.lr, on_step=show)
    first, last = float(np.mean(curve[:10])), float(np.mean(curve[-10:]))
    took = time.perf_counter() - t0
    if a.plot is not None:
        plot(curve, a.plot, title=f"make-N task, seed {a.seed}: first 10 steps {first:.2f}, "
             f"last 10 steps {last:.2f}")  # fmt: skip
    print(json.dumps({"seed": a.seed, "steps": a.steps, "first10": round(first, 4),
                      "last10": round(last, 4), "seconds": round(took, 1)}))  # fmt: skip
    return 0 if math.isfinite(last) else 1


if __name__ == "__main__":
    sys.exit(main())
