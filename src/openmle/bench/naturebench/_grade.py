"""NatureBench's scoring rule: a case's primary metrics, SOTA points and the gap ``g``.

Every ``performance_entries`` instance of a case's ``metadata.json`` has a primary metric with
a direction and a SOTA score (text in NatureBench's forms, :func:`parse_sota`); the evaluator's
result is scored per instance as the normalised gap to the SOTA and averaged into the case's
``g`` (:func:`case_gap`). Pure functions; the registry runs the evaluator
(:meth:`openmle.bench.NatureBenchTask.evaluate`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, final

from attrs import frozen

from openmle._validation import finite_or_none

__all__ = ["FAILED_INSTANCE_G", "PrimaryMetric", "case_gap", "parse_sota", "primary_metrics"]

FAILED_INSTANCE_G = -1.0

_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_MEAN = re.compile(rf"\bmean\s*=\s*({_NUMBER})", re.IGNORECASE)
_RANGE = re.compile(rf"^~?\s*({_NUMBER})\s*(?:to|-|\u2013|\u2014)\s*~?\s*({_NUMBER})\s*$")
_BOUND = re.compile(rf"^[<>]=?\s*({_NUMBER})")
_LEADING = re.compile(rf"^{_NUMBER}")


def _parse_one(value: Any, higher_is_better: bool) -> float | None:
    """One SOTA value (number or text) as a point estimate, by the harness's rules."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return finite_or_none(value)
    text = str(value).strip()
    if not text:
        return None
    m = _MEAN.search(text)  # "..., (mean=0.919)"
    if m:
        return finite_or_none(float(m.group(1)))
    core = text.split("(", 1)[0].strip().lstrip("~").strip()  # "11.5 (0.6)" -> "11.5"
    r = _RANGE.match(core)  # "~0.60 to ~0.95": the better end for the direction
    if r:
        lo, hi = float(r.group(1)), float(r.group(2))
        return finite_or_none(hi if higher_is_better else lo)
    b = _BOUND.match(core)  # "< 1.6" -> 1.6
    if b:
        return finite_or_none(float(b.group(1)))
    core = core.split("\u00b1", 1)[0].strip().lstrip("~").strip()  # "0.939 ± 0.002"
    n = _LEADING.match(core)
    return finite_or_none(float(n.group(0))) if n else None


def parse_sota(sota_score: Any, higher_is_better: bool) -> float | None:
    """The SOTA point of a ``sota_score`` field: the best by direction over its variants.

    ``sota_score`` is a list of ``{"value", "method"}`` variants, one such dict, a number or
    text. Text follows NatureBench's forms: ``"0.939 ± 0.002"`` -> 0.939, ``"11.5 (0.6)"`` ->
    11.5, ``"~0.60 to ~0.95"`` -> the better end for the direction, ``"< 1.6"`` -> 1.6,
    ``"(mean=0.919)"`` -> 0.919. None when nothing numeric can be read.
    """
    items = sota_score if isinstance(sota_score, list) else [sota_score]
    points: list[float] = []
    for item in items:
        value = item.get("value") if isinstance(item, dict) else item
        p = _parse_one(value, higher_is_better)
        if p is not None:
            points.append(p)
    if not points:
        return None
    return max(points) if higher_is_better else min(points)


@final
@frozen(kw_only=True)
class PrimaryMetric:
    """One instance's primary metric: its name, direction and SOTA point (never 0)."""

    instance: str
    metric: str
    higher_is_better: bool
    sota: float


def primary_metrics(metadata: Mapping[str, Any]) -> tuple[dict[str, PrimaryMetric], list[str]]:
    """The primary metric of every ``performance_entries`` instance, and the skipped ones.

    An instance without a primary metric, without a metric name, or with a SOTA that is
    missing, unparsable or 0 (cannot be normalised) is skipped, with a note saying why.
    """
    notes: list[str] = []
    table: dict[str, PrimaryMetric] = {}
    entries = metadata.get("performance_entries")
    if not isinstance(entries, list) or not entries:
        return {}, ["metadata.json has no performance_entries"]
    for entry in entries:
        if not isinstance(entry, dict):
            notes.append("a performance entry is not an object")
            continue
        instance = entry.get("dataset_name") or entry.get("instance_name")
        if not isinstance(instance, str) or not instance:
            notes.append("a performance entry has no dataset_name")
            continue
        listed = entry.get("metrics")
        metrics: list[Any] = listed if isinstance(listed, list) else []
        primary = next((m for m in metrics if isinstance(m, dict) and m.get("is_primary")), None)
        if primary is None or not isinstance(primary.get("name"), str) or not primary["name"]:
            notes.append(f"instance {instance!r}: no named primary metric, skipped")
            continue
        hib = primary.get("metric_direction") == "higher_is_better"
        sota = parse_sota(primary.get("sota_score"), hib)
        if sota is None or sota == 0:
            why = "missing or unparsable" if sota is None else "0 (cannot be normalised)"
            notes.append(f"instance {instance!r}: SOTA {why}, skipped")
            continue
        table[instance] = PrimaryMetric(
            instance=instance, metric=primary["name"], higher_is_better=hib, sota=sota
        )
    return table, notes


def _norm(name: str) -> str:
    return name.lower().replace("_", "").replace(" ", "").replace("-", "")


def _metric_in(block: Any, metric: str) -> float | None:
    """The value keyed (loosely: case, ``_``, ``-`` and spaces ignored) by ``metric`` in
    ``block`` or the dicts nested in it; None when absent or not a number.
    """
    if not isinstance(block, dict):
        return None
    target = _norm(metric)
    for key, value in block.items():
        if (
            _norm(str(key)) == target
            and not isinstance(value, bool)
            and isinstance(value, int | float)
        ):
            return float(value)
    for value in block.values():
        found = _metric_in(value, metric) if isinstance(value, dict) else None
        if found is not None:
            return found
    return None


def case_gap(
    raw: Mapping[str, Any], table: Mapping[str, PrimaryMetric]
) -> tuple[dict[str, float], float | None]:
    """Per-instance gaps and the case's ``g`` from an evaluator's result.

    ``g_i = d * (score - sota) / |sota|`` (``d`` = +1 for higher-is-better, -1 otherwise);
    an instance whose own block has no finite score for its primary metric gets -1 (a score is
    never taken from another instance's block); ``g`` is the mean over the primary instances,
    None when there are none.
    """
    per: dict[str, float] = {}
    for instance, pm in table.items():
        score = _metric_in(raw.get(instance), pm.metric)
        if score is None or not math.isfinite(score):
            per[instance] = FAILED_INSTANCE_G
            continue
        d = 1.0 if pm.higher_is_better else -1.0
        per[instance] = d * (score - pm.sota) / abs(pm.sota)
    if not per:
        return per, None
    return per, sum(per.values()) / len(per)
