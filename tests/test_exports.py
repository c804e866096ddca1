"""The public API is pinned: ``__all__`` of every public module, and public objects
report their public module (``openmle.Job``, not ``openmle._types.Job``)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

import openmle
from openmle.errors import MissingDependency

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
    "openmle.builder": [
        "Baseline",
        "CUSTOM_METRIC",
        "Blocklist",
        "BuildOptions",
        "BuildResult",
        "ColumnStats",
        "CorpusSummary",
        "DIMENSIONS",
        "DecontamResult",
        "FINDINGS",
        "FileInfo",
        "Finding",
        "GateResult",
        "Inputs",
        "Intake",
        "Inventory",
        "Join",
        "JudgeResult",
        "JudgeThresholds",
        "METRIC_LIBRARY",
        "MetricCheck",
        "PURPOSE_JUDGE",
        "PURPOSE_KEY",
        "PURPOSE_PREPARE",
        "PURPOSE_SPEC",
        "PrepareResult",
        "PrepareRun",
        "RawFile",
        "STAGES",
        "SandboxFactory",
        "Solvability",
        "SpecError",
        "SpecResult",
        "SplitRule",
        "TaskSpec",
        "build_many",
        "build_task",
        "check_contamination",
        "check_metric_code",
        "intake",
        "inventory",
        "load_blocklist",
        "sandbox_factory",
    ],
    "openmle.backends": [
        "DockerSandbox",
        "GradeLike",
        "JobServiceSandbox",
        "LocalSandbox",
        "LogCap",
        "OfflineModel",
        "OpenAIModel",
        "RaySandbox",
        "RecordingModel",
        "ReplayModel",
        "TaskHandle",
        "classify_run",
        "make_model",
        "make_sandbox",
        "pid_alive",
        "register_model",
        "register_sandbox",
        "build_sandbox",
        "check_sandbox_spec",
        "remove_stale_cgroups",
        "safe_rmtree",
        "sandbox_takes",
    ],
    "openmle.train": [
        "AsyncRollouts",
        "ByteTokenizer",
        "Completion",
        "GSPOConfig",
        "GSPOLossOutput",
        "GSPOTrainer",
        "HFTokenizer",
        "LoRAConfig",
        "LocalPolicy",
        "ModelPolicy",
        "OpenMLEGRPOTrainer",
        "Policy",
        "PolicySample",
        "RolloutBatch",
        "RolloutGroup",
        "RolloutProducer",
        "RolloutStep",
        "RolloutTask",
        "SFTBatch",
        "SFTConfig",
        "SFTTrainer",
        "SandboxReward",
        "StepTracker",
        "TinyCausalLM",
        "TinyLMConfig",
        "Tokenizer",
        "apply_lora",
        "encode_chat",
        "gspo_loss",
        "prompt_dataset",
        "quantization_config",
        "rollout_batch",
        "sample_completions",
        "sft_dataset",
        "sft_loss",
        "train_on_policy",
        "OptimConfig",
    ],
    "openmle.bench.mlebench": [
        "KIND",
        "LITE_RULES",
        "VALIDATION_PROTOCOLS",
        "Competition",
        "DoctorLine",
        "MLEBench",
        "MLEBenchTask",
        "Media",
        "SelfScored",
        "SplitRule",
        "build_validation_view",
        "doctor",
        "generic_rule",
        "lite_rule",
        "mask_reason",
        "rule_for",
    ],
    "openmle.bench.naturebench": [
        "CHILD",
        "FAILED_INSTANCE_G",
        "GRADE_RECORD",
        "KIND",
        "LITE_CASES",
        "REFERENCE_TIMEOUT_S",
        "RESULTS_COLUMNS",
        "SUITES",
        "CaseResult",
        "NatureBench",
        "NatureBenchMetrics",
        "NatureBenchTask",
        "PrimaryMetric",
        "case_domain",
        "case_gap",
        "case_resources",
        "case_rows",
        "check_results",
        "leaderboard_metrics",
        "metrics_by_domain",
        "parse_sota",
        "primary_metrics",
        "read_judge",
        "read_suite",
        "write_naturebench_report",
        "write_results_csv",
        "write_submission_yaml",
    ],
    "openmle.bench": [
        "KNOWN_ISSUES",
        "LITE_IDS",
        "METRICS",
        "MLEBENCH_REPORT_FIELDS",
        "SMOKE_IDS",
        "MODALITIES",
        "MODALITY_LABELS",
        "SEARCH_KEYS",
        "modality_of",
        "preset_deviations",
        "preset_lines",
        "preset_search",
        "read_result",
        "register_benchmark",
        "validation_protocol",
        "SUITES",
        "Arm",
        "BenchConfig",
        "BenchReport",
        "BenchRun",
        "BenchTask",
        "Benchmark",
        "BenchmarkKind",
        "Competition",
        "DoctorLine",
        "Leaderboard",
        "MLEBench",
        "MLEBenchTask",
        "Metric",
        "NatureBench",
        "NatureBenchTask",
        "PrimaryMetric",
        "RankInfo",
        "RunStatus",
        "SandboxFactory",
        "SeedMetrics",
        "SuiteMetrics",
        "aggregate_seeds",
        "arun_bench",
        "bench_report",
        "bench_sandbox",
        "bench_status",
        "benchmark_kind",
        "benchmark_names",
        "build_miniature",
        "build_seeds",
        "case_gap",
        "case_rows",
        "check_priors_clean",
        "competition_exclusions",
        "competition_report",
        "doctor",
        "parse_sota",
        "primary_metrics",
        "priors_ablation",
        "rank_score",
        "read_judge",
        "round_score",
        "smoke_miniature",
        "track_bench",
        "write_naturebench_report",
        "write_report",
        "LaunchStatus",
        "LiveBoard",
        "array_executor",
        "bench_task_sandbox",
        "launch_status",
        "submit_array",
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
        "MultipleErrors",
        "OpenMLEError",
        "RunDirError",
        "SandboxError",
        "SandboxUnavailable",
        "TaskPackageError",
        "TrainerError",
    ],
    "openmle.gym": [
        "AGGREGATION",
        "Aggregate",
        "ChildRun",
        "GradeLimits",
        "GradeReport",
        "MLESummary",
        "Problem",
        "Severity",
        "Task",
        "ValidationReport",
        "aggregate",
        "bundled",
        "bundled_names",
        "bundled_raw",
        "cache_root",
        "confine_child",
        "data_preview",
        "human_rank",
        "load_task",
        "match_sota_rate",
        "mean_relative_gap",
        "medal_rate",
        "relative_gap",
        "resolve_task",
        "run_child",
        "summarize",
        "surpass_sota_rate",
        "valid_rate",
        "validate_path",
        "MAX_CSV_BYTES",
        "MAX_MAP_K",
        "SHIPPED",
        "SPLIT_KINDS",
        "CsvError",
        "Exclusions",
        "check_split",
        "grade_in_thread",
        "load_exclusions",
        "normalise_name",
        "positive_labels",
        "split_indices",
    ],
    "openmle.operators": [
        "DEFAULT_TEMPLATES",
        "OperatorTemplates",
        "ParentView",
        "ParsedAnswer",
        "PromptBudget",
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
        "MAX_ANSWER_CHARS",
        "AskAttempt",
        "JsonAnswer",
        "ask_json",
        "extract_json",
    ],
    "openmle.priors": [
        "ANY",
        "Artifact",
        "ContaminatedTask",
        "DISTILL_SYSTEM",
        "DistillFailure",
        "DistillReport",
        "Exclusions",
        "KINDS",
        "LexicalRetriever",
        "PRIORS_BEGIN",
        "PRIORS_END",
        "PRIOR_SCHEMA_VERSION",
        "Prior",
        "PriorLibrary",
        "Refusal",
        "RenderedPriors",
        "Retriever",
        "TaskProfile",
        "adistill",
        "applies",
        "bm25_scores",
        "check_task_not_in_priors",
        "default_exclusions",
        "distill",
        "load_library",
        "normalise_name",
        "priors_from_run",
        "priors_from_runs",
        "render_priors",
        "save_library",
        "PRIORS_CHARS",
        "PRIORS_K",
        "priors_for_search",
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
        "leaderboard_rank",
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
        "PAPER",
        "Preset",
        "BasicPrompts",
        "Board",
        "Budget",
        "CARD_SCHEMA_VERSION",
        "Consumption",
        "DEFAULT_MIX",
        "DeferredMemory",
        "DeferringPromptBuilder",
        "Evaluation",
        "ExperienceCard",
        "FamilyStats",
        "GreedySelector",
        "IslandSelector",
        "Islands",
        "Ledger",
        "MemoryConfig",
        "MemoryPlan",
        "Node",
        "Normalization",
        "OperatorMemory",
        "OperatorMix",
        "OperatorPrompts",
        "OperatorRouter",
        "PendingRequest",
        "PriceTable",
        "Progress",
        "ProgressLine",
        "PromptBuilder",
        "Proposal",
        "RLFitness",
        "RLParentSelector",
        "RLStep",
        "ResumeSpec",
        "RunDir",
        "JudgedRecords",
        "SFTExport",
        "SFTExportSummary",
        "SFTRecord",
        "SearchConfig",
        "SearchCore",
        "SearchResult",
        "SearchSpec",
        "StepVerdict",
        "SummaryStore",
        "TaskInfo",
        "ThreeFactorSelector",
        "UNKNOWN_FAMILY",
        "UniformSelector",
        "UtilityRow",
        "ajudge_sft_records",
        "aresume_search",
        "arun_search",
        "estimate_tokens",
        "evolutionary_records",
        "export_sft",
        "journal_fingerprint",
        "judge_sft_records",
        "method_family",
        "parallel_records",
        "plan_rl_step",
        "read_journal",
        "read_sft_jsonl",
        "resume_search",
        "rl_fitness",
        "run_search",
        "SearchPriors",
        "resolve_task_meta",
        "task_description",
        "task_direction",
        "export_run",
        "write_report",
        "write_comparison",
        "compare_runs",
        "RunComparison",
        "REPLAY_CHARS",
        "DATA_TASK_DIR",
        "check_new_run_dir",
    ],
    "openmle.service": [
        "API_KEYS_ENV",
        "KeyLimits",
        "ServiceConfig",
        "create_app",
        "job_view",
        "load_api_keys",
        "load_key_limits",
        "load_sandbox",
        "serve",
    ],
    "openmle.testing": [
        "FunctionSandbox",
        "FunctionSelector",
        "HOSTILE_PROGRAMS",
        "HostileProgram",
        "HostileReport",
        "RecordingTrainer",
        "SANDBOX_PROFILES",
        "SANDBOX_RULES",
        "SandboxProfile",
        "ScriptedModel",
        "TOY_SOLUTION",
        "ToyGrade",
        "ToyTask",
        "check_operator_model",
        "check_sandbox",
        "check_selector",
        "check_trainer",
        "run_hostile_battery",
        "sample_candidates",
    ],
    "openmle.tracking": [
        "DEFAULT_DIRS",
        "GuardedTracker",
        "JSONL_FILE",
        "JsonlTracker",
        "MLFLOW_DB",
        "MlflowTracker",
        "TRACKERS",
        "TensorBoardTracker",
        "TrackSpec",
        "Tracker",
        "WandbTracker",
        "flatten_params",
        "metric_values",
        "mlflow_uri",
        "open_tracker",
    ],
}


def _needs_missing_extra(mod: object, name: str) -> bool:
    """True when ``name`` lives behind an extra that is not installed (a core-only install).

    Such a name raises MissingDependency naming the ``pip install`` line, as documented.
    """
    try:
        getattr(mod, name)
    except MissingDependency as exc:
        message = str(exc)
    else:
        return False
    assert "pip install 'openmle[" in message, (name, message)
    return True


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_all_is_pinned(module: str) -> None:
    """Each public module exports exactly the pinned names, once each (ruff keeps them sorted)."""
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(PUBLIC[module])
    assert len(set(mod.__all__)) == len(mod.__all__)
    for name in mod.__all__:
        if _needs_missing_extra(mod, name):
            continue
        assert hasattr(mod, name), name


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_public_objects_report_public_module(module: str) -> None:
    """Reprs and docs name the public module, never a private ``_module``."""
    mod = importlib.import_module(module)
    for name in mod.__all__:
        if _needs_missing_extra(mod, name):
            continue
        obj = getattr(mod, name)
        where = getattr(obj, "__module__", None)
        if callable(obj) and isinstance(where, str) and where.startswith("openmle."):
            assert "._" not in where, (module, name, where)


# Names that moved on purpose, with their deprecated alias (kept for one release).
NEW_IN_TRAIN = {
    "LoRAConfig",
    "OpenMLEGRPOTrainer",
    "OptimConfig",
    "SandboxReward",
    "StepTracker",
    "apply_lora",
    "prompt_dataset",
    "quantization_config",
    "sft_dataset",
}
MOVED = {
    ("openmle.backends", name): ("openmle.train", name)
    for name in PUBLIC["openmle.train"]
    if name not in NEW_IN_TRAIN  # added after the move: no old path
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_moved_names_keep_a_deprecated_alias(old: tuple[str, str], new: tuple[str, str]) -> None:
    """The old import path still works for one release, warns, and names the new path."""
    pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")
    old_mod = importlib.import_module(old[0])
    assert old[1] not in old_mod.__all__
    with pytest.warns(DeprecationWarning, match=rf"from {new[0]} import {new[1]}"):
        obj = getattr(old_mod, old[1])
    assert obj is getattr(importlib.import_module(new[0]), new[1])


@pytest.mark.parametrize("name", PUBLIC["openmle.service"])
def test_gym_service_is_a_deprecated_alias_of_service(name: str) -> None:
    """``openmle.gym.service`` (moved to ``openmle.service``) still works for one release: the
    import and each name warn, naming the new import, and give the very same objects."""
    new = importlib.import_module("openmle.service")
    sys.modules.pop("openmle.gym.service", None)
    with pytest.warns(DeprecationWarning, match=r"import openmle\.service"):
        old = importlib.import_module("openmle.gym.service")
    assert old.__all__ == []
    with pytest.warns(DeprecationWarning, match=rf"from openmle\.service import {name}"):
        obj = getattr(old, name)
    assert obj is getattr(new, name)
    with pytest.raises(AttributeError):
        old.no_such_name  # noqa: B018


def test_service_imports_nothing_from_gym() -> None:
    """``openmle.service`` is a package of its own: importing it loads no ``openmle.gym``."""
    code = (
        "import sys, openmle.service\n"
        "print(sorted(m for m in sys.modules if m.startswith('openmle.gym')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(openmle.__file__).parents[1])}
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env=env
    )
    assert out.stdout.strip() == "[]"


def test_names_that_left_the_search_api_are_deprecated_aliases() -> None:
    """Helpers that left openmle.search (softmax, draw_without_replacement, card_line,
    novelty_of, extract_imports, FAMILY_TAGS, PRESETS, Recorder): the old import still works for
    one release, with a DeprecationWarning naming the new home."""
    import warnings

    import openmle.search
    from openmle.search import _cards, _driver, _families, _memory, _select

    moved = {
        "FAMILY_TAGS": _families.FAMILY_TAGS,
        "PRESETS": _select.PRESETS,
        "Recorder": _driver.Recorder,
        "extract_imports": _families.extract_imports,
        "softmax": _select.softmax,
        "draw_without_replacement": _select.draw_without_replacement,
        "card_line": _memory.card_line,
        "novelty_of": _cards.novelty_of,
    }
    for name, obj in moved.items():
        assert name not in openmle.search.__all__
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert getattr(openmle.search, name) is obj
        assert [w.category for w in caught] == [DeprecationWarning]
        assert "no longer public" in str(caught[0].message)
    with pytest.raises(AttributeError, match="not_a_name"):
        openmle.search.not_a_name  # noqa: B018


def test_one_way_to_rewrite_module() -> None:
    """Only openmle._exports (publish / publish_one) assigns ``__module__``: no package or module
    rewrites it by hand."""
    import ast

    src = Path(openmle.__file__).parent
    bad = []
    for path in sorted(src.rglob("*.py")):
        if path.name == "_exports.py" and path.parent == src:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if not isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bad += [
                f"{path.relative_to(src)}:{node.lineno}"
                for t in targets
                if isinstance(t, ast.Attribute) and t.attr == "__module__"
            ]
    assert not bad, "set __module__ with openmle._exports.publish/publish_one:\n" + "\n".join(bad)


def test_operators_proposal_is_a_deprecated_alias_of_parsed_answer() -> None:
    """operators.Proposal (a parsed model answer) was renamed ParsedAnswer, so that Proposal
    means one thing (openmle.search.Proposal); the old name works for one release, warning."""
    import openmle.operators
    import openmle.search

    assert "Proposal" not in openmle.operators.__all__
    with pytest.warns(DeprecationWarning, match=r"renamed openmle\.operators\.ParsedAnswer"):
        old: object = openmle.operators.Proposal
    assert old is openmle.operators.ParsedAnswer
    assert openmle.operators.ParsedAnswer.__module__ == "openmle.operators"
    search_proposal: object = openmle.search.Proposal
    assert old is not search_proposal  # two names, two things


def test_one_deprecation_mechanism() -> None:
    """Every deprecation warns through openmle._exports.warn_deprecated (which states the
    removal release): no other module names DeprecationWarning."""
    import ast

    from openmle._exports import REMOVED_IN

    src = Path(openmle.__file__).parent
    bad = [
        f"{path.relative_to(src)}:{node.lineno}"
        for path in sorted(src.rglob("*.py"))
        if not (path.name == "_exports.py" and path.parent == src)
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path)))
        if isinstance(node, ast.Name) and node.id == "DeprecationWarning"
    ]
    assert not bad, "warn with openmle._exports.warn_deprecated:\n" + "\n".join(bad)
    changelog = (Path(__file__).parents[1] / "CHANGELOG.md").read_text()
    assert f"removed in {REMOVED_IN}" in changelog
