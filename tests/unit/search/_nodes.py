"""Journalled nodes and run directories made by hand, for the SFT export and judge tests."""

from __future__ import annotations

import json
from pathlib import Path

from openmle import Operator, Outcome
from openmle.search import Consumption, Node

__all__ = ["IM", "D", "G", "X", "node", "write_run"]

D, IM, G, X = Operator.DRAFT, Operator.IMPROVE, Operator.DEBUG, Operator.CROSSOVER


def node(
    node_id: str,
    step: int,
    op: Operator,
    parents: tuple[str, ...] = (),
    score: float | None = None,
) -> Node:
    """A journalled node: SUCCESS with ``score``, or a runtime error when ``score`` is None."""
    ok = score is not None
    return Node(
        node_id=node_id, step=step, operator=op, parent_ids=parents, generation=len(parents),
        debug_depth=1 if op is Operator.DEBUG else 0, reason="selector",
        code=f"print({step})\n", plan=f"plan {node_id}",
        outcome=Outcome.SUCCESS if ok else Outcome.RUNTIME_ERROR, score=score,
        valid_score=score, printed_score=score,
        error_signature=None if ok else "ValueError: boom", detail="", exit_code=0 if ok else 1,
        feedback="" if ok else "Traceback\nValueError: boom", family="unknown", model="m",
        used=Consumption(),
    )  # fmt: skip


def write_run(path: Path, nodes: list[Node], *, name: str = "toy", hib: bool = True) -> Path:
    """A run directory with a manifest and a journal of ``nodes``."""
    path.mkdir(parents=True)
    manifest = {"task": {"name": name, "higher_is_better": hib}}
    (path / "manifest.json").write_text(json.dumps(manifest))
    lines = [json.dumps({"event": "node", "node": n.to_dict()}) for n in nodes]
    (path / "journal.jsonl").write_text("\n".join(lines) + "\n")
    return path
