"""The public API is pinned: ``__all__`` of every public module, sorted, and public classes
report their public module."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "openmle": [
        "Candidate",
        "Job",
        "Message",
        "ModelRequest",
        "ModelResponse",
        "OpenMLEError",
        "Operator",
        "OperatorModel",
        "Outcome",
        "Resources",
        "RunResult",
        "Sandbox",
        "Selection",
        "Selector",
        "Split",
        "TaskMeta",
        "Trainer",
        "Usage",
        "__version__",
        "error_signature",
    ],
    "openmle.backends": [
        "ByteTokenizer",
        "Completion",
        "GSPOConfig",
        "GSPOLossOutput",
        "GSPOTrainer",
        "HFTokenizer",
        "RolloutBatch",
        "SFTBatch",
        "SFTConfig",
        "SFTTrainer",
        "TinyCausalLM",
        "TinyLMConfig",
        "Tokenizer",
        "encode_chat",
        "gspo_loss",
        "sample_completions",
        "sft_loss",
    ],
    "openmle.errors": [
        "BackendError",
        "BudgetExhausted",
        "InvalidArgument",
        "InvalidArgumentType",
        "JobServiceError",
        "MissingDependency",
        "ModelAuthError",
        "ModelError",
        "ModelNotFoundError",
        "ModelRateLimited",
        "ModelTimeout",
        "OpenMLEError",
        "RunDirError",
        "SandboxError",
        "SandboxUnavailable",
        "TaskPackageError",
        "TrainerError",
    ],
    "openmle.testing": [
        "FunctionSandbox",
        "FunctionSelector",
        "RecordingTrainer",
        "ScriptedModel",
        "TOY_SOLUTION",
        "ToyGrade",
        "ToyTask",
        "check_operator_model",
        "check_selector",
        "check_trainer",
        "sample_candidates",
    ],
}


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_all_is_pinned_and_sorted(module: str) -> None:
    """Each public module exports exactly the pinned names, once each (ruff keeps them sorted)."""
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    assert len(set(mod.__all__)) == len(mod.__all__)
    for name in mod.__all__:
        assert hasattr(mod, name), name


@pytest.mark.parametrize("module", ["openmle", "openmle.backends", "openmle.testing"])
def test_public_classes_report_public_module(module: str) -> None:
    """Reprs and docs say ``openmle.Job``, not ``openmle._types.Job``."""
    mod = importlib.import_module(module)
    for name in mod.__all__:
        obj = getattr(mod, name)
        if callable(obj) and getattr(obj, "__module__", "").startswith("openmle."):
            assert not obj.__module__.startswith(f"{module}._"), (name, obj.__module__)
