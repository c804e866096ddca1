"""dogs-vs-cats-redux-kernels-edition: binary log loss of ``label`` = P(dog) (our grader)."""

from __future__ import annotations

from typing import Any

from ._common import aligned, binary_log_loss, number, probabilities


def grade(submission: Any, answers: Any) -> float:
    """Log loss of the probability that each test image shows a dog."""
    sub, ans = aligned(submission, answers, "id", ("label",))
    p = [row[0] for row in probabilities(sub, ("label",))]
    return binary_log_loss([number(r["label"], "answers") for r in ans], p)
