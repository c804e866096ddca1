"""``openmle bench report``: per-run MLE-bench fields, suite metrics over seeds, in Markdown,
JSON and a self-contained HTML page, plus files MLE-bench's own tools read.

Every run of the matrix is counted: a run that failed or never finished is a failure (no
submission, no medal), never dropped, so seeds are complete by construction (MLE-bench's
``--pad-missing`` rule). Files written to ``BENCH_DIR``:

- ``report.json``, ``report.md``, ``report.html``;
- ``submission.jsonl``: one ``{"competition_id", "submission_path"}`` line per run, seed-major
  (absolute paths; ``null`` for a run without a kept submission, as MLE-bench's
  ``experiments/make_submission.py`` writes it), the input of ``mlebench grade --submission
  submission.jsonl``, which then counts every run with seeds aligned;
- ``grading_report.json``: MLE-bench's grading-report shape (totals and
  ``competition_reports``), for ``experiments/aggregate_grading_reports.py``.

In an ablation (``BenchConfig.arms``) those two files hold the first arm (``base``), so
MLE-bench's tools read a plain agent's results; each arm's own pair is in
``arms/<arm>/submission.jsonl`` and ``arms/<arm>/grading_report.json``, and the Markdown
"Runs" table lists every arm's runs with an ``arm`` column.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import html
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openmle._writeback import ensure_dir, write_file
from openmle.bench._aggregate import METRICS, Metric, SuiteMetrics, aggregate_seeds
from openmle.bench._benchmarks import benchmark_kind
from openmle.bench._medals import bench_dict, competition_report
from openmle.bench._runner import RESULT, BenchRun, RunStatus, preset_lines, read_result
from openmle.bench._suites import KNOWN_ISSUES, MODALITY_LABELS, modality_of
from openmle.bench.mlebench._registry import protocol_lines
from openmle.errors import InvalidArgument
from openmle.gym import AGGREGATION, GradeReport

__all__ = ["BenchReport", "bench_report", "write_report"]

_LABELS = {
    "valid_submissions_percentage": "valid submission %",
    "submission_exists_percentage": "submission exists %",
    "any_medal_percentage": "any medal %",
    "gold_medal_percentage": "gold %",
    "silver_medal_percentage": "silver %",
    "bronze_medal_percentage": "bronze %",
    "above_median_percentage": "above median %",
    "human_rank": "mean Human Rank",
}


class BenchReport:
    """A bench directory's results: the reports (seed-major) and the suite metrics.

    Nothing a run directory holds is taken on trust: each ``bench_result.json`` is read
    bounded and checked (:func:`openmle.bench.read_result`), and only its score, reason and
    seed are used; medals, thresholds, validity, the Human Rank and the submission path are
    recomputed from the competition's leaderboard and the kept submission file. Without the
    leaderboard (registry not at hand) a run keeps its score and gets no medal, with a note.
    """

    def __init__(self, run: BenchRun) -> None:
        self.run = run
        self._boards: dict[str, Any] = {}
        self._bench: Any = None
        statuses = run.status()
        by_key = {(s.arm, s.competition_id, s.seed): s for s in statuses}
        self.unfinished: dict[str, int] = {}
        for st in statuses:
            if st.state != "done":
                self.unfinished[st.state] = self.unfinished.get(st.state, 0) + 1
        self._n_runs = len(statuses)
        names = [a.name for a in run.config.arms] or [""]
        self.arm_seeds: dict[str, list[list[GradeReport]]] = {}
        for arm in names:
            rows: list[list[GradeReport]] = []
            for seed in run.config.seeds:
                row = []
                for cid in run.config.competitions:
                    s = by_key[(arm, cid, seed)]
                    row.append(self._verified(s, arm))
                rows.append(row)
            self.arm_seeds[arm] = rows
        self.seeds: list[list[GradeReport]] = self.arm_seeds[names[0]]
        self.metrics: SuiteMetrics = aggregate_seeds(self.seeds)
        self.arm_metrics: dict[str, SuiteMetrics] = {
            a: aggregate_seeds(rows) for a, rows in self.arm_seeds.items() if a
        }

    def _board(self, cid: str) -> Any:
        """The competition's leaderboard, or None (NatureBench, or registry not at hand)."""
        if cid not in self._boards:
            from openmle.bench._runner import _bench_of
            from openmle.errors import OpenMLEError

            board = None
            with contextlib.suppress(OpenMLEError, OSError, ValueError):
                if self._bench is None:
                    self._bench = _bench_of(self.run.config, self.run.path)
                board = self._bench.task(cid).leaderboard
            self._boards[cid] = board
        return self._boards[cid]

    def _verified(self, s: RunStatus, arm: str) -> GradeReport:
        """The run's report rebuilt from its stored score (see the class doc)."""
        cid, seed = s.competition_id, s.seed
        claimed = s.report
        if claimed is None:
            reason = f"run {s.state}: counted as a failure"
            score: float | None = None
        else:
            if claimed.competition_id != cid or claimed.seed != seed:
                raise InvalidArgument(
                    f"{self.run.run_dir(cid, seed, arm) / RESULT}: malformed bench result "
                    f"(it names {claimed.competition_id!r} seed {claimed.seed}); delete it "
                    "to re-grade that run with `openmle bench resume`"
                )
            reason, score = claimed.reason, claimed.score
        kept = self.run.submission_path(cid, seed, arm)
        exists = claimed is not None and kept.is_file() and not kept.is_symlink()
        rel = str(kept.relative_to(self.run.path)) if exists else ""
        if not exists:
            score = None
            if claimed is not None and claimed.score is not None:
                reason = "the kept submission file is missing: not counted"
        board = self._board(cid)
        if board is not None:
            when = None
            if claimed is not None:
                with contextlib.suppress(ValueError):
                    when = _dt.datetime.fromisoformat(claimed.created_at)
            return competition_report(
                cid,
                score,
                board,
                submission_exists=exists,
                submission_path=rel,
                seed=seed,
                reason=reason,
                created_at=when,
            )
        if benchmark_kind(self.run.config.benchmark).leaderboards and score is not None:
            reason = "medals not verified: the competition's leaderboard is not at hand"
        return GradeReport(
            task=cid,
            score=score,
            valid=score is not None,
            submission_exists=exists,
            created_at=claimed.created_at if claimed is not None else "",
            submission_path=rel,
            seed=seed,
            reason=reason,
        )

    @property
    def reports(self) -> list[GradeReport]:
        """Every run's report, seed-major (of the first arm, in an ablation)."""
        return [r for row in self.seeds for r in row]

    def to_dict(self) -> dict[str, Any]:
        """Everything, JSON-ready (no timestamps of runs, so reruns compare equal)."""
        gap = self.validation_gap()
        out: dict[str, Any] = {
            "manifest": self.run.manifest,
            "aggregation": AGGREGATION,
            "metrics": self.metrics.to_dict(),
            "modalities": {
                label: {
                    "competitions": n,
                    "any_medal_percentage": medal.to_dict(),
                    "valid_submissions_percentage": valid.to_dict(),
                }
                for label, n, medal, valid in self.modality_rows()
            },
            "validation_vs_test": None if gap is None else {k: v.to_dict() for k, v in gap.items()},
            "runs": [_stable(r) for r in self.reports],
            "unfinished_runs": dict(sorted(self.unfinished.items())),
        }
        if self.arm_metrics:
            out["arms"] = {
                a.name: {
                    "arm": a.to_dict(),
                    "metrics": self.arm_metrics[a.name].to_dict(),
                    "runs": [_stable(r) for row in self.arm_seeds[a.name] for r in row],
                    "spent": self._spent(a.name),
                }
                for a in self.run.config.arms
            }
        return out

    def _result(self, cid: str, seed: int, arm: str) -> dict[str, Any]:
        """The run's checked ``bench_result.json`` ({} when absent)."""
        return read_result(self.run.run_dir(cid, seed, arm) / RESULT) or {}

    def _spent(self, arm: str) -> dict[str, float]:
        """Total compute the arm's finished runs spent (sandbox seconds, steps, GPU-seconds)."""
        total: dict[str, float] = {}
        for cid in self.run.config.competitions:
            for seed in self.run.config.seeds:
                spent = self._result(cid, seed, arm).get("spent") or {}
                for k in ("sandbox_s", "steps", "gpu_s"):
                    v = spent.get(k)
                    if isinstance(v, int | float) and not isinstance(v, bool):
                        total[k] = total.get(k, 0.0) + float(v)
        return total

    def arms_markdown(self) -> list[str]:
        """The ablation table: each arm's metrics side by side, mean ± sd over seeds."""
        if not self.arm_metrics:
            return []
        cfg = self.run.config
        arms = list(cfg.arms)
        sha = _md((cfg.priors_sha256 or "")[:16])
        out = [
            "## Arms (mean ± population sd over seeds; same competitions, seeds and budget)",
            "",
            "| metric | " + " | ".join(_md(a.name) for a in arms) + " |",
            "| --- |" + " --- |" * len(arms),
            "| priors | " + " | ".join(f"on ({sha})" if a.priors else "off" for a in arms) + " |",
            "| workers | " + " | ".join(str(a.workers) for a in arms) + " |",
            "| sandbox s spent | "
            + " | ".join(_fmt(self._spent(a.name).get("sandbox_s")) for a in arms)
            + " |",
        ]
        for key in METRICS:
            cells = []
            for a in arms:
                mt = self.arm_metrics[a.name].metrics[key]
                cells.append(f"{_fmt(mt.mean)} ± {_fmt(mt.sd)}")
            out.append(f"| {_LABELS[key]} | " + " | ".join(cells) + " |")
        out.append("")
        notes = (  # a note for each setting the arms differ in
            (
                {a.priors for a in arms},
                f"Arms with priors on saw the library sha256 {sha}; arms with priors off "
                "saw none. These runs differ in priors on purpose (the difference is the "
                "priors' effect); compare them with other benches only at the same library.",
            ),
            (
                {a.workers for a in arms},
                f"Every arm had the same budget ({_md(_budget_text(cfg.budget))}): more workers "
                "spend the same sandbox compute in parallel, so the workers' effect is not "
                "bought with more compute.",
            ),
        )
        for values, note in notes:
            if len(values) > 1:
                out += [note, ""]
        return out

    # ------------------------------------------------------------------ breakdowns

    def modality_rows(self) -> list[tuple[str, int, Metric, Metric]]:
        """Per modality of the competitions (:data:`openmle.bench.MODALITIES`): the label,
        how many competitions, and any-medal % and valid-submission % over seeds. Competitions
        without a known modality are grouped as ``unknown``.
        """
        groups: dict[str, list[str]] = {}
        for cid in self.run.config.competitions:
            groups.setdefault(modality_of(cid) or "unknown", []).append(cid)
        out = []
        for label in (*MODALITY_LABELS, "unknown"):
            ids = groups.get(label)
            if not ids:
                continue
            medal, valid = [], []
            for row in self.seeds:
                part = [r for r in row if r.competition_id in ids]
                medal.append(100 * sum(r.any_medal for r in part) / len(part))
                valid.append(100 * sum(r.valid_submission for r in part) / len(part))
            out.append((label, len(ids), Metric.of(medal), Metric.of(valid)))
        return out

    def validation_gap(self) -> dict[str, Any] | None:
        """Validation-vs-test any-medal % over seeds: the medal each run's best *validation*
        score (recorded by the runner as ``best_valid_score``) would earn on the leaderboard,
        next to the graded test submission's. None without leaderboards (NatureBench).
        """
        valid_pct: list[float] = []
        test_pct: list[float] = []
        for seed, row in zip(self.run.config.seeds, self.seeds, strict=True):
            hits = 0
            for r in row:
                board = self._board(r.competition_id)
                if board is None:
                    return None
                best = self._result(r.competition_id, seed, "").get("best_valid_score")
                if isinstance(best, int | float) and math.isfinite(best):
                    hits += competition_report(
                        r.competition_id, float(best), board, submission_exists=True
                    ).any_medal
            valid_pct.append(100 * hits / len(row))
            test_pct.append(100 * sum(r.any_medal for r in row) / len(row))
        v, t = Metric.of(valid_pct), Metric.of(test_pct)
        gap = Metric.of([b - a for a, b in zip(valid_pct, test_pct, strict=True)])
        return {"validation_any_medal": v, "test_any_medal": t, "test_minus_validation": gap}

    def _header(self) -> list[str]:
        """The Markdown header lines (every text escaped)."""
        m = self.run.manifest
        cfg = self.run.config
        source = benchmark_kind(cfg.benchmark).title
        out = [
            f"# openmle bench: {_md(cfg.suite)}",
            "",
            f"- competitions: {len(cfg.competitions)}, seeds: {len(cfg.seeds)} "
            f"({', '.join(map(str, cfg.seeds))})",
            f"- model: {_md(cfg.model)}, sandbox: {_md(cfg.sandbox)}, "
            f"budget: {_md(_budget_text(cfg.budget))}",
            f"- {source} commit: {_md(_commit(m))}, openmle {_md(str(m.get('openmle_version')))}",
            f"- hardware: {_md(_hw(m.get('hardware')))}; per run: "
            f"{_md(_resources(cfg))}, {cfg.time_limit_s:g} s per program",
        ]
        out += [f"- {_md(line, limit=1_000)}" for line in preset_lines(cfg)]
        out += [f"- {_md(line[2:], limit=1_000)}" for line in protocol_lines(m)]
        out += [f"- **{_md(line, limit=1_000)}**" for line in self._unfinished_lines()]
        return out

    def _unfinished_lines(self) -> list[str]:
        """One line when runs are not finished: every number below counts them as failures,
        so the table is not the bench's result yet (how many, in which state, how to finish).
        """
        if not self.unfinished:
            return []
        n = sum(self.unfinished.values())
        states = ", ".join(f"{k} {v}" for k, v in sorted(self.unfinished.items()))
        return [
            f"unfinished: {n} of {self._n_runs} runs ({states}) are counted as failures below; "
            f"finish them with openmle bench resume {self.run.path}"
        ]

    # ------------------------------------------------------------------ Markdown

    def markdown(self) -> str:
        """The report as Markdown (every text from the bench directory escaped)."""
        out = [
            *self._header(),
            "",
            "## Suite (mean, SEM = sample sd (ddof 1) / sqrt(seeds), sd = population sd)",
            "",
            "| metric | mean | SEM | sd | per seed |",
            "| --- | --- | --- | --- | --- |",
        ]
        for key in METRICS:
            mt = self.metrics.metrics[key]
            per = ", ".join(_fmt(v) for v in mt.per_seed)
            out.append(
                f"| {_LABELS[key]} | {_fmt(mt.mean)} | {_fmt(mt.sem)} | {_fmt(mt.sd)} | {per} |"
            )
        out += [
            "",
            "Human Rank: the fraction of the competition's leaderboard entries strictly worse "
            "than the test score (ties not counted), 0 for an invalid submission.",
            "",
            "## By modality (any medal %, valid submission %: mean ± population sd)",
            "",
            "| modality | competitions | any medal % | valid submission % |",
            "| --- | --- | --- | --- |",
        ]
        for label, n, medal, valid in self.modality_rows():
            out.append(
                f"| {label} | {n} | {_fmt(medal.mean)} ± {_fmt(medal.sd)} | "
                f"{_fmt(valid.mean)} ± {_fmt(valid.sd)} |"
            )
        gap = self.validation_gap()
        if gap is not None:
            out += [
                "",
                "## Validation vs test (any medal %: mean ± population sd)",
                "",
                "| medal of | mean | sd | per seed |",
                "| --- | --- | --- | --- |",
            ]
            for key, label in (
                ("validation_any_medal", "best validation score"),
                ("test_any_medal", "test submission"),
                ("test_minus_validation", "test - validation"),
            ):
                mt = gap[key]
                per = ", ".join(_fmt(v) for v in mt.per_seed)
                out.append(f"| {label} | {_fmt(mt.mean)} | {_fmt(mt.sd)} | {per} |")
        if self.arm_metrics:
            out += ["", *self.arms_markdown()]
        arms = [a for a in self.arm_seeds if a]
        col = "arm | " if arms else ""
        out += [
            "",
            "## Runs" + (" (every arm)" if arms else ""),
            "",
            f"| {col}competition | seed | score | gold | silver | bronze | median | medal | above "
            "median | valid | submission | Human Rank | note |",
            "| --- " * (13 + bool(arms)) + "|",
        ]
        for arm in arms or [""]:
            runs = [r for row in self.arm_seeds[arm] for r in row]
            for r in sorted(runs, key=lambda r: (r.competition_id, r.seed or 0)):
                note = r.reason if not r.valid_submission else ""
                if r.competition_id in KNOWN_ISSUES:
                    note = (
                        (note + "; " if note else "")
                        + "known issue: "
                        + KNOWN_ISSUES[r.competition_id]
                    )
                out.append(
                    f"| {_md(arm) + ' | ' if arms else ''}{_md(r.competition_id)} | {r.seed} | "
                    f"{_fmt(r.score)} | {_fmt(r.gold_threshold)} | {_fmt(r.silver_threshold)} | "
                    f"{_fmt(r.bronze_threshold)} | {_fmt(r.median_threshold)} | "
                    f"{r.medal or '-'} | {_yes(r.above_median)} | {_yes(r.valid_submission)} | "
                    f"{_yes(r.submission_exists)} | {_fmt(r.human_rank)} | {_md(note)} |"
                )
        return "\n".join(out) + "\n"

    def _medal_rows(self, arm: str, seeds: Sequence[int]) -> list[str]:
        e = html.escape
        out = []
        reports = [r for row in self.arm_seeds[arm] for r in row]
        for cid in self.run.config.competitions:
            cells = []
            runs = [r for r in reports if r.competition_id == cid]
            for seed in seeds:
                r = next(x for x in runs if x.seed == seed)
                label = r.medal or ("valid" if r.valid_submission else "failed")
                cells.append(
                    f'<td class="{label}" title="{e(r.reason[:300])}">{e(label)}<br>'
                    f"<small>{_fmt(r.score)}</small></td>"
                )
            out.append(f"<tr><th>{e(cid)}</th>{''.join(cells)}<td>{_plot(runs)}</td></tr>")
        return out

    # ------------------------------------------------------------------ HTML

    def html(self) -> str:
        """A self-contained HTML page: suite table, medal table, score-vs-threshold plots
        (every text from the bench directory escaped).
        """
        cfg = self.run.config
        e = html.escape
        m = self.run.manifest
        source = benchmark_kind(cfg.benchmark).title
        rows = "".join(
            f"<tr><td>{e(_LABELS[k])}</td><td>{_fmt(self.metrics.metrics[k].mean)}</td>"
            f"<td>{_fmt(self.metrics.metrics[k].sem)}</td>"
            f"<td>{_fmt(self.metrics.metrics[k].sd)}</td></tr>"
            for k in METRICS
        )
        modal = "".join(
            f"<tr><td>{e(label)}</td><td>{n}</td><td>{_fmt(md.mean)} ± {_fmt(md.sd)}</td>"
            f"<td>{_fmt(vd.mean)} ± {_fmt(vd.sd)}</td></tr>"
            for label, n, md, vd in self.modality_rows()
        )
        seeds = list(cfg.seeds)
        arms = [a for a in self.arm_seeds if a]
        medal_rows = []
        for arm in arms or [""]:
            if arms:
                medal_rows.append(f'<tr><th colspan="{len(seeds) + 2}">arm {e(arm)}</th></tr>')
            medal_rows += self._medal_rows(arm, seeds)
        head = "".join(f"<th>seed {s}</th>" for s in seeds)
        preset = "".join(
            f"<li>{e(line)}</li>"
            for line in [*preset_lines(cfg), *(x[2:] for x in protocol_lines(m))]
        ) + "".join(f"<li><strong>{e(line)}</strong></li>" for line in self._unfinished_lines())
        return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>openmle bench: {e(cfg.suite)}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}
