"""NatureBench cases as openmle tasks: the agent sees ``problem/``, the evaluator runs outside.

Input: a NatureBench checkout (``FrontisAI/NatureBench``, MIT) after its download step::

    ROOT/tasks/<case_id>/{problem/,evaluation/,environment/,metadata.json}
    ROOT/task-set/{all,cpu,gpu_low,gpu_high}.txt
    ROOT/submit-results/case_metadata.csv       (optional: the official case -> domain table)

Each case becomes a :class:`NatureBenchTask` (an :class:`openmle._task_protocol.TaskHandle`):

- the program reads ``problem/data/`` read-only through ``$DATA_DIR`` (the runtime path every
  case exposes after the harness extracts its archives); ``problem/README.md`` and
  ``problem/data_description.md`` are the task description the model reads;
- ``evaluation/`` (``evaluator.py`` and the ground truth) is a private path: never mounted,
  never readable by the program;
- the program writes its outputs under ``./output/`` in its working directory (the task's
  ``outputs``; the harness's ``$OUTPUT_DIR``, e.g. ``./output/<instance>/pred.csv``) and/or a
  single ``./submission.csv``; the sandbox copies that directory out of the workspace,
  bounded and never following a link (:func:`openmle.backends._kit.grade_outside`), with
  ``submission.csv`` put into it;
- a grade runs the evaluator on that directory in place (the sandbox's vetted copy, which a
  bench run moves into the bench directory: one copy, never two), or copies a lone
  ``submission.csv`` into a fresh output directory (``OUTPUT_DIR``), and runs the case's
  ``run_evaluation()`` (or ``main()``) in a
  confined ``python -I`` process (the grader's limits, :class:`openmle.gym.GradeLimits`, with
  ``OUTPUT_DIR`` set, as the harness does); its returned per-instance blocks are scored against
  ``metadata.json``'s primary metrics and SOTA scores into the gap ``g``
  (:func:`openmle.bench.naturebench.case_gap`). The grade's ``score`` is ``g`` (higher is
  better), so the search selects on the evaluator, as the harness's agents do (every
  evaluator attempt counts there, the best kept); ``valid`` and ``test`` are the same evaluator.

A test grade writes its structured result (status, message, ``g``, per-instance gaps, the
evaluator's raw result) to ``naturebench_grade.json`` next to the kept submission; the report
(:func:`naturebench_report`) reads those into NatureBench's metrics and submission files.

Resources per case: ``task-set`` membership decides the GPUs (``cpu``: none; ``gpu_low`` and
``gpu_high``: one, as in the reference setup), falling back to ``metadata.json``'s
``compute_resource_requirements.gpu_compute.severity`` (``none``: 0, otherwise 1) for a case in
no list; the per-run wall-clock limit defaults to the reference 4 hours.

The sandbox sets the program's ``$OUTPUT_DIR`` to ``<workspace>/output`` (the task's
``outputs``; the harness sets ``OUTPUT_DIR=/workspace/output``). The task description still
says the variable is not set and to use ``os.environ.get('OUTPUT_DIR', 'output')``, which names
the same directory: it is kept as it was, since a run's manifest records its hash and resume
refuses a changed description.

Limits: the output directory is bounded (10,000 entries, 2 GiB
counted at each file's apparent or allocated size, 16 levels:
:class:`openmle.backends._workspace.OutputLimits`), and a sparse file in it is refused at any
size (its holes would be written out in full on the host). Nothing here downloads anything.
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from attrs import define, field

from openmle._trees import scratch_dir
from openmle._types import Resources, Split, check_split
from openmle.bench.naturebench._cases import (
    REFERENCE_TIMEOUT_S,
    SUITES,
    case_domain,
    read_json_object,
    read_suite,
)
from openmle.bench.naturebench._grade import case_gap, primary_metrics
from openmle.errors import InvalidArgument, TaskPackageError
from openmle.gym import GradeLimits, GradeReport

if TYPE_CHECKING:
    from openmle.bench._runner import BenchConfig

__all__ = ["CHILD", "GRADE_RECORD", "LITE_CASES", "NatureBench", "NatureBenchTask"]

CHILD = "openmle.bench.naturebench.child"
"""The module the evaluator process runs."""
GRADE_RECORD = "naturebench_grade.json"
"""The file a test grade writes next to the kept submission."""
OUTPUT_DIR_NAME = "output"
"""The directory, in its working directory, a program writes a case's outputs into."""
_MAX_METADATA_BYTES = 4 << 20
_MAX_DESCRIPTION_CHARS = 200_000
_CASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


