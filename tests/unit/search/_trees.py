"""Build small search trees of cards for tests (deterministic from a seed)."""

from __future__ import annotations

import numpy as np

from openmle import Operator, Outcome, RunResult, TaskMeta
from openmle.search import Board

__all__ = ["PROGRAMS", "add_card", "grow_board", "result_for"]

PROGRAMS = (
    "import lightgbm as lgb\nmodel = lgb.LGBMRegressor()\n",
    "import xgboost as xgb\nmodel = xgb.XGBRegressor()\n",
    "from catboost import CatBoostRegressor\nmodel = CatBoostRegressor()\n",
    "import torch\nimport torch.nn as nn\nnet = nn.Linear(3, 1)\n",
    "from sklearn.linear_model import Ridge\nmodel = Ridge()\n",
    "import pandas as pd\nx = 1\n",
)


def result_for(score: float | None, *, outcome: Outcome | None = None, sig: str = "") -> RunResult:
    """A validation RunResult: SUCCESS with ``score`` or a failure with signature ``sig``."""
    if score is not None:
        return RunResult(outcome=Outcome.SUCCESS, score=score, runtime_s=1.5)
    return RunResult(
        outcome=outcome or Outcome.RUNTIME_ERROR,
        error_signature=sig or "ValueError: bad",
        logs=f"Traceback (most recent call last):\n{sig or 'ValueError: bad'}\n",
        runtime_s=0.5,
    )


def add_card(
    board: Board,
    node: str,
    score: float | None,
    parents: tuple[str, ...] = (),
    *,
    code: str = "",
    sig: str = "",
    plan: str = "",
) -> None:
    """Add node ``node`` to ``board``: a Draft, Improve or Crossover by the number of
    ``parents``, scored ``score`` (None: a failure with signature ``sig``), its plan ``plan``
    or "plan of <node>".
    """
    op = {0: "draft", 1: "improve", 2: "crossover"}[len(parents)]
    board.add(
        board.make_card(
            node_id=node,
            operator=op,
            code=code,
            result=result_for(score, sig=sig),
            parent_ids=parents,
            plan=plan or f"plan of {node}",
        )
    )


def grow_board(
    n: int, *, seed: int = 0, task: TaskMeta | None = None, fail_rate: float = 0.25
) -> Board:
    """A board of ``n`` nodes: drafts first, then improve/debug/crossover on random parents."""
    task = task or TaskMeta()
    rng = np.random.default_rng(seed)
    board = Board(task=task)
    for i in range(n):
        scored = [c.node_id for c in board if c.score is not None]
        failed = [c.node_id for c in board if c.score is None]
        roll = rng.random()
        parents: tuple[str, ...]
        if i < 3 or roll < 0.15:
            op, parents = Operator.DRAFT, ()
        elif roll < 0.3 and failed:
            op, parents = Operator.DEBUG, (failed[int(rng.integers(len(failed)))],)
        elif roll < 0.5 and len(scored) >= 2:
            a, b = rng.choice(len(scored), size=2, replace=False)
            op, parents = Operator.CROSSOVER, (scored[int(a)], scored[int(b)])
        elif scored:
            op, parents = Operator.IMPROVE, (scored[int(rng.integers(len(scored)))],)
        else:
            op, parents = Operator.DRAFT, ()
        ok = rng.random() >= fail_rate
        score = round(float(rng.uniform(0.3, 0.95)), 4) if ok else None
        sig = f"KeyError: '<str>' #{int(rng.integers(3))}"
        card = board.make_card(
            node_id=f"n{i}",
            operator=op,
            code=PROGRAMS[int(rng.integers(len(PROGRAMS)))],
            result=result_for(score, sig=sig),
            parent_ids=parents,
            plan=f"plan {i}",
            generation=i // 5,
        )
        board.add(card)
    return board
