"""Search: run a search, what it records, and the parts a harness author swaps.

- **Run and resume**: :func:`run_search` / :func:`arun_search` take one :class:`SearchSpec`
  (what to search, with which model, sandbox, :class:`Budget`, :class:`SearchConfig`, prompts
  and :class:`SearchPriors`, an already-rendered priors block), :func:`resume_search` /
  :func:`aresume_search` one :class:`ResumeSpec` (:class:`PriceTable` prices model calls);
  they return a :class:`SearchResult` of :class:`Node` values and report :class:`Progress` (by
  default a :class:`ProgressLine` on stderr); :func:`resolve_task_meta`,
  :func:`task_direction` and :func:`task_description` say what a search would use for a task,
  and :func:`preflight_sandbox` runs the sandbox's check that a search runs before its first step;
  :class:`OperatorRouter` runs several models in one search (a model per operator).
- **Run directories**: :class:`RunDir` (the journal, manifest and replay),
  :func:`read_journal`, :func:`journal_fingerprint`, :func:`check_new_run_dir` (may a run be
  written there; :func:`reset_unstarted_run_dir` clears one that holds no started run, under
  its writer lock; :data:`DATA_TASK_DIR` is where ``--data`` builds its task),
  :func:`write_report`
  (``report.html``, with each node's request and answer, :data:`REPLAY_CHARS` per message),
  :func:`write_comparison` / :func:`compare_runs` (two runs side by side, :class:`RunComparison`),
  :func:`export_run` (the node table as Parquet or JSONL); SFT data from runs: :func:`export_sft`,
  :func:`parallel_records`, :func:`evolutionary_records`, :class:`SFTRecord`,
  :class:`SFTExport` / :class:`SFTExportSummary` (what an export wrote and dropped),
  :func:`estimate_tokens`,
  :func:`read_sft_jsonl`; an optional model-judged step filter: :func:`judge_sft_records`.
- **Parent selection** (:class:`openmle.Selector` implementations): :class:`ThreeFactorSelector`
  (score, gain, novelty; presets ``paper`` and ``released``), :class:`IslandSelector` over
  :class:`Islands`, :class:`GreedySelector` and :class:`UniformSelector` baselines, and
  :class:`RLParentSelector` with :func:`rl_fitness`, :class:`OperatorMix` and
  :func:`plan_rl_step` for training.
- **Prompts and memory**: :class:`PromptBuilder` (the seam), :class:`OperatorPrompts`,
  :class:`BasicPrompts`; :class:`OperatorMemory` picks the nodes each operator sees and renders
  them within a budget; :class:`SummaryStore` writes node summaries lazily through an
  :class:`openmle.OperatorModel`, cached in memory and on disk.
- **What search knows**: :class:`ExperienceCard` records one evaluated node; :class:`Board`
  aggregates the cards of a task and makes each new card (best node, per-family statistics,
  repeated errors, lineage); :func:`method_family` is the one method-family detector.
- **The core, for custom drivers**: :class:`SearchCore` (the I/O-free loop), :class:`Proposal`,
  :class:`Evaluation`, :class:`Ledger`.
"""

from __future__ import annotations