LITE_CASES: tuple[str, ...] = (
    "s41587-025-02688-8",
    "s42256-025-01016-8",
    "s42256-023-00627-3",
    "s41592-025-02776-2",
    "s41467-025-63412-3",
    "s43588-024-00703-7",
    "s43588-025-00842-5",
    "s41467-025-65557-7",
    "s42256-022-00447-x",
    "s42256-023-00611-x",
)
"""NatureBench Lite: the ten case ids of the paper's NatureBench evaluation, as its released
search configuration lists them (the harness itself publishes no Lite list). The reference
budget is 4 hours per case (:data:`~openmle.bench.naturebench.REFERENCE_TIMEOUT_S`)."""

_LIMIT_WHY = {
    "time": "the evaluator hit its time limit",
    "cpu": "the evaluator hit its cpu limit",
    "killed": "the evaluator was killed at a limit (its CPU hard limit, the out-of-memory "
    "killer or a cancellation)",
}
"""Why an evaluator gave no result, by the grading process's ``ChildRun.limit``."""


def _read_text(path: Path) -> str:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            return fh.read(_MAX_DESCRIPTION_CHARS)
    except OSError:
        return ""


def _abs(p: str | Path) -> Path:
    return Path(p).expanduser().resolve()


def _opt_abs(p: str | Path | None) -> Path | None:
    return None if p is None else _abs(p)


def _grade_limits(instance: object, attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, GradeLimits):
        raise InvalidArgument(
            f"Expected NatureBench grade_limits to be an openmle.gym.GradeLimits or None but got "
            f"{type(value).__name__}; for example GradeLimits(timeout_s=3600, memory_mb=16384)"
        )


