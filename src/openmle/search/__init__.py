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

from types import FunctionType

from openmle.search._board import Board, FamilyStats
from openmle.search._cards import CARD_SCHEMA_VERSION, ExperienceCard, novelty_of
from openmle.search._families import FAMILY_TAGS, UNKNOWN_FAMILY, extract_imports, method_family
from openmle.search._islands import Islands, IslandSelector
from openmle.search._memory import (
    DeferredMemory,
    MemoryConfig,
    MemoryPlan,
    OperatorMemory,
    card_line,
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
    draw_without_replacement,
    softmax,
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
    "card_line",
    "draw_without_replacement",
    "extract_imports",
    "method_family",
    "novelty_of",
    "plan_rl_step",
    "rl_fitness",
    "softmax",
]

for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type | FunctionType) and _obj.__module__.startswith("openmle.search._"):
        _obj.__module__ = __name__
del _name, _obj, FunctionType

# --- The search loop, budgets and run directories (issue 5). Keep this block last. ---------
from openmle.search._budget import Budget, Consumption, Ledger, PriceTable  # noqa: E402
from openmle.search._driver import Progress, Recorder, SearchResult  # noqa: E402
from openmle.search._entry import (  # noqa: E402
    aresume_search,
    arun_search,
    resume_search,
    run_search,
)
from openmle.search._loop import (  # noqa: E402
    Evaluation,
    Node,
    Proposal,
    SearchConfig,
    SearchCore,
)
from openmle.search._prompts import (  # noqa: E402
    BasicPrompts,
    DeferringPromptBuilder,
    OperatorPrompts,
    PendingRequest,
    PromptBuilder,
    TaskInfo,
)
from openmle.search._rundir import RunDir, journal_fingerprint, read_journal  # noqa: E402

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
__all__.sort()
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("openmle.search._"):
        _obj.__module__ = __name__
del _name, _obj

# SFT data from search runs (issue 8).
from openmle.search._sft_export import (  # noqa: E402
    SFTRecord,
    evolutionary_records,
    export_sft,
    parallel_records,
    read_sft_jsonl,
)

__all__ += ["SFTRecord", "evolutionary_records", "export_sft", "parallel_records", "read_sft_jsonl"]
__all__.sort()
for _sft_obj in (SFTRecord, evolutionary_records, export_sft, parallel_records, read_sft_jsonl):
    _sft_obj.__module__ = __name__
del _sft_obj
