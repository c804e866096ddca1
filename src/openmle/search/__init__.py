"""Search: experience cards, the task board, parent selection, operator memory and the loop."""

from __future__ import annotations

__all__: list[str] = []

# --- The search loop, budgets and run directories (issue 5). Keep this block last. ---------
from openmle.search._budget import Budget, Consumption, Ledger, PriceTable
from openmle.search._driver import (
    Progress,
    Recorder,
    SearchResult,
    arun_search,
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
    PromptBuilder,
    TaskInfo,
    extract_program,
)
from openmle.search._rundir import (
    RunDir,
    aresume_search,
    journal_fingerprint,
    read_journal,
    resume_search,
)

__all__ += [
    "BasicPrompts",
    "Budget",
    "Consumption",
    "Evaluation",
    "Ledger",
    "Node",
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
    "extract_program",
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
