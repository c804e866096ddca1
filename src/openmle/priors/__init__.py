"""Cross-task experience priors: made from runs and public artifacts, kept clean, retrieved
and shown to the Draft and Improve prompts.

- :class:`Prior` is one piece of advice (method, trick or pitfall) with where it applies,
  its evidence, provenance and licence; a :class:`PriorLibrary` is a versioned JSONL file
  (:func:`save_library`, :func:`load_library`, :attr:`PriorLibrary.content_hash`).
- :func:`priors_from_runs` derives priors from finished run directories (validation
  evidence only); :func:`distill` / :func:`adistill` distil :class:`Artifact` texts with any
  :class:`openmle.OperatorModel`.
- :class:`Exclusions` (:func:`default_exclusions`: all 75 MLE-bench competitions) refuses
  sources about an evaluation suite before distillation; :func:`check_task_not_in_priors`
  lets a benchmark runner refuse a task the priors were made from.
- :class:`Retriever` is the retrieval protocol; :class:`LexicalRetriever` (metadata match +
  BM25) is the default. :func:`render_priors` renders a delimited block under a hard
  character budget for :func:`openmle.operators.build_request`'s ``priors`` argument.
- :func:`priors_for_search` (or :meth:`PriorLibrary.for_search`) retrieves and renders the
  priors of one task into the frozen :class:`openmle.search.SearchPriors` that
  :class:`openmle.search.SearchSpec` takes (the search itself never loads or retrieves).
"""

from __future__ import annotations

from openmle._exports import publish
from openmle.priors._decontam import (
    ContaminatedTask,
    Exclusions,
    Refusal,
    check_task_not_in_priors,
    default_exclusions,
    normalise_name,
)
from openmle.priors._distill import (
    DISTILL_SYSTEM,
    Artifact,
    DistillFailure,
    DistillReport,
    adistill,
    distill,
)
from openmle.priors._from_runs import priors_from_run, priors_from_runs
from openmle.priors._library import (
    PRIORS_CHARS,
    PRIORS_K,
    PriorLibrary,
    load_library,
    priors_for_search,
    save_library,
)
from openmle.priors._record import ANY, KINDS, PRIOR_SCHEMA_VERSION, Prior
from openmle.priors._render import PRIORS_BEGIN, PRIORS_END, RenderedPriors, render_priors
from openmle.priors._retrieve import (
    LexicalRetriever,
    Retriever,
    TaskProfile,
    applies,
    bm25_scores,
)

__all__ = [
    "ANY",
    "DISTILL_SYSTEM",
    "KINDS",
    "PRIORS_BEGIN",
    "PRIORS_CHARS",
    "PRIORS_END",
    "PRIORS_K",
    "PRIOR_SCHEMA_VERSION",
    "Artifact",
    "ContaminatedTask",
    "DistillFailure",
    "DistillReport",
    "Exclusions",
    "LexicalRetriever",
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
    "priors_for_search",
    "priors_from_run",
    "priors_from_runs",
    "render_priors",
    "save_library",
]

publish(globals())
