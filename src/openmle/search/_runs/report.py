"""``openmle report``: one self-contained HTML file per run, plus a PNG/SVG score plot.

The HTML has no external assets (inline CSS and SVG): the search tree coloured by operator and
outcome (hover a node for its plan), the validation score over wall time and over steps with
the running best, the best node's lineage with each step's change in score, the budget used
against its caps, and outcome/operator counts. The final test score of the chosen program is
shown next to its validation score, never mixed into the search curves.

Below them, "Replay" lists every node in step order, collapsed (``<details>``): the exact request
the model saw (read back from ``requests/``, verified against its hash and bounded on read by
:meth:`~openmle.search.RunDir.request`) and its answer as the run kept it (the plan and the
program), each message cut at :data:`REPLAY_CHARS` characters with a marked cut, every text
HTML-escaped (model output is untrusted). :func:`write_comparison` puts two runs side by side.

The PNG and SVG plots use matplotlib (``pip install 'openmle[data]'``); without it the HTML is
still written and the plots are skipped with a note.
"""

from __future__ import annotations

import html
import io
import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from attrs import frozen

from openmle._types import Operator, RunResult
from openmle._writeback import write_file
from openmle.errors import InvalidArgument, RunDirError
from openmle.search._loop import Node
from openmle.search._rundir import RunDir

__all__ = ["REPLAY_CHARS", "RunComparison", "compare_runs", "write_comparison", "write_report"]

REPLAY_CHARS = 20_000
"""The most characters of one message (or the plan, or the program) the replay shows."""
REPLAY_TOTAL_CHARS = 4_000_000
"""The most characters the whole replay shows; later nodes are listed without their texts."""

OP_COLORS = {
    Operator.DRAFT: "#3b82f6",
    Operator.IMPROVE: "#16a34a",
    Operator.DEBUG: "#f59e0b",
    Operator.CROSSOVER: "#a855f7",
}
FAIL = "#dc2626"
BEST = "#111827"


def _esc(x: object) -> str:
    return html.escape(str(x), quote=True)


def _fmt(v: float | None, nd: int = 4) -> str:
    return "—" if v is None else f"{v:.{nd}g}"


def _running_best(nodes: Sequence[Node], hib: bool) -> list[float | None]:
    out: list[float | None] = []
    best: float | None = None
    for n in nodes:
        if (
            n.ok
            and n.score is not None
            and (best is None or (n.score > best if hib else n.score < best))
        ):
            best = n.score
        out.append(best)
    return out


def _lineage(nodes: dict[str, Node], best: Node | None) -> list[Node]:
    chain: list[Node] = []
    cur = best
    while cur is not None:
        chain.append(cur)
        cur = nodes.get(cur.parent_ids[0]) if cur.parent_ids else None
    return chain[::-1]


def _tree_svg(nodes: Sequence[Node], best_path: set[str], width: int = 1100) -> str:
    if not nodes:
        return "<p>No nodes.</p>"
    by_id = {n.node_id: n for n in nodes}
    max_gen = max(n.generation for n in nodes)
    pad, row = 30, 46
    gutter = 64  # the "gen N" labels' column: no node (nor its ring) reaches into it
    height = pad * 2 + row * max_gen + 20
    step_max = max(1, max(n.step for n in nodes))
    r = 7 if len(nodes) <= 120 else 4

    def pos(n: Node) -> tuple[float, float]:
        return gutter + (width - gutter - pad) * n.step / step_max, pad + row * n.generation

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-label="search tree" class="tree">'
    ]
    for g in sorted(
        {n.generation for n in nodes}
    ):  # (contiguous in a run; an edit's gaps are not drawn)
        gy = pad + row * g
        parts.append(
            f'<line x1="{gutter - 14}" x2="{width}" y1="{gy}" y2="{gy}" stroke="#f1f5f9" />'
            f'<text x="2" y="{gy + 3.5}" class="axis">gen {g}</text>'
        )
    for n in nodes:
        x2, y2 = pos(n)
        for i, p in enumerate(n.parent_ids):
            if p not in by_id:
                continue
            x1, y1 = pos(by_id[p])
            on_best = n.node_id in best_path and p in best_path and i == 0
            stroke = BEST if on_best else "#94a3b8"
            w = 2.5 if on_best else 1
            dash = ' stroke-dasharray="3 3"' if n.operator is Operator.CROSSOVER and i else ""
            parts.append(
                f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                f'stroke="{stroke}" stroke-width="{w}"{dash} />'
            )
    for n in nodes:
        x, y = pos(n)
        fill = OP_COLORS[n.operator]
        title = (
            f"{n.node_id} · {n.operator.value} · {n.outcome.value}"
            f"{'' if n.score is None else f' · score {n.score:.5g}'}\n{n.plan[:300]}"
        )
        if n.ok:
            shape = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{fill}" stroke="white" />'
        else:
            shape = (
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="white" stroke="{fill}" '
                f'stroke-width="2" /><path d="M{x - r / 1.6:.1f},{y - r / 1.6:.1f} '
                f"L{x + r / 1.6:.1f},{y + r / 1.6:.1f} M{x - r / 1.6:.1f},{y + r / 1.6:.1f} "
                f'L{x + r / 1.6:.1f},{y - r / 1.6:.1f}" stroke="{FAIL}" stroke-width="2" />'
            )
        ring = (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r + 4}" fill="none" stroke="{BEST}" '
            'stroke-width="2" />'
            if n.node_id in best_path
            else ""
        )
        parts.append(f"<g><title>{_esc(title)}</title>{ring}{shape}</g>")
    parts.append("</svg>")
    return "".join(parts)


