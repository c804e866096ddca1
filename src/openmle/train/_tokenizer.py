"""Tokenisation through a small protocol with a chat-template hook.

A trainer needs four things from a tokeniser: ``encode``, ``decode``, the end-of-sequence and
padding ids, and a way to render chat messages into a prompt. :class:`ByteTokenizer` (UTF-8
bytes plus three special ids) needs no files and pairs with :class:`TinyCausalLM`;
:class:`HFTokenizer` adapts any ``transformers`` tokenizer and uses its own chat template unless
you pass one.

Prompt and answer are tokenised separately (:func:`encode_chat`) and concatenated as ids, which
is how a rollout is built (generated ids appended to the prompt's ids), so training sees exactly
the ids that were sampled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, final, runtime_checkable

from attrs import define, field

from openmle._types import Message

__all__ = [
    "ByteTokenizer",
    "ChatTemplate",
    "HFTokenizer",
    "Tokenizer",
    "default_chat_template",
    "encode_chat",
]

ChatTemplate = Callable[[Sequence[Message], bool], str]
"""Renders ``(messages, add_generation_prompt)`` into the prompt text."""


def default_chat_template(messages: Sequence[Message], add_generation_prompt: bool) -> str:
    r"""A plain template: ``<|role|>\ncontent\n`` per message, then ``<|assistant|>\n``."""
    text = "".join(f"<|{m.role}|>\n{m.content}\n" for m in messages)
    return text + ("<|assistant|>\n" if add_generation_prompt else "")


@runtime_checkable
class Tokenizer(Protocol):
    """What the trainers and samplers need from a tokeniser."""

    @property
    def eos_token_id(self) -> int:
        """The id that ends an answer."""
        ...

    @property
    def pad_token_id(self) -> int:
        """The id used for padding (never trained on)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without special tokens."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens dropped."""
        ...

    def render_chat(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """The prompt text of ``messages`` (the chat-template hook)."""
        ...


@final
@define(eq=False)
class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as ids 0-255, then BOS 256, EOS 257, PAD 258 (``vocab_size`` 259).

    Args:
        chat_template: renders messages into text; :func:`default_chat_template` by default.
    """

    chat_template: ChatTemplate = field(default=default_chat_template)
    vocab_size: int = field(default=259, init=False)
    bos_token_id: int = field(default=256, init=False)

    @property
    def eos_token_id(self) -> int:
        """257."""
        return 257

    @property
    def pad_token_id(self) -> int:
        """258."""
        return 258

    def encode(self, text: str) -> list[int]:
        """The UTF-8 bytes of ``text``."""
        return list(text.encode("utf-8"))

    def decode(self, ids: Sequence[int]) -> str:
        """Bytes below 256 decoded as UTF-8 (invalid sequences replaced)."""
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def render_chat(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """Apply ``chat_template``."""
        return self.chat_template(messages, add_generation_prompt)


@final
@define(eq=False)
class HFTokenizer(Tokenizer):
    """Adapts a Hugging Face ``transformers`` tokenizer to :class:`Tokenizer`.

    Args:
        tokenizer: a ``PreTrainedTokenizerBase``.
        chat_template: overrides the tokenizer's own template; when ``None`` the tokenizer's
            ``apply_chat_template`` is used if it has a template, else
            :func:`default_chat_template`.

    Raises:
        ValueError: the tokenizer has neither an EOS token nor a pad token.
    """

    tokenizer: Any
    chat_template: ChatTemplate | None = None

    def __attrs_post_init__(self) -> None:
        if self.tokenizer.eos_token_id is None and self.tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has neither an eos_token_id nor a pad_token_id")

    @property
    def eos_token_id(self) -> int:
        """The tokenizer's EOS id (its pad id when it has no EOS)."""
        eos = self.tokenizer.eos_token_id
        return int(eos if eos is not None else self.tokenizer.pad_token_id)

    @property
    def pad_token_id(self) -> int:
        """The tokenizer's pad id (its EOS id when it has no pad token)."""
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def encode(self, text: str) -> list[int]:
        """``tokenizer.encode(text, add_special_tokens=False)``."""
        return [int(i) for i in self.tokenizer.encode(text, add_special_tokens=False)]

    def decode(self, ids: Sequence[int]) -> str:
        """``tokenizer.decode(ids, skip_special_tokens=True)``."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=True))

    def render_chat(self, messages: Sequence[Message], *, add_generation_prompt: bool) -> str:
        """The override template, else the tokenizer's template, else the default one."""
        if self.chat_template is not None:
            return self.chat_template(messages, add_generation_prompt)
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(
                    [{"role": m.role, "content": m.content} for m in messages],
                    tokenize=False,
                    add_generation_prompt=add_generation_prompt,
                )
            )
        return default_chat_template(messages, add_generation_prompt)


def encode_chat(
    tokenizer: Tokenizer, messages: Sequence[Message], answer: str | None = None
) -> tuple[list[int], list[int]]:
    """Prompt ids of ``messages`` (with the generation prompt) and ids of ``answer`` + EOS.

    Args:
        tokenizer: any :class:`Tokenizer`.
        messages: the conversation so far (system/user turns, earlier assistant turns).
        answer: the assistant's answer to train on; ``None`` gives empty answer ids.

    Returns:
        ``(prompt_ids, answer_ids)``; ``answer_ids`` ends with ``eos_token_id`` when given.
    """
    prompt = tokenizer.encode(tokenizer.render_chat(messages, add_generation_prompt=True))
    if answer is None:
        return prompt, []
    return prompt, [*tokenizer.encode(answer), tokenizer.eos_token_id]
