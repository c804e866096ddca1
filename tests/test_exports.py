"""The public API is pinned: ``__all__`` of every public module, and public objects
report their public module (``openmle.Job``, not ``openmle._types.Job``)."""

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
        "DockerSandbox",
        "GSPOConfig",
        "GSPOLossOutput",
        "GSPOTrainer",
        "HFTokenizer",
        "JobServiceSandbox",
        "OpenAIModel",
        "RaySandbox",
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
    "openmle.gym": [
        "Aggregate",
        "GradeReport",
        "MLESummary",
        "Problem",
        "Severity",
        "Task",
        "ValidationReport",
        "aggregate",
        "bundled",
        "bundled_names",
        "human_rank",
        "load_task",
        "match_sota_rate",
        "mean_relative_gap",
        "medal_rate",
        "relative_gap",
        "resolve_task",
        "summarize",
        "surpass_sota_rate",
        "valid_rate",
        "validate_path",
    ],
    "openmle.gym.service": [
        "API_KEYS_ENV",
        "ServiceConfig",
        "create_app",
        "job_view",
        "load_api_keys",
        "load_sandbox",
        "serve",
    ],
    "openmle.operators": [
        "DEFAULT_TEMPLATES",
        "OperatorTemplates",
        "ParentView",
        "PromptBudget",
        "Proposal",
        "Section",
        "TaskBrief",
        "build_request",
        "clip",
        "extract_code_blocks",
        "fit_sections",
        "format_duration",
        "parse_response",
        "program_fingerprint",
        "render_feedback",
        "same_program",
    ],
    "openmle.rewards": [
        "BOUND_MODES",
        "GENERATION_ABORT_PENALTY",
        "GapInfo",
        "GapPenalty",
        "GroupMember",
        "GroupRewards",
        "GuardVerdict",
        "HACK_PENALTY",
        "MAPPING_MODES",
        "MAX_RANGE",
        "MISSING_VALIDATION_PENALTY",
        "MemberReward",
        "NO_CODE_PENALTY",
        "NO_SCORE_REWARD",
        "RewardGuard",
        "RewardProfile",
        "Verdict",
        "adaptive_bounds",
        "entropic_advantage",
        "entropic_advantages",
        "entropic_beta",
        "group_normalized_advantage",
        "human_rank",
        "medal_binary",
        "preferred_static_bounds",
        "read_leaderboard",
        "resolve_bounds",
        "score_to_reward",
        "score_to_reward_from_meta",
        "signed_score",
        "static_bounds",
        "static_view_reward",
        "validation_gap",
        "validation_gap_penalty",
    ],
    "openmle.search": [
        "Board",
        "CARD_SCHEMA_VERSION",
        "DEFAULT_MIX",
        "ExperienceCard",
        "FAMILY_TAGS",
        "FamilyStats",
        "GreedySelector",
        "IslandSelector",
        "Islands",
        "MemoryConfig",
        "MemoryPlan",
        "Normalization",
        "OperatorMemory",
        "OperatorMix",
        "PRESETS",
        "RLFitness",
        "RLParentSelector",
        "RLStep",
        "SummaryStore",
        "ThreeFactorSelector",
        "UNKNOWN_FAMILY",
        "UniformSelector",
        "UtilityRow",
        "card_line",
        "draw_without_replacement",
        "extract_imports",
        "method_family",
        "novelty_of",
        "plan_rl_step",
        "rl_fitness",
        "softmax",
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
def test_all_is_pinned(module: str) -> None:
    """Each public module exports exactly the pinned names, once each (ruff keeps them sorted)."""
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    assert len(set(mod.__all__)) == len(mod.__all__)
    for name in mod.__all__:
        assert hasattr(mod, name), name


@pytest.mark.parametrize("module", ["openmle", "openmle.backends", "openmle.testing"])
def test_public_classes_report_public_module(module: str) -> None:
    """Reprs and docs say ``openmle.Job``, not ``openmle._types.Job``."""


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_objects_report_public_module(module: str) -> None:
    """Reprs and docs name the public module, never a private ``_module``."""
    mod = importlib.import_module(module)
    for name in mod.__all__:
        obj = getattr(mod, name)
        where = getattr(obj, "__module__", None)
        if callable(obj) and isinstance(where, str) and where.startswith("openmle."):
            assert "._" not in where, (module, name, where)