@final
@define(eq=False)
class NatureBench:
    """A NatureBench checkout: its cases, suites and domains (see the module doc).

    Args:
        root: the downloaded data (holds ``tasks/``; the harness's ``--data-dir``,
            ``./data/naturebench_data`` by default), or a checkout holding both.
        harness: the harness checkout (holds ``task-set/`` and ``submit-results/``); default
            ``root``.
        resources: what a program run may use besides GPUs (CPUs, memory); the GPUs come from
            each case's demand unless ``gpus_override`` is set (``--gpus N``, a recorded
            deviation: a CPU-only machine can run a ``gpu_low`` case).
        time_limit_s: wall-clock limit of one program run (default: the reference 4 hours).
        grade_limits: the evaluator process's limits (default: 1 hour, 16 GiB).
        grader: runs the evaluator elsewhere instead of the local grading process: a callable
            ``(evaluation_dir, submission_copy, timeout_s) -> {"raw": dict} | {"error": str}``
            (``submission_copy`` is the output directory for a program that wrote one)
            such as :class:`openmle.bench.ContainerGrader` (a container of the
            case's image, the answers mounted read-only there only).
    """

    root: Path = field(converter=_abs)
    harness: Path | None = field(default=None, converter=_opt_abs)
    resources: Resources = field(factory=Resources)
    time_limit_s: float = REFERENCE_TIMEOUT_S
    grade_limits: GradeLimits | None = field(default=None, validator=_grade_limits)
    grader: Callable[[Path, Path, float], Mapping[str, Any]] | None = None
    gpus_override: int | None = None
    _domains: dict[str, str] | None = field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        if not self.tasks_dir.is_dir():
            raise InvalidArgument(
                f"No NatureBench tasks under {self.tasks_dir}; give the harness checkout after "
                "its download step (`python run_naturebench.py --download-only` or the "
                "Hugging Face dataset unpacked into tasks/)"
            )
        if self.grade_limits is None:
            self.grade_limits = GradeLimits(timeout_s=3600.0, memory_mb=16_384)

    @property
    def tasks_dir(self) -> Path:
        """``ROOT/tasks``."""
        return self.root / "tasks"

    @property
    def task_set(self) -> Path:
        """``HARNESS/task-set``."""
        return (self.harness or self.root) / "task-set"

    def ids(self) -> list[str]:
        """Every case directory under ``tasks/`` (sorted)."""
        return sorted(
            p.name
            for p in self.tasks_dir.iterdir()
            if p.is_dir() and _CASE_ID.match(p.name) and (p / "metadata.json").is_file()
        )

    def suite(self, spec: str | Sequence[str]) -> list[str]:
        """The case ids of a suite: ``all``, ``cpu``, ``gpu_low``, ``gpu_high`` (from
        ``task-set/``), ``lite`` (:data:`LITE_CASES`, the paper's ten cases), a ``.txt`` file
        of ids, comma-separated ids, or a list of ids.

        Raises:
            InvalidArgument: an unknown id (for ``lite``: a case not downloaded) or an empty
                selection.
            TaskPackageError: a task-set list is missing or malformed.
        """
        if isinstance(spec, str) and spec == "lite":
            ids = list(LITE_CASES)
        elif isinstance(spec, str) and spec in SUITES:
            ids = list(read_suite(self.task_set, spec))
        elif isinstance(spec, str) and spec.endswith(".txt"):
            ids = _ids_file(Path(spec))
        elif isinstance(spec, str):
            ids = [s.strip() for s in spec.split(",") if s.strip()]
        else:
            ids = [str(s).strip() for s in spec if str(s).strip()]
        known = set(self.ids())
        unknown = [i for i in ids if i not in known]
        if unknown:
            more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
            raise InvalidArgument(
                f"Unknown NatureBench case(s) {unknown[:10]}{more} under {self.tasks_dir}; "
                f"download them first, or choose from the suites {['lite', *SUITES]}"
            )
        if not ids:
            raise InvalidArgument(f"Expected at least one case in suite {spec!r}")
        return list(dict.fromkeys(ids))

    def tier(self, cid: str) -> str:
        """``cpu``, ``gpu_low`` or ``gpu_high`` from ``task-set/``; ``""`` when in none."""
        for name in ("cpu", "gpu_low", "gpu_high"):
            with contextlib.suppress(TaskPackageError):
                if cid in read_suite(self.task_set, name):
                    return name
        return ""

    def domain(self, cid: str) -> str:
        """The case's leaderboard domain: ``submit-results/case_metadata.csv`` when present,
        else ``metadata.json``'s ``domain_metadata.primary_domain`` (``Other`` when absent).
        """
        if self._domains is None:
            self._domains = {}
            path = (self.harness or self.root) / "submit-results" / "case_metadata.csv"
            with (
                contextlib.suppress(OSError, csv.Error, UnicodeDecodeError),
                path.open(newline="", encoding="utf-8-sig") as fh,
            ):
                for row in csv.DictReader(fh):
                    case, dom = (row.get("case_id") or "").strip(), row.get("domain")
                    if case and isinstance(dom, str) and dom.strip():
                        self._domains[case] = dom.strip()[:100]
        if cid in self._domains:
            return self._domains[cid]
        return case_domain(self.tasks_dir / cid)

    def task(self, cid: str) -> NatureBenchTask:
        """The case ``cid`` as a task.

        Raises:
            InvalidArgument: not a case id under ``tasks/``.
        """
        if not isinstance(cid, str) or not _CASE_ID.match(cid):
            raise InvalidArgument(f"Expected a NatureBench case id but got {cid!r}")
        root = self.tasks_dir / cid
        if not (root / "metadata.json").is_file():
            raise InvalidArgument(f"No NatureBench case {cid!r} under {self.tasks_dir}")
        return NatureBenchTask(bench=self, case_id=cid)

    def resolve(self, ref: str) -> NatureBenchTask:
        """A task resolver: the case id as reference."""
        return self.task(ref)

    def manifest_entries(self, competitions: Sequence[str]) -> dict[str, Any]:
        """The bench manifest's ``naturebench`` entry (:meth:`manifest`)."""
        return {"naturebench": self.manifest()}

    def manifest(self) -> dict[str, Any]:
        """What the bench manifest records about the checkout."""
        from openmle.bench._mlebench import _git_commit

        return {
            "benchmark": "naturebench",
            "root": str(self.root),
            "harness": None if self.harness is None else str(self.harness),
            "commit": _git_commit(self.harness or self.root),
            "time_limit_s": self.time_limit_s,
        }


def open_for_bench(config: BenchConfig, path: Path) -> NatureBench:
    """The NatureBench checkout a bench runs: ``data_dir`` (the downloaded ``tasks/``),
    ``registry`` (the harness checkout), resources, time limit and the ``--gpus`` override.
    """
    return NatureBench(
        config.data_dir,
        harness=config.registry,
        resources=config.resources,
        time_limit_s=config.time_limit_s,
        gpus_override=config.gpus_override,
    )


