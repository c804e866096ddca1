"""Metric code when no vetted metric fits: the model's ``utils/metric.py``, checked before use.

The check runs the metric on the baselines' submissions in gym's confined grading process
(:func:`openmle.gym.run_child` with :class:`openmle.gym.GradeLimits`; the program is
:mod:`openmle.builder._metric_program`, guarded against network, processes, file changes and
reads outside the Python installation), twice, in two processes with different hash seeds. The
metric is accepted when it imports and constructs, states ``higher_is_better`` as a bool,
touches nothing the guard refuses, gives a finite number for every submission, the same number
every time, and orders the constant baseline strictly below the better one; otherwise the
check says why, and the task is rejected with that reason.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
from attrs import field, frozen

from openmle._protocols import OperatorModel
from openmle._trees import scratch_dir
from openmle._types import Message, ModelRequest
from openmle.builder._spec import PURPOSE_KEY, PURPOSE_METRIC, TaskSpec, task_messages
from openmle.gym import GradeLimits, run_child

__all__ = [
    "METRIC_CONTRACT",
    "METRIC_PROGRAM",
    "MetricCheck",
    "check_metric_code",
    "metric_stage",
]

METRIC_PROGRAM = "openmle.builder._metric_program"
"""The module the grading process runs (``python -I -m``)."""
DEFAULT_LIMITS = GradeLimits(timeout_s=60.0, memory_mb=2048)
"""One check run's limits: a metric over a baseline's few thousand rows needs little."""
MAX_SOURCE_CHARS = 100_000


@frozen(kw_only=True)
class MetricCheck:
    """The metric check's record.

    Args:
        ok: the metric may grade the task.
        reason: why not (empty when ok).
        higher_is_better: the metric class's direction (None when it gave none).
        scores: each submission's score (the first run's first call).
        runs: the results of the grading processes, as they came back.
    """

    ok: bool
    reason: str
    higher_is_better: bool | None = None
    scores: Mapping[str, float] = field(factory=dict)
    runs: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "ok": self.ok,
            "reason": self.reason,
            "higher_is_better": self.higher_is_better,
            "scores": dict(self.scores),
            "runs": list(self.runs),
        }


def _one_run(
    source_path: Path,
    answers: Path,
    submissions: Mapping[str, Path],
    limits: GradeLimits,
    hash_seed: int,
) -> tuple[dict[str, Any] | None, str]:
    config = {
        "metric_source": str(source_path),
        "answers": str(answers),
        "submissions": {k: str(v) for k, v in submissions.items()},
    }
    run = run_child(config, limits=limits, module=METRIC_PROGRAM, hash_seed=hash_seed)
    if run.limit == "time":
        return None, f"the metric did not finish within {limits.timeout_s:g} s (timeout_s)"
    if run.limit is not None:
        return None, f"the metric hit the grading process's {run.limit} limit"
    if run.result is None:
        return None, f"the metric's process died without a result (exit {run.returncode})"
    return run.result, ""


def check_metric_code(
    source: str,
    answers: Path,
    submissions: Mapping[str, Path],
    *,
    constant: str,
    better: str,
    limits: GradeLimits | None = None,
) -> MetricCheck:
    """Check the model's ``metric.py`` ``source`` on baseline submissions.

    Args:
        source: the metric module (one class whose name ends in ``Metrics``, constructed with
            no arguments, with ``higher_is_better`` and ``evaluate(y_true, y_pred)`` on two
            pandas DataFrames: the answers and a submission).
        answers: the private answers CSV.
        submissions: baseline name -> submission CSV (at least ``constant`` and ``better``).
        constant, better: the names of the constant baseline and of one that must beat it.
        limits: the grading process's limits (default :data:`DEFAULT_LIMITS`).

    Blocking (two child processes); never raises for a bad metric: the result says why.
    """
    lim = limits or DEFAULT_LIMITS
    if len(source) > MAX_SOURCE_CHARS:
        return MetricCheck(ok=False, reason=f"metric.py is over {MAX_SOURCE_CHARS} characters")
    with scratch_dir(prefix="openmle-metric-") as tmp:
        path = Path(tmp) / "metric.py"
        path.write_text(source, encoding="utf-8")
        runs: list[dict[str, Any]] = []
        for seed in (0, 1):
            result, why = _one_run(path, answers, submissions, lim, seed)
            if result is None:
                return MetricCheck(ok=False, reason=why, runs=tuple(runs))
            runs.append(result)
    return _judge(runs, constant, better)


def _judge(runs: list[dict[str, Any]], constant: str, better: str) -> MetricCheck:
    """The verdict on two runs' results."""
    shown = tuple(r if len(json.dumps(r)) <= 20_000 else {"too_large": True} for r in runs)

    def no(reason: str, hib: bool | None = None) -> MetricCheck:
        return MetricCheck(ok=False, reason=reason, higher_is_better=hib, runs=shown)

    for r in runs:
        denied = r.get("denied") or []
        if denied:
            return no(
                f"the metric tried what a metric may not ({', '.join(map(str, denied[:3]))}); "
                "compute the score from y_true and y_pred only"
            )
        if "error" in r:
            return no(f"the metric raised {str(r['error'])[:300]}")
    hib = runs[0].get("higher_is_better")
    if not isinstance(hib, bool):
        return no("the metric class's higher_is_better is not a bool; set it to True or False")
    values: dict[str, list[Any]] = {}
    for r in runs:
        scores = r.get("scores")
        if not isinstance(scores, dict):
            return no("the metric's process gave no scores", hib)
        for name, pair in scores.items():
            values.setdefault(str(name), []).extend(pair if isinstance(pair, list) else [None])
    for name, vals in sorted(values.items()):
        if any(not isinstance(v, int | float) or not math.isfinite(v) for v in vals):
            return no(f"the metric is not a finite number on the {name} submission", hib)
        if len(set(vals)) != 1:
            return no(
                f"the metric is not deterministic: the {name} submission scored {vals}; "
                "seed or remove any randomness",
                hib,
            )
    scores = {name: float(vals[0]) for name, vals in values.items()}
    if constant not in scores or better not in scores:
        return no("the metric's process did not score every baseline", hib)
    low, high = scores[constant], scores[better]
    if not ((high > low) if hib else (high < low)):
        return no(
            f"the metric does not order the constant baseline ({low:.6g}) below the "
            f"{better} one ({high:.6g}) (higher_is_better={hib})",
            hib,
        )
    return MetricCheck(ok=True, reason="", higher_is_better=hib, scores=scores, runs=shown)


