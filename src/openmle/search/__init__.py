"""Search: experience cards, the task board, parent selection, operator memory and the loop.

- :class:`ExperienceCard` records one evaluated node; :class:`Board` aggregates the cards of a
  task (best node, per-family statistics, repeated errors, lineage).
- :func:`method_family` is the one method-family detector.
"""

from __future__ import annotations

from openmle.search._board import Board, FamilyStats
from openmle.search._cards import CARD_SCHEMA_VERSION, ExperienceCard, novelty_of
from openmle.search._families import FAMILY_TAGS, UNKNOWN_FAMILY, extract_imports, method_family

__all__ = [
    "CARD_SCHEMA_VERSION",
    "FAMILY_TAGS",
    "UNKNOWN_FAMILY",
    "Board",
    "ExperienceCard",
    "FamilyStats",
    "extract_imports",
    "method_family",
    "novelty_of",
]

for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith("openmle.search._"):
        _obj.__module__ = __name__
del _name, _obj