table{{border-collapse:collapse;margin-bottom:2em}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:center}}
.gold{{background:#f5d76e}}.silver{{background:#d5d8dc}}.bronze{{background:#e0a96d}}
.failed{{background:#f5b7b1}}.valid{{background:#eafaf1}}
</style></head><body>
<h1>openmle bench: {e(cfg.suite)}</h1>
<p>{len(cfg.competitions)} competitions &times; {len(seeds)} seeds; model
<code>{e(cfg.model)}</code>, sandbox <code>{e(cfg.sandbox)}</code>, budget
<code>{e(_budget_text(cfg.budget))}</code>; {e(source)} commit
<code>{e(_commit(m))}</code>;
hardware: {e(_hw(m.get("hardware")))}. Missing or failed runs count as failures.</p>
<ul>{preset}</ul>
<h2>Suite (mean, SEM = sample sd (ddof 1) / sqrt(seeds), population sd)</h2>
<table><tr><th>metric</th><th>mean</th><th>SEM</th><th>sd</th></tr>{rows}</table>
<h2>By modality (mean ± population sd)</h2>
<table><tr><th>modality</th><th>competitions</th><th>any medal %</th>
<th>valid submission %</th></tr>{modal}</table>
<h2>Medals</h2>
<p>Plot: test score (blue dots, one per seed) against the gold, silver and bronze thresholds
(solid ticks in their colours) and the leaderboard median (purple dashed tick); better scores
to the right; the axis ends are labelled with their scores.</p>
<table><tr><th>competition</th>{head}<th>score vs thresholds</th></tr>{"".join(medal_rows)}
</table></body></html>
"""


_TICKS = {
    "median": ("#7d3c98", ' stroke-dasharray="3,2"'),
    "bronze": ("#b9770e", ""),
    "silver": ("#717d7e", ""),
    "gold": ("#d4ac0d", ""),
}
"""Tick colour and dash of each threshold: four distinct colours, the median dashed."""


def _plot(runs: Sequence[GradeReport]) -> str:
    """An inline SVG: thresholds as ticks, scores as dots, better to the right, both axis
    ends labelled with their score.
    """
    r0 = next((r for r in runs if r.gold_threshold is not None), None)
    if r0 is None:
        return ""
    marks = {
        "median": r0.median_threshold,
        "bronze": r0.bronze_threshold,
        "silver": r0.silver_threshold,
        "gold": r0.gold_threshold,
    }
    values = [v for v in marks.values() if v is not None and math.isfinite(v)]
    values += [r.score for r in runs if r.score is not None]
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    lower = r0.is_lower_better

    def x(v: float) -> float:
        t = (v - lo) / span
        return 10 + 280 * (1 - t if lower else t)

    left, right = (hi, lo) if lower else (lo, hi)
    parts = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="52">',
        '<line x1="10" y1="20" x2="290" y2="20" stroke="#ccc"/>',
        f'<text x="10" y="48" font-size="9" text-anchor="start">{_fmt(left)}</text>',
        f'<text x="290" y="48" font-size="9" text-anchor="end">{_fmt(right)} (better)</text>',
    ]
    for name, v in marks.items():
        if v is not None and math.isfinite(v):
            color, dash = _TICKS[name]
            parts.append(
                f'<line x1="{x(v):.1f}" y1="8" x2="{x(v):.1f}" y2="32" stroke="{color}" '
                f'stroke-width="2"{dash}><title>{name} {_fmt(v)}</title></line>'
            )
    parts.extend(
        f'<circle cx="{x(r.score):.1f}" cy="20" r="4" fill="#2e86c1">'
        f"<title>seed {r.seed}: {_fmt(r.score)}</title></circle>"
        for r in runs
        if r.score is not None
    )
    parts.append("</svg>")
    return "".join(parts)


def _stable(r: GradeReport) -> dict[str, Any]:
    d = bench_dict(r)
    d.pop("created_at", None)
    return d


def _fmt(v: float | None) -> str:
    if v is None or isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return "-"
    return f"{v:.5g}"


def _yes(b: bool) -> str:
    return "yes" if b else "no"


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]#|~"})


def _md(text: str, limit: int = 200) -> str:
    """``text`` safe in a Markdown table cell: HTML escaped (``<``, ``>``, ``&``; quotes stay,
    as no text lands in an attribute, and an entity such as ``&#x27;`` would be broken by
    escaping its ``#``), Markdown's specials backslash-escaped, line breaks as spaces, at most
    ``limit`` characters of the original.
    """
    flat = " ".join(str(text)[:limit].split())
    return html.escape(flat, quote=False).translate(_MD_SPECIAL)


def _commit(m: Mapping[str, Any]) -> str:
    """The benchmark's commit as its manifest entry records it (``mlebench_commit`` or
    ``commit`` in a top-level block of the manifest), else ``unknown``.
    """
    for block in m.values():
        if isinstance(block, Mapping):
            for field_ in ("mlebench_commit", "commit"):
                if field_ in block:
                    return str(block.get(field_) or "unknown")
    return "unknown"


def _hw(h: Any) -> str:
    if not isinstance(h, Mapping):
        return "unknown"
    gpus = h.get("gpus")
    names = ", ".join(str(g) for g in gpus) if isinstance(gpus, list) and gpus else "no GPU"
    return f"{h.get('cpus')} CPUs, {h.get('memory_mb')} MiB, {names}"


def _resources(cfg: Any) -> str:
    r = cfg.resources
    mem = "no memory cap" if r.memory_mb is None else f"{r.memory_mb} MiB"
    return f"{r.cpus:g} CPUs, {r.gpus} GPUs, {mem}"


def _budget_text(budget: Mapping[str, Any]) -> str:
    """A budget dict as words: ``steps 800, sandbox_s 43200, wall_s 64800`` (caps that are
    not set are left out; ``on_exhaust`` only when it is not ``finish``).
    """
    parts = []
    for k, v in budget.items():
        if v is None or k == "prices" or (k == "on_exhaust" and v == "finish"):
            continue
        parts.append(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}")
    if budget.get("prices"):
        parts.append("with a price table")
    return ", ".join(parts) or "uncapped"


def _mlebench_dict(r: GradeReport, root: Path) -> dict[str, Any]:
    d = r.to_mlebench()
    if d["submission_path"]:
        d["submission_path"] = str((root / d["submission_path"]).resolve())
    return d


def bench_report(path: str | os.PathLike[str]) -> BenchReport:
    """The report of the bench directory at ``path`` (finished or not)."""
    return BenchReport(BenchRun.open(path))


def _mlebench_files(reports: Sequence[GradeReport], root: Path, jsonl: Path, grading: Path) -> None:
    """MLE-bench's input files for ``reports``: ``submission.jsonl`` and the grading report."""
    # every run, seed-major, a run without a kept submission as null (MLE-bench's
    # ``experiments/make_submission.py`` convention): a re-grade then counts every run, and
    # the i-th line of a competition is its seed i, as ``aggregate_grading_reports.py`` reads
    lines = [
        json.dumps(
            {
                "competition_id": r.competition_id,
                "submission_path": str((root / r.submission_path).resolve())
                if r.submission_exists and r.submission_path
                else None,
            }
        )
        for r in reports
    ]
    write_file(jsonl, "".join(line + "\n" for line in lines).encode("utf-8"))
    summary = {
        "total_runs": len(reports),
        "total_runs_with_submissions": sum(r.submission_exists for r in reports),
        "total_valid_submissions": sum(r.valid_submission for r in reports),
        "total_medals": sum(r.any_medal for r in reports),
        "total_gold_medals": sum(r.gold_medal for r in reports),
        "total_silver_medals": sum(r.silver_medal for r in reports),
        "total_bronze_medals": sum(r.bronze_medal for r in reports),
        "total_above_median": sum(r.above_median for r in reports),
        "competition_reports": [
            _mlebench_dict(r, root) for r in reports if r.gold_threshold is not None
        ],
    }
    write_file(grading, (json.dumps(summary, indent=2) + "\n").encode("utf-8"))


def write_report(
    path: str | os.PathLike[str], *, naturebench: Mapping[str, Any] | None = None
) -> dict[str, Path]:
    """Write the reports and MLE-bench's input files into the bench directory.

    Writes ``report.{json,md,html}``, ``submission.jsonl`` and ``grading_report.json``;
    returns their paths by kind. In an ablation the main ``submission.jsonl`` and
    ``grading_report.json`` hold the first arm (``base``: what MLE-bench's tools compare with
    other agents), and every arm also gets its own under ``arms/<arm>/`` (kinds
    ``submission_jsonl:<arm>`` and ``grading_report:<arm>``). A NatureBench bench also gets
    its leaderboard metrics and submission package (``naturebench`` are the keyword arguments of
    :func:`openmle.bench.write_naturebench_report`: judge, submission, judge_model).
    """
    rep = bench_report(path)
    root = rep.run.path
    out = {
        "json": root / "report.json",
        "markdown": root / "report.md",
        "html": root / "report.html",
        "submission_jsonl": root / "submission.jsonl",
        "grading_report": root / "grading_report.json",
    }
    # A link in the bench directory (report.html -> ~/.bashrc) is replaced, never written through.
    write_file(out["json"], (json.dumps(rep.to_dict(), indent=2, sort_keys=True) + "\n").encode())
    write_file(out["markdown"], rep.markdown().encode("utf-8", "backslashreplace"))
    write_file(out["html"], rep.html().encode("utf-8", "backslashreplace"))
    _mlebench_files(rep.reports, root, out["submission_jsonl"], out["grading_report"])
    for arm in rep.run.config.arms:
        d = ensure_dir(root, "arms", arm.name)
        out[f"submission_jsonl:{arm.name}"] = d / "submission.jsonl"
        out[f"grading_report:{arm.name}"] = d / "grading_report.json"
        _mlebench_files(
            [r for row in rep.arm_seeds[arm.name] for r in row],
            root,
            d / "submission.jsonl",
            d / "grading_report.json",
        )
    extra = benchmark_kind(rep.run.config.benchmark).report
    if extra is not None:
        out.update(extra(root, dict(naturebench or {})))
    return out
