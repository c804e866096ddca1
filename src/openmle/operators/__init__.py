"""The four operators as prompt builders and response parsers.

- :func:`build_request` builds the Draft, Improve, Debug or Crossover request from a
  :class:`TaskBrief`, :class:`ParentView` values (program + feedback), a memory block and the
  execution budget, in the wording of :class:`OperatorTemplates`, within a hard
  :class:`PromptBudget`.
- :func:`parse_response` reads a plan and exactly one program from an answer (a
  :class:`ParsedAnswer`);
  :func:`same_program` flags a child identical to its parent.
- Prompts show validation scores only: :func:`render_feedback` refuses test-split results.
- Structured answers: :func:`ask_json` asks a model for one JSON object, validates it and sends
  an invalid answer back with its error (each call an :class:`AskAttempt`, the result a
  :class:`JsonAnswer`); :func:`extract_json` reads the object from an answer. The task builder
  and the priors' distillation use it.
"""

from __future__ import annotations

from openmle._exports import deprecated_aliases, publish
from openmle.operators._ask import MAX_ANSWER_CHARS, AskAttempt, JsonAnswer, ask_json, extract_json
from openmle.operators._parse import (
    ParsedAnswer,
    extract_code_blocks,
    parse_response,
    program_fingerprint,
    same_program,
)
from openmle.operators._prompt_budget import Section, clip, fit_sections
from openmle.operators._prompts import (
    DEFAULT_TEMPLATES,
    OperatorTemplates,
    ParentView,
    PromptBudget,
    TaskBrief,
    build_request,
    format_duration,
    render_feedback,
)

__all__ = [
    "DEFAULT_TEMPLATES",
    "MAX_ANSWER_CHARS",
    "AskAttempt",
    "JsonAnswer",
    "OperatorTemplates",
    "ParentView",
    "ParsedAnswer",
    "PromptBudget",
    "Section",
    "TaskBrief",
    "ask_json",
    "build_request",
    "clip",
    "extract_code_blocks",
    "extract_json",
    "fit_sections",
    "format_duration",
    "parse_response",
    "program_fingerprint",
    "render_feedback",
    "same_program",
]

publish(globals())

# Renamed in this release (CHANGELOG): served for one release, with a DeprecationWarning.
__getattr__ = deprecated_aliases(
    __name__,
    {"Proposal": ("openmle.operators", "ParsedAnswer")},
    reason="it was renamed {module}.{attr} (openmle.search.Proposal is the search's proposal)",
)