def _curve_svg(
    xs: Sequence[float],
    nodes: Sequence[Node],
    best: Sequence[float | None],
    xlabel: str,
    hib: bool,
    width: int = 540,
    height: int = 300,
) -> str:
    pts = [(x, n) for x, n in zip(xs, nodes, strict=True)]
    ys = [n.score for _, n in pts if n.ok and n.score is not None]
    if not ys:
        return "<p>No successful node yet.</p>"
    lo, hi = min(ys), max(ys)
    if hi - lo < 1e-12:
        lo, hi = lo - 0.5, hi + 0.5
    margin = (hi - lo) * 0.08
    lo, hi = lo - margin, hi + margin
    if not (math.isfinite(hi - lo) and hi > lo) or max(abs(lo), abs(hi)) > 1e300:
        return "<p>The scores are too large to plot (beyond 1e300).</p>"  # an edited journal
    x_max = max(max(xs), 1e-9)
    L, R, T, B = 60, 15, 15, 40

    def sx(x: float) -> float:
        return L + (width - L - R) * x / x_max

    def sy(y: float) -> float:
        return T + (height - T - B) * (hi - y) / (hi - lo)

    parts = [f'<svg viewBox="0 0 {width} {height}" width="100%" role="img" class="curve">']
    for i in range(5):
        v = lo + (hi - lo) * i / 4
        y = sy(v)
        parts.append(
            f'<line x1="{L}" x2="{width - R}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb" />'
            f'<text x="{L - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{v:.4g}</text>'
        )
    for i in range(5):
        v = x_max * i / 4
        x = sx(v)
        parts.append(
            f'<text x="{x:.1f}" y="{height - B + 16}" text-anchor="middle" class="axis">'
            f"{v:.3g}</text>"
        )
    parts.append(
        f'<text x="{(L + width - R) / 2}" y="{height - 6}" text-anchor="middle" class="label">'
        f"{_esc(xlabel)}</text>"
    )
    line = []
    for (x, _), b in zip(pts, best, strict=True):
        if b is not None:
            line.append(f"{sx(x):.1f},{sy(b):.1f}")
    if line:
        parts.append(
            f'<polyline points="{" ".join(line)}" fill="none" stroke="{BEST}" stroke-width="2" />'
        )
    for x, n in pts:
        if n.ok and n.score is not None:
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(n.score):.1f}" r="3.5" '
                f'fill="{OP_COLORS[n.operator]}"><title>{_esc(n.node_id)} '
                f"{n.score:.5g}</title></circle>"
            )
        else:
            parts.append(
                f'<text x="{sx(x):.1f}" y="{height - B - 4}" text-anchor="middle" '
                f'fill="{FAIL}" font-size="10">×<title>{_esc(n.node_id)} '
                f"{_esc(n.outcome.value)}</title></text>"
            )
    direction = "higher is better" if hib else "lower is better"
    parts.append(
        f'<text x="{L + 4}" y="{T + 10}" class="axis">validation score ({direction})</text>'
    )
    parts.append("</svg>")
    return "".join(parts)


