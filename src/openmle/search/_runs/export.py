"""Export a run directory's nodes as a table (parquet via pyarrow, or JSONL) for analysis and
training.

One row per node, in step order: identity and lineage, operator, outcome and scores (the
selection score, the sandbox's validation score and the printed score), error signature, method
family, what the node consumed, the plan and the program, and the capped feedback. The final
test result of the chosen program is attached to its row (``test_score``); every other row has
None there, so a table never mixes test scores into search data by accident.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO, Literal

from openmle._compat import require
from openmle._validation import check_choice
from openmle._writeback import write_file
from openmle.search._rundir import RunDir

__all__ = ["export_run", "node_rows"]

COLUMNS: tuple[str, ...] = (
    "run_id",
    "task",
    "node_id",
    "step",
    "operator",
    "parent_ids",
    "generation",
    "debug_depth",
    "reason",
    "outcome",
    "score",
    "valid_score",
    "printed_score",
    "test_score",
    "error_signature",
    "detail",
    "family",
    "model",
    "sandbox_s",
    "queue_s",
    "model_s",
    "wall_s",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "elapsed_s",
    "is_best",
    "plan",
    "code",
    "feedback",
)

_INTS = frozenset({"step", "generation", "debug_depth", "prompt_tokens", "completion_tokens"})
_FLOATS = frozenset(
    {
        "score",
        "valid_score",
        "printed_score",
        "test_score",
        "sandbox_s",
        "queue_s",
        "model_s",
        "wall_s",
        "cost_usd",
        "elapsed_s",
    }
)


def node_rows(run_dir: str | Path) -> list[dict[str, Any]]:
    """The run's nodes as flat, JSON-ready rows (see :data:`COLUMNS`)."""
    rd = RunDir.open(run_dir)
    final = rd.final_result()
    best_id = final[0] if final else None
    test_score = final[1].score if final else None
    run_id = rd.path.name
    task = rd.manifest["task"]["name"]
    return [
        {
            "run_id": run_id,
            "task": task,
            "node_id": n.node_id,
            "step": n.step,
            "operator": n.operator.value,
            "parent_ids": list(n.parent_ids),
            "generation": n.generation,
            "debug_depth": n.debug_depth,
            "reason": n.reason,
            "outcome": n.outcome.value,
            "score": n.score,
            "valid_score": n.valid_score,
            "printed_score": n.printed_score,
            "test_score": test_score if n.node_id == best_id else None,
            "error_signature": n.error_signature,
            "detail": n.detail,
            "family": n.family,
            "model": n.model,
            "sandbox_s": n.used.sandbox_s,
            "queue_s": n.used.queue_s,
            "model_s": n.used.model_s,
            "wall_s": n.used.wall_s,
            "prompt_tokens": n.used.prompt_tokens,
            "completion_tokens": n.used.completion_tokens,
            "cost_usd": n.used.cost_usd,
            "elapsed_s": n.elapsed_s,
            "is_best": n.node_id == best_id,
            "plan": n.plan,
            "code": n.code,
            "feedback": n.feedback,
        }
        for n in rd.nodes()
    ]


def _utf8(value: Any) -> Any:
    """``value``, its text made valid UTF-8 (a lone surrogate, legal in JSON, written as its
    escape, backslash u d800) so Parquet can store it.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def export_run(
    run_dir: str | Path,
    *,
    format: Literal["parquet", "jsonl"] = "parquet",
    out: str | Path | None = None,
) -> Path:
    """Write the run's node table to ``out`` (default ``RUN_DIR/nodes.<ext>``).

    Args:
        run_dir: a run directory.
        format: ``"parquet"`` (needs pyarrow: ``pip install 'openmle[data]'``) or ``"jsonl"``.
        out: the output file.

    Returns:
        The path written.

    Raises:
        RunDirError: not a run directory. MissingDependency: pyarrow is missing for parquet.
    """
    check_choice(format, ("parquet", "jsonl"), "format")
    rows = node_rows(run_dir)
    path = Path(out) if out is not None else Path(run_dir) / f"nodes.{format}"
    path.parent.mkdir(parents=True, exist_ok=True)
    if format == "jsonl":

        def jsonl(f: BinaryIO) -> None:
            for row in rows:
                f.write((json.dumps(row, sort_keys=True) + "\n").encode("utf-8"))

        write_file(path, jsonl)  # a link at path (nodes.jsonl -> ~/.bashrc) is replaced
        return path
    pa = require("pyarrow", "data")
    pq = require("pyarrow.parquet", "data")

    def kind(column: str) -> Any:
        if column == "parent_ids":
            return pa.list_(pa.string())
        if column in _INTS:
            return pa.int64()
        if column in _FLOATS:
            return pa.float64()
        if column == "is_best":
            return pa.bool_()
        return pa.string()

    schema = pa.schema([(c, kind(c)) for c in COLUMNS])
    table = pa.Table.from_pylist([{k: _utf8(v) for k, v in r.items()} for r in rows], schema=schema)
    write_file(path, lambda f: pq.write_table(table, f))
    return path
