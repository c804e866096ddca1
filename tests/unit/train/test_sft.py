"""SFTTrainer: answer-only loss, learning, accumulation, exact resume, and handing over to GSPO."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle import Message, Trainer  # noqa: E402
from openmle.errors import InvalidArgument, TrainerError  # noqa: E402
from openmle.testing import check_trainer  # noqa: E402
from openmle.train import (  # noqa: E402
    ByteTokenizer,
    GSPOTrainer,
    RolloutBatch,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
)

pytestmark = pytest.mark.torch


def _records() -> list[list[Message]]:
    return [
        [
            Message(role="user", content=f"Add {a} and {b}."),
            Message(role="assistant", content=str(a + b)),
        ]
        for a, b in [(1, 2), (3, 4), (2, 5), (6, 1)]
    ]


def _model() -> Any:
    return TinyCausalLM(TinyLMConfig(dim=32, n_layers=1, n_heads=2, seed=0))


def test_loss_falls_on_chat_records() -> None:
    """Twenty steps on four chat records cut the answer NLL by more than half."""
    batch = SFTBatch.from_messages(ByteTokenizer(), _records())
    trainer = SFTTrainer(_model(), config=SFTConfig(lr=3e-3))
    assert isinstance(trainer, Trainer)
    first = trainer.step(batch)
    for _ in range(19):
        last = trainer.step(batch)
    assert last["loss"] < 0.5 * first["loss"]
    assert first["tokens"] == float(batch.loss_mask.sum()) and last["step"] == 20.0


def test_prompt_tokens_carry_no_loss() -> None:
    """Changing prompt tokens' targets does not change the loss value: only answers count."""
    from openmle.train import sft_loss

    logits = torch.randn(1, 6, 259, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    other = torch.tensor([[9, 9, 9, 4, 5, 6]])
    mask = torch.tensor([[False, False, False, True, True, True]])
    assert sft_loss(logits, ids, mask).item() == pytest.approx(sft_loss(logits, other, mask).item())


def test_accumulation_equals_one_pass() -> None:
    """Micro-batches of one record give the whole-batch loss and gradient norm."""
    batch = SFTBatch.from_messages(ByteTokenizer(), _records())
    a = SFTTrainer(_model()).step(batch)
    b = SFTTrainer(_model(), config=SFTConfig(micro_batch_size=1)).step(batch)
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-6)
    assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)


def test_conformance_and_kind_check(tmp_path: Path) -> None:
    """check_trainer passes; a GSPO checkpoint is refused by SFTTrainer.load."""
    tok = ByteTokenizer()
    recs = _records()
    batches = [SFTBatch.from_messages(tok, recs[i : i + 2]) for i in (0, 2, 0, 2)]
    check_trainer(lambda: SFTTrainer(_model(), config=SFTConfig(lr=1e-3)), batches)
    GSPOTrainer(_model()).save(tmp_path / "g")
    with pytest.raises(TrainerError, match="'gspo' checkpoint"):
        SFTTrainer(_model()).load(tmp_path / "g")


class _RunsCode:
    """Unpickled by a full unpickler, it runs ``code``."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (exec, (self.code,))


def test_a_checkpoint_from_elsewhere_cannot_run_code(tmp_path: Path) -> None:
    """The RNG file of a checkpoint was read with a full unpickler (``weights_only=False``): a
    received checkpoint ran its code on load. Now it is refused, naming the checkpoint."""
    SFTTrainer(_model()).save(tmp_path / "ck")
    marker = tmp_path / "ran"
    torch.save(_RunsCode(f"open({str(marker)!r}, 'w').write('x')"), tmp_path / "ck" / "rng-0.pt")
    with pytest.raises(TrainerError, match="cannot read checkpoint"):
        SFTTrainer(_model()).load(tmp_path / "ck")
    assert not marker.exists()
    torch.save({"torch": "not a state"}, tmp_path / "ck" / "rng-0.pt")
    with pytest.raises(TrainerError, match="no usable RNG state"):
        SFTTrainer(_model()).load(tmp_path / "ck")


def test_saving_over_links_writes_no_file_elsewhere(tmp_path: Path) -> None:
    """Saving into a checkpoint folder whose files are links (a folder from elsewhere) wrote
    the new tensors through them into the linked files; each file is now replaced."""
    SFTTrainer(_model()).save(tmp_path / "ck")
    victims = {}
    for name in ("model.pt", "optimizer.pt", "trainer.json", "rng-0.pt"):
        victims[name] = tmp_path / f"mine-{name}"
        victims[name].write_text("keep me\n")
        (tmp_path / "ck" / name).unlink()
        (tmp_path / "ck" / name).symlink_to(victims[name])
    SFTTrainer(_model()).save(tmp_path / "ck")
    assert all(v.read_text() == "keep me\n" for v in victims.values())
    assert not any(p.is_symlink() for p in (tmp_path / "ck").iterdir())
    loaded = SFTTrainer(_model())
    loaded.load(tmp_path / "ck")  # the files written are whole
    assert loaded.step_count == 0


@pytest.mark.parametrize("info", ["[]", '{"kind": "sft"}', '{"kind": "sft", "step": "3"}'])
def test_a_checkpoint_without_a_step_is_refused(tmp_path: Path, info: str) -> None:
    """A ``trainer.json`` that is not an object with an integer step: one TrainerError naming
    it (an ``AttributeError`` or ``KeyError`` came out of ``load``)."""
    SFTTrainer(_model()).save(tmp_path / "ck")
    (tmp_path / "ck" / "trainer.json").write_text(info)
    with pytest.raises(TrainerError, match=r"trainer\.json is not a trainer checkpoint's"):
        SFTTrainer(_model()).load(tmp_path / "ck")


def test_sft_then_gspo_on_the_same_model() -> None:
    """The SFT-trained module goes straight into GSPOTrainer (same model interface)."""
    model = _model()
    tok = ByteTokenizer()
    SFTTrainer(model, config=SFTConfig(lr=1e-3)).step(SFTBatch.from_messages(tok, _records()))
    rb = RolloutBatch.from_sequences([[1, 2], [3]], [[4, 5], [6]], [1.0, -1.0], pad_token_id=258)
    metrics = GSPOTrainer(model).step(rb)
    assert metrics["ratio_mean"] == 1.0


def test_config_validation() -> None:
    """Bad SFT hyperparameters raise InvalidArgument naming the field."""
    with pytest.raises(InvalidArgument, match="lr"):
        SFTConfig(lr=0.0)
    with pytest.raises(InvalidArgument, match="micro_batch_size"):
        SFTConfig(micro_batch_size=0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_sft_on_gpu_resumes_exactly() -> None:
    """On CUDA (bf16 autocast, fused AdamW) SFT steps are finite and resume exactly."""
    tok = ByteTokenizer()
    recs = _records()
    batches = [SFTBatch.from_messages(tok, recs[i : i + 2]) for i in (0, 2, 0, 2)]
    check_trainer(lambda: SFTTrainer(_model().cuda(), config=SFTConfig(lr=1e-3)), batches)
