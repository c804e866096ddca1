"""TRL as the engine: ``GRPOTrainer`` (sequence-level IS = GSPO) on a tiny local model with
rewards from real ``LocalSandbox`` runs, our advantages in TRL's loss, and ``SFTTrainer`` on the
SFT export. Tested with TRL 1.16.0 on the CPU."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest
from tests._examples import load_example

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")
datasets = pytest.importorskip("datasets")
trl = pytest.importorskip("trl")

from tests.integration.train._tiny_hf import (  # noqa: E402
    WORDS,
    digit_tokenizer,
    save_tiny_llama,
)

from openmle import Job, Outcome, RunResult, TaskMeta  # noqa: E402
from openmle.backends import LocalSandbox  # noqa: E402
from openmle.errors import InvalidArgument  # noqa: E402
from openmle.rewards import RewardProfile  # noqa: E402
from openmle.train import (  # noqa: E402
    OpenMLEGRPOTrainer,
    RolloutTask,
    SandboxReward,
    prompt_dataset,
    sft_dataset,
)

pytestmark = [
    pytest.mark.torch,
    pytest.mark.timeout(900),
    # TRL 1.16's generation path calls a transformers API that transformers deprecates
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
]

G = 4
CUDA = os.environ.get("OPENMLE_TEST_DEVICE") == "cuda"  # scripts/gpu-check.sh sets it


# The digit task (write one digit; the answer 7 is private; score ``1 - |d - 7| / 9``) is the
# example's (one definition).
DigitTask = load_example("meta_evolution").DigitTask


class FlakyNode:
    """The real LocalSandbox, except that digit 5 reports a lost node (INFRA_ERROR)."""

    def __init__(self, inner: LocalSandbox) -> None:
        self.inner = inner
        self.ran: list[str] = []

    async def run(self, job: Job) -> RunResult:
        self.ran.append(job.code)
        if "'5'" in job.code:
            return RunResult(outcome=Outcome.INFRA_ERROR, split=job.split, detail="node lost")
        return await self.inner.run(job)

    async def aclose(self) -> None:
        await self.inner.aclose()


def _program(text: str) -> str | None:
    """The tiny model's answer -> a program writing its first digit (None without one)."""
    digits = [w for w in text.split() if w in WORDS]
    return None if not digits else f"open('submission.csv', 'w').write('{digits[0]}')\n"


def _tokenizer() -> Any:
    return digit_tokenizer()


def _tiny_llama(path: Path) -> Any:
    return transformers.LlamaForCausalLM.from_pretrained(save_tiny_llama(path, layers=2))


class Recording(OpenMLEGRPOTrainer):  # type: ignore[misc]
    """Records the advantages TRL's loss receives and the groups they came from."""

    seen: list[tuple[Any, list[Any]]]

    def _generate_and_score_completions(self, inputs: Any) -> dict[str, Any]:
        out: dict[str, Any] = super()._generate_and_score_completions(inputs)
        self.seen.append((out["advantages"].clone(), list(self.openmle_reward.groups)))
        return out