def _ids_file(path: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"Cannot read the id list {path} ({type(exc).__name__})") from None
    return [ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()]


@final
@define(eq=False)
class NatureBenchTask:
    """One NatureBench case as a task (see the module doc)."""

    bench: NatureBench
    case_id: str
    outputs: str | None = OUTPUT_DIR_NAME
    """The directory the program writes its outputs into (the evaluator's ``OUTPUT_DIR``)."""

    @property
    def name(self) -> str:
        """The case id."""
        return self.case_id

    @property
    def root(self) -> Path:
        """``tasks/<case_id>``."""
        return self.bench.tasks_dir / self.case_id

    @property
    def leaderboard(self) -> None:
        """No human leaderboard: the score is the gap ``g`` (no medals)."""
        return None

    @property
    def known_names(self) -> tuple[str, ...]:
        """No other name than the case id."""
        return ()

    @property
    def grades_kept_copy(self) -> bool:
        """A test submission is graded from the bench's kept copy (the evaluator's record
        lands beside it).
        """
        return True

    def preflight(self) -> str | None:
        """Nothing to prepare: a downloaded case runs as it is."""
        return None

    @property
    def metadata(self) -> dict[str, Any]:
        """``metadata.json``.

        Raises:
            TaskPackageError: missing, too large or not a JSON object.
        """
        return read_json_object(self.root / "metadata.json")

    @property
    def tier(self) -> str:
        """``cpu``, ``gpu_low``, ``gpu_high`` or ``""`` (see :meth:`NatureBench.tier`)."""
        return self.bench.tier(self.case_id)

    @property
    def gpus(self) -> int:
        """GPUs one program run needs (see the module doc), or the bench's override."""
        if self.bench.gpus_override is not None:
            return self.bench.gpus_override
        tier = self.tier
        if tier:
            return 0 if tier == "cpu" else 1
        req = self.metadata.get("compute_resource_requirements")
        gpu = req.get("gpu_compute") if isinstance(req, dict) else None
        severity = gpu.get("severity") if isinstance(gpu, dict) else None
        return 0 if severity in (None, "none") else 1

    @property
    def resources(self) -> Resources:
        """The bench's resources with this case's GPUs."""
        r = self.bench.resources
        return Resources(cpus=r.cpus, gpus=self.gpus, memory_mb=r.memory_mb)

    @property
    def time_limit_s(self) -> float:
        """Wall-clock limit of one program run."""
        return self.bench.time_limit_s

    @property
    def higher_is_better(self) -> bool:
        """Always: the score is the gap ``g``."""
        return True

    @property
    def domain(self) -> str:
        """The leaderboard domain."""
        return self.bench.domain(self.case_id)

    @property
    def grade_limits(self) -> Any:
        """The evaluator process's limits."""
        return self.bench.grade_limits

    @property
    def description(self) -> str:
        """``problem/README.md`` and ``problem/data_description.md`` plus the output rule."""
        parts = [
            _read_text(self.root / "problem" / name)
            for name in ("README.md", "data_description.md")
        ]
        text = "\n\n".join(p for p in parts if p.strip())
        return (
            text + "\n\n## How this run is graded\n\nThe data of `problem/data/` is in "
            f"$DATA_DIR (read-only). `$OUTPUT_DIR` is `./{OUTPUT_DIR_NAME}/` in the working "
            f"directory (the variable is not set: use `os.environ.get('OUTPUT_DIR', "
            f"'{OUTPUT_DIR_NAME}')` and create the directory): write every output file the "
            f"task asks for there (e.g. `./{OUTPUT_DIR_NAME}/<instance>/<file>`), regular "
            "files only. A single `submission.csv` in the working directory is given to the "
            "case's evaluator as `$OUTPUT_DIR/submission.csv`.\n"
        )

    @property
    def dockerfile(self) -> Path | None:
        """``environment/Dockerfile.v3`` when the case ships one (``DockerSandbox`` builds it,
        on the harness's base image, which must exist in the engine), else None.
        """
        path = self.root / "environment" / "Dockerfile.v3"
        return path if path.is_file() else None

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """``evaluation/`` (the evaluator and the ground truth)."""
        return (self.root / "evaluation",)

    def public_dir(self, split: Split | str) -> Path:
        """``problem/data`` (both splits: the evaluator is the only grader)."""
        check_split(split)
        return self.root / "problem" / "data"

    def grade(
        self, submission: Path, split: Split | str, *, timeout_s: float | None = None
    ) -> GradeReport:
        """Run the case's evaluator on ``submission`` out of process; the score is ``g``.

        ``submission`` is a ``submission.csv`` or an output directory (what the sandbox copied
        from ``./output/``); the evaluator reads it as ``OUTPUT_DIR``.

        Never raises for a bad submission or a failing evaluator: the report is invalid with
        the reason. A test grade also writes :data:`GRADE_RECORD` beside ``submission``.
        """
        sp = check_split(split)
        record = self.evaluate(submission, timeout_s=timeout_s)
        g = record["g"]
        if sp is Split.TEST:
            with contextlib.suppress(OSError):
                Path(submission).with_name(GRADE_RECORD).write_text(
                    json.dumps(record, indent=2, sort_keys=True), encoding="utf-8"
                )
        return GradeReport(
            task=self.case_id,
            split=sp,
            score=g,
            valid=g is not None,
            reason="" if g is not None else record["message"],
            higher_is_better=True,
            submission_path=str(submission),
            submission_exists=Path(submission).exists(),
        )

    def evaluate(self, submission: Path, *, timeout_s: float | None = None) -> dict[str, Any]:
        """The structured result of one evaluator run: ``status`` (``scored``,
        ``no_submission``, ``evaluator_error``, ``no_primary_metrics``), ``message``, ``g``,
        ``instances`` (per-instance gaps), ``raw`` (the evaluator's result) and ``notes``.
        """
        from openmle.gym import run_child

        def result(status: str, message: str, **extra: Any) -> dict[str, Any]:
            base: dict[str, Any] = {
                "case_id": self.case_id,
                "status": status,
                "message": message[:1000],
            }
            base.update({"g": None, "instances": {}, "raw": None, "notes": []})
            base.update(extra)
            return base

        try:
            table, notes = primary_metrics(self.metadata)
        except TaskPackageError as exc:
            return result("task_error", str(exc))
        src = Path(submission)
        if src.is_symlink() or not (src.is_file() or src.is_dir()):
            return result("no_submission", "no output to evaluate", notes=notes)
        evaluator = self.root / "evaluation" / "evaluator.py"
        if not evaluator.is_file():
            return result("task_error", f"{evaluator} is missing", notes=notes)
        limits = self.grade_limits or GradeLimits()
        if timeout_s is not None:
            limits = limits.with_timeout(min(limits.timeout_s, max(1.0, float(timeout_s))))
        with scratch_dir(prefix="openmle-nb-output-") as tmp:
            if src.is_dir():
                # The sandbox's vetted copy of the program's output directory (or the bench's
                # kept copy of it): evaluated in place, never copied a second time.
                out = src
            else:
                out = Path(tmp) / "output"
                out.mkdir()
                shutil.copyfile(src, out / "submission.csv", follow_symlinks=False)
            if self.bench.grader is not None:
                try:
                    found = dict(
                        self.bench.grader(
                            evaluator.parent,
                            out if src.is_dir() else out / "submission.csv",
                            limits.timeout_s,
                        )
                    )
                except Exception as exc:  # the engine failed: no grade, said so
                    found = {"error": f"the grader failed: {type(exc).__name__}: {str(exc)[:300]}"}
                limit, code = found.get("limit"), None
            else:
                child = run_child(
                    {"evaluator": str(evaluator), "output_dir": str(out)},
                    limits=limits,
                    module=CHILD,
                )
                found, limit, code = child.result or {}, child.limit, child.returncode
        if limit is not None or "raw" not in found:
            why = found.get("error") or (
                _LIMIT_WHY.get(limit, f"the evaluator hit its {limit} limit")
                if limit
                else f"the evaluator process ended without a result (exit {code})"
            )
            return result("evaluator_error", str(why), notes=notes)
        raw = found["raw"] if isinstance(found["raw"], dict) else {}
        per, g = case_gap(raw, table)
        if g is None:
            return result(
                "no_primary_metrics",
                "metadata.json gives no instance a usable primary metric and SOTA",
                raw=raw,
                notes=notes,
            )
        return result("scored", "", g=g, instances=per, raw=raw, notes=notes)
