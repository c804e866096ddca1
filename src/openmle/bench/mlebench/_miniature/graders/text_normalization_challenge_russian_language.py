"""text-normalization-challenge-russian-language: accuracy of the normalised token
``after`` by ``<sentence_id>_<token_id>`` (our grader).
"""

from __future__ import annotations

from typing import Any

from ._common import accuracy, aligned


def grade(submission: Any, answers: Any) -> float:
    """The fraction of tokens whose ``after`` text equals the answer (compared as text)."""
    sub, ans = aligned(submission, answers, "id", ("after",))
    return accuracy([str(r["after"]) for r in ans], [str(r["after"]) for r in sub])
