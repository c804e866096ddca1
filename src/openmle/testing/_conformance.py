"""Conformance checks a backend author runs against their own implementation.

Each ``check_*`` function raises ``AssertionError`` with a readable message on the first
violation of the protocol's contract, and returns nothing when the implementation conforms.
Use them from any test runner::

    def test_my_selector_conforms():
        openmle.testing.check_selector(MySelector())

The sandbox conformance suite (which needs task packages) lives in
``openmle.testing.check_sandbox``.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from openmle._protocols import OperatorModel, Selector, Trainer
from openmle._types import Candidate, Message, ModelRequest, ModelResponse, Operator, Usage
from openmle.errors import InvalidArgument, InvalidArgumentType

__all__ = ["check_operator_model", "check_selector", "check_trainer", "sample_candidates"]

BatchT = TypeVar("BatchT")


async def check_operator_model(model: OperatorModel, request: ModelRequest | None = None) -> None:
    """Check that ``model.complete`` answers a request as the search accepts it.

    The answer must be a :class:`ModelResponse` with text, token counts that are integers
    >= 0 (the search ignores other counts and estimates them from the characters, with a
    warning), a ``latency_s`` >= 0 and a ``cost_usd`` that is None or a finite number >= 0
    (else the search ignores it).

    Raises:
        InvalidArgumentType: ``model`` has no ``complete`` method.
        AssertionError: the answer breaks the contract (the message says how).
    """
    if not callable(getattr(model, "complete", None)):
        raise InvalidArgumentType(
            f"Expected an openmle.OperatorModel (async complete(request)) but got "
            f"model={model!r:.80} (type={type(model).__name__})"
        )
    req = request or ModelRequest(
        messages=(
            Message(role="system", content="You write Python programs."),
            Message(role="user", content="Write a program that prints 1."),
        ),
        operator=Operator.DRAFT,
        temperature=0.0,
        max_tokens=256,
    )
    resp = await model.complete(req)
    if not isinstance(resp, ModelResponse):
        raise AssertionError(f"complete() returned {type(resp).__name__}")
    if not isinstance(resp.text, str):
        raise AssertionError("ModelResponse.text must be a str")
    if not isinstance(resp.usage, Usage):
        raise AssertionError(f"ModelResponse.usage must be a Usage, got {resp.usage!r:.80}")
    for name in ("prompt_tokens", "completion_tokens"):
        count = getattr(resp.usage, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise AssertionError(f"Usage.{name} must be an integer >= 0, got {count!r:.40}")
    if not (resp.latency_s >= 0):
        raise AssertionError(f"latency_s must be >= 0, got {resp.latency_s}")
    cost = resp.cost_usd
    if cost is not None and (
        isinstance(cost, bool) or not isinstance(cost, int | float) or not 0 <= cost < math.inf
    ):
        raise AssertionError(f"cost_usd must be None or a finite number >= 0, got {cost!r:.40}")


def sample_candidates(n: int = 8, *, seed: int = 0) -> list[Candidate]:
    """A reproducible mix of candidates (scores, parents, families, ties, a missing score)."""
    rng = np.random.default_rng(seed)
    families = ("lightgbm", "sklearn", "neural_net", "xgboost")
    out: list[Candidate] = []
    for i in range(n):
        parent = f"n{rng.integers(0, i)}" if i > 0 and rng.random() < 0.7 else None
        score = None if i == n - 1 else round(float(rng.uniform(0.5, 0.9)), 3)
        if i == 2 and n > 3:
            score = out[1].score  # a tie
        out.append(
            Candidate(
                node_id=f"n{i}",
                score=score,
                parent_ids=(parent,) if parent else (),
                parent_best_score=out[int(parent[1:])].score if parent else None,
                family=families[i % len(families)],
                reward=None if score is None else score - 0.5,
                children_rewards=tuple(float(x) for x in rng.uniform(0, 1, size=i % 3)),
                visits=int(i % 3),
                generation=i // 3,
            )
        )
    return out


def check_selector(selector: Selector, candidates: Sequence[Candidate] | None = None) -> None:
    """Check probabilities (one per candidate, finite, >= 0, summing to 1), distinct draws,
    ``k`` larger than the pool, and determinism under the same ``rng`` seed.
    """
    cands = list(candidates) if candidates is not None else sample_candidates()
    ids = [c.node_id for c in cands]
    for k in (1, 2, len(cands) + 3):
        sel = selector.select(cands, np.random.default_rng(7), k=k)
        if list(sel.node_ids) != ids:
            raise AssertionError("Selection.node_ids must list candidates in order")
        if len(sel.probabilities) != len(cands):
            raise AssertionError("one probability per candidate")
        if not (all(math.isfinite(p) and p >= 0 for p in sel.probabilities)):
            raise AssertionError(sel.probabilities)
        if not (math.isclose(sum(sel.probabilities), 1.0, rel_tol=0, abs_tol=1e-9)):
            raise AssertionError(f"probabilities sum to {sum(sel.probabilities)}")
        if len(set(sel.chosen)) != len(sel.chosen):
            raise AssertionError(f"duplicate draws {sel.chosen}")
        if len(sel.chosen) != min(k, len(cands)):
            raise AssertionError(f"k={k} over {len(cands)} candidates chose {len(sel.chosen)}")
        again = selector.select(cands, np.random.default_rng(7), k=k)
        if again != sel:
            raise AssertionError("same candidates and same rng seed must give the same selection")


def check_trainer(factory: Callable[[], Trainer[BatchT]], batches: Sequence[BatchT]) -> None:
    """Check finite metrics and exact resume: train on ``batches`` straight through, and again
    with a save after the first half and a load into a fresh trainer; the metrics of the second
    half must be identical.

    Raises:
        InvalidArgumentType: ``factory`` is not callable (pass the class, or a lambda building
            a fresh trainer).
        InvalidArgument: fewer than two ``batches``.
        AssertionError: the trainer breaks the contract (the message says how).
    """
    if not callable(factory):
        raise InvalidArgumentType(
            f"Expected a callable returning a fresh trainer but got factory={factory!r:.80} "
            f"(type={type(factory).__name__}); pass e.g. lambda: SFTTrainer(model_factory())"
        )
    if len(batches) < 2:
        raise InvalidArgument(
            f"check_trainer needs at least two batches but got batches={len(batches)}; "
            "pass two or more (the resume check splits them in halves)"
        )
    half = len(batches) // 2
    straight = factory()
    expected = [dict(straight.step(b)) for b in batches]
    for m in expected:
        if not (m and all(isinstance(v, float) and math.isfinite(v) for v in m.values())):
            raise AssertionError(f"step() must return finite float metrics, got {m}")
    first = factory()
    for b in batches[:half]:
        first.step(b)
    with tempfile.TemporaryDirectory() as tmp:
        first.save(tmp)
        resumed = factory()
        resumed.load(tmp)
        got = [dict(resumed.step(b)) for b in batches[half:]]
    if got != expected[half:]:
        raise AssertionError(
            f"after save/load the metrics differ:\n got      {got}\n expected {expected[half:]}"
        )
