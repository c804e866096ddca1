"""Meta-evolution at toy scale: search, train the operator model on what search verified,
search again.

1. A tiny byte-level policy, warm-started on the answer *shape* only (every digit equally
   often), drives a search on the ``digit`` task (write one digit to ``submission.csv``; the
   grade ``1 - |digit - 7| / 9`` is computed outside the sandbox from a hidden answer).
2. The search's run directory is exported to SFT records (:func:`openmle.search.export_sft`).
3. The policy is trained: SFT on those records, then GSPO on rollouts whose rewards come from
   running the programs in :class:`~openmle.backends.LocalSandbox`.
4. The trained policy searches again under the same harness and budget.

Both searches' results are printed as they are, whatever they are. Run::

    python examples/meta_evolution.py --steps 12 --gspo-steps 30

(about 30 s on 2 cores; one run: mean node score 0.70 before training, 0.87 after).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import anyio
from attrs import define, frozen

from openmle import Message, ModelRequest, ModelResponse, Operator, Split
from openmle.backends import LocalSandbox
from openmle.operators import ParentView, parse_response
from openmle.rewards import RewardProfile
from openmle.search import (
    Board,
    Budget,
    Node,
    OperatorMix,
    Proposal,
    SearchConfig,
    SearchSpec,
    TaskInfo,
    export_sft,
    run_search,
)
from openmle.train import (
    ByteTokenizer,
    GSPOConfig,
    GSPOTrainer,
    LocalPolicy,
    RolloutProducer,
    RolloutTask,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
    train_on_policy,
)

PROMPT = "Write the digit."


@frozen
class DigitGrade:
    """One grade."""

    score: float | None
    valid: bool
    reason: str


@frozen
class DigitTask:
    """The ``digit`` task package (the answer 7 lives in ``private``)."""

    root: Path
    name: str = "digit"

    @classmethod
    def create(cls, root: Path) -> DigitTask:
        """Write the package under ``root``."""
        for split in ("valid", "data"):
            (root / split / "public").mkdir(parents=True, exist_ok=True)
            (root / split / "public" / "description.txt").write_text(PROMPT + "\n")
            (root / split / "private").mkdir(parents=True, exist_ok=True)
            (root / split / "private" / "answer.txt").write_text("7\n")
        return cls(root)

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """The answer directories."""
        return (self.root / "valid" / "private", self.root / "data" / "private")

    def public_dir(self, split: Split) -> Path:
        """The public directory of ``split``."""
        return self.root / ("valid" if split is Split.VALID else "data") / "public"

    def grade(self, submission: Path, split: Split) -> DigitGrade:
        """``1 - |digit - answer| / 9``; anything but one digit is invalid."""
        private = self.root / ("valid" if split is Split.VALID else "data") / "private"
        answer = int((private / "answer.txt").read_text())
        with submission.open("rb") as f:
            text = f.read(64).decode(errors="replace").strip()
        if len(text) != 1 or not text.isdigit():
            return DigitGrade(None, False, "the submission is not one digit")
        return DigitGrade(1.0 - abs(int(text) - answer) / 9.0, True, "")


def program(digit: int) -> str:
    """The answer shape the warm start teaches: a fenced program writing ``digit``."""
    return f"```python\nopen('submission.csv','w').write('{digit}')\n```"


def warm_start(model: TinyCausalLM, tok: ByteTokenizer, steps: int = 600) -> None:
    """SFT on the answer shape only, every digit equally often (no preference for the 7).

    Trained until the shape is near certain (about 0.999 of the probability mass on the ten
    programs after 600 steps): with a weaker warm start (0.92 after 200 steps), reinforcement
    learning breaks the shape, because a negative advantage also pushes down the tokens that
    follow a bad digit, and AdamW moves every weight by about ``lr`` whatever the size of its
    gradient, so tokens with little margin flip and no valid program is left to learn from.
    """
    shape = [
        [Message(role="user", content=PROMPT), Message(role="assistant", content=program(d))]
        for d in range(10)
    ]
    warm = SFTTrainer(model, SFTConfig(lr=3e-3, weight_decay=0.0))
    batch = SFTBatch.from_messages(tok, shape)
    for _ in range(steps):
        warm.step(batch)


def request() -> ModelRequest:
    """Every operator's prompt (a byte-level model's context is short)."""
    return ModelRequest(messages=(Message(role="user", content=PROMPT),))


@frozen
class ShortPrompts:
    """A prompt builder giving the short prompt for every operator."""

    def build(
        self,
        proposal: Proposal,
        parents: Sequence[Node],
        task: TaskInfo,
        *,
        board: Board | None = None,
        time_left_s: float | None = None,
    ) -> ModelRequest:
        """The short prompt."""
        r = request()
        return ModelRequest(messages=r.messages, operator=proposal.operator, seed=proposal.seed)

    def parse(self, text: str) -> tuple[str, str | None]:
        """Plan and program."""
        p = parse_response(text)
        return p.plan, p.code


@define(eq=False)
class PolicyModel:
    """The local policy as an :class:`~openmle.OperatorModel` for the search."""

    policy: LocalPolicy
    model: str = "tiny-policy"

    async def complete(self, req: ModelRequest) -> ModelResponse:
        """One sample."""
        (s,) = await self.policy.sample(req, 1, seed=req.seed or 0)
        return ModelResponse(text=s.text, model=self.model, finish_reason="stop")


def short(task: RolloutTask, op: Operator, parents: Sequence[ParentView]) -> ModelRequest:
    """The rollout prompt (the same as the search's)."""
    return ModelRequest(messages=request().messages, operator=op)


def search(
    policy: LocalPolicy, task: DigitTask, out: Path, steps: int, seed: int
) -> dict[str, object]:
    """One search; its best validation score, test score and mean node score."""
    result = run_search(
        SearchSpec(
            task="digit",
            model=PolicyModel(policy),
            sandbox=LocalSandbox(resolver=lambda ref: task, max_concurrency=2),
            budget=Budget(steps=steps),
            config=SearchConfig(initial_drafts=4, seed=seed),
            workers=2,
            higher_is_better=True,
            description=PROMPT,
            prompts=ShortPrompts(),
        ),
        run_dir=out,
    )
    scores = [n.valid_score if n.valid_score is not None else 0.0 for n in result.nodes]
    return {
        "nodes": len(result.nodes),
        "valid_programs": sum(n.valid_score is not None for n in result.nodes),
        "mean_score": round(sum(scores) / max(1, len(scores)), 4),
        "best_valid": None if result.best is None else result.best.valid_score,
        "test": None if result.test_result is None else result.test_result.score,
    }


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Run the loop and print both searches' results."""
    ap = argparse.ArgumentParser(description="Meta-evolution at toy scale.")
    ap.add_argument("--steps", type=int, default=12, help="search steps (each search)")
    ap.add_argument("--gspo-steps", type=int, default=30, help="GSPO steps (default: 30)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="meta-evolution-"))
    tok = ByteTokenizer()
    model = TinyCausalLM(
        TinyLMConfig(dim=64, n_layers=2, n_heads=4, max_seq_len=128, seed=args.seed)
    )
    warm_start(model, tok)
    task = DigitTask.create(work / "task")
    policy = LocalPolicy(model, tok, max_new_tokens=64)

    before = search(policy, task, work / "search-before", args.steps, args.seed)
    records = export_sft([work / "search-before"], work / "sft.parquet", prompts=ShortPrompts())
    if records:
        sft = SFTTrainer(model, SFTConfig(lr=1e-3, weight_decay=0.0))
        data = SFTBatch.from_messages(tok, [r.messages for r in records])
        for _ in range(20):
            sft.step(data)

    async def gspo() -> list[float]:
        sandbox = LocalSandbox(resolver=lambda ref: task, max_concurrency=2)
        try:
            producer = RolloutProducer(
                policy=policy, sandbox=sandbox, tasks=[RolloutTask(name="digit", timeout_s=30)],
                group_size=8, mix=OperatorMix(draft=1, improve=0, debug=0, crossover=0),
                prompt=short, seed=args.seed,
                profile=RewardProfile.default(advantage="grpo", map_scores=False),
            )  # fmt: skip
            trainer = GSPOTrainer(model, GSPOConfig(lr=7e-4, weight_decay=0.0))
            steps = await train_on_policy(
                producer, trainer, steps=args.gspo_steps, groups_per_step=1,
                pad_token_id=tok.pad_token_id,
            )  # fmt: skip
            return [round(s.mean_reward, 4) for s in steps]
        finally:
            await sandbox.aclose()

    curve = anyio.run(gspo)
    after = search(policy, task, work / "search-after", args.steps, args.seed)
    report = {"before": before, "sft_records": len(records), "gspo_rewards": curve, "after": after}
    print("search before training:", json.dumps(before))
    print(f"SFT records: {len(records)}; GSPO mean reward per step: {curve}")
    print("search after training: ", json.dumps(after))
    return report


if __name__ == "__main__":
    main()