from openmle._exports import deprecated_aliases, publish
from openmle.search._board import Board, FamilyStats
from openmle.search._budget import Budget, Consumption, Ledger, PriceTable
from openmle.search._cards import CARD_SCHEMA_VERSION, ExperienceCard
from openmle.search._display import ProgressLine
from openmle.search._driver import Progress, SearchResult
from openmle.search._entry import (
    ResumeSpec,
    SearchSpec,
    aresume_search,
    arun_search,
    preflight_sandbox,
    resolve_task_meta,
    resume_search,
    run_search,
    task_description,
    task_direction,
)
from openmle.search._families import UNKNOWN_FAMILY, method_family
from openmle.search._islands import Islands, IslandSelector
from openmle.search._loop import Evaluation, Node, Proposal, SearchConfig, SearchCore
from openmle.search._memory import DeferredMemory, MemoryConfig, MemoryPlan, OperatorMemory
from openmle.search._preset import PAPER, Preset
from openmle.search._priors import SearchPriors
from openmle.search._prompts import (
    BasicPrompts,
    DeferringPromptBuilder,
    OperatorPrompts,
    PendingRequest,
    PromptBuilder,
    TaskInfo,
)
from openmle.search._rl import (
    DEFAULT_MIX,
    OperatorMix,
    RLFitness,
    RLParentSelector,
    RLStep,
    plan_rl_step,
    rl_fitness,
)
from openmle.search._routing import OperatorRouter
from openmle.search._rundir import (
    DATA_TASK_DIR,
    RunDir,
    check_new_run_dir,
    journal_fingerprint,
    read_journal,
    reset_unstarted_run_dir,
)
from openmle.search._runs.export import export_run
from openmle.search._runs.report import (
    REPLAY_CHARS,
    RunComparison,
    compare_runs,
    write_comparison,
    write_report,
)
from openmle.search._runs.sft_export import (
    SFTExport,
    SFTExportSummary,
    SFTRecord,
    estimate_tokens,
    evolutionary_records,
    export_sft,
    parallel_records,
    read_sft_jsonl,
)
from openmle.search._runs.sft_judge import (
    JudgedRecords,
    StepVerdict,
    ajudge_sft_records,
    judge_sft_records,
)
from openmle.search._select import (
    GreedySelector,
    Normalization,
    ThreeFactorSelector,
    UniformSelector,
    UtilityRow,
)
from openmle.search._summaries import SummaryStore

__all__ = [
    "CARD_SCHEMA_VERSION",
    "DATA_TASK_DIR",
    "DEFAULT_MIX",
    "PAPER",
    "REPLAY_CHARS",
    "UNKNOWN_FAMILY",
    "BasicPrompts",
    "Board",
    "Budget",
    "Consumption",
    "DeferredMemory",
    "DeferringPromptBuilder",
    "Evaluation",
    "ExperienceCard",
    "FamilyStats",
    "GreedySelector",
    "IslandSelector",
    "Islands",
    "JudgedRecords",
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
    "Preset",
    "PriceTable",
    "Progress",
    "ProgressLine",
    "PromptBuilder",
    "Proposal",
    "RLFitness",
    "RLParentSelector",
    "RLStep",
    "ResumeSpec",
    "RunComparison",
    "RunDir",
    "SFTExport",
    "SFTExportSummary",
    "SFTRecord",
    "SearchConfig",
    "SearchCore",
    "SearchPriors",
    "SearchResult",
    "SearchSpec",
    "StepVerdict",
    "SummaryStore",
    "TaskInfo",
    "ThreeFactorSelector",
    "UniformSelector",
    "UtilityRow",
    "ajudge_sft_records",
    "aresume_search",
    "arun_search",
    "check_new_run_dir",
    "compare_runs",
    "estimate_tokens",
    "evolutionary_records",
    "export_run",
    "export_sft",
    "journal_fingerprint",
    "judge_sft_records",
    "method_family",
    "parallel_records",
    "plan_rl_step",
    "preflight_sandbox",
    "read_journal",
    "read_sft_jsonl",
    "reset_unstarted_run_dir",
    "resolve_task_meta",
    "resume_search",
    "rl_fitness",
    "run_search",
    "task_description",
    "task_direction",
    "write_comparison",
    "write_report",
]
publish(globals())

# Names that were public until this release and are internal now: served for one release, with
# a DeprecationWarning (CHANGELOG: "Removed from public API").
__getattr__ = deprecated_aliases(
    __name__,
    {
        "FAMILY_TAGS": ("openmle.search._families", "FAMILY_TAGS"),
        "PRESETS": ("openmle.search._select", "PRESETS"),
        "Recorder": ("openmle.search._driver", "Recorder"),
        "card_line": ("openmle.search._memory", "card_line"),
        "draw_without_replacement": ("openmle.search._select", "draw_without_replacement"),
        "extract_imports": ("openmle.search._families", "extract_imports"),
        "novelty_of": ("openmle.search._cards", "novelty_of"),
        "softmax": ("openmle.search._select", "softmax"),
    },
)
