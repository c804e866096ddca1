"""A tiny Hugging Face tokenizer and Llama for the TRL tests, made here (nothing downloaded).

Needs ``transformers``, ``tokenizers`` and ``torch`` (imported when called: the test modules
skip on ``pytest.importorskip`` first). The vocabulary is the ten digits and three specials;
the chat template is short (an operator prompt's words are all ``<unk>`` for it).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

__all__ = ["VOCAB", "WORDS", "digit_tokenizer", "save_tiny_llama"]

WORDS = [str(d) for d in range(10)]
VOCAB = ["<pad>", "<eos>", "<unk>", *WORDS]


def _modules(*names: str) -> list[Any]:
    """The optional libraries, untyped (as the tests' ``pytest.importorskip`` gives them)."""
    return [importlib.import_module(name) for name in names]


def digit_tokenizer() -> Any:
    """A word-level ``PreTrainedTokenizerFast`` over :data:`VOCAB` (pad 0, eos 1, unk 2)."""
    tokenizers, transformers = _modules("tokenizers", "transformers")
    raw = tokenizers.Tokenizer(
        tokenizers.models.WordLevel(vocab={w: i for i, w in enumerate(VOCAB)}, unk_token="<unk>")
    )
    raw.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=raw, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>"
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }} {% endfor %}"
        "{% if add_generation_prompt %}1 2 3 {% endif %}"
    )
    return tok


def save_tiny_llama(path: Path, *, layers: int) -> Path:
    """A seeded (seed 0) ``layers``-layer Llama of width 32 over :data:`VOCAB`, saved to
    ``path``; returns ``path``."""
    torch, transformers = _modules("torch", "transformers")
    cfg = transformers.LlamaConfig(
        vocab_size=len(VOCAB), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=0, eos_token_id=1, bos_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)
    return path
