"""LoRA and QLoRA through PEFT: train a few low-rank adapters instead of the whole model.

:func:`apply_lora` puts LoRA adapters (``peft``, extra ``peft``) on a model and freezes
everything else, so :class:`~openmle.train.GSPOTrainer` and :class:`~openmle.train.SFTTrainer`
(which optimise the parameters with ``requires_grad``) train the adapters only, and the
checkpoint still holds the whole model. A Hugging Face causal LM is wrapped with
``peft.get_peft_model`` (its forward, ``logits_to_keep`` included, is unchanged); any other
module, :class:`~openmle.train.TinyCausalLM` included, gets the adapters injected in place
(``peft.inject_adapter_in_model``), keeping its class and forward.

QLoRA is the same adapters on a model whose frozen weights are stored in 4 bits:
:func:`quantization_config` gives the ``transformers`` ``BitsAndBytesConfig`` to load it with
(``from_pretrained(name, quantization_config=...)``); it needs ``bitsandbytes`` and a CUDA GPU,
and says so when either is missing. For TRL, pass :meth:`LoRAConfig.peft` as ``peft_config``.
"""

from __future__ import annotations

from typing import Any, final

from attrs import field, frozen
from torch import nn

from openmle._compat import require
from openmle._validation import check_choice, check_positive, check_type, fail
from openmle.errors import InvalidArgument

__all__ = ["LoRAConfig", "apply_lora", "quantization_config"]

_TINY_TARGETS = ("qkv", "proj")
"""The attention projections of :class:`~openmle.train.TinyCausalLM`."""


def _targets(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@final
@frozen(kw_only=True)
class LoRAConfig:
    """Where the adapters go and their shape.

    Attributes:
        r: the adapters' rank.
        alpha: the scale numerator (the update is scaled by ``alpha / r``).
        dropout: dropout on the adapters' input.
        target_modules: names (suffixes) of the linear layers to adapt; ``None``: PEFT's
            default for the model's architecture, or ``("qkv", "proj")`` for
            :class:`~openmle.train.TinyCausalLM`.
        quantize: ``None``, or ``"4bit"`` for QLoRA (NF4 weights, bf16 compute; CUDA and
            ``bitsandbytes`` only): load the model with :func:`quantization_config`.
    """

    r: int = 16
    alpha: float = 32.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = field(default=None, converter=_targets)
    quantize: str | None = None

    def __attrs_post_init__(self) -> None:
        check_positive(check_type(self.r, int, "r"), "r")
        check_positive(self.alpha, "alpha")
        if not 0.0 <= check_type(self.dropout, (int, float), "dropout") < 1.0:
            raise fail("a number in [0, 1)", "dropout", self.dropout)
        if self.target_modules is not None and not all(
            isinstance(t, str) and t for t in self.target_modules
        ):
            raise fail("module names", "target_modules", self.target_modules)
        if self.quantize is not None:
            check_choice(self.quantize, ("4bit",), "quantize")

    def peft(self, *, task_type: str | None = "CAUSAL_LM") -> Any:
        """The ``peft.LoraConfig`` (e.g. TRL's ``peft_config``).

        Raises:
            MissingDependency: peft is not installed (extra ``peft``).
        """
        peft: Any = require("peft", "peft")
        return peft.LoraConfig(
            r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
            target_modules=None if self.target_modules is None else list(self.target_modules),
            task_type=task_type,
        )  # fmt: skip


def apply_lora(model: nn.Module, config: LoRAConfig | None = None) -> nn.Module:
    """Add LoRA adapters to ``model`` and freeze its other parameters.

    Args:
        model: a ``transformers`` causal LM (wrapped with ``peft.get_peft_model``; a 4-bit
            model is prepared with ``peft.prepare_model_for_kbit_training`` first) or any other
            module (adapters injected in place: the same object is returned).
        config: the adapters; ``LoRAConfig()`` by default.

    Returns:
        The model to train (pass it to the trainer and, for rollouts, to the policy).

    Raises:
        MissingDependency: peft is not installed (``pip install 'openmle[peft]'``).
        InvalidArgument: no module of the model matches ``target_modules``.
    """
    check_type(model, nn.Module, "model")
    cfg = config or LoRAConfig()
    peft: Any = require("peft", "peft")
    from ._model import TinyCausalLM

    try:
        if _is_transformers(model):
            if getattr(model, "is_loaded_in_4bit", False) or getattr(model, "is_quantized", False):
                model = peft.prepare_model_for_kbit_training(model)
            return peft.get_peft_model(model, cfg.peft())  # type: ignore[no-any-return]
        targets = cfg.target_modules
        if targets is None and isinstance(model, TinyCausalLM):
            targets = _TINY_TARGETS
        if targets is None:
            raise fail(
                "target_modules for a model that is not a transformers model",
                "target_modules", None, "name its linear layers, e.g. ('q_proj', 'v_proj')",
            )  # fmt: skip
        lora = LoRAConfig(r=cfg.r, alpha=cfg.alpha, dropout=cfg.dropout, target_modules=targets)
        out = peft.inject_adapter_in_model(lora.peft(task_type=None), model)
    except ValueError as exc:
        if isinstance(exc, InvalidArgument):
            raise
        raise InvalidArgument(f"cannot add LoRA adapters: {exc}; check target_modules") from exc
    for name, p in out.named_parameters():
        p.requires_grad_("lora_" in name)
    return out  # type: ignore[no-any-return]


def quantization_config(quantize: str = "4bit") -> Any:
    """The ``transformers.BitsAndBytesConfig`` of QLoRA: NF4 4-bit weights, double quantisation,
    bf16 compute.

    Raises:
        InvalidArgument: no CUDA device (bitsandbytes' 4-bit kernels are CUDA-only here), or an
            unknown ``quantize``.
        MissingDependency: transformers or bitsandbytes is missing (``pip install
            bitsandbytes``; Linux with a CUDA GPU).
    """
    import torch

    check_choice(quantize, ("4bit",), "quantize")
    if not torch.cuda.is_available():
        raise InvalidArgument(
            "quantize='4bit' (QLoRA) needs a CUDA GPU: bitsandbytes' 4-bit kernels run on CUDA; "
            "use plain LoRA (quantize=None) on this machine"
        )
    transformers: Any = require("transformers", "hf")
    require("bitsandbytes", "qlora")
    return transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=torch.bfloat16,
    )  # fmt: skip


def _is_transformers(model: nn.Module) -> bool:
    try:
        import transformers
    except ImportError:
        return False
    return isinstance(model, transformers.PreTrainedModel)
