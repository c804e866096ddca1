"""LoRA through PEFT: adapters on the tiny model and on a transformers model train alone in our
trainers and resume from a checkpoint; QLoRA says plainly what it needs."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")
pytest.importorskip("peft", reason="needs peft: pip install 'openmle[peft]'")

from openmle.errors import InvalidArgument  # noqa: E402
from openmle.train import (  # noqa: E402
    GSPOConfig,
    GSPOTrainer,
    LoRAConfig,
    RolloutBatch,
    TinyCausalLM,
    TinyLMConfig,
    apply_lora,
    quantization_config,
)

pytestmark = [
    pytest.mark.torch,
    # peft asks transformers a deprecated property of transformers 5.x
    pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"),
]


def _batch(seed: int) -> RolloutBatch:
    gen = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, 32, (3,), generator=gen).tolist() for _ in range(4)]
    answers = [torch.randint(1, 32, (4,), generator=gen).tolist() for _ in range(4)]
    return RolloutBatch.from_sequences(prompts, answers, [1.0, -1.0, 0.5, -0.5], pad_token_id=0)


def _tiny() -> TinyCausalLM:
    return TinyCausalLM(TinyLMConfig(vocab_size=32, dim=32, n_layers=1, n_heads=2, seed=0))


def test_adapters_on_the_tiny_model_train_alone() -> None:
    """Only the adapters require gradients and only they move; the base stays bit-equal."""
    model = apply_lora(_tiny(), LoRAConfig(r=4, alpha=8))
    assert isinstance(model, TinyCausalLM)  # injected in place, same class and forward
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    assert any(".qkv.lora_A" in n for n in trainable) and any(
        ".proj.lora_B" in n for n in trainable
    )
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer = GSPOTrainer(model, GSPOConfig(lr=1e-2))
    for seed in range(3):
        m = trainer.step(_batch(seed))
    assert m["grad_norm"] > 0
    moved = {n for n, p in model.named_parameters() if not torch.equal(before[n], p)}
    assert moved and moved <= trainable
    assert any("lora_A" in n for n in moved)  # B starts at 0, A moves once B has


def test_a_lora_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    def build() -> GSPOTrainer:
        return GSPOTrainer(apply_lora(_tiny(), LoRAConfig(r=4)), GSPOConfig(lr=1e-2))

    a = build()
    a.step(_batch(0))
    a.save(tmp_path / "ck")
    want = a.step(_batch(1))
    b = build()
    b.load(tmp_path / "ck")
    got = b.step(_batch(1))
    assert got["loss"] == pytest.approx(want["loss"], abs=1e-9)
    for (n, p), q in zip(a.model.named_parameters(), b.model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=n)


def test_a_transformers_model_is_wrapped_with_get_peft_model() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=32, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32,
    )  # fmt: skip
    torch.manual_seed(0)
    lora = LoRAConfig(r=2, target_modules=["q_proj", "v_proj"])
    model = apply_lora(transformers.LlamaForCausalLM(cfg), lora)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    trainer = GSPOTrainer(model, GSPOConfig(lr=1e-2))
    before = [p.detach().clone() for p in model.parameters()]
    trainer.step(_batch(0))
    trainer.step(_batch(1))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(InvalidArgument, match="r"):
        LoRAConfig(r=0)
    with pytest.raises(InvalidArgument, match="quantize"):
        LoRAConfig(quantize="8bit")
    with pytest.raises(InvalidArgument, match="target_modules"):
        apply_lora(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    with pytest.raises(InvalidArgument, match="check target_modules"):
        apply_lora(_tiny(), LoRAConfig(target_modules=["nope"]))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_qlora_needs_a_cuda_gpu_and_says_so() -> None:
    """QLoRA (4-bit weights through bitsandbytes) is CUDA only: on the CPU the config is refused
    with the reason; scripts/gpu-check.sh runs it on a GPU."""
    with pytest.raises(InvalidArgument, match="needs a CUDA GPU"):
        quantization_config("4bit")
