"""Search: experience cards, the task board, parent selection, operator memory and the loop.

- :class:`ExperienceCard` records one evaluated node; :class:`Board` aggregates the cards of a
  task (best node, per-family statistics, repeated errors, lineage).
- :func:`method_family` is the one method-family detector.
- Parent selection (:class:`openmle.Selector` implementations): :class:`ThreeFactorSelector`
  (score, gain, novelty; presets ``paper`` and ``released``), :class:`IslandSelector` over
  :class:`Islands`, :class:`GreedySelector` and :class:`UniformSelector` baselines, and
  :class:`RLParentSelector` with :func:`rl_fitness`, :class:`OperatorMix` and
  :func:`plan_rl_step` for training.
- Operator-conditioned memory: :class:`OperatorMemory` picks the nodes each operator sees
  and renders them within a budget; :class:`SummaryStore` writes node summaries lazily
  through an :class:`openmle.OperatorModel`, cached in memory and on disk.
"""

from __future__ import annotations

from openmle._exports import deprecated_aliases, publish
from openmle.search._board import Board, FamilyStats
from openmle.search._cards import CARD_SCHEMA_VERSION, ExperienceCard
from openmle.search._families import FAMILY_TAGS, UNKNOWN_FAMILY, extract_imports, method_family
from openmle.search._islands import Islands, IslandSelector
from openmle.search._memory import (
    DeferredMemory,
    MemoryConfig,
    MemoryPlan,
    OperatorMemory,
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
from openmle.search._select import (
    PRESETS,
    GreedySelector,
    Normalization,
    ThreeFactorSelector,
    UniformSelector,
    UtilityRow,
)
from openmle.search._summaries import SummaryStore

__all__ = [
    "CARD_SCHEMA_VERSION",
    "DEFAULT_MIX",
    "FAMILY_TAGS",
    "PRESETS",
    "UNKNOWN_FAMILY",
    "Board",
    "DeferredMemory",
    "ExperienceCard",
    "FamilyStats",
    "GreedySelector",
    "IslandSelector",
    "Islands",
    "MemoryConfig",
    "MemoryPlan",
    "Normalization",
    "OperatorMemory",
    "OperatorMix",
    "RLFitness",
    "RLParentSelector",
    "RLStep",
    "SummaryStore",
    "ThreeFactorSelector",
    "UniformSelector",
    "UtilityRow",
    "extract_imports",
    "method_family",
    "plan_rl_step",
    "rl_fitness",
]


# --- The search loop, budgets and run directories (issue 5). Keep this block last. ---------
from openmle.search._budget import Budget, Consumption, Ledger, PriceTable
from openmle.search._driver import Progress, Recorder, SearchResult
from openmle.search._entry import (
    aresume_search,
    arun_search,
    resume_search,
    run_search,
)
from openmle.search._loop import (
    Evaluation,
    Node,
    Proposal,
    SearchConfig,
    SearchCore,
)
from openmle.search._prompts import (
    BasicPrompts,
    DeferringPromptBuilder,
    OperatorPrompts,
    PendingRequest,
    PromptBuilder,
    TaskInfo,
)
from openmle.search._rundir import RunDir, journal_fingerprint, read_journal

__all__ += [
    "BasicPrompts",
    "Budget",
    "Consumption",
    "DeferringPromptBuilder",
    "Evaluation",
    "Ledger",
    "Node",
    "OperatorPrompts",
    "PendingRequest",
    "PriceTable",
    "Progress",
    "PromptBuilder",
    "Proposal",
    "Recorder",
    "RunDir",
    "SearchConfig",
    "SearchCore",
    "SearchResult",
    "TaskInfo",
    "aresume_search",
    "arun_search",
    "journal_fingerprint",
    "read_journal",
    "resume_search",
    "run_search",
]

# SFT data from search runs (issue 8).
from openmle.search._sft_export import (  # noqa: E402
    SFTRecord,
    evolutionary_records,
    export_sft,
    parallel_records,
    read_sft_jsonl,
)

__all__ += ["SFTRecord", "evolutionary_records", "export_sft", "parallel_records", "read_sft_jsonl"]

# The optional model-judged step filter over SFT records (issue 18).
from openmle.search._sft_judge import (  # noqa: E402
    JudgedRecords,
    StepVerdict,
    ajudge_sft_records,
    judge_sft_records,
)

__all__ += ["JudgedRecords", "StepVerdict", "ajudge_sft_records", "judge_sft_records"]
__all__.sort()
publish(globals())

# Helpers that were public until this release and are internal now: served for one release, with a
# DeprecationWarning (CHANGELOG: "Moved/Removed from public API").
__getattr__ = deprecated_aliases(
    __name__,
    {
        "card_line": ("openmle.search._memory", "card_line"),
        "draw_without_replacement": ("openmle.search._select", "draw_without_replacement"),
        "novelty_of": ("openmle.search._cards", "novelty_of"),
        "softmax": ("openmle.search._select", "softmax"),
    },
    removed_in="the next release",
)
