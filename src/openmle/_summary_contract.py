"""The node-summary request: what :class:`~openmle.search.SummaryStore` sends and what a model
that answers it offline (:class:`~openmle.backends.OfflineModel`) reads.

One definition for both sides, so editing the prompt cannot silently break the offline model:
the request carries ``metadata["purpose"] == NODE_SUMMARY_PURPOSE``; its user message holds an
:data:`OUTCOME_LINE` and, when the node has a scored first parent, a :data:`PARENT_LINE` (each
matched by its ``*_RE`` pattern); the answer is a JSON object with the :data:`SUMMARY_KEYS`.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "BUILDER_JUDGE_PURPOSE",
    "BUILDER_PREPARE_PURPOSE",
    "BUILDER_SPEC_PURPOSE",
    "NODE_SUMMARY_PURPOSE",
    "OUTCOME_LINE",
    "OUTCOME_LINE_RE",
    "PARENT_LINE",
    "PARENT_LINE_RE",
    "PURPOSE_KEY",
    "SUMMARY_KEYS",
]

PURPOSE_KEY: Final = "purpose"
"""The ``ModelRequest.metadata`` key that names what a request is for."""

NODE_SUMMARY_PURPOSE: Final = "node_summary"
"""``metadata[PURPOSE_KEY]`` of a node-summary request."""

# The task builder's request kinds (openmle.builder), here so that a model answering them
# offline (backends) needs no import of the builder, which sits above the backends.
BUILDER_SPEC_PURPOSE: Final = "builder_spec"
"""A request for a task spec; ``metadata["inventory"]`` holds the inventory as a dict."""
BUILDER_PREPARE_PURPOSE: Final = "builder_prepare"
"""A request for ``prepare.py``; ``metadata["spec"]`` holds the spec as a dict."""
BUILDER_JUDGE_PURPOSE: Final = "builder_judge"
"""A request for a quality judgement; ``metadata["evidence"]`` holds the records it judges."""

SUMMARY_KEYS: Final = ("method", "lesson")
"""The string fields of the JSON object a summary answer holds."""

OUTCOME_LINE: Final = "Outcome: {outcome}; validation score: {score}."
"""The node's own outcome and validation score (``score``: ``%.6g`` or ``none``)."""

PARENT_LINE: Final = "First parent {node_id}: {family}, validation score {score}; plan: {plan}"
"""The node's first parent, when it is on the board."""

OUTCOME_LINE_RE: Final = re.compile(
    r"^Outcome: ([a-z_]+); validation score: (\S+)\.$", re.MULTILINE
)
"""Matches an :data:`OUTCOME_LINE`: groups outcome, score."""

PARENT_LINE_RE: Final = re.compile(
    r"^First parent (\S+): [^,]*, validation score (\S+);", re.MULTILINE
)
"""Matches a :data:`PARENT_LINE`: groups node id, score."""
