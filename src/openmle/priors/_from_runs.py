"""Priors from finished openmle runs: which method-family changes raised validation scores.

Only the nodes' validation evidence is read (each node's experience card: its family, its
signed validation fitness and its gain over the best parent). The run's final test grade is
never read, so a test score cannot reach a prior.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle.errors import InvalidArgument
from openmle.priors._library import PriorLibrary
from openmle.priors._record import Prior
from openmle.priors._retrieve import TaskProfile

__all__ = ["priors_from_run", "priors_from_runs"]


def priors_from_run(
    path: str | Path, *, profile: TaskProfile | None = None, min_n: int = 1
) -> list[Prior]:
    """Priors from one run directory.

    For every (parent family -> child family) change seen in the run with a scored parent
    and a scored child, one prior: a ``method`` when the mean gain in signed validation
    score is positive, a ``pitfall`` otherwise, with ``effect`` the mean gain (in the task's
    own score units, higher is better) and ``n`` the number of nodes. Families whose nodes
    failed at least half the time (at least ``max(min_n, 2)`` nodes) give a ``pitfall``
    without an effect. The run's best program (by validation score) gives one ``method``
    prior quoting the model's own plan for it, with ``effect`` its signed validation score
    minus the mean of the run's scored Drafts (``n``: those Drafts), when at least one Draft
    was scored.

    Args:
        path: a run directory (read with :meth:`openmle.search.RunDir.open`).
        profile: the task's labels (task type, modality, metric family, size band) the
            priors apply to; ``"any"`` when omitted.
        min_n: fewest observations a prior needs.

    Raises:
        RunDirError: the run directory is damaged.
    """
    from openmle.search import RunDir  # lazy: the search package is heavy

    if isinstance(min_n, bool) or not isinstance(min_n, int) or min_n < 1:
        raise InvalidArgument(f"min_n must be an integer >= 1, got {min_n!r}")
    profile = profile or TaskProfile()
    rd = RunDir.open(path)
    try:
        nodes = rd.nodes()
        manifest = rd.manifest
    finally:
        rd.close()
    task = manifest.get("task", {}) if isinstance(manifest.get("task"), Mapping) else {}
    task_name = str(task.get("name") or profile.task_id or "unknown-task")
    source_ids = [task_name]
    if profile.task_id and profile.task_id != task_name:
        source_ids.append(profile.task_id)
    desc_hash = task.get("description_sha256")
    if isinstance(desc_hash, str) and desc_hash:
        source_ids.append(desc_hash)
    run_tag = hashlib.sha256(
        f"{task_name}|{manifest.get('created_at', '')}|{desc_hash}|{len(nodes)}".encode()
    ).hexdigest()[:8]

    gains, tries = _family_stats(nodes)
    labels: dict[str, Any] = {
        "task_type": profile.task_type,
        "modality": profile.modality,
        "metric_family": profile.metric_family,
        "size_band": profile.size_band,
    }
    common: dict[str, Any] = {
        "source": f"openmle run {task_name}",
        "provenance": "run",
        "source_ids": source_ids,
        "licence": "own",
        **labels,
    }
    run = _RunContext(task_name=task_name, run_tag=run_tag, min_n=min_n, common=common)
    out = _change_priors(gains, run)
    best = _best_program(nodes, task_name, run_tag, source_ids, labels)
    if best is not None:
        out.append(best)
    return out + _failure_priors(tries, run)


def _family_stats(
    nodes: list[Any],
) -> tuple[dict[tuple[str, str], list[float]], dict[str, list[bool]]]:
    """Per (parent family, child family) the children's gains over their first parent, and
    per family whether each of its nodes succeeded.
    """
    family: dict[str, str] = {}
    gains: dict[tuple[str, str], list[float]] = defaultdict(list)
    tries: dict[str, list[bool]] = defaultdict(list)
    for node in nodes:
        card = node.card
        if card is None:
            continue
        family[node.node_id] = card.family
        tries[card.family].append(card.outcome.is_success)
        if card.delta_vs_parent is None or card.fitness is None or not node.parent_ids:
            continue
        parent_fam = family.get(node.parent_ids[0], "unknown")
        gains[(parent_fam, card.family)].append(card.delta_vs_parent)
    return gains, tries


@frozen(kw_only=True)
class _RunContext:
    """What the priors drawn from one run share.

    Attributes:
        task_name: the run's task (quoted in each prior's text).
        run_tag: a short hash naming the run in prior ids.
        min_n: fewest observations a prior needs.
        common: the fields every prior of the run carries (source, provenance, labels).
    """

    task_name: str
    run_tag: str
    min_n: int
    common: Mapping[str, Any]


def _change_priors(
    gains: Mapping[tuple[str, str], list[float]],
    run: _RunContext,
) -> list[Prior]:
    """One ``method`` (mean gain > 0) or ``pitfall`` per family change seen ``min_n`` times."""
    out: list[Prior] = []
    for (src, dst), values in sorted(gains.items()):
        if len(values) < run.min_n:
            continue
        mean = sum(values) / len(values)
        helped = mean > 0
        change = f"refining a {dst} program" if src == dst else f"moving from {src} to {dst}"
        text = (
            f"On task {run.task_name!r}, {change} "
            + ("raised" if helped else "did not raise")
            + f" the validation score (mean change {mean:+.4g} over {len(values)} node(s))."
        )
        out.append(
            Prior(
                prior_id=f"run-{run.run_tag}-{src}-to-{dst}",
                kind="method" if helped else "pitfall",
                text=text,
                family=dst,
                effect=mean,
                n=len(values),
                **run.common,
            )
        )
    return out


def _failure_priors(
    tries: Mapping[str, list[bool]],
    run: _RunContext,
) -> list[Prior]:
    """A ``pitfall`` per family whose nodes failed at least half the time."""
    out: list[Prior] = []
    for fam, oks in sorted(tries.items()):
        failures = oks.count(False)
        if len(oks) >= max(run.min_n, 2) and failures * 2 >= len(oks):
            out.append(
                Prior(
                    prior_id=f"run-{run.run_tag}-{fam}-fails",
                    kind="pitfall",
                    text=(
                        f"On task {run.task_name!r}, {failures} of {len(oks)} {fam} programs "
                        "failed to produce a validation score; keep them simple and check "
                        "them before scaling up."
                    ),
                    family=fam,
                    n=len(oks),
                    **run.common,
                )
            )
    return out


def _best_program(
    nodes: list[Any],
    task_name: str,
    run_tag: str,
    source_ids: list[str],
    labels: Mapping[str, Any],
) -> Prior | None:
    """The ``method`` prior of the run's best program (None without a scored Draft)."""
    scored = [n for n in nodes if n.card is not None and n.card.fitness is not None]
    drafts = [n.card.fitness for n in scored if not n.parent_ids]
    if not scored or not drafts:
        return None
    top = max(scored, key=lambda n: (n.card.fitness, -n.step))
    plan = " ".join(str(top.plan).split())[:400] or "(the program gave no plan)"
    effect = float(top.card.fitness - sum(drafts) / len(drafts))
    return Prior(
        prior_id=f"run-{run_tag}-best",
        kind="method",
        text=(
            f"On task {task_name!r}, the best validation score came from this program "
            f"({effect:+.4g} over the mean first draft): {plan}"
        ),
        family=top.card.family,
        source=f"openmle run {task_name}",
        effect=effect,
        n=len(drafts),
        provenance="run",
        source_ids=source_ids,
        licence="own",
        **labels,
    )


def priors_from_runs(
    runs: Iterable[str | Path] | Mapping[str | Path, TaskProfile], *, min_n: int = 1
) -> PriorLibrary:
    """A library from several run directories (a mapping gives each run its profile)."""
    items: list[tuple[str | Path, TaskProfile | None]]
    if isinstance(runs, Mapping):
        items = list(runs.items())
    else:
        items = [(r, None) for r in runs]
    priors: list[Prior] = []
    for path, profile in items:
        priors.extend(priors_from_run(path, profile=profile, min_n=min_n))
    return PriorLibrary(priors)
