"""Corpus scale: build many sources, resumable after a kill, with a summary and an index.

Layout of ``CORPUS_DIR``::

    tasks/<name>/            finished packages (published with one rename; never rebuilt)
    records/<name>.json      each finished source's result (status, stage, reason, findings)
    summary.json             counts, per-stage pass rates and reasons
    index.json, index.txt    the built tasks (index.txt: one package path a line)

A source counts as finished once its record exists. After a kill (even ``kill -9``) a rerun
removes half-built staging directories, writes the missing record of a package that was
published just before the kill, and builds only the sources without a record.

Each source is a directory ``SOURCES_DIR/<name>/`` of raw files; provenance may sit next to it
in ``SOURCES_DIR/<name>.provenance.json`` (``{"source": ..., "licence": ...}``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from attrs import frozen

from openmle._protocols import OperatorModel
from openmle._readback import loads_untrusted
from openmle._trees import remove_tree
from openmle.builder._pipeline import STAGES, BuildOptions, BuildResult, SandboxFactory, build_task
from openmle.errors import InvalidArgument, OpenMLEError

__all__ = ["CorpusSummary", "build_many"]

ModelFactory = Callable[[], OperatorModel]


@frozen(kw_only=True)
class CorpusSummary:
    """What a corpus holds after :func:`build_many`.

    Args:
        sources: sources found.
        built, rejected, failed: finished sources by status.
        skipped: sources finished by an earlier run (not rebuilt now).
        stages: per stage, ``{"reached": n, "passed": m, "skipped": k}``: ``skipped`` counts
            the builds in which the stage did not run (``judge`` without ``--judge``,
            ``solvability`` with ``--no-solvability``, ``metric`` without a custom metric),
            which are neither reached nor passed.
        reasons: how often each finding or failure reason stopped a build.
    """

    sources: int
    built: int
    rejected: int
    failed: int
    skipped: int
    stages: dict[str, dict[str, int]]
    reasons: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "sources": self.sources,
            "built": self.built,
            "rejected": self.rejected,
            "failed": self.failed,
            "skipped": self.skipped,
            "stages": self.stages,
            "reasons": self.reasons,
        }

    def table(self) -> str:
        """A plain-text table of the per-stage pass rates and the reasons."""
        lines = [
            f"sources {self.sources}: built {self.built}, rejected {self.rejected}, "
            f"failed {self.failed} ({self.skipped} finished earlier)",
            f"{'stage':<12} {'reached':>8} {'passed':>8} {'skipped':>8} {'rate':>7}",
        ]
        for stage, c in self.stages.items():
            rate = f"{c['passed'] / c['reached']:.1%}" if c["reached"] else "-"
            skipped = c.get("skipped", 0)
            lines.append(f"{stage:<12} {c['reached']:>8} {c['passed']:>8} {skipped:>8} {rate:>7}")
        for reason, n in sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  {n:>5}  {reason}")
        return "\n".join(lines)


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _entry(result: BuildResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "stage": result.stage,
        "reason": result.reason[:2000],
        "findings": list(result.findings),
        "skipped": list(result.record.get("skipped", [])),
    }


def _recover(corpus: Path, names: list[str]) -> None:
    """Remove half-built leftovers; record packages published just before a kill."""
    tasks, records = corpus / "tasks", corpus / "records"
    for p in tasks.iterdir():
        if p.name.startswith("."):
            remove_tree(p)
    for p in records.iterdir():
        if p.name.startswith("."):
            p.unlink(missing_ok=True)
    for name in names:
        if (tasks / name).is_dir() and not (records / f"{name}.json").exists():
            _write_json(
                records / f"{name}.json",
                {
                    "status": "built",
                    "stage": "emit",
                    "reason": "",
                    "findings": [],
                    "skipped": _skipped_in(tasks / name),
                },
            )


def _skipped_in(package: Path) -> list[str]:
    """The stages the build of ``package`` skipped (its builder/record.json's ``skipped``)."""
    try:
        record = loads_untrusted((package / "builder" / "record.json").read_text(encoding="utf-8"))
        return [str(s) for s in record.get("skipped", [])]
    except (OSError, ValueError, AttributeError, TypeError):
        return []


def summarize(corpus: Path, names: list[str], skipped: int) -> CorpusSummary:
    """Summarise the finished records of ``names``; write summary.json and the index."""
    entries = {}
    for name in names:
        path = corpus / "records" / f"{name}.json"
        if path.exists():
            entries[name] = loads_untrusted(path.read_text(encoding="utf-8"))
    status = Counter(e["status"] for e in entries.values())
    stages = {s: {"reached": 0, "passed": 0, "skipped": 0} for s in STAGES}
    reasons: Counter[str] = Counter()
    for e in entries.values():
        stop = STAGES.index(e["stage"]) if e["stage"] in STAGES else len(STAGES) - 1
        not_run = set(e.get("skipped", ()))
        for i, s in enumerate(STAGES[: stop + 1]):
            if s in not_run:  # did not run: neither reached nor passed
                stages[s]["skipped"] += 1
                continue
            stages[s]["reached"] += 1
            if i < stop or e["status"] == "built":
                stages[s]["passed"] += 1
        if e["status"] != "built":
            codes = e["findings"] or [f"{e['stage']} failed"]
            reasons.update(codes)
    built = sorted(n for n, e in entries.items() if e["status"] == "built")
    index = [{"name": n, "path": f"tasks/{n}"} for n in built]
    _write_json(corpus / "index.json", index)
    (corpus / "index.txt").write_text(
        "".join(f"{corpus / 'tasks' / n}\n" for n in built), encoding="utf-8"
    )
    summary = CorpusSummary(
        sources=len(names),
        built=status["built"],
        rejected=status["rejected"],
        failed=status["failed"],
        skipped=skipped,
        stages=stages,
        reasons=dict(reasons),
    )
    _write_json(corpus / "summary.json", summary.to_dict())
    return summary


def _provenance(sources: Path, name: str) -> tuple[str, str]:
    side = sources / f"{name}.provenance.json"
    if not side.is_file():
        return name, ""
    try:
        data = loads_untrusted(side.read_text(encoding="utf-8"))
        return str(data.get("source", name)), str(data.get("licence", ""))
    except (ValueError, AttributeError):
        raise InvalidArgument(
            f"{side} is not a JSON object with 'source' and 'licence'; fix or remove it"
        ) from None


async def build_many(
    sources_dir: Path | str,
    corpus_dir: Path | str,
    model: ModelFactory,
    *,
    workers: int = 1,
    sandbox: SandboxFactory | None = None,
    options: BuildOptions | None = None,
    on_result: Callable[[str, dict[str, Any]], None] | None = None,
) -> CorpusSummary:
    """Build every source under ``sources_dir`` into ``corpus_dir``; resumable.

    A source whose build raises (an error of the pipeline, not of the data) is recorded as
    ``failed`` with the error, so one bad source never stops the corpus.

    Raises:
        InvalidArgument: ``sources_dir`` is not a directory or ``workers`` < 1.
    """
    if workers < 1:
        raise InvalidArgument(f"Expected workers >= 1 but got {workers}")
    sources = Path(sources_dir)
    corpus = Path(corpus_dir)

    def scan() -> tuple[list[str], list[str]]:
        if not sources.is_dir():
            raise InvalidArgument(f"sources_dir={str(sources_dir)!r} is not a directory")
        names = sorted(
            p.name for p in sources.iterdir() if p.is_dir() and not p.name.startswith(".")
        )
        (corpus / "tasks").mkdir(parents=True, exist_ok=True)
        (corpus / "records").mkdir(parents=True, exist_ok=True)
        _recover(corpus, names)
        todo = [n for n in names if not (corpus / "records" / f"{n}.json").exists()]
        return names, todo

    names, todo = await anyio.to_thread.run_sync(scan)
    base = options or BuildOptions()
    limiter = anyio.CapacityLimiter(workers)

    async def one(name: str) -> None:
        async with limiter:
            source, licence = await anyio.to_thread.run_sync(_provenance, sources, name)
            opts = BuildOptions(
                source=source,
                licence=licence,
                name=name,
                blocklist=base.blocklist,
                max_spec_attempts=base.max_spec_attempts,
                max_prepare_attempts=base.max_prepare_attempts,
                prepare_timeout_s=base.prepare_timeout_s,
                solvability=base.solvability,
                baseline_timeout_s=base.baseline_timeout_s,
                judge=base.judge,
                judge_thresholds=base.judge_thresholds,
                judge_attempts=base.judge_attempts,
                judge_timeout_s=base.judge_timeout_s,
            )
            try:
                result = await build_task(
                    sources / name, corpus / "tasks" / name, model(), sandbox=sandbox, options=opts
                )
                entry = _entry(result)
            except OpenMLEError as exc:
                entry = {
                    "status": "failed",
                    "stage": "intake",
                    "reason": str(exc)[:2000],
                    "findings": [],
                }
            await anyio.to_thread.run_sync(_write_json, corpus / "records" / f"{name}.json", entry)
            if on_result is not None:
                on_result(name, entry)

    async with anyio.create_task_group() as tg:
        for name in todo:
            tg.start_soon(one, name)
    return await anyio.to_thread.run_sync(summarize, corpus, names, len(names) - len(todo))