def _bars(spent: dict[str, float], caps: dict[str, Any]) -> str:
    rows = []
    labels = {
        "steps": ("steps", ""),
        "sandbox_s": ("sandbox time", " s"),
        "wall_s": ("wall time", " s"),
        "tokens": ("tokens", ""),
        "usd": ("money", " USD"),
    }
    for key, (label, unit) in labels.items():
        cap = caps.get(key)
        used = spent.get(key, 0.0)
        nd = 0 if key in ("steps", "tokens") else (2 if key == "usd" else 1)
        if cap:
            frac = min(1.0, used / cap)
            bar = (
                f'<div class="bar"><div style="width:{100 * frac:.1f}%"></div></div>'
                f"<span>{used:,.{nd}f}{unit} of {cap:,.{nd}f}{unit} "
                f"({100 * used / cap:.0f}%)</span>"
            )
        else:
            bar = f'<div class="bar empty"></div><span>{used:,.{nd}f}{unit} (no cap)</span>'
        rows.append(f"<tr><th>{label}</th><td>{bar}</td></tr>")
    return '<table class="budget">' + "".join(rows) + "</table>"


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1180px;
color:#111827;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
.sub{color:#4b5563;margin:0 0 16px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #e5e7eb;border-radius:8px;
padding:10px 14px;min-width:150px}.card b{display:block;font-size:20px}.card small{color:#6b7280}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:16px}
table{border-collapse:collapse;font-size:13px}td,th{padding:4px 8px;text-align:left;
border-bottom:1px solid #f1f5f9;vertical-align:top}th{font-weight:600}
.lineage td.plan{max-width:620px;color:#374151}.pos{color:#15803d}.neg{color:#b91c1c}
.axis{font-size:10px;fill:#6b7280}.label{font-size:11px;fill:#374151}
.legend span{display:inline-flex;align-items:center;margin-right:14px;font-size:12px}
.legend i{display:inline-block;width:11px;height:11px;border-radius:50%;margin-right:5px}
.bar{display:inline-block;width:260px;height:10px;background:#f1f5f9;border-radius:5px;
margin-right:8px;vertical-align:middle;overflow:hidden}.bar div{height:100%;background:#2563eb}
.bar.empty{background:repeating-linear-gradient(45deg,#f8fafc,#f8fafc 4px,#e5e7eb 4px,#e5e7eb 6px)}
code{font-size:12px}
details.node{border-bottom:1px solid #f1f5f9;padding:2px 0}details.node>summary{cursor:pointer}
pre.msg{white-space:pre-wrap;word-break:break-word;background:#f8fafc;border:1px solid #e5e7eb;
padding:8px;font-size:12px;max-height:480px;overflow:auto}.cut{color:#b91c1c;font-weight:600}
.diverge{background:#fef3c7}
"""


def _counts(nodes: Sequence[Node]) -> str:
    ops: dict[str, dict[str, int]] = {}
    for n in nodes:
        row = ops.setdefault(n.operator.value, {})
        key = "success" if n.ok else n.outcome.value
        row[key] = row.get(key, 0) + 1
    outcomes = sorted({k for r in ops.values() for k in r})
    head = "<tr><th>operator</th>" + "".join(f"<th>{_esc(o)}</th>" for o in outcomes)
    head += "<th>total</th></tr>"
    body = "".join(
        f"<tr><td>{_esc(op)}</td>"
        + "".join(f"<td>{r.get(o, 0)}</td>" for o in outcomes)
        + f"<td>{sum(r.values())}</td></tr>"
        for op, r in sorted(ops.items())
    )
    return f"<table>{head}{body}</table>"


def _lineage_table(chain: Sequence[Node], hib: bool) -> str:
    rows = [
        "<tr><th>node</th><th>operator</th><th>score</th><th>Δ vs parent</th><th>plan</th></tr>"
    ]
    prev: float | None = None
    for n in chain:
        delta = ""
        if n.score is not None and prev is not None:
            d = n.score - prev
            good = d > 0 if hib else d < 0
            delta = f'<span class="{"pos" if good else "neg"}">{d:+.4g}</span>'
        rows.append(
            f"<tr><td><code>{_esc(n.node_id)}</code></td><td>{_esc(n.operator.value)}</td>"
            f"<td>{_fmt(n.score, 5)}</td><td>{delta}</td>"
            f'<td class="plan">{_esc(n.plan[:400])}</td></tr>'
        )
        if n.score is not None:
            prev = n.score
    return '<table class="lineage">' + "".join(rows) + "</table>"


def _plots(
    path: Path, steps: list[int], nodes: Sequence[Node], best: list[float | None], hib: bool
) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    if any(n.score is not None and abs(n.score) > 1e300 for n in nodes):
        return []  # beyond what matplotlib lays out (an edited journal): the HTML says so
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=120)
    for op, color in OP_COLORS.items():
        xs = [s for s, n in zip(steps, nodes, strict=True) if n.ok and n.operator is op]
        ys = [float(n.score or 0.0) for n in nodes if n.ok and n.operator is op]
        if xs:
            ax.scatter(xs, ys, s=22, color=color, label=op.value, zorder=3)
    fails = [s for s, n in zip(steps, nodes, strict=True) if not n.ok]
    ok_scores = [n.score for n in nodes if n.ok and n.score is not None]
    if fails and ok_scores:
        lo = min(ok_scores)
        hi = max(ok_scores)
        y = lo - 0.05 * (hi - lo or 1.0) if hib else hi + 0.05 * (hi - lo or 1.0)
        ax.scatter(fails, [y] * len(fails), marker="x", color=FAIL, s=20, label="failed", zorder=3)
    bx = [s for s, b in zip(steps, best, strict=True) if b is not None]
    by = [b for b in best if b is not None]
    if bx:
        ax.step(bx, by, where="post", color=BEST, linewidth=2, label="best so far")
    if not ok_scores:
        ax.text(
            0.5,
            0.5,
            f"No node succeeded ({len(nodes)} tried): no score to plot",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
    ax.set_xlabel("step")
    ax.set_ylabel(f"validation score ({'higher' if hib else 'lower'} is better)")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    out = []
    for ext in ("png", "svg"):
        p = path.with_suffix(f".{ext}")
        buf = io.BytesIO()
        fig.savefig(buf, format=ext)
        write_file(p, buf.getvalue())  # a link at p (score.png -> ~/.bashrc) is replaced
        out.append(p)
    plt.close(fig)
    return out


def _nothing_succeeded(nodes: Sequence[Node]) -> str:
    """The report's words when no node succeeded: how many were tried and how they failed."""
    counts: dict[str, int] = {}
    for n in nodes:
        counts[n.outcome.value] = counts.get(n.outcome.value, 0) + 1
    how = ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none was tried"
    return (
        f'<p class="sub"><b>No node succeeded</b>: {len(nodes)} tried ({_esc(how)}), so there '
        "is no best program, no score curve and no test score. The outcomes by operator below "
        "and journal.jsonl say why.</p>\n"
    )


_INTEGRITY = {
    "keyed": "journal HMAC chain verified with your journal key",
    "chained": "journal hash chain verified (catches accidental edits, not a forger who "
    "recomputes it; set OPENMLE_JOURNAL_KEY for a keyed chain)",
    "unchained": "journal written before the hash chain: edits to it cannot be detected",
}


def _model_name(entry: object) -> str:
    """A model record's id, else its class (``?`` for a record of the wrong shape)."""
    if not isinstance(entry, dict):
        return "?"
    return str(entry.get("id") or entry.get("class") or "?")[:120]


def _model_text(manifest: dict[str, Any]) -> str:
    """The model (each routed model by operator) and the summary model, as escaped HTML."""
    routes = manifest["model"].get("routes")
    if isinstance(routes, dict) and routes:
        text = ", ".join(f"{str(k)[:20]}: {_model_name(v)}" for k, v in list(routes.items())[:8])
    else:
        text = _model_name(manifest["model"])
    out = f"<code>{_esc(text)}</code>"
    summary = manifest.get("summary_model")
    if isinstance(summary, dict):
        out += f" (summaries: <code>{_esc(_model_name(summary))}</code>)"
    return out


def _priors_line(manifest: dict[str, Any]) -> str:
    """Which prior library the run saw (runs with different priors are not comparable)."""
    entry = (manifest.get("extra") or {}).get("priors")
    if not isinstance(entry, dict):
        return '<p class="sub">priors: none (not comparable with runs that used priors)</p>'
    shown = ", ".join(str(x) for x in entry.get("shown", [])) or "none fitted"
    return (
        f'<p class="sub">priors: library sha256 <code>{_esc(str(entry.get("sha256"))[:16])}'
        f"</code> ({_esc(entry.get('n_priors'))} priors; shown to Draft and Improve: "
        f"{_esc(shown)}) · compare only with runs that used the same library</p>"
    )


def _preset_line(manifest: dict[str, Any]) -> str:
    """The preset the run was started with (``--preset``) and every deviation from it."""
    entry = (manifest.get("extra") or {}).get("preset")
    if not isinstance(entry, dict) or not isinstance(entry.get("preset"), dict):
        return ""
    raw = entry.get("deviations")
    devs: dict[str, Any] = raw if isinstance(raw, dict) else {}
    said = "; ".join(
        f"{k}: preset {d.get('preset')} -> used {d.get('used')}"
        for k, d in devs.items()
        if isinstance(d, dict)
    )
    return (
        f'<p class="sub">preset <code>{_esc(entry["preset"].get("name"))}</code> · '
        f"deviations: {_esc(said or 'none')}</p>"
    )


def _capped(text: str, cap: int = REPLAY_CHARS) -> str:
    """``text`` escaped in a ``<pre>``, cut at ``cap`` characters with a marked cut."""
    if len(text) <= cap:
        return f'<pre class="msg">{_esc(text)}</pre>'
    return (
        f'<pre class="msg">{_esc(text[:cap])}<span class="cut">\n[… cut: {len(text) - cap:,} '
        f"more characters of {len(text):,} not shown]</span></pre>"
    )


def _replay(rd: RunDir, nodes: Sequence[Node]) -> str:
    """Every node in step order, collapsed: its request (from ``requests/``) and its answer."""
    if not nodes:
        return "<p>No nodes.</p>"
    try:
        digests = rd.node_requests()
    except RunDirError as exc:
        digests = {}
        note = f'<p class="sub">requests not shown: {_esc(str(exc)[:500])}</p>'
    else:
        note = ""
    left = REPLAY_TOTAL_CHARS
    parts = [note]
    for n in nodes:
        head = (
            f"step {n.step} · <code>{_esc(n.node_id)}</code> · {_esc(n.operator.value)} · "
            f"{_esc(n.outcome.value)}{'' if n.score is None else f' · score {n.score:.5g}'}"
        )
        if left <= 0:
            parts.append(
                f'<details class="node"><summary>{head}</summary><p class="sub">not shown: the '
                f"replay's {REPLAY_TOTAL_CHARS:,} characters are spent</p></details>"
            )
            continue
        body: list[str] = []
        digest = digests.get(n.node_id)
        if digest is None:
            body.append('<p class="sub">no recorded request (none sent, or an older run)</p>')
        else:
            try:
                req = rd.request(digest)
            except RunDirError as exc:
                body.append(f'<p class="sub">request unreadable: {_esc(str(exc)[:500])}</p>')
            else:
                body.append(
                    f"<p><b>request</b> <code>{_esc(digest[:16])}</code> · temperature "
                    f"{_esc(req.temperature)} · max_tokens {_esc(req.max_tokens)} · seed "
                    f"{_esc(req.seed)}</p>"
                )
                for i, msg in enumerate(req.messages):
                    body.append(
                        f"<details><summary>message {i + 1}: {_esc(msg.role)} "
                        f"({len(msg.content):,} characters)</summary>{_capped(msg.content)}"
                        "</details>"
                    )
                    left -= min(len(msg.content), REPLAY_CHARS)
        body.append(f"<div><b>answer</b> (plan){_capped(n.plan)}</div>")
        body.append(f"<details><summary>program ({len(n.code):,} characters)</summary>")
        body.append(f"{_capped(n.code)}</details>")
        left -= min(len(n.plan), REPLAY_CHARS) + min(len(n.code), REPLAY_CHARS)
        parts.append(f'<details class="node"><summary>{head}</summary>{"".join(body)}</details>')
    return "".join(parts)


def _spent(nodes: Sequence[Node]) -> dict[str, float]:
    """What the run used: steps, sandbox seconds, wall seconds, tokens and USD."""
    return {
        "steps": float(len(nodes)),
        "sandbox_s": sum(n.used.sandbox_s for n in nodes),
        "wall_s": max((n.elapsed_s for n in nodes), default=0.0),
        "tokens": float(sum(n.used.tokens for n in nodes)),
        "usd": sum(n.used.cost_usd or 0.0 for n in nodes),
    }


def _cards_html(
    nodes: Sequence[Node], best: Node | None, test: RunResult | None, spent: dict[str, float]
) -> str:
    """The summary cards: nodes, best validation, the test score, sandbox time, tokens."""
    ok = sum(n.ok for n in nodes)
    cards = [
        ("nodes", f"{len(nodes)}", f"{ok} succeeded"),
        ("best validation", _fmt(best.score if best else None, 5), best.node_id if best else ""),
        (
            "test score (chosen program)",
            _fmt(test.score if test else None, 5),
            "graded once at the end" if test else "not graded",
        ),
        ("sandbox time", f"{spent['sandbox_s']:.0f} s", f"wall {spent['wall_s']:.0f} s"),
        ("tokens", f"{spent['tokens']:,.0f}", f"{spent['usd']:.2f} USD"),
    ]
    return "".join(
        f"<div class='card'><small>{_esc(a)}</small><b>{_esc(b)}</b><small>{_esc(c)}</small></div>"
        for a, b, c in cards
    )


_LEGEND = "".join(
    f'<span><i style="background:{c}"></i>{op.value}</span>' for op, c in OP_COLORS.items()
) + (
    f'<span><i style="background:white;border:2px solid {FAIL}"></i>failed (×)</span>'
    f'<span><i style="background:white;border:2px solid {BEST}"></i>best lineage</span>'
)


def _run_line(rd: RunDir) -> str:
    """The line under the title: model, selector, seed, workers, selection score, why the
    search stopped, the openmle version, the run's name and its integrity.
    """
    m = rd.manifest
    stop = next(
        (s.get("stop_reason") for s in reversed(rd.sessions()) if s["event"] == "end"), None
    )
    return f"""<p class="sub">model {_model_text(m)} ·
selector <code>{_esc(m["selector"]["class"].rsplit(".", 1)[-1])}</code> ·
seed {m["seeds"]["search"]} · {m["workers"]} workers · selection by
{_esc(m["score_used_for_selection"])} · stopped by {_esc(stop or "—")} ·
openmle {_esc(m["openmle_version"])} · run <code>{_esc(rd.path.name)}</code> ·
{_INTEGRITY[rd.integrity]}</p>"""


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` (and ``score.png``/``score.svg``) for a run directory.

    Args:
        run_dir: the run directory.
        out: the HTML path (default ``RUN_DIR/report.html``); the plots go next to it.

    Returns:
        The HTML path.

    Raises:
        RunDirError: not a run directory.
    """
    rd = RunDir.open(run_dir)
    m = rd.manifest
    hib = bool(m["task"]["higher_is_better"])
    nodes = sorted(rd.nodes(), key=lambda n: n.step)
    final = rd.final_result()
    best = _best(nodes, hib)
    chain = _lineage({n.node_id: n for n in nodes}, best)
    best_path = {n.node_id for n in chain}
    running = _running_best(nodes, hib)
    time_order = sorted(nodes, key=lambda n: n.elapsed_s)
    spent = _spent(nodes)
    caps = rd.budget().to_dict()  # the budget in force (a resume may have changed it)
    path = Path(out) if out is not None else rd.path / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    plots = _plots(path.with_name("score"), [n.step for n in nodes], nodes, running, hib)
    ok = sum(n.ok for n in nodes)
    card_html = _cards_html(nodes, best, final[1] if final else None, spent)
    by_step = _curve_svg([float(n.step) for n in nodes], nodes, running, "step", hib)
    by_time = _curve_svg(
        [n.elapsed_s for n in time_order],
        time_order,
        _running_best(time_order, hib),
        "wall seconds",
        hib,
    )
    plot_names = ", ".join(_esc(p.name) for p in plots) or "matplotlib not installed"
    html_text = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>openmle run — {_esc(m["task"]["name"])}</title>
<style>{_CSS}</style></head><body>
<h1>Search on <code>{_esc(m["task"]["name"])}</code></h1>
{_run_line(rd)}
{_priors_line(m)}
{_preset_line(m)}
{_nothing_succeeded(nodes) if ok == 0 else ""}<div class="cards">{card_html}</div>
<h2>Search tree</h2>
<p class="legend">{_LEGEND} · x: step, y: generation · hover a node for its plan</p>
{_tree_svg(nodes, best_path)}
<h2>Validation score</h2>
<div class="grid"><div>{by_step}</div><div>{by_time}</div></div>
<h2>Best lineage <small style="font-weight:400;color:#6b7280">(first parents, oldest
first)</small></h2>
{_lineage_table(chain, hib) if chain else "<p>No successful node.</p>"}
<h2>Budget</h2>
{_bars(spent, caps)}
<h2>Outcomes by operator</h2>
{_counts(nodes)}
<h2>Replay <small style="font-weight:400;color:#6b7280">(each node's exact request and answer;
click to open)</small></h2>
{_replay(rd, nodes)}
<p class="sub" style="margin-top:24px">Plots: {plot_names} ·
{_budget_note(m["budget"], caps)}</p>
</body></html>
"""
    write_file(path, html_text.encode("utf-8", "backslashreplace"))  # no link followed
    return path


def _budget_note(started: Any, caps: dict[str, Any]) -> str:
    """The budget in force, and the one the run started with when a resume changed it."""
    note = f"budget: <code>{_esc(json.dumps(caps, sort_keys=True))}</code>"
    if isinstance(started, dict) and started != caps:
        note += f" (started with <code>{_esc(json.dumps(started, sort_keys=True))}</code>)"
    return note


def _best(nodes: Sequence[Node], hib: bool) -> Node | None:
    best: Node | None = None
    for n in nodes:
        if not n.ok or n.score is None:
            continue
        better = best is None or best.score is None
        if not better and best is not None and best.score is not None:
            better = n.score > best.score if hib else n.score < best.score
        if better:
            best = n
    return best


def _step_key(n: Node, steps: dict[str, int]) -> tuple[str, tuple[int | str, ...], str]:
    """What two runs must share at a step: operator, parents (by their step), outcome."""
    parents = tuple(steps.get(p, p) for p in n.parent_ids)
    return n.operator.value, parents, n.outcome.value


def _describe(n: Node, steps: dict[str, int]) -> str:
    op, parents, outcome = _step_key(n, steps)
    on = ", ".join(f"step {p}" for p in parents) or "no parent"
    return f"{op} of {on} -> {outcome}"


@frozen(kw_only=True)
class RunComparison:
    """Two runs compared step by step (see :func:`compare_runs`).

    Args:
        run_a, run_b: the run directories.
        steps_a, steps_b: how many nodes each run has.
        best_a, best_b: each run's best validation score (``None``: no node succeeded).
        first_divergence: the first step where the runs differ (operator, parents by their
            step, or outcome), or where one run has a node and the other none; ``None`` when
            they agree at every step.
        divergence: what differs there, in words (empty when they agree).
    """

    run_a: str
    run_b: str
    steps_a: int
    steps_b: int
    best_a: float | None
    best_b: float | None
    first_divergence: int | None
    divergence: str

    def summary(self) -> str:
        """A few lines of text for a terminal."""
        lines = [
            f"A {self.run_a}: {self.steps_a} nodes, best {_fmt(self.best_a, 5)}",
            f"B {self.run_b}: {self.steps_b} nodes, best {_fmt(self.best_b, 5)}",
        ]
        if self.first_divergence is None:
            lines.append("the runs agree at every step (operator, parents, outcome)")
        else:
            lines.append(f"first divergence at step {self.first_divergence}: {self.divergence}")
        return "\n".join(lines)


def _compare(
    a: Sequence[Node], b: Sequence[Node]
) -> tuple[int | None, str, dict[str, int], dict[str, int]]:
    sa = {n.node_id: n.step for n in a}
    sb = {n.node_id: n.step for n in b}
    for na, nb in zip(a, b, strict=False):
        if na.step != nb.step or _step_key(na, sa) != _step_key(nb, sb):
            return (
                min(na.step, nb.step),
                f"A {_describe(na, sa)}; B {_describe(nb, sb)}",
                sa,
                sb,
            )
    if len(a) != len(b):
        longer, name = (a, "A") if len(a) > len(b) else (b, "B")
        n = longer[min(len(a), len(b))]
        other = "B" if name == "A" else "A"
        return n.step, f"only {name} has this step ({other} stopped before it)", sa, sb
    return None, "", sa, sb


def _load(run_dir: str | Path) -> tuple[RunDir, list[Node], bool]:
    rd = RunDir.open(run_dir)
    return (
        rd,
        sorted(rd.nodes(), key=lambda n: n.step),
        bool(rd.manifest["task"]["higher_is_better"]),
    )


def _check_comparable(rda: RunDir, rdb: RunDir) -> None:
    """Refuse two runs whose metrics run in opposite directions; warn when their tasks differ.

    Raises:
        InvalidArgument: one run maximises its metric and the other minimises it.
    """
    ta, tb = rda.manifest["task"], rdb.manifest["task"]

    def said(label: str, rd: RunDir, task: Mapping[str, Any]) -> str:
        direction = "higher is better" if task["higher_is_better"] else "lower is better"
        return f"{label} {str(rd.path)!r} (task {task['name']!r}, {direction})"

    if bool(ta["higher_is_better"]) != bool(tb["higher_is_better"]):
        raise InvalidArgument(
            f"cannot compare {said('run A', rda, ta)} with {said('run B', rdb, tb)}: their "
            "scores run in opposite directions; compare two runs of the same task"
        )
    if ta["name"] != tb["name"]:
        warnings.warn(
            f"comparing runs of different tasks ({ta['name']!r} and {tb['name']!r}): their "
            "scores measure different things",
            UserWarning,
            stacklevel=4,  # the caller of compare_runs or write_comparison
        )


def compare_runs(run_a: str | Path, run_b: str | Path) -> RunComparison:
    """Compare two runs step by step: where do they first take a different path?

    Steps are matched by their number; at each, the operator, the parents (named by their step,
    since node ids differ between runs) and the outcome must agree.

    Warns:
        UserWarning: the runs searched different tasks.

    Raises:
        RunDirError: either is not a run directory.
        InvalidArgument: one run's metric is maximised and the other's minimised.
    """
    return _comparison(_load(run_a), _load(run_b))[0]


def _comparison(
    la: tuple[RunDir, list[Node], bool], lb: tuple[RunDir, list[Node], bool]
) -> tuple[RunComparison, dict[str, int], dict[str, int]]:
    (rda, a, hib_a), (rdb, b, hib_b) = la, lb
    _check_comparable(rda, rdb)
    first, why, sa, sb = _compare(a, b)
    ba, bb = _best(a, hib_a), _best(b, hib_b)
    comp = RunComparison(
        run_a=str(rda.path),
        run_b=str(rdb.path),
        steps_a=len(a),
        steps_b=len(b),
        best_a=None if ba is None else ba.score,
        best_b=None if bb is None else bb.score,
        first_divergence=first,
        divergence=why,
    )
    return comp, sa, sb


def _side_by_side(
    a: Sequence[Node], b: Sequence[Node], sa: dict[str, int], sb: dict[str, int], first: int | None
) -> str:
    by_a = {n.step: n for n in a}
    by_b = {n.step: n for n in b}
    rows = [
        "<tr><th>step</th><th>A operator</th><th>A parents</th><th>A outcome</th><th>A score</th>"
        "<th>B operator</th><th>B parents</th><th>B outcome</th><th>B score</th></tr>"
    ]

    def cells(n: Node | None, steps: dict[str, int]) -> str:
        if n is None:
            return "<td>—</td>" * 4
        _, parents, _ = _step_key(n, steps)
        return (
            f"<td>{_esc(n.operator.value)}</td><td>{_esc(', '.join(map(str, parents)) or '—')}"
            f"</td><td>{_esc(n.outcome.value)}</td><td>{_fmt(n.score, 5)}</td>"
        )

    for step in sorted(set(by_a) | set(by_b)):
        cls = ' class="diverge"' if step == first else ""
        rows.append(
            f"<tr{cls}><td>{step}</td>{cells(by_a.get(step), sa)}{cells(by_b.get(step), sb)}</tr>"
        )
    return "<table>" + "".join(rows) + "</table>"


def write_comparison(
    run_a: str | Path, run_b: str | Path, out: str | Path | None = None
) -> tuple[Path, RunComparison]:
    """Write one HTML page showing two runs side by side (``openmle report RUN_A RUN_B``).

    The page holds both runs' validation scores over steps (with the running best), their
    operator and outcome counts, a step-by-step table, and the first step where they diverge
    (highlighted). Every text is HTML-escaped.

    Args:
        run_a, run_b: the run directories.
        out: the HTML path (default ``RUN_A/compare-<name of RUN_B>.html``).

    Returns:
        The HTML path and the comparison.

    Warns:
        UserWarning: the runs searched different tasks.

    Raises:
        RunDirError: either is not a run directory.
        InvalidArgument: one run's metric is maximised and the other's minimised.
    """
    la, lb = _load(run_a), _load(run_b)
    (rda, a, hib_a), (rdb, b, hib_b) = la, lb
    comp, sa, sb = _comparison(la, lb)
    first, why = comp.first_divergence, comp.divergence
    path = Path(out) if out is not None else rda.path / f"compare-{rdb.path.name}.html"
    path.parent.mkdir(parents=True, exist_ok=True)

    def column(label: str, rd: RunDir, nodes: Sequence[Node], hib: bool) -> str:
        m = rd.manifest
        curve = _curve_svg(
            [float(n.step) for n in nodes], nodes, _running_best(nodes, hib), "step", hib
        )
        return (
            f"<div><h2>{label}: <code>{_esc(rd.path.name)}</code></h2>"
            f'<p class="sub">task <code>{_esc(m["task"]["name"])}</code> · model '
            f"<code>{_esc(m['model']['id'] or m['model']['class'])}</code> · seed "
            f"{_esc(m['seeds']['search'])} · {len(nodes)} nodes</p>{curve}"
            f"<h3>Outcomes by operator</h3>{_counts(nodes)}</div>"
        )

    verdict = (
        "The runs agree at every step (operator, parents, outcome)."
        if first is None
        else f"First divergence at <b>step {first}</b>: {_esc(why)}"
    )
    html_text = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>openmle runs compared</title>
<style>{_CSS}</style></head><body>
<h1>Two runs side by side</h1>
<p class="sub">{verdict}</p>
<div class="grid">{column("A", rda, a, hib_a)}{column("B", rdb, b, hib_b)}</div>
<h2>Step by step <small style="font-weight:400;color:#6b7280">(parents named by their step;
the first divergence highlighted)</small></h2>
{_side_by_side(a, b, sa, sb, first)}
</body></html>
"""
    write_file(path, html_text.encode("utf-8", "backslashreplace"))  # no link followed
    return path, comp
