"""Training: the GSPO and SFT trainers, rollouts, losses, a tiny causal LM and tokenisers.

A recipe layer on top of :mod:`openmle.operators`, :mod:`openmle.rewards` and
:mod:`openmle.search` (not a leaf backend): every module here is a readable recipe that can be
copied and changed. Names load lazily; using one needs the ``torch`` extra
(``pip install 'openmle[torch]'``) and raises :class:`openmle.errors.MissingDependency` without it.

- :mod:`openmle.train._gspo`: :class:`GSPOTrainer` and :class:`GSPOConfig`.
- :mod:`openmle.train._sft`: :class:`SFTTrainer` and :class:`SFTConfig`.
- :mod:`openmle.train._rollout`: policies, the rollout producer, ``train_on_policy``.
- :mod:`openmle.train._loss`, :mod:`openmle.train._batch`: the losses and their batches.
- :mod:`openmle.train._model`, :mod:`openmle.train._tokenizer`: a tiny causal LM, tokenisers.
- :mod:`openmle.train._tracking`: :class:`StepTracker`, trainer steps to an experiment tracker
  (:mod:`openmle.tracking`) as ``on_step``.
- :mod:`openmle.train._lora`: LoRA/QLoRA adapters through PEFT (extra ``peft``).
- :mod:`openmle.train._trl`: TRL as the engine for scale (extra ``trl``): operator prompt
  datasets, sandbox reward functions, ``OpenMLEGRPOTrainer`` with the profile's advantages.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from openmle._compat import require
from openmle._exports import publish_one

if TYPE_CHECKING:
    from openmle.train._batch import RolloutBatch as RolloutBatch
    from openmle.train._batch import SFTBatch as SFTBatch
    from openmle.train._engine import OptimConfig as OptimConfig
    from openmle.train._gspo import GSPOConfig as GSPOConfig
    from openmle.train._gspo import GSPOTrainer as GSPOTrainer
    from openmle.train._lora import LoRAConfig as LoRAConfig
    from openmle.train._lora import apply_lora as apply_lora
    from openmle.train._lora import quantization_config as quantization_config
    from openmle.train._loss import GSPOLossOutput as GSPOLossOutput
    from openmle.train._loss import gspo_loss as gspo_loss
    from openmle.train._loss import sft_loss as sft_loss
    from openmle.train._model import Completion as Completion
    from openmle.train._model import TinyCausalLM as TinyCausalLM
    from openmle.train._model import TinyLMConfig as TinyLMConfig
    from openmle.train._model import sample_completions as sample_completions
    from openmle.train._rollout import AsyncRollouts as AsyncRollouts
    from openmle.train._rollout import LocalPolicy as LocalPolicy
    from openmle.train._rollout import ModelPolicy as ModelPolicy
    from openmle.train._rollout import Policy as Policy
    from openmle.train._rollout import PolicySample as PolicySample
    from openmle.train._rollout import RolloutGroup as RolloutGroup
    from openmle.train._rollout import RolloutProducer as RolloutProducer
    from openmle.train._rollout import RolloutStep as RolloutStep
    from openmle.train._rollout import RolloutTask as RolloutTask
    from openmle.train._rollout import rollout_batch as rollout_batch
    from openmle.train._rollout import train_on_policy as train_on_policy
    from openmle.train._sft import SFTConfig as SFTConfig
    from openmle.train._sft import SFTTrainer as SFTTrainer
    from openmle.train._tokenizer import ByteTokenizer as ByteTokenizer
    from openmle.train._tokenizer import HFTokenizer as HFTokenizer
    from openmle.train._tokenizer import Tokenizer as Tokenizer
    from openmle.train._tokenizer import encode_chat as encode_chat
    from openmle.train._tracking import StepTracker as StepTracker
    from openmle.train._trl import SandboxReward as SandboxReward
    from openmle.train._trl import prompt_dataset as prompt_dataset
    from openmle.train._trl import sft_dataset as sft_dataset

# name -> private module that defines it. Keep alphabetical.
_LAZY: dict[str, str] = {
    "AsyncRollouts": "openmle.train._rollout",
    "ByteTokenizer": "openmle.train._tokenizer",
    "Completion": "openmle.train._model",
    "GSPOConfig": "openmle.train._gspo",
    "GSPOLossOutput": "openmle.train._loss",
    "GSPOTrainer": "openmle.train._gspo",
    "HFTokenizer": "openmle.train._tokenizer",
    "LoRAConfig": "openmle.train._lora",
    "LocalPolicy": "openmle.train._rollout",
    "ModelPolicy": "openmle.train._rollout",
    "OpenMLEGRPOTrainer": "openmle.train._trl",
    "OptimConfig": "openmle.train._engine",
    "Policy": "openmle.train._rollout",
    "PolicySample": "openmle.train._rollout",
    "RolloutBatch": "openmle.train._batch",
    "RolloutGroup": "openmle.train._rollout",
    "RolloutProducer": "openmle.train._rollout",
    "RolloutStep": "openmle.train._rollout",
    "RolloutTask": "openmle.train._rollout",
    "SFTBatch": "openmle.train._batch",
    "SFTConfig": "openmle.train._sft",
    "SFTTrainer": "openmle.train._sft",
    "SandboxReward": "openmle.train._trl",
    "StepTracker": "openmle.train._tracking",
    "TinyCausalLM": "openmle.train._model",
    "TinyLMConfig": "openmle.train._model",
    "Tokenizer": "openmle.train._tokenizer",
    "apply_lora": "openmle.train._lora",
    "encode_chat": "openmle.train._tokenizer",
    "gspo_loss": "openmle.train._loss",
    "prompt_dataset": "openmle.train._trl",
    "quantization_config": "openmle.train._lora",
    "rollout_batch": "openmle.train._rollout",
    "sample_completions": "openmle.train._model",
    "sft_dataset": "openmle.train._trl",
    "sft_loss": "openmle.train._loss",
    "train_on_policy": "openmle.train._rollout",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openmle.train' has no attribute {name!r}")
    require("torch", "torch")
    obj = getattr(importlib.import_module(module), name)
    publish_one(obj, __name__)  # reprs and docs name the public path
    globals()[name] = obj
    return obj


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
