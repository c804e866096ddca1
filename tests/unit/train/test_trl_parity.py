"""Our GSPO loss equals TRL's GRPO loss with ``importance_sampling_level="sequence"``.

TRL's own ``GRPOTrainer.compute_loss`` (its public training code path) runs on a tiny Llama built
locally from a config (no download), on a batch with off-policy old log-probs, random advantages
and truncated importance-sampling weights; our :func:`gspo_loss` and our :class:`GSPOTrainer` see
the same batch through the same model. Each TRL ``loss_type`` whose aggregation we also have is
compared: loss within 1e-5 and gradients within 1e-5.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")
transformers = pytest.importorskip(
    "transformers", reason="needs transformers: pip install 'openmle[hf]'"
)
tokenizers = pytest.importorskip("tokenizers", reason="needs tokenizers: pip install 'openmle[hf]'")
datasets = pytest.importorskip("datasets", reason="needs datasets: pip install 'openmle[trl]'")
trl = pytest.importorskip("trl", reason="needs trl: pip install 'openmle[trl]'")

from openmle.train import GSPOConfig, GSPOTrainer, RolloutBatch, gspo_loss  # noqa: E402
from openmle.train._loss import token_logprobs  # noqa: E402

pytestmark = pytest.mark.torch

VOCAB, PROMPT, COMPLETION, B = 48, 4, 7, 6
EPS_LOW, EPS_HIGH = 3.5e-4, 4e-4

# TRL loss_type -> our aggregation
MODES = {
    "grpo": "seq-mean-token-mean",
    "bnpo": "token-mean",
    "dapo": "token-mean",
    "luspo": "seq-mean-token-sum",
    "dr_grpo": "seq-mean-token-sum-norm",
}


def _tiny_llama(path: Path) -> Any:
    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)
    return transformers.LlamaForCausalLM.from_pretrained(path)  # _name_or_path = path


def _tokenizer() -> Any:
    vocab = {f"t{i}": i for i in range(VOCAB)}
    raw = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="t2"))
    raw.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="t0", eos_token="t1", unk_token="t2"
    )


def _trl_trainer(model: Any, tmp: Path, loss_type: str, beta: float) -> Any:
    args = trl.GRPOConfig(
        output_dir=str(tmp / "out"), importance_sampling_level="sequence", loss_type=loss_type,
        beta=beta, epsilon=EPS_LOW, epsilon_high=EPS_HIGH, per_device_train_batch_size=B,
        num_generations=B, max_completion_length=COMPLETION, report_to="none", use_cpu=True,
        bf16=False, activation_checkpointing=False, vllm_importance_sampling_correction=True,
        vllm_importance_sampling_mode="token_truncate", vllm_importance_sampling_clip_min=0.0,
        vllm_importance_sampling_clip_max=2.0,
        use_bias_correction_kl=False,  # SLIME's low_var_kl, like ours, is not IS-weighted
    )  # fmt: skip
    ds = datasets.Dataset.from_dict({"prompt": ["t3 t4 t5 t6"] * B})
    logging.getLogger("trl").setLevel(logging.ERROR)  # the length-weighting warning is expected
    tr = trl.GRPOTrainer(
        model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=args, train_dataset=ds, processing_class=_tokenizer(),
    )  # fmt: skip
    # The truncated IS ratio is applied in compute_loss only on TRL's vLLM path; the batch below
    # carries the ratio TRL's generation step would have computed (token_truncate on [0, 2]).
    tr.use_vllm = True
    return tr


def _batch(model: Any) -> dict[str, Any]:
    """A batch with equal-length prompts (TRL left-pads prompts) and ragged completions."""
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, VOCAB, (B, PROMPT), generator=gen)
    completion = torch.randint(3, VOCAB, (B, COMPLETION), generator=gen)
    lengths = torch.tensor([7, 3, 5, 1, 6, 4])
    cmask = (torch.arange(COMPLETION)[None] < lengths[:, None]).long()
    ids = torch.cat([prompt, completion], 1)
    with torch.no_grad():
        lp = token_logprobs(model(input_ids=ids).logits, ids)[:, PROMPT:]
    # old policy: small per-sequence shifts so some ratios leave the clip band, some do not
    shift = torch.tensor([1e-4, -2e-3, 3e-3, -5e-5, 8e-4, -1e-3])[:, None]
    old = lp + shift + 1e-4 * torch.randn(B, COMPLETION, generator=gen)
    rollout = old + 0.5 * torch.randn(B, COMPLETION, generator=gen)  # some weights exceed 2
    ref = lp + 0.05 * torch.randn(B, COMPLETION, generator=gen)
    return {
        "prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
        "completion_mask": cmask, "advantages": torch.randn(B, generator=gen),
        "old_per_token_logps": old, "ref_per_token_logps": ref,
        "importance_sampling_ratio": (old - rollout).exp().clamp(0.0, 2.0),
        "num_items_in_batch": cmask.sum(), "rollout": rollout,
    }  # fmt: skip


def _ours(inputs: dict[str, Any]) -> RolloutBatch:
    pad = torch.zeros(B, PROMPT)

    def full(x: Any) -> Any:
        return torch.cat([pad, x], 1)

    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    return RolloutBatch(
        input_ids=ids, attention_mask=torch.ones_like(ids),
        response_mask=torch.cat([pad.bool(), inputs["completion_mask"].bool()], 1),
        advantages=inputs["advantages"], old_logprobs=full(inputs["old_per_token_logps"]),
        rollout_logprobs=full(inputs["rollout"]), ref_logprobs=full(inputs["ref_per_token_logps"]),
    )  # fmt: skip


def _grads(model: Any) -> list[Any]:
    out = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad(set_to_none=True)
    return out


@pytest.mark.parametrize(("loss_type", "beta"), [(k, 0.0) for k in MODES] + [("grpo", 0.1)])
def test_loss_and_gradients_equal_trl(tmp_path: Path, loss_type: str, beta: float) -> None:
    """TRL's compute_loss and our gspo_loss agree (value and gradient) for each shared mode."""
    model = _tiny_llama(tmp_path / "m")
    tr = _trl_trainer(model, tmp_path, loss_type, beta)
    inputs = _batch(model)
    model.eval()  # TRL's eval mode divides by no accumulation count; the model has no dropout
    trl_loss = tr.compute_loss(model, inputs)
    torch.autograd.backward(trl_loss)
    trl_grads = _grads(model)
    assert any(torch.any(g != 0) for g in trl_grads)

    batch = _ours(inputs)
    lp = token_logprobs(model(input_ids=batch.input_ids).logits, batch.input_ids)
    out = gspo_loss(
        lp, batch.old_logprobs, batch.advantages, batch.response_mask,  # type: ignore[arg-type]
        rollout_logprobs=batch.rollout_logprobs, ref_logprobs=batch.ref_logprobs, kl_coef=beta,
        clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH, aggregation=MODES[loss_type],
        norm_length=COMPLETION,
    )  # fmt: skip
    torch.autograd.backward(out.loss)
    assert 0 < out.clip_fraction.item() < 1 and out.tis_clip_fraction.item() > 0
    assert out.loss.item() == pytest.approx(trl_loss.item(), abs=1e-5)
    for ours, theirs in zip(_grads(model), trl_grads, strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_trainer_on_a_transformers_model_matches_trl(tmp_path: Path) -> None:
    """GSPOTrainer driving the Hugging Face model reports TRL's loss and takes a finite step."""
    model = _tiny_llama(tmp_path / "m")
    tr = _trl_trainer(copy.deepcopy(model), tmp_path, "grpo", 0.0)
    inputs = _batch(model)
    tr.model.eval()
    expected = tr.compute_loss(tr.model, inputs).item()
    cfg = GSPOConfig(clip_eps_low=EPS_LOW, clip_eps_high=EPS_HIGH, lr=1e-3)
    before = [p.detach().clone() for p in model.parameters()]
    metrics = GSPOTrainer(model, config=cfg).step(_ours(inputs))
    assert metrics["loss"] == pytest.approx(expected, abs=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