METRIC_CONTRACT = """No vetted metric fits this task, so write its metric: a Python module
`metric.py` with exactly one class whose name ends in `Metrics`, constructed with no
arguments, with a class attribute `higher_is_better` (a bool) and a method
`evaluate(self, y_true, y_pred) -> float`: y_true is the answers table (the id column and the
target), y_pred a submission in the format of the sample submission, both pandas DataFrames.
It must be deterministic and finite, use only its two arguments (no files, network or
processes; numpy, pandas and the standard library), and score the answers better than a
constant prediction. Answer with one ```python block."""


def metric_messages(spec: TaskSpec, sample_header: list[str]) -> list[Message]:
    """The metric prompt: the contract, the spec and the sample submission's columns."""
    columns = json.dumps(sample_header[:50])
    return task_messages(METRIC_CONTRACT, spec, "\n\nSample submission columns: " + columns)


async def metric_stage(
    model: OperatorModel, spec: TaskSpec, staged: Path, record: dict[str, Any]
) -> tuple[str, str, str, tuple[str, ...]] | None:
    """Ask ``model`` for ``utils/metric.py``, write it into the staged package and check it on
    the package's constant sample submission and the perfect one (the answers); why the build
    stops (a failed or rejected metric), or None. Records ``metric``.
    """
    from openmle.builder._gate import _perfect_submission
    from openmle.builder._inventory import read_table
    from openmle.builder._prepare import extract_code

    data = staged / "data"
    sample = data / "public" / "sample_submission.csv"
    answers = data / "private" / "test_answer.csv"
    try:
        header = (await anyio.to_thread.run_sync(read_table, sample))[0]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return ("rejected", "metric", f"the sample submission is unreadable: {exc}", ())
    request = ModelRequest(
        messages=metric_messages(spec, header),
        metadata={PURPOSE_KEY: PURPOSE_METRIC, "spec": spec.to_dict()},
        temperature=0.0,
    )
    answer = (await model.complete(request)).text
    source = extract_code(answer)
    if source is None:
        record["metric"] = {"ok": False, "reason": "no ```python block"}
        return ("failed", "metric", "the model wrote no metric.py (no ```python block)", ())

    def check() -> MetricCheck:
        (staged / "utils").mkdir(exist_ok=True)
        (staged / "utils" / "metric.py").write_text(source, encoding="utf-8")
        with scratch_dir(prefix="openmle-metric-subs-") as tmp:
            perfect = Path(tmp) / "answers.csv"
            _perfect_submission(spec, answers, header, perfect)
            return check_metric_code(
                source,
                answers,
                {"constant": sample, "answers": perfect},
                constant="constant",
                better="answers",
            )

    try:
        result = await anyio.to_thread.run_sync(check)
    except (OSError, ValueError) as exc:
        result = MetricCheck(ok=False, reason=f"the answers could not be read: {exc}")
    if result.ok and result.higher_is_better != spec.higher_is_better:
        result = MetricCheck(
            ok=False,
            reason=f"the metric class's higher_is_better ({result.higher_is_better}) "
            f"contradicts the spec's ({spec.higher_is_better})",
            higher_is_better=result.higher_is_better,
            scores=result.scores,
            runs=result.runs,
        )
    record["metric"] = result.to_dict()
    if not result.ok:
        return ("rejected", "metric", "utils/metric.py: " + result.reason, ("metric_rejected",))
    return None
