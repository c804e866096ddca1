"""Tokenisers: the byte tokeniser, the chat-template hook, the transformers adapter, batches."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

torch = pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

from openmle import Message  # noqa: E402
from openmle.errors import InvalidArgument  # noqa: E402
from openmle.train import ByteTokenizer, HFTokenizer, RolloutBatch, SFTBatch, Tokenizer  # noqa: E402
from openmle.train._tokenizer import default_chat_template, encode_chat  # noqa: E402

pytestmark = pytest.mark.torch

CHAT = [Message(role="system", content="Be brief."), Message(role="user", content="héllo")]


def test_byte_tokenizer_round_trip() -> None:
    """UTF-8 bytes round-trip; special ids are dropped on decode."""
    tok = ByteTokenizer()
    assert isinstance(tok, Tokenizer)
    ids = tok.encode("héllo")
    assert ids == list("héllo".encode()) and tok.decode([*ids, tok.eos_token_id]) == "héllo"
    assert (tok.eos_token_id, tok.pad_token_id, tok.vocab_size) == (257, 258, 259)


def test_chat_template_hook() -> None:
    """The default template renders roles; a custom template replaces it."""
    text = ByteTokenizer().render_chat(CHAT, add_generation_prompt=True)
    assert text == "<|system|>\nBe brief.\n<|user|>\nhéllo\n<|assistant|>\n"

    def terse(messages: Sequence[Message], add_generation_prompt: bool) -> str:
        return "|".join(m.content for m in messages) + (">" if add_generation_prompt else "")

    assert ByteTokenizer(chat_template=terse).render_chat(CHAT, add_generation_prompt=True) == (
        "Be brief.|héllo>"
    )


def test_encode_chat_appends_eos() -> None:
    """encode_chat gives the prompt ids and the answer ids ending with EOS."""
    tok = ByteTokenizer()
    prompt, answer = encode_chat(tok, CHAT, "ok")
    assert tok.decode(prompt) == default_chat_template(CHAT, True)
    assert answer == [*b"ok", 257]


def _hf_tokenizer() -> object:
    tokenizers = pytest.importorskip(
        "tokenizers", reason="needs tokenizers: pip install 'openmle[hf]'"
    )
    transformers = pytest.importorskip(
        "transformers", reason="needs transformers: pip install 'openmle[hf]'"
    )
    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2, "hello": 3, "world": 4, "user": 5, ":": 6}
    model = tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]")
    raw = tokenizers.Tokenizer(model)
    raw.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="[PAD]", eos_token="[EOS]", unk_token="[UNK]"
    )


def test_hf_adapter_uses_the_tokenizers_own_template() -> None:
    """HFTokenizer encodes without special tokens and applies the tokenizer's chat template."""
    hf = _hf_tokenizer()
    tok = HFTokenizer(hf)
    assert isinstance(tok, Tokenizer)
    assert tok.encode("hello world") == [3, 4] and tok.decode([3, 1, 4]) == "hello world"
    assert (tok.eos_token_id, tok.pad_token_id) == (1, 0)
    msgs = [Message(role="user", content="hello")]
    assert tok.render_chat(msgs, add_generation_prompt=True) == default_chat_template(msgs, True)
    hf.chat_template = "{% for m in messages %}{{ m.role }} : {{ m.content }} {% endfor %}"  # type: ignore[attr-defined]
    assert tok.render_chat(msgs, add_generation_prompt=False) == "user : hello "
    assert (
        HFTokenizer(hf, chat_template=lambda m, g: "world").render_chat(
            msgs, add_generation_prompt=True
        )
        == "world"
    )


def test_batches_from_sequences_and_messages() -> None:
    """Right padding, response masks on the answer ids, rollout log-probs in place."""
    b = RolloutBatch.from_sequences(
        [[1, 2], [3]],
        [[4], [5, 6]],
        [0.5, -0.5],
        pad_token_id=9,
        rollout_logprobs=[[-1.0], [-2.0, -3.0]],
    )
    assert b.input_ids.tolist() == [[1, 2, 4], [3, 5, 6]]
    assert b.response_mask.tolist() == [[False, False, True], [False, True, True]]
    assert b.rollout_logprobs is not None
    assert b.rollout_logprobs.tolist() == [[0.0, 0.0, -1.0], [0.0, -2.0, -3.0]]
    s = SFTBatch.from_sequences([[1, 2, 3], [4]], [[5], [6, 7]], pad_token_id=0)
    assert s.input_ids.tolist() == [[1, 2, 3, 5], [4, 6, 7, 0]]
    assert s.attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    tok = ByteTokenizer()
    m = SFTBatch.from_messages(tok, [[*CHAT, Message(role="assistant", content="hi")]])
    assert tok.decode(m.input_ids[0][m.loss_mask[0]].tolist()) == "hi"
    with pytest.raises(InvalidArgument, match="assistant"):
        SFTBatch.from_messages(tok, [CHAT])
    with pytest.raises(InvalidArgument, match="advantages"):
        RolloutBatch.from_sequences([[1]], [[2]], [0.0, 1.0], pad_token_id=0)
    with pytest.raises(InvalidArgument, match="rollout_logprobs"):
        RolloutBatch.from_sequences([[1]], [[2]], [0.0], pad_token_id=0, rollout_logprobs=[[]])
