"""Reference backends: sandboxes, operator models and trainers.

Every backend lives in a private module and is imported only when first used, so
``import openmle.backends`` stays light; a backend whose optional dependency is missing raises
:class:`openmle.errors.MissingDependency` with the ``pip install`` line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openmle.backends._docker import DockerSandbox as DockerSandbox
    from openmle.backends._jobclient import JobServiceSandbox as JobServiceSandbox
    from openmle.backends._local import LocalSandbox as LocalSandbox
    from openmle.backends._offline import OfflineModel as OfflineModel
    from openmle.backends._openai import OpenAIModel as OpenAIModel
    from openmle.backends._ray import RaySandbox as RaySandbox
    from openmle.backends._replay import RecordingModel as RecordingModel
    from openmle.backends._replay import ReplayModel as ReplayModel
    from openmle.backends._torch._batch import RolloutBatch as RolloutBatch
    from openmle.backends._torch._batch import SFTBatch as SFTBatch
    from openmle.backends._torch._loss import GSPOLossOutput as GSPOLossOutput
    from openmle.backends._torch._loss import gspo_loss as gspo_loss
    from openmle.backends._torch._loss import sft_loss as sft_loss
    from openmle.backends._torch._model import Completion as Completion
    from openmle.backends._torch._model import TinyCausalLM as TinyCausalLM
    from openmle.backends._torch._model import TinyLMConfig as TinyLMConfig
    from openmle.backends._torch._model import sample_completions as sample_completions
    from openmle.backends._torch._rollout import AsyncRollouts as AsyncRollouts
    from openmle.backends._torch._rollout import LocalPolicy as LocalPolicy
    from openmle.backends._torch._rollout import ModelPolicy as ModelPolicy
    from openmle.backends._torch._rollout import Policy as Policy
    from openmle.backends._torch._rollout import PolicySample as PolicySample
    from openmle.backends._torch._rollout import RolloutGroup as RolloutGroup
    from openmle.backends._torch._rollout import RolloutProducer as RolloutProducer
    from openmle.backends._torch._rollout import RolloutStep as RolloutStep
    from openmle.backends._torch._rollout import RolloutTask as RolloutTask
    from openmle.backends._torch._rollout import rollout_batch as rollout_batch
    from openmle.backends._torch._rollout import train_on_policy as train_on_policy
    from openmle.backends._torch._sft import SFTConfig as SFTConfig
    from openmle.backends._torch._sft import SFTTrainer as SFTTrainer
    from openmle.backends._torch._tokenizer import ByteTokenizer as ByteTokenizer
    from openmle.backends._torch._tokenizer import HFTokenizer as HFTokenizer
    from openmle.backends._torch._tokenizer import Tokenizer as Tokenizer
    from openmle.backends._torch._tokenizer import encode_chat as encode_chat
    from openmle.backends._torch._trainer import GSPOConfig as GSPOConfig
    from openmle.backends._torch._trainer import GSPOTrainer as GSPOTrainer

# name -> private module that defines it. Keep alphabetical.
_LAZY: dict[str, str] = {
    "AsyncRollouts": "openmle.backends._torch._rollout",
    "ByteTokenizer": "openmle.backends._torch._tokenizer",
    "Completion": "openmle.backends._torch._model",
    "DockerSandbox": "openmle.backends._docker",
    "GSPOConfig": "openmle.backends._torch._trainer",
    "GSPOLossOutput": "openmle.backends._torch._loss",
    "GSPOTrainer": "openmle.backends._torch._trainer",
    "HFTokenizer": "openmle.backends._torch._tokenizer",
    "JobServiceSandbox": "openmle.backends._jobclient",
    "LocalPolicy": "openmle.backends._torch._rollout",
    "LocalSandbox": "openmle.backends._local",
    "ModelPolicy": "openmle.backends._torch._rollout",
    "OfflineModel": "openmle.backends._offline",
    "OpenAIModel": "openmle.backends._openai",
    "Policy": "openmle.backends._torch._rollout",
    "PolicySample": "openmle.backends._torch._rollout",
    "RaySandbox": "openmle.backends._ray",
    "RecordingModel": "openmle.backends._replay",
    "ReplayModel": "openmle.backends._replay",
    "RolloutBatch": "openmle.backends._torch._batch",
    "RolloutGroup": "openmle.backends._torch._rollout",
    "RolloutProducer": "openmle.backends._torch._rollout",
    "RolloutStep": "openmle.backends._torch._rollout",
    "RolloutTask": "openmle.backends._torch._rollout",
    "SFTBatch": "openmle.backends._torch._batch",
    "SFTConfig": "openmle.backends._torch._sft",
    "SFTTrainer": "openmle.backends._torch._sft",
    "TinyCausalLM": "openmle.backends._torch._model",
    "TinyLMConfig": "openmle.backends._torch._model",
    "Tokenizer": "openmle.backends._torch._tokenizer",
    "encode_chat": "openmle.backends._torch._tokenizer",
    "gspo_loss": "openmle.backends._torch._loss",
    "rollout_batch": "openmle.backends._torch._rollout",
    "sample_completions": "openmle.backends._torch._model",
    "sft_loss": "openmle.backends._torch._loss",
    "train_on_policy": "openmle.backends._torch._rollout",
}
assert list(_LAZY) == sorted(_LAZY), "keep _LAZY alphabetical"

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'openmle.backends' has no attribute {name!r}")
    obj = getattr(importlib.import_module(module), name)
    if getattr(obj, "__module__", "").startswith("openmle.backends._"):
        obj.__module__ = __name__  # reprs and docs name the public path
    globals()[name] = obj
    return obj


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
