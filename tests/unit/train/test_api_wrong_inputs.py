"""Training API ergonomics found by a new-user trial (CPU, tiny models, well under a second)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._errors import X

pytest.importorskip("torch")

from openmle import Message
from openmle.errors import InvalidArgument, InvalidArgumentType, TrainerError
from openmle.train import (
    ByteTokenizer,
    GSPOConfig,
    GSPOTrainer,
    RolloutBatch,
    SFTBatch,
    SFTConfig,
    SFTTrainer,
    TinyCausalLM,
    TinyLMConfig,
    sample_completions,
)

TOK = ByteTokenizer()


def _model(dim: int = 16) -> TinyCausalLM:
    return TinyCausalLM(TinyLMConfig(vocab_size=TOK.vocab_size, dim=dim, n_layers=1, n_heads=2))


def test_a_trainer_refuses_the_other_trainers_config() -> None:
    """``SFTTrainer(model, config=GSPOConfig())`` was accepted (both have ``optim()``)."""
    with pytest.raises(InvalidArgumentType, match="Expected SFTConfig but got config="):
        SFTTrainer(_model(), config=X(GSPOConfig()))
    with pytest.raises(InvalidArgumentType, match="Expected GSPOConfig but got config="):
        GSPOTrainer(_model(), config=X(SFTConfig()))


def test_a_checkpoint_of_another_shape_is_a_trainer_error(tmp_path: Path) -> None:
    """It was torch's multi-line ``RuntimeError`` from ``load_state_dict``."""
    SFTTrainer(_model(16)).save(tmp_path / "ckpt")
    with pytest.raises(TrainerError, match="does not fit this model") as info:
        SFTTrainer(_model(32)).load(tmp_path / "ckpt")
    assert "\n" not in str(info.value)


def test_chat_records_may_be_role_content_mappings() -> None:
    """The chat JSON of most datasets; it raised ``AttributeError: 'dict' ... 'role'``."""
    as_dicts = [[{"role": "user", "content": "two"}, {"role": "assistant", "content": "2"}]]
    as_messages = [[Message(role="user", content="two"), Message(role="assistant", content="2")]]
    got = SFTBatch.from_messages(TOK, X(as_dicts))
    want = SFTBatch.from_messages(TOK, as_messages)
    assert got.input_ids.tolist() == want.input_ids.tolist()


@pytest.mark.parametrize(
    ("conversations", "error", "names"),
    [
        (["hello"], InvalidArgumentType, "conversations[0]="),
        ([[Message(role="user", content="x"), 5]], InvalidArgumentType, "conversations[0][1]"),
        ([[{"role": "bot", "content": "x"}]], InvalidArgument, "Message.role"),
    ],
)
def test_wrong_chat_records_are_named(conversations: object, error: type, names: str) -> None:
    with pytest.raises(error, match=names.replace("[", r"\[").replace("]", r"\]")):
        SFTBatch.from_messages(TOK, X(conversations))


@pytest.mark.parametrize(
    ("prompts", "max_new", "names"),
    [
        ([[]], 2, "prompts[0]"),
        ([], 2, "prompts="),
        (["ab"], 2, "prompts[0]"),
        ([[1]], -1, "max_new_tokens"),
        ([[1] * 20], 2, "TinyLMConfig.max_seq_len 16"),
    ],
)
def test_sampling_names_a_wrong_prompt(prompts: object, max_new: int, names: str) -> None:
    """An empty prompt was torch's "Expected tensor for argument #1 'indices' to have one of
    the following scalar types"; a too-long one a bare ``ValueError``."""
    model = TinyCausalLM(TinyLMConfig(vocab_size=14, dim=16, n_layers=1, n_heads=2, max_seq_len=16))
    with pytest.raises(InvalidArgument) as info:
        sample_completions(model, X(prompts), max_new_tokens=max_new, eos_token_id=12)
    assert names in str(info.value)


@pytest.mark.parametrize(
    ("prompts", "responses", "pad", "names"),
    [
        (["ab"], [[1]], 0, "prompts[0]"),
        ([[1]], "ab", 0, "answers="),
        ([[1]], [[2]], "x", "pad_token_id"),
    ],
)
def test_a_rollout_batch_names_wrong_sequences(
    prompts: object, responses: object, pad: object, names: str
) -> None:
    """They were torch's "too many dimensions 'str'" and "full(): argument 'fill_value'"."""
    with pytest.raises(InvalidArgument) as info:
        RolloutBatch.from_sequences(X(prompts), X(responses), [1.0], pad_token_id=X(pad))
    assert names in str(info.value)