def test_grpo_trainer_on_sandbox_rewards(tmp_path: Path) -> None:
    task = DigitTask.create(tmp_path / "task")
    sandbox = FlakyNode(LocalSandbox(resolver=lambda ref: task, max_concurrency=2))
    meta = TaskMeta(higher_is_better=True)
    spec = RolloutTask(name="digit", description="Write one digit.", meta=meta, timeout_s=60)
    profile = RewardProfile.default()
    reward = SandboxReward(sandbox, [spec], num_generations=G, profile=profile, parse=_program)
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "out"), importance_sampling_level="sequence",
        per_device_train_batch_size=2 * G, num_generations=G, max_completion_length=4,
        max_steps=2, learning_rate=5e-2, report_to="none", use_cpu=not CUDA, bf16=CUDA,
        logging_steps=1, save_strategy="no", temperature=1.0, seed=0,
        activation_checkpointing=False,
    )  # fmt: skip
    logging.getLogger("trl").setLevel(logging.ERROR)
    model = _tiny_llama(tmp_path / "model")
    before = [p.detach().clone() for p in model.parameters()]
    trainer = Recording(
        model=model, reward_funcs=[reward], args=args,
        train_dataset=prompt_dataset([spec], repeat=16), processing_class=_tokenizer(),
    )  # fmt: skip
    trainer.seen = []
    trainer.train()
    assert trainer.state.global_step == 2
    assert sandbox.ran  # real programs ran in the LocalSandbox
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert trainer.seen
    masked = 0
    for used, groups in trainer.seen:
        assert len(groups) * G == used.shape[0]
        want: list[float] = []
        for _task, members, history, got in groups:
            again = profile.group(members, meta=meta, history=history)
            assert again.advantages == pytest.approx(got.advantages, abs=1e-12)
            for m, a, inc in zip(members, again.advantages, again.included, strict=True):
                if m.outcome is Outcome.INFRA_ERROR:
                    assert not inc  # masked, not punished
                    masked += 1
                want.append(a if inc and not again.discarded else 0.0)
        torch.testing.assert_close(used, torch.tensor(want), atol=1e-6, rtol=0)


def test_reward_groups_follow_trl_grouping(tmp_path: Path) -> None:
    """Whole groups of ``num_generations`` consecutive completions; a mixed group is refused."""
    task = DigitTask.create(tmp_path / "task")
    spec = RolloutTask(name="digit", meta=TaskMeta(higher_is_better=True))
    reward = SandboxReward(
        FlakyNode(LocalSandbox(resolver=lambda ref: task, max_concurrency=2)), [spec],
        num_generations=2, parse=_program,
    )  # fmt: skip
    out = reward(
        prompts=[""] * 6, completions=["7", "0", "6", "no digit", "5", "3"],
        task=["digit"] * 6, prompt_id=["a", "a", "b", "b", "c", "c"],
    )  # fmt: skip
    assert len(reward.groups) == 3
    assert out[4] is None and reward.advantages[4] == 0.0  # INFRA_ERROR: masked for TRL
    assert not reward.groups[2][3].included[0] and reward.groups[2][3].included[1]
    assert out[0] is not None and out[1] is not None and out[0] > out[1]  # 7 beats 0
    assert reward.groups[1][3].base_rewards[1] == -1.0  # no program: the no-code penalty
    with pytest.raises(InvalidArgument, match="not one group"):
        reward(prompts=[""] * 2, completions=["1", "2"], task=["digit"] * 2, prompt_id=["a", "b"])
    with pytest.raises(InvalidArgument, match="multiple of num_generations"):
        reward(prompts=[""] * 3, completions=["1"] * 3, task=["digit"] * 3, prompt_id=["a"] * 3)


def test_sft_trainer_on_the_sft_export(tmp_path: Path) -> None:
    """TRL's SFTTrainer warm-starts a tiny model on the export's records (JSONL and parquet)."""
    import json

    from openmle import Message
    from openmle.search import SFTRecord

    recs = [
        SFTRecord(
            messages=[Message(role="user", content="q"), Message(role="assistant", content="7 7")],
            task="digit",
            run_id="r",
            path="parallel",
            operator="draft",
            node_id=f"n{i}",
            score=1.0,
            segment_id=f"n{i}",
        )
        for i in range(4)
    ]
    jsonl = tmp_path / "sft.jsonl"
    jsonl.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in recs))
    ds = sft_dataset(jsonl)
    assert ds[0]["completion"] == [{"role": "assistant", "content": "7 7"}]
    tok = _tokenizer()
    tok.chat_template = (
        "{% for m in messages %}{{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}{% endif %}"
    )
    model = _tiny_llama(tmp_path / "model")
    before = [p.detach().clone() for p in model.parameters()]
    args = trl.SFTConfig(
        output_dir=str(tmp_path / "sft"), max_steps=2, per_device_train_batch_size=2,
        learning_rate=1e-2, report_to="none", use_cpu=not CUDA, bf16=CUDA, save_strategy="no",
        activation_checkpointing=False,
    )  # fmt: skip
    trainer = trl.SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    trainer.train()
    assert trainer.state.global_step == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
