"""The pipeline: intake, decontamination, inventory, spec, prepare (twice), gate, solvability,
judge, emit. Every stage's result goes into the package's ``builder/record.json``.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from attrs import field, frozen

from openmle._protocols import OperatorModel, Sandbox
from openmle._task_protocol import TaskResolver
from openmle._trees import remove_tree
from openmle.builder._decontam import Blocklist, check_contamination, load_blocklist
from openmle.builder._emit import (
    publish,
    stage_package,
    staging_dir,
    write_leaderboard,
    write_record,
    write_toml,
)
from openmle.builder._gate import GateResult, run_gate
from openmle.builder._intake import Intake, intake
from openmle.builder._inventory import Inventory, inventory
from openmle.builder._judge import JudgeThresholds, judge_task
from openmle.builder._prepare import StageResolver, request_prepare, run_prepare
from openmle.builder._spec import METRIC_LIBRARY, SpecError, TaskSpec, request_spec
from openmle.errors import InvalidArgument

__all__ = ["BuildOptions", "BuildResult", "SandboxFactory", "build_task"]

log = logging.getLogger("openmle.builder")

SandboxFactory = Callable[[TaskResolver], Sandbox]
"""Makes the sandbox a build runs prepare.py (and the baselines) in, given its resolver."""

STAGES = (
    "intake",
    "decontam",
    "inventory",
    "spec",
    "prepare",
    "metric",
    "gate",
    "solvability",
    "judge",
    "emit",
)
"""The stages, in order (a build stops at the first that fails)."""


def local_sandbox(resolver: TaskResolver) -> Sandbox:
    """The default: a :class:`~openmle.backends.LocalSandbox` (bubblewrap, no network)."""
    from openmle.backends import LocalSandbox

    return LocalSandbox(resolver=resolver, max_concurrency=1)


def sandbox_factory(spec: str) -> SandboxFactory | None:
    """The sandbox factory for a ``--sandbox`` spec, through the one sandbox registry
    (:func:`openmle.backends.make_sandbox`): None for ``local`` (the default,
    :func:`local_sandbox`), else ``docker`` or any spec whose factory takes a ``resolver``
    keyword (``module:callable``, a registered name, an ``openmle.sandboxes`` entry point).

    Raises:
        InvalidArgument: the spec names no sandbox, or one whose factory takes no ``resolver``
            (such as ``service:URL``): prepare.py's files come back through the builder's own
            task resolver, which such a sandbox cannot use.
    """
    from openmle.backends import build_sandbox, sandbox_takes

    if spec == "local":
        return None
    if not sandbox_takes(spec, "resolver"):
        raise InvalidArgument(
            f"Expected --sandbox local, docker or a sandbox factory taking resolver= for a "
            f"build but got {spec!r}: prepare.py's output comes back through the builder's "
            "own task resolver"
        )
    return lambda resolver: build_sandbox(spec, {"resolver": resolver}, {})


@frozen(kw_only=True)
class BuildOptions:
    """How to build one task.

    Args:
        source, licence: provenance, recorded in the package.
        name: the task name (default: the output directory's name).
        blocklist: evaluation data to refuse (default: the shipped list).
        max_spec_attempts, max_prepare_attempts: model answers tried per stage.
        prepare_timeout_s: wall-clock limit of one prepare.py run.
        solvability: run the baselines (a constant and gradient boosting) and seed a
            synthetic leaderboard.
        judge: run the model's quality gate (five dimensions; ``rejected`` stops the build, a
            judge that never gave a valid answer fails it with the errors).
        goal: the user's goal in words (``"predict Survived"``): the column it names is the
            target, a metric it names is used; shown to the model with the inventory. A goal
            that names no column is a warning (logged on ``openmle.builder`` and kept in the
            record's ``warnings``, naming the words and the columns): the target is then the
            builder's guess.
        metric: a metric of :data:`~openmle.builder.METRIC_LIBRARY` the task must use.
    """

    source: str = ""
    licence: str = ""
    name: str | None = None
    blocklist: Blocklist | None = None
    max_spec_attempts: int = 3
    max_prepare_attempts: int = 3
    prepare_timeout_s: float = 300.0
    solvability: bool = True
    baseline_timeout_s: float = 300.0
    judge: bool = False
    judge_thresholds: JudgeThresholds | None = None
    judge_attempts: int = 3
    judge_timeout_s: float = 300.0
    goal: str = ""
    metric: str | None = field(default=None)

    @metric.validator
    def _known_metric(self, _: object, value: str | None) -> None:
        if value is not None and value not in METRIC_LIBRARY:
            raise InvalidArgument(
                f"metric (--metric) {value!r} is not a vetted metric; use one of "
                f"{sorted(METRIC_LIBRARY)}"
            )


@frozen(kw_only=True)
class BuildResult:
    """How one build ended.

    Args:
        status: ``"built"`` (a package at ``package``), ``"rejected"`` (the data or the task
            failed a check: decontamination, gate, solvability) or ``"failed"`` (a stage gave
            no result: no valid spec, prepare.py never ran).
        stage: the last stage reached (``"emit"`` when built).
        reason: why it was not built (empty when built).
        findings: the gate's finding codes (or ``"contaminated"``, or ``"no_table"`` when
            the raw data holds nothing the inventory reads as a table).
        record: the builder's full record (also in the package's builder/record.json);
            its ``warnings`` (when present) are what the user should know, such as a goal
            that names no column; its ``skipped`` (when present) names the stages that did
            not run (``metric`` without a custom metric, ``solvability``, ``judge``).
    """

    status: str
    stage: str
    reason: str
    package: Path | None
    findings: tuple[str, ...] = ()
    record: dict[str, Any] = field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "status": self.status,
            "stage": self.stage,
            "reason": self.reason,
            "package": str(self.package) if self.package else None,
            "findings": list(self.findings),
            "record": self.record,
        }


async def build_task(
    raw_dir: Path | str,
    out: Path | str,
    model: OperatorModel,
    *,
    sandbox: SandboxFactory | None = None,
    options: BuildOptions | None = None,
) -> BuildResult:
    """Build a verified task package at ``out`` from the raw data in ``raw_dir``.

    A task is published (one rename) only when every stage passed; otherwise nothing is
    written at ``out`` and the result says which stage stopped it and why.

    Raises:
        InvalidArgument: ``raw_dir`` is not a usable directory, or ``out`` exists.
    """
    opts = options or BuildOptions()
    out_path = await anyio.to_thread.run_sync(lambda: Path(out).expanduser().absolute())
    if await anyio.to_thread.run_sync(out_path.exists):
        raise InvalidArgument(f"out={str(out)!r} exists; a finished package is never overwritten")
    name = opts.name or out_path.name
    record: dict[str, Any] = {"builder": "openmle", "name": name}
    rec = await anyio.to_thread.run_sync(
        lambda: intake(raw_dir, source=opts.source, licence=opts.licence)
    )
    record["intake"] = rec.to_dict()

    def stop(status: str, stage: str, reason: str, findings: Sequence[str] = ()) -> BuildResult:
        return BuildResult(
            status=status,
            stage=stage,
            reason=reason,
            package=None,
            findings=tuple(findings),
            record=record,
        )

    stopped = await _decontam_stage(rec, opts, record)
    if stopped is not None:
        return stop(*stopped)
    inv = await anyio.to_thread.run_sync(lambda: inventory(rec, goal=opts.goal, metric=opts.metric))
    record["inventory"] = inv.to_dict()
    _warn(record, inv.goal_warning())
    if not inv.tables:  # nothing to label: no model can answer a spec
        return stop(
            "rejected",
            "inventory",
            "no readable table (CSV, TSV, JSON records or JSON Lines) and no per-class image "
            "folder in the raw data; nothing holds labels",
            ("no_table",),
        )
    try:
        spec_result = await request_spec(model, inv, max_attempts=opts.max_spec_attempts)
    except SpecError as exc:
        return stop("failed", "spec", str(exc))
    spec = spec_result.spec
    record["spec"] = spec_result.to_dict()
    resolver = StageResolver()
    box = (sandbox or local_sandbox)(resolver)
    work = Path(await anyio.to_thread.run_sync(lambda: tempfile.mkdtemp(prefix="openmle-build-")))
    staged = await anyio.to_thread.run_sync(staging_dir, out_path)
    try:
        gate = await _prepare_and_gate_stage(
            model, box, resolver, spec, inv, rec.raw_dir, work, staged, name, opts, record
        )
        if not isinstance(gate, GateResult):
            return stop(*gate)
        stopped = await _solvability_stage(box, resolver, staged, spec, name, opts, record)
        if stopped is None:
            stopped = await _judge_stage(model, inv, spec, opts, record)
        if stopped is not None:
            return stop(*stopped)
        record["checksums"] = gate.checksums
        await anyio.to_thread.run_sync(lambda: write_record(staged, record, inv.text()))
        await anyio.to_thread.run_sync(publish, staged, out_path)
        return BuildResult(status="built", stage="emit", reason="", package=out_path, record=record)
    finally:
        with anyio.CancelScope(shield=True):
            await box.aclose()
            await anyio.to_thread.run_sync(remove_tree, work)
            await anyio.to_thread.run_sync(remove_tree, staged)


def _warn(record: dict[str, Any], warning: str | None) -> None:
    """Log ``warning`` (``openmle: warning: ...``; on stderr where logging is not set up) and
    keep it in the record's ``warnings``; None: nothing.
    """
    if warning is not None:
        record.setdefault("warnings", []).append(warning)
        log.warning("openmle: warning: %s", warning)


def _skip(record: dict[str, Any], stage: str) -> None:
    """Note in the record's ``skipped`` that ``stage`` did not run (not asked for, or not
    needed: the ``metric`` stage runs only for a custom metric).
    """
    record.setdefault("skipped", []).append(stage)


_Stopped = tuple[str, str, str, tuple[str, ...]]
"""Why a stage stopped the build: ``(status, stage, reason, findings)``."""


async def _prepare_and_gate_stage(
    model: OperatorModel,
    box: Sandbox,
    resolver: StageResolver,
    spec: TaskSpec,
    inv: Inventory,
    raw_dir: Path,
    work: Path,
    staged: Path,
    name: str,
    opts: BuildOptions,
    record: dict[str, Any],
) -> GateResult | _Stopped:
    """prepare.py from the model, run twice in the sandbox (``work/run1``, ``work/run2``), the
    package staged from the first run and gated (determinism included): the passed gate, or
    why the build stops. Records ``prepare`` and ``gate``.
    """
    prepared = await request_prepare(
        model,
        box,
        resolver,
        spec,
        inv,
        raw_dir,
        work / "run1",
        max_attempts=opts.max_prepare_attempts,
        timeout_s=opts.prepare_timeout_s,
    )
    record["prepare"] = prepared.to_dict()
    if not prepared.ok:
        return ("failed", "prepare", prepared.runs[-1].error_text(2000), ())
    second = await run_prepare(
        box, resolver, prepared.source, raw_dir, work / "run2", timeout_s=opts.prepare_timeout_s
    )
    record["prepare"]["second_run"] = second.to_dict()
    await anyio.to_thread.run_sync(
        lambda: stage_package(staged, spec, name, work / "run1", prepared.source, raw_dir)
    )
    if spec.custom:  # no vetted metric fits: the model's utils/metric.py, checked first
        from openmle.builder._metric import metric_stage

        stopped = await metric_stage(model, spec, staged, record)
        if stopped is not None:
            return stopped
    else:
        _skip(record, "metric")
    gate = await anyio.to_thread.run_sync(
        lambda: run_gate(spec, inv, staged, work / "run2" if second.ok else None)
    )
    record["gate"] = gate.to_dict()
    if not second.ok:
        return (
            "rejected",
            "gate",
            "the second prepare.py run failed: " + second.error_text(500),
            ("not_deterministic",),
        )
    if not gate.passed:
        reason = "; ".join(f"{f.code}: {f.file}: {f.message}" for f in gate.findings)
        return ("rejected", "gate", reason, gate.codes)
    return gate


async def _decontam_stage(
    rec: Intake, opts: BuildOptions, record: dict[str, Any]
) -> _Stopped | None:
    """Check the raw data against the evaluation blocklist; why it stopped the build, if it did."""
    blocklist = opts.blocklist
    if blocklist is None:
        blocklist = await anyio.to_thread.run_sync(load_blocklist)
    contamination = await anyio.to_thread.run_sync(check_contamination, rec, blocklist)
    record["decontam"] = contamination.to_dict()
    if not contamination.clean:
        return (
            "rejected",
            "decontam",
            "matches evaluation data: " + "; ".join(contamination.matches),
            ("contaminated",),
        )
    return None


async def _solvability_stage(
    box: Sandbox,
    resolver: StageResolver,
    staged: Path,
    spec: TaskSpec,
    name: str,
    opts: BuildOptions,
    record: dict[str, Any],
) -> _Stopped | None:
    """Run the baselines (when asked) and write the leaderboard; why it stopped, if it did."""
    if not opts.solvability:
        _skip(record, "solvability")
        return None
    from openmle.builder._solvability import check_solvability

    solv = await check_solvability(box, resolver, staged, spec, timeout_s=opts.baseline_timeout_s)
    record["solvability"] = solv.to_dict()
    if not solv.solvable:
        return ("rejected", "solvability", solv.reason, ("not_solvable",))
    write_leaderboard(staged, solv.leaderboard)
    write_toml(staged, spec, name, leaderboard=True)
    return None


async def _judge_stage(
    model: OperatorModel,
    inv: Inventory,
    spec: TaskSpec,
    opts: BuildOptions,
    record: dict[str, Any],
) -> _Stopped | None:
    """Ask the quality judge (when asked); why it stopped the build, if it did."""
    if not opts.judge:
        _skip(record, "judge")
        return None
    evidence: dict[str, Any] = {k: record[k] for k in ("gate", "solvability") if k in record}
    evidence["inventory"] = record["inventory"]
    evidence["spec"] = spec.to_dict()
    verdict = await judge_task(
        model,
        evidence,
        inv.text(),
        thresholds=opts.judge_thresholds,
        max_attempts=opts.judge_attempts,
        timeout_s=opts.judge_timeout_s,
    )
    record["quality"] = verdict.to_dict()
    if verdict.verdict == "error":
        return (
            "failed",
            "judge",
            "the judge gave no valid answer: " + "; ".join(verdict.errors),
            (),
        )
    if verdict.verdict == "rejected":
        return ("rejected", "judge", f"quality scores {verdict.scores}", ("quality_rejected",))
    return None
