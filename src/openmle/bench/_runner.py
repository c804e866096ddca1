"""``openmle bench``: the competitions x seeds matrix, resumable, several runs at once.

A bench directory::

    BENCH_DIR/
      manifest.json                       what makes the numbers comparable (see BenchConfig)
      runs/<competition>/seed-<k>/        an ordinary search run directory (resumable)
      runs/<competition>/seed-<k>/bench_result.json
                                          the run's grading report, written once at its end
      submissions/<competition>/seed-<k>/submission.csv
                                          the chosen program's test submission, as graded

Each run searches on the validation split only; the program with the best validation score is
run once on the test split, and that submission is graded by the competition's grader, kept,
and reported with MLE-bench's fields (:func:`openmle.bench.competition_report`). Seed ``k`` is
the search seed, which also seeds every model request.

Exactly resumable: a run with ``bench_result.json`` is finished and never touched again; a run
directory without one is resumed with :func:`openmle.search.aresume_search` (in-flight steps
re-run with their journalled proposals); a run that never started is started. A run whose
directory holds files but no manifest (killed while being created) is started afresh.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import math
import os
import platform
import re
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import anyio
import attrs
from attrs import define, field, frozen

from openmle._protocols import OperatorModel, Sandbox
from openmle._readback import read_back_json
from openmle._task_protocol import GradeLike
from openmle._trees import remove_tree
from openmle._types import Outcome, Resources, Split
from openmle._version import __version__
from openmle._writeback import ensure_dir, write_file
from openmle.backends import gpu_models, visible_gpus
from openmle.bench._benchmarks import Benchmark, BenchTask, benchmark_kind
from openmle.bench._live import committed_fractions
from openmle.bench._medals import Leaderboard, bench_dict, competition_report
from openmle.errors import InvalidArgument, OpenMLEError
from openmle.gym import Exclusions, GradeReport

if TYPE_CHECKING:
    from openmle.bench._live import LiveBoard
    from openmle.gym import GradeLimits
    from openmle.priors import PriorLibrary
    from openmle.search import (
        Budget,
        OperatorPrompts,
        Preset,
        Progress,
        SearchResult,
        ThreeFactorSelector,
    )

__all__ = [
    "SEARCH_KEYS",
    "Arm",
    "BenchConfig",
    "BenchRun",
    "RunStatus",
    "SandboxFactory",
    "arun_bench",
    "bench_sandbox",
    "bench_status",
    "check_priors_clean",
    "competition_exclusions",
    "preset_deviations",
    "preset_lines",
    "preset_search",
    "priors_ablation",
    "read_result",
    "validation_protocol",
]

MANIFEST = "manifest.json"
BENCH_FILE_MAX_BYTES = 64 * 1024 * 1024
"""The largest manifest or result file read back from a bench directory (a larger one, or
one that is not a regular file, is refused; see :func:`openmle._readback.read_back`)."""
DEFAULT_BENCHMARK = "mle-bench"
SEARCH_KEYS = ("max_debug_depth", "selector", "prompt_chars", "data_preview", "gpu_memory_gb")
"""The search settings a bench holds for every run (``BenchConfig.search``)."""
RESULT = "bench_result.json"


def read_json_file(path: Path, *, what: str) -> Any:
    """A JSON file of a bench directory, read as untrusted (:func:`openmle._readback.read_back`:
    no symbolic link followed, only a regular file, at most :data:`BENCH_FILE_MAX_BYTES`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        InvalidArgument: anything else; one line naming the file, what is wrong and the fix.
    """
    try:
        return read_back_json(path, max_bytes=BENCH_FILE_MAX_BYTES)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)[:120]
        raise InvalidArgument(
            f"{path}: {what} refused ({why}); restore it, or delete it to redo that part of "
            "the bench"
        ) from None


_NUM = (int, float, type(None))
_REPORT_TYPES: dict[str, tuple[type, ...]] = {
    "competition_id": (str,),
    "score": _NUM,
    "gold_threshold": _NUM,
    "silver_threshold": _NUM,
    "bronze_threshold": _NUM,
    "median_threshold": _NUM,
    "any_medal": (bool,),
    "gold_medal": (bool,),
    "silver_medal": (bool,),
    "bronze_medal": (bool,),
    "above_median": (bool,),
    "submission_exists": (bool,),
    "valid_submission": (bool,),
    "is_lower_better": (bool,),
    "created_at": (str,),
    "submission_path": (str,),
    "human_rank": (int, float),
    "seed": (int, type(None)),
    "reason": (str,),
    "leaderboard_size": (int,),
}
_REASON_CHARS = 2_000


def read_result(path: Path) -> dict[str, Any] | None:
    """A run's ``bench_result.json`` (None when absent), read bounded (:func:`read_json_file`)
    and checked: an object whose ``report`` is an object with the fields a report is rebuilt
    from (competition id, score, reason, seed), each of its type; ``spent`` an object of
    numbers. Stored medals and thresholds are never used (the report recomputes them).

    Raises:
        InvalidArgument: a malformed file, in one line naming it.
    """
    try:
        data = read_json_file(path, what="bench result")
    except FileNotFoundError:
        return None

    def bad(why: str) -> InvalidArgument:
        return InvalidArgument(
            f"{path}: malformed bench result ({why}); delete it to re-grade that run with "
            "`openmle bench resume`"
        )

    if not isinstance(data, dict) or not isinstance(data.get("report"), dict):
        raise bad("expected an object with a 'report' object")
    report = data["report"]
    for key, value in report.items():
        types = _REPORT_TYPES.get(key)
        if types is None:
            raise bad(f"unknown field report.{key}")
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise bad(f"report.{key} is {type(value).__name__}")
        if isinstance(value, float) and not math.isfinite(value):
            raise bad(f"report.{key} is not finite")
    if not isinstance(report.get("competition_id"), str):
        raise bad("report.competition_id is missing")
    spent = data.get("spent", {})
    if not isinstance(spent, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in spent.values()
    ):
        raise bad("'spent' is not an object of numbers")
    best = data.get("best_valid_score")
    if best is not None and (isinstance(best, bool) or not isinstance(best, int | float)):
        raise bad("best_valid_score is not a number")
    report["reason"] = str(report.get("reason", ""))[:_REASON_CHARS]
    return data


def _atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, fsync'd; a link at ``path`` is replaced, not followed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_file(path, text.encode("utf-8"), fsync=True)


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)


_COMPETITION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")
"""A competition id: a directory name under ``runs/`` and ``submissions/``, never a path."""


def _competition_ids(values: Iterable[str]) -> tuple[str, ...]:
    out = _strs(values)
    bad = [c for c in out if not _COMPETITION_ID.fullmatch(c)]
    if bad:
        raise InvalidArgument(
            f"BenchConfig.competitions has {bad[0][:60]!r}, not a competition id (letters, "
            "digits, '.', '_', '+', '-'; no '/'); name the benchmark's competitions "
            "(CLI: --competitions)"
        )
    return out


def _ints(values: Iterable[int]) -> tuple[int, ...]:
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int):
            raise InvalidArgument(f"Expected integer seeds but got {v!r}")
        out.append(v)
    return tuple(out)


def _arm_name(inst: object, attribute: Any, value: str) -> None:
    if not isinstance(value, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_+-]{0,40}", value):
        raise InvalidArgument(
            f"Expected an arm name of lower-case letters, digits, '_', '+' or '-' but got "
            f"Arm.name={value!r}"
        )


@final
@frozen(kw_only=True)
class Arm:
    """One arm of an ablation: every competition and seed is run once per arm.

    Args:
        name: the arm's name (its runs live under ``runs/<name>/``).
        priors: show the bench's prior library (``BenchConfig.priors``) to the search.
        workers: expansions in flight within one run. Arms share the bench's budget, so at a
            fixed ``sandbox_s`` more workers spend the same compute in parallel.
    """

    name: str = field(validator=_arm_name)
    priors: bool = False
    workers: int = 1

    def __attrs_post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise InvalidArgument(f"Expected Arm.workers >= 1 but got {self.workers!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"name": self.name, "priors": self.priors, "workers": self.workers}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Arm:
        """Inverse of :meth:`to_dict`."""
        return cls(**dict(data))


def priors_ablation(workers: int) -> tuple[Arm, ...]:
    """The 2 x 2 ablation: priors off/on x 1 worker / ``workers`` workers (``workers`` >= 2),
    named ``base``, ``priors``, ``parallel`` and ``priors+parallel``.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
        raise InvalidArgument(f"Expected workers >= 2 for the parallel arms but got {workers!r}")
    return (
        Arm(name="base", priors=False, workers=1),
        Arm(name="priors", priors=True, workers=1),
        Arm(name="parallel", priors=False, workers=workers),
        Arm(name="priors+parallel", priors=True, workers=workers),
    )


def _arms(values: Iterable[Any]) -> tuple[Arm, ...]:
    return tuple(v if isinstance(v, Arm) else Arm.from_dict(v) for v in values)


@final
@frozen(kw_only=True)
class BenchConfig:
    """One benchmark: what runs, and everything a comparison must hold equal.

    Args:
        suite: the suite name (``mle-bench-lite``...) or ``"custom"``.
        competitions: the competition ids, in report order.
        seeds: the search seeds (one run per competition and seed).
        model: the ``--model`` spec (``offline``, ``openai:URL#MODEL``...).
        sandbox: the ``--sandbox`` spec.
        budget: :meth:`openmle.search.Budget.to_dict` of each run's budget.
        data_dir: the prepared MLE-bench data.
        registry: the MLE-bench checkout, or None for the installed ``mlebench``.
        resources: what each program run may use.
        time_limit_s: the wall-clock limit of one program run.
        concurrency: runs at once (None: the sandbox's slots).
        workers: expansions in flight within one run (arms set their own).
        benchmark: ``mle-bench`` or ``naturebench`` (then ``data_dir`` is the NatureBench
            checkout, and each case's GPUs and the run's time limit come from the case).
        priors: a prior library file shown to every run (or to the arms with ``priors``);
            the bench refuses a competition named in the library's provenance.
        priors_sha256: the library's content hash, recorded when the bench is made; a
            resumed bench refuses a library that changed.
        islands: island populations per run (0: none; see ``SearchConfig.islands``).
        arms: the ablation's arms (:func:`priors_ablation`); empty: one plain arm. Arms whose
            workers differ need a ``sandbox_s`` cap in the budget (the fixed compute).
        validation: MLE-bench's validation protocol (``auto``, ``split`` or ``self``; see
            :class:`MLEBench`); the manifest records the protocol of each competition.
        gpus_override: ``--gpus N`` given explicitly: every program run gets N GPUs whatever
            its task demands (recorded in the manifest as a deviation).
        search: search settings of every run (keys of :data:`SEARCH_KEYS`):
            ``max_debug_depth``, ``selector`` (``ThreeFactorSelector.preset`` name),
            ``prompt_chars`` (per-operator prompt caps), ``data_preview`` (default on: a
            bounded preview of the public data in the Draft prompt), ``gpu_memory_gb`` (a
            recorded per-job GPU memory cap; see :class:`openmle.search.Preset`).
        preset: the :meth:`openmle.search.Preset.to_dict` of the preset the bench was made
            from (``--preset``), or None.
        deviations: every preset field the bench does not hold at the preset's value:
            ``{field: {"preset": ..., "used": ...}}`` (:meth:`Preset.deviations`).
        summary_model: the ``--summary-model`` spec: node summaries written by this model
            are shown to every run's operators (None: no summaries). ``model`` may be routed
            (``draft=SPEC,improve=SPEC,default=SPEC``).
    """

    suite: str
    competitions: tuple[str, ...] = field(converter=_competition_ids)
    seeds: tuple[int, ...] = field(converter=_ints)
    model: str
    sandbox: str = "local"
    budget: Mapping[str, Any] = field(factory=dict)
    data_dir: str
    registry: str | None = None
    resources: Resources = field(factory=Resources)
    time_limit_s: float = 3600.0
    concurrency: int | None = None
    workers: int = 1
    benchmark: str = DEFAULT_BENCHMARK
    priors: str | None = None
    priors_sha256: str | None = None
    islands: int = 0
    arms: tuple[Arm, ...] = field(default=(), converter=_arms)
    validation: str = "auto"
    gpus_override: int | None = None
    search: Mapping[str, Any] = field(factory=dict, converter=dict, hash=False)
    preset: Mapping[str, Any] | None = field(default=None, hash=False)
    deviations: Mapping[str, Any] = field(factory=dict, converter=dict, hash=False)
    summary_model: str | None = None

    def __attrs_post_init__(self) -> None:
        unknown = sorted(set(self.search) - set(SEARCH_KEYS))
        if unknown:
            raise InvalidArgument(
                f"Expected BenchConfig.search keys in {list(SEARCH_KEYS)} but got {unknown}"
            )
        benchmark_kind(self.benchmark)  # a registered benchmark, or InvalidArgument
        if not self.competitions:
            raise InvalidArgument("Expected at least one competition in the bench; check SUITE")
        if not self.seeds or any(s < 0 for s in self.seeds):
            raise InvalidArgument(
                f"Expected at least one seed, each >= 0, but got seeds={list(self.seeds)} "
                "(CLI: --seeds N with N >= 1 runs seeds 0..N-1)"
            )
        if len(set(self.seeds)) != len(self.seeds):
            raise InvalidArgument(f"Expected distinct seeds but got {list(self.seeds)}")
        t = self.time_limit_s
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 < t < math.inf:
            raise InvalidArgument(
                f"Expected time_limit_s, the seconds one program run may take, to be a number "
                f"> 0 but got {t!r} (CLI: --time-limit SECONDS, e.g. --time-limit 3600)"
            )
        if self.concurrency is not None and self.concurrency < 1:
            raise InvalidArgument(f"Expected concurrency >= 1 but got {self.concurrency}")
        if self.workers < 1:
            raise InvalidArgument(f"Expected workers >= 1 but got {self.workers}")
        if isinstance(self.islands, bool) or not isinstance(self.islands, int) or self.islands < 0:
            raise InvalidArgument(f"Expected islands >= 0 but got islands={self.islands!r}")
        names = [a.name for a in self.arms]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"Expected distinct arm names but got {names}")
        if any(a.priors for a in self.arms) and self.priors is None:
            raise InvalidArgument(
                "an arm shows priors but the bench has no prior library; pass priors= "
                "(CLI: --priors FILE)"
            )
        if len({a.workers for a in self.arms}) > 1 and self.budget.get("sandbox_s") is None:
            raise InvalidArgument(
                "arms with different workers are compared at equal total compute: give the "
                "budget a sandbox_s cap (e.g. --budget sandbox_s=600), the compute every arm "
                f"spends; got budget={dict(self.budget)}"
            )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return (
            {
                "suite": self.suite,
                "competitions": list(self.competitions),
                "seeds": list(self.seeds),
                "model": self.model,
                "sandbox": self.sandbox,
                "budget": dict(self.budget),
                "data_dir": self.data_dir,
                "registry": self.registry,
                "resources": self.resources.to_dict(),
                "time_limit_s": self.time_limit_s,
                "concurrency": self.concurrency,
                "workers": self.workers,
            }
            | ({"benchmark": self.benchmark} if self.benchmark != DEFAULT_BENCHMARK else {})
            | (
                {"priors": self.priors, "priors_sha256": self.priors_sha256}
                if self.priors is not None
                else {}
            )
            | ({"islands": self.islands} if self.islands else {})
            | ({"arms": [a.to_dict() for a in self.arms]} if self.arms else {})
            | ({"validation": self.validation} if self.validation != "auto" else {})
            | ({"gpus_override": self.gpus_override} if self.gpus_override is not None else {})
            | ({"search": dict(self.search)} if self.search else {})
            | (
                {"preset": dict(self.preset), "deviations": dict(self.deviations)}
                if self.preset is not None
                else {}
            )
            | ({"summary_model": self.summary_model} if self.summary_model else {})
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchConfig:
        """Inverse of :meth:`to_dict`."""
        d = dict(data)
        d["resources"] = Resources.from_dict(d.get("resources") or {})
        return cls(**d)


def hardware() -> dict[str, Any]:
    """CPU count, memory, GPU models (:func:`openmle.backends.gpu_models`), platform."""
    mem = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    return {
        "cpus": os.cpu_count(),
        "memory_mb": mem,
        "gpus": list(gpu_models()),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


@final
@frozen(kw_only=True)
class RunStatus:
    """Where one (competition, seed) run stands."""

    competition_id: str
    seed: int
    state: str  # "done", "interrupted" or "pending"
    report: GradeReport | None = None
    arm: str = ""


@final
@define(eq=False)
class BenchRun:
    """A bench directory: its manifest and its runs.

    Create one with :meth:`create` (new directory) or :meth:`open` (existing).
    """

    path: Path
    config: BenchConfig
    manifest: dict[str, Any]

    @classmethod
    def create(
        cls, path: str | os.PathLike[str], config: BenchConfig, bench: Benchmark
    ) -> BenchRun:
        """Make ``path`` (absent or empty) and write the manifest.

        Raises:
            InvalidArgument: ``path`` holds files (use ``openmle bench resume``).
        """
        p = Path(path)
        cls.refuse_used(p)
        manifest = {
            "kind": "openmle-bench",
            "schema_version": 1,
            "openmle_version": __version__,
            "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
            "config": config.to_dict(),
            **bench.manifest_entries(config.competitions),
            "hardware": hardware(),
            "selection": "best validation score; test graded once for the chosen program",
            "validation_protocol": validation_protocol(config),
            "gpu_memory_cap_gb": {
                "cap": config.search.get("gpu_memory_gb"),
                "enforced": False,
                "why": "no backend can cap a job's GPU memory (see Preset.gpu_memory_gb)",
            },
        }
        deviations = deviation_lines(config)
        if deviations:
            manifest["deviations"] = deviations
        _atomic_write(p / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
        return cls(path=p, config=config, manifest=manifest)

    @staticmethod
    def refuse_used(path: str | os.PathLike[str]) -> None:
        """Refuse ``path`` as a new bench directory: a file, or a directory holding anything
        but ``valid/`` (the validation views the preflight builds). Checked before the
        preflight writes there, so an existing bench is never written into.

        Raises:
            InvalidArgument: naming ``--out`` and the fix.
        """
        p = Path(path)
        if p.exists() and not p.is_dir():
            raise InvalidArgument(f"--out {str(p)!r} is a file; give a new directory")
        if p.is_dir() and any(c.name != "valid" for c in p.iterdir()):
            raise InvalidArgument(
                f"{str(p)!r} already exists and is not empty; finish it with `openmle bench "
                "resume` or choose a new --out"
            )

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> BenchRun:
        """An existing bench directory.

        Raises:
            InvalidArgument: not a bench directory.
        """
        p = Path(path)
        try:
            manifest = read_back_json(p / MANIFEST, max_bytes=BENCH_FILE_MAX_BYTES)
        except (OSError, ValueError) as exc:
            why = f" ({exc.strerror})" if isinstance(exc, OSError) and exc.strerror else ""
            raise InvalidArgument(
                f"{str(p)!r} is not a bench directory (no readable {MANIFEST}{why}); give the "
                "--out of `openmle bench run`"
            ) from None
        if not isinstance(manifest, dict) or manifest.get("kind") != "openmle-bench":
            raise InvalidArgument(f"{str(p)!r} is not a bench directory (wrong manifest kind)")
        try:
            config = BenchConfig.from_dict(manifest["config"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InvalidArgument(
                f"{p / MANIFEST}: malformed bench manifest ({type(exc).__name__}: "
                f"{str(exc)[:240]}); restore it from the bench's original copy"
            ) from None
        return cls(path=p, config=config, manifest=manifest)

    def record_deviation(self, text: str) -> None:
        """Add ``text`` to the manifest's ``deviations`` (the list the report's header prints)
        and rewrite the manifest atomically; a text already listed is not added again. For a
        change made after the bench began, such as a resume with another model.
        """
        listed = self.manifest.get("deviations")
        devs = [str(d) for d in listed] if isinstance(listed, list) else []
        if text in devs:
            return
        self.manifest["deviations"] = [*devs, text]
        _atomic_write(self.path / MANIFEST, json.dumps(self.manifest, indent=2, sort_keys=True))

    def run_dir(self, cid: str, seed: int, arm: str = "") -> Path:
        """The search run directory of (``cid``, ``seed``) (under ``runs/<arm>/`` in an arm)."""
        base = self.path / "runs" / arm if arm else self.path / "runs"
        return base / cid / f"seed-{seed}"

    def submission_path(self, cid: str, seed: int, arm: str = "") -> Path:
        """Where the run's graded test submission is kept."""
        base = self.path / "submissions" / arm if arm else self.path / "submissions"
        return base / cid / f"seed-{seed}" / "submission.csv"

    def status(self) -> list[RunStatus]:
        """Every run of the matrix: arms in order, then competitions, then seeds."""
        out = []
        for arm in [a.name for a in self.config.arms] or [""]:
            for cid in self.config.competitions:
                for seed in self.config.seeds:
                    rd = self.run_dir(cid, seed, arm)
                    data = read_result(rd / RESULT)
                    if data is not None:
                        report = GradeReport.from_dict(data["report"])
                        out.append(
                            RunStatus(
                                competition_id=cid, seed=seed, state="done", report=report, arm=arm
                            )
                        )
                    elif (rd / "manifest.json").is_file():
                        out.append(
                            RunStatus(competition_id=cid, seed=seed, state="interrupted", arm=arm)
                        )
                    else:
                        out.append(
                            RunStatus(competition_id=cid, seed=seed, state="pending", arm=arm)
                        )
        return out


def bench_status(path: str | os.PathLike[str]) -> list[RunStatus]:
    """The runs of the bench directory at ``path`` and where each stands."""
    return BenchRun.open(path).status()


@final
@define(eq=False)
class _KeepingTask:
    """A competition seen by one run: its test grade keeps the submission it graded.

    With ``home`` (the bench directory ``keep`` lies in), the folders from ``home`` down to
    ``keep`` are made or checked with no link followed (a ``submissions`` link to another
    bench's is refused with ``OSError``), and the kept file is replaced, never written through
    a link (symbolic or hard) standing at ``keep``.
    """

    inner: BenchTask
    ref: str
    keep: Path
    home: Path | None = None

    @property
    def name(self) -> str:
        return self.ref

    @property
    def private_paths(self) -> tuple[Path, ...]:
        return self.inner.private_paths

    @property
    def dockerfile(self) -> Path | None:
        """The task's environment Dockerfile (when its benchmark ships one), else None."""
        found = getattr(self.inner, "dockerfile", None)
        return Path(found) if found is not None else None

    @property
    def outputs(self) -> str | None:
        """The task's output directory name (when its program writes one), else None."""
        found = getattr(self.inner, "outputs", None)
        return found if isinstance(found, str) else None

    @property
    def grade_limits(self) -> GradeLimits | None:
        """The inner task's grading limits (so a sandbox bounds the grade by the job's
        timeout), else None.
        """
        return getattr(self.inner, "grade_limits", None)

    def public_dir(self, split: Split) -> Path:
        return self.inner.public_dir(split)

    def grade(self, submission: Path, split: Split, *, timeout_s: float | None = None) -> GradeLike:
        bound: dict[str, Any] = {} if timeout_s is None else {"timeout_s": timeout_s}
        if Split(split) is Split.TEST:
            src = Path(submission)
            self._keep_folder()
            if self.keep.is_symlink():  # never copy through a link left in the bench directory
                self.keep.unlink()
            if src.is_dir() and not src.is_symlink():  # the sandbox's copy of an output dir
                kept = self.keep.with_name(src.name)
                remove_tree(kept)
                # Moved, not copied: the sandbox's vetted copy becomes the one kept copy (a
                # copy only when the bench directory is on another file system).
                shutil.move(src, kept)
                if (kept / "submission.csv").is_file():
                    _copy_new(kept / "submission.csv", self.keep)
                else:
                    self.keep.unlink(missing_ok=True)
                # graded in place, so the evaluator's record lands beside the kept copy
                return self.inner.grade(kept, split, **bound)
            if src.is_file() and not src.is_symlink():
                _copy_new(src, self.keep)
                if self.inner.grades_kept_copy:
                    # graded in place, so the grade's record lands beside the kept copy
                    return self.inner.grade(self.keep, split, **bound)
            else:
                with contextlib.suppress(FileNotFoundError):
                    self.keep.unlink()
        return self.inner.grade(submission, split, **bound)

    def _keep_folder(self) -> None:
        """Make the kept file's folder; below ``home``, through real directories only.

        Raises:
            OSError: a folder between ``home`` and the kept file is a link or not a directory.
        """
        if self.home is None or not self.keep.parent.is_relative_to(self.home):
            self.keep.parent.mkdir(parents=True, exist_ok=True)
            return
        ensure_dir(self.home, *self.keep.parent.relative_to(self.home).parts)


def _copy_new(src: Path, dst: Path) -> None:
    """``src``'s bytes as a new file at ``dst`` (a link there is replaced, not written through)."""
    with src.open("rb") as f:
        write_file(dst, lambda out: shutil.copyfileobj(f, out))


def _ref(cid: str, seed: int, arm: str = "") -> str:
    return f"{cid}@arm-{arm}@seed-{seed}" if arm else f"{cid}@seed-{seed}"


@final
@define(eq=False)
class _Resolver:
    bench: Benchmark
    run: BenchRun

    @classmethod
    def open(cls, path: Path) -> _Resolver:
        """The resolver of the bench directory at ``path`` (where a worker runs its jobs)."""
        run = BenchRun.open(path)
        return cls(bench=_bench_of(run.config, run.path), run=run)

    def __call__(self, ref: str) -> _KeepingTask:
        cid, sep, seed = ref.rpartition("@seed-")
        if not sep or not seed.isdigit():
            raise InvalidArgument(f"Expected a bench task reference ID@seed-K but got {ref!r}")
        arm = ""
        if self.run.config.arms:
            cid, sep, arm = cid.rpartition("@arm-")
            if not sep or arm not in {a.name for a in self.run.config.arms}:
                raise InvalidArgument(f"Expected a reference ID@arm-NAME@seed-K but got {ref!r}")
        return _KeepingTask(
            inner=self.bench.task(cid),
            ref=ref,
            keep=self.run.submission_path(cid, int(seed), arm),
            home=self.run.path,
        )


ProgressFn = Callable[[str], None]


@define(eq=False)
class _Live:
    """Progress lines: per run (competition, seed, step, best validation, elapsed, budget
    left) and overall (runs done, medals so far, ETA).
    """

    total: int
    done: int
    medals: int
    emit: ProgressFn
    t0: float = field(factory=time.monotonic)
    finished_here: int = 0
    _last: dict[str, tuple[float, int]] = field(factory=dict)
    board: LiveBoard | None = None

    def run_line(
        self, cid: str, seed: int, p: Progress, steps: int | None, arm: Arm | None = None
    ) -> None:
        """A line when the run commits a step (and a heartbeat every 30 s otherwise); with a
        board, the board is told instead.
        """
        if self.board is not None:
            self.board.progress(cid, seed, p, steps, "" if arm is None else arm.name)
            return
        cid = cid if arm is None else f"{cid} [{arm.name}]"
        key = f"{cid}:{seed}"
        now = time.monotonic()
        last_t, last_step = self._last.get(key, (-math.inf, -1))
        if p.steps_done == last_step and now - last_t < 30.0:
            return
        self._last[key] = (now, p.steps_done)
        best = "-" if p.best_score is None else f"{p.best_score:.5g}"
        fractions = committed_fractions(p, steps)  # the step the line shows, not one proposed
        left = ", ".join(f"{k} {max(0.0, 1 - v):.0%} left" for k, v in sorted(fractions.items()))
        of = f"/{steps}" if steps else ""
        self.emit(
            f"  {cid} seed {seed}: step {p.steps_done}{of}, best valid {best}, "
            f"{now - self.t0:.0f}s elapsed{', ' + left if left else ''}"
        )

    def finished(self, report: GradeReport, arm: Arm | None = None) -> None:
        if self.board is not None:
            self.board.finished(report, "" if arm is None else arm.name)
        self.done += 1
        self.finished_here += 1
        self.medals += int(report.any_medal)
        elapsed = time.monotonic() - self.t0
        remaining = self.total - self.done
        eta = elapsed / self.finished_here * remaining if self.finished_here else math.nan
        medal = report.medal or ("valid" if report.valid_submission else "no valid submission")
        score = "-" if report.score is None else f"{report.score:.5g}"
        self.emit(
            f"[{self.done}/{self.total} runs, {self.medals} medals] {report.competition_id} seed "
            f"{report.seed}: test {score} ({medal}); ETA {eta:.0f}s"
        )


def _budget(config: BenchConfig) -> Budget:
    from openmle.search import Budget

    return Budget.from_dict(dict(config.budget))


async def _one(
    run: BenchRun,
    bench: Benchmark,
    cid: str,
    seed: int,
    *,
    model: OperatorModel,
    sandbox: Sandbox,
    limiter: anyio.CapacityLimiter,
    live: _Live,
    arm: Arm | None = None,
    priors: PriorLibrary | None = None,
    summary_model: OperatorModel | None = None,
) -> GradeReport:
    """One (competition, seed[, arm]) run: search (or resume), grade, keep, report."""
    name = "" if arm is None else arm.name
    rd = run.run_dir(cid, seed, name)
    _real_dirs(run, cid, seed, name)
    task = bench.task(cid)
    leaderboard = task.leaderboard  # None: no medals (the score is reported as is)
    steps = run.config.budget.get("steps")

    def progress(p: Progress) -> None:
        live.run_line(cid, seed, p, steps, arm)

    result = await _search(
        run,
        task,
        _ref(cid, seed, name),
        rd,
        seed=seed,
        model=model,
        sandbox=sandbox,
        limiter=limiter,
        progress=progress,
        arm=arm,
        priors=priors if (arm is None or arm.priors) else None,
        summary_model=summary_model,
    )
    kept = run.submission_path(cid, seed, name)
    report = _report_of(result, cid, seed, leaderboard, kept=kept, root=run.path)
    _write_result(rd / RESULT, report, result)
    live.finished(report, arm)
    return report


def _real_dirs(run: BenchRun, cid: str, seed: int, arm: str) -> None:
    """Make the run's and its submission's directories, refusing a link among them (a bench
    directory from elsewhere with ``runs -> /home/me`` would send the run's files there).

    Raises:
        InvalidArgument: a directory of the run is a symbolic link or not a directory.
    """
    for top in ("runs", "submissions"):
        try:
            ensure_dir(run.path, top, *([arm] if arm else []), cid, f"seed-{seed}")
        except OSError as exc:
            raise InvalidArgument(
                f"{exc.strerror or exc} (bench directory {str(run.path)!r})"
            ) from None


async def _search(
    run: BenchRun,
    task: BenchTask,
    ref: str,
    rd: Path,
    *,
    seed: int,
    model: OperatorModel,
    sandbox: Sandbox,
    limiter: anyio.CapacityLimiter,
    progress: Callable[[Progress], None],
    arm: Arm | None,
    priors: PriorLibrary | None,
    summary_model: OperatorModel | None = None,
) -> SearchResult:
    """The run's search: resumed when its directory holds a manifest, else started (a
    directory without one was killed while being made: nothing was journalled; it is cleared
    unless another driver is making the run, which fails this one).
    """
    from openmle.search import ResumeSpec, SearchConfig, SearchSpec, aresume_search, arun_search

    hib = task.higher_is_better
    selector, prompts = await anyio.to_thread.run_sync(_search_parts, run.config, task, hib)
    if summary_model is not None:
        from openmle.search import SummaryStore

        prompts = attrs.evolve(prompts, summaries=SummaryStore(model=summary_model))
    from openmle.search import reset_unstarted_run_dir

    if await anyio.to_thread.run_sync(reset_unstarted_run_dir, rd):
        resume = ResumeSpec(
            model=model,
            sandbox=sandbox,
            selector=selector,
            prompts=prompts,
            description=task.description,
            priors_sha256=None if priors is None else priors.content_hash,
        )
        return await aresume_search(rd, resume, limiter=limiter, on_progress=progress)
    cfg = run.config
    spec = SearchSpec(
        task=ref,
        model=model,
        sandbox=sandbox,
        budget=_budget(cfg),
        config=SearchConfig(
            seed=seed,
            timeout_s=task.time_limit_s,
            islands=cfg.islands,
            max_debug_depth=cfg.search.get("max_debug_depth", SearchConfig().max_debug_depth),
        ),
        selector=selector,
        prompts=prompts,
        workers=cfg.workers if arm is None else arm.workers,
        ordered=True,
        higher_is_better=hib,
        description=task.description,
        resources=task.resources,
        time_limit_s=task.time_limit_s,
        manifest_extra={
            "bench": {"competition_id": task.name, "seed": seed}
            | ({"arm": arm.to_dict()} if arm is not None else {})
        },
        priors=(
            None if priors is None else priors.for_search(task=ref, description=task.description)
        ),
    )
    return await arun_search(spec, run_dir=rd, limiter=limiter, on_progress=progress)


def _report_of(
    result: SearchResult,
    cid: str,
    seed: int,
    leaderboard: Leaderboard | None,
    *,
    kept: Path,
    root: Path,
) -> GradeReport:
    """The run's report: MLE-bench's fields against ``leaderboard``, or (none) the score as
    is without medals; ``kept`` is the graded test submission the bench kept.
    """
    test = result.test_result
    score = test.score if test is not None and test.outcome is Outcome.SUCCESS else None
    if score is not None:
        reason = ""
    elif test is None:
        reason = "no program succeeded on validation"
    else:
        reason = test.detail or test.outcome.value
    exists = kept.is_file()
    kept_rel = str(kept.relative_to(root)) if exists else ""
    if leaderboard is not None:
        return competition_report(
            cid,
            score,
            leaderboard,
            submission_exists=exists,
            submission_path=kept_rel,
            seed=seed,
            reason=reason,
        )
    return GradeReport(
        task=cid,
        score=score,
        valid=score is not None,
        submission_exists=exists,
        created_at=_dt.datetime.now(_dt.UTC).isoformat(),
        submission_path=kept_rel,
        seed=seed,
        reason=reason,
    )


def _write_result(path: Path, report: GradeReport, result: SearchResult) -> None:
    """``bench_result.json``: the report and what the search spent (written once, atomically)."""
    data = {
        "report": bench_dict(report),
        "best_node": None if result.best is None else result.best.node_id,
        "best_valid_score": result.best_valid_score,
        "nodes": len(result.nodes),
        "stop_reason": result.stop_reason,
        "spent": dict(result.spent),
    }
    _atomic_write(path, json.dumps(data, indent=2, sort_keys=True))


PREVIEW_CHARS = 6_000
"""The data preview's character budget in a Draft prompt."""


def _search_parts(
    config: BenchConfig, task: BenchTask, hib: bool
) -> tuple[ThreeFactorSelector | None, OperatorPrompts]:
    """The selector and prompt builder every run of the bench uses (``BenchConfig.search``):
    selection weights by preset name (None: the search's default), per-operator prompt caps,
    and the data preview of the split the program reads (validation), built from the public
    directory only, the task's private paths excluded (blocking I/O: call off the loop).
    """
    from openmle.gym import data_preview
    from openmle.operators import PromptBudget
    from openmle.search import OperatorPrompts, ThreeFactorSelector

    st = config.search
    selector = (
        ThreeFactorSelector.preset(str(st["selector"]), higher_is_better=hib)
        if st.get("selector")
        else None
    )
    preview = ""
    if st.get("data_preview", True):
        with contextlib.suppress(OpenMLEError, OSError):
            preview = data_preview(
                task.public_dir(Split.VALID),
                exclude=tuple(task.private_paths),
                max_chars=PREVIEW_CHARS,
            )
    budget = PromptBudget(operator_max_chars=dict(st.get("prompt_chars") or {}))
    return selector, OperatorPrompts(budget=budget, data_preview=preview)


def validation_protocol(config: BenchConfig) -> str:
    """VALIDATION: the one place the bench says which validation protocol a preset's
    ``validation`` field is compared with: ``config.validation`` (``auto``: per competition,
    ``split`` where openmle ships a rule, else ``self``; ``split``; ``self``, the paper's). The
    protocol of each competition is in the manifest's ``validation``.
    """
    return config.validation


def preset_search(preset: Preset) -> dict[str, Any]:
    """The ``BenchConfig.search`` settings of an :class:`openmle.search.Preset`."""
    return {
        "max_debug_depth": preset.max_debug_depth,
        "selector": preset.selector,
        "prompt_chars": dict(preset.prompt_chars),
        "data_preview": preset.data_preview,
        "gpu_memory_gb": preset.gpu_memory_gb,
    }


def preset_deviations(preset: Preset, config: BenchConfig) -> BenchConfig:
    """``config`` with its preset recorded and every value that differs from the preset's
    listed in ``deviations`` (budget caps, per-program limit, seeds, search settings, the
    validation protocol actually used).
    """
    from openmle.search import SearchConfig

    b = config.budget
    st = config.search
    used = {
        "steps": b.get("steps"),
        "sandbox_s": b.get("sandbox_s"),
        "wall_s": b.get("wall_s"),
        "time_limit_s": config.time_limit_s,
        "seeds": len(config.seeds),
        "max_debug_depth": st.get("max_debug_depth", SearchConfig().max_debug_depth),
        "selector": st.get("selector", "released"),
        "prompt_chars": dict(st.get("prompt_chars") or {}),
        "data_preview": bool(st.get("data_preview", True)),
        "gpu_memory_gb": st.get("gpu_memory_gb"),
        "budget_line": True,
        "validation": validation_protocol(config),
    }
    deviations: Mapping[str, Any] = preset.deviations(used)
    return attrs.evolve(config, preset=preset.to_dict(), deviations=deviations)


def _words(v: Any) -> str:
    if isinstance(v, Mapping):
        return " ".join(f"{k}={x}" for k, x in v.items()) or "(none)"
    return str(v)


def deviation_lines(config: BenchConfig) -> list[str]:
    """Every way the bench departs from its reference, in words, one line each: the preset's
    fields the bench does not hold (``field: preset value -> used value``) and an explicit
    ``--gpus`` override of the tasks' own GPU demand. The manifest's one ``deviations`` record
    and the report's lines are both this list.
    """
    out = [
        f"{k}: preset {_words(d.get('preset'))} -> used {_words(d.get('used'))}"
        for k, d in config.deviations.items()
        if isinstance(d, Mapping)
    ]
    if config.gpus_override is not None:
        out.append(
            f"--gpus {config.gpus_override}: every program run gets "
            f"{config.gpus_override} GPU(s), whatever its task demands"
        )
    return out


def preset_lines(config: BenchConfig) -> list[str]:
    """The report's lines about the preset: its name and fields, whether the bench deviates
    from it (the deviations themselves are :func:`deviation_lines`, listed once from the
    manifest), and the validation protocol. Without a preset, an MLE-bench report says that
    its numbers are not the paper's operating point and where they differ from it
    (:func:`_paper_gap_line`); other benchmarks get no line.
    """
    p = config.preset
    if not isinstance(p, Mapping):
        return [_paper_gap_line(config)] if config.benchmark == "mle-bench" else []
    fields = ", ".join(f"{k} {_words(v)}" for k, v in p.items() if k != "name")
    out = [f"preset: {p.get('name')} ({fields})"]
    if not deviation_lines(config):
        out.append("deviations from the preset: none")
    out.append(f"validation protocol: {validation_protocol(config)}")
    return out


def _paper_gap_line(config: BenchConfig) -> str:
    """One line for a bench run without a preset: not the paper's operating point, and each
    setting that differs from ``--preset paper``'s (``field: paper value -> used value``, the
    preset's deviations computed as for a bench run with it).
    """
    from openmle.search import Preset

    gaps = preset_deviations(Preset.named("paper"), config).deviations
    words = "; ".join(
        f"{k}: paper {_words(d.get('preset'))} -> used "
        f"{'none' if d.get('used') is None else _words(d.get('used'))}"
        for k, d in gaps.items()
        if isinstance(d, Mapping)
    )
    return "preset: none; not the paper's operating point (--preset paper runs it)" + (
        f", it differs in {words}" if words else ""
    )


async def _slots(sandbox: Sandbox) -> int:
    from openmle.bench._engines import engine_slots

    return await engine_slots(sandbox)


SandboxFactory = Callable[[Callable[[str], Any]], Any]
"""Builds a sandbox from the bench's task resolver (``resolver(job.task) -> TaskHandle``)."""


def bench_sandbox(spec: str) -> SandboxFactory:
    """The sandbox factory for a ``--sandbox`` spec, through the one sandbox registry
    (:func:`openmle.backends.make_sandbox`, the grammar of ``openmle search --sandbox``):
    ``local``, ``docker``, ``ray`` (each job a Ray task with its resources; the workers open
    the bench directory at the same path), ``service:URL`` (a job service started with
    ``--sandbox openmle.bench:bench_task_sandbox``), or a ``module:callable`` /
    ``openmle.sandboxes`` entry point whose factory takes a ``resolver`` keyword.

    Raises:
        InvalidArgument: the spec names no sandbox, or one that can neither take the bench's
            task resolver nor run on a job service.
    """
    from openmle.bench._engines import sandbox_factory

    return sandbox_factory(spec)


async def _open_bench(
    path: str | os.PathLike[str],
    config: BenchConfig | None,
    bench: Benchmark | None,
    *,
    check_gpus: bool,
) -> tuple[BenchRun, Benchmark, PriorLibrary | None]:
    """The bench directory (made from ``config``, or opened to resume), its benchmark and its
    prior library, after the preflight (a problem stops the bench before its first step).
    """
    if config is not None:
        BenchRun.refuse_used(path)  # before the preflight builds views under it
        bench = bench or _bench_of(config, Path(path))
        library = await anyio.to_thread.run_sync(_library, config, bench)
        if library is not None and config.priors_sha256 is None:
            config = attrs.evolve(config, priors_sha256=library.content_hash)
        await anyio.to_thread.run_sync(preflight, config, bench, check_gpus)
        return BenchRun.create(path, config, bench), bench, library
    run = BenchRun.open(path)
    bench = bench or _bench_of(run.config, run.path)
    library = await anyio.to_thread.run_sync(_library, run.config, bench)
    await anyio.to_thread.run_sync(preflight, run.config, bench, check_gpus)
    return run, bench, library


def _live_for(
    states: Sequence[RunStatus], emit: ProgressFn | None, board: LiveBoard | None
) -> _Live:
    """The progress of a bench whose runs stand at ``states`` (the board, if any, started)."""
    live = _Live(
        total=len(states),
        done=sum(s.state == "done" for s in states),
        medals=sum(bool(s.report and s.report.any_medal) for s in states),
        emit=emit or (lambda _line: None),
        board=board,
    )
    if board is not None:
        board.start(
            total=live.total,
            done=live.done,
            valid=sum(bool(s.report and s.report.valid_submission) for s in states),
            medals=live.medals,
        )
    return live


async def arun_bench(
    path: str | os.PathLike[str],
    *,
    model: OperatorModel | None,
    config: BenchConfig | None = None,
    sandbox: SandboxFactory | None = None,
    bench: Benchmark | None = None,
    emit: ProgressFn | None = None,
    board: LiveBoard | None = None,
    only: Iterable[tuple[str, int, str]] | None = None,
    summary_model: OperatorModel | None = None,
) -> list[GradeReport]:
    """Run a new bench (``config`` given) or finish the one at ``path``: every run, once.

    With ``config`` a new bench directory is made at ``path``; without, the bench at ``path``
    is resumed (finished runs untouched, interrupted ones resumed, the rest started).

    Args:
        path: the bench directory.
        model: an :class:`openmle.OperatorModel` (the CLI builds it from ``config.model``);
            None only when there is nothing to run (``only=()``: make the directory).
        config: the bench to start; None to resume the one at ``path``.
        sandbox: builds the sandbox from the bench's task resolver (default: from
            ``config.sandbox``, see :func:`bench_sandbox`); the sandbox is closed at the end.
        bench: the registry and data (default: from the config; validation views under
            ``BENCH_DIR/valid``).
        emit: receives progress lines (default: none).
        board: a live display (:class:`openmle.bench.LiveBoard`) told of every run's start,
            steps and end; the per-step lines then go to it instead of ``emit``.
        only: run just these ``(competition, seed, arm)`` (arm "" without arms); the others
            are left as they are (a job array's task runs one). None: every unfinished run.
        summary_model: the operator model writing node summaries (``config.summary_model``;
            the CLI builds it from the spec). None with a ``summary_model`` spec: ``model``.

    Returns:
        Every run's report, competitions in order, then seeds (runs that did not finish are
        reported as failures).

    Raises:
        InvalidArgument: a bad config, a non-empty new directory, not a bench directory, or
            ``model=None`` with runs to do.
    """
    # a new bench's sandbox spec is checked before its directory is made (nothing written)
    factory = sandbox or (None if config is None else bench_sandbox(config.sandbox))
    run, bench, library = await _open_bench(path, config, bench, check_gpus=sandbox is None)
    cfg = run.config
    states = run.status()
    todo = _todo(states, only, model)
    box = (factory or bench_sandbox(cfg.sandbox))(_Resolver(bench=bench, run=run))
    live = _live_for(states, emit, board)
    arms = {a.name: a for a in cfg.arms}
    live.emit(
        f"openmle bench: {len(states)} runs ({len(cfg.competitions)} competitions x "
        f"{len(cfg.seeds)} seeds{f' x {len(arms)} arms' if arms else ''}), {len(todo)} to do, "
        f"writing {run.path}"
    )
    runs_at_once = await _engine_ready(box, cfg.concurrency, bool(todo))
    gate = anyio.Semaphore(runs_at_once)
    most = max([cfg.workers, *(a.workers for a in cfg.arms)])
    limiter = anyio.CapacityLimiter(runs_at_once * most)

    async def one(s: RunStatus, model: OperatorModel) -> None:
        async with gate:
            if board is not None:
                board.started(s.competition_id, s.seed, s.arm)
            try:
                await _one(
                    run,
                    bench,
                    s.competition_id,
                    s.seed,
                    model=model,
                    sandbox=box,
                    limiter=limiter,
                    live=live,
                    arm=arms.get(s.arm),
                    priors=library,
                    summary_model=summary_model or (model if cfg.summary_model else None),
                )
            except OpenMLEError as exc:  # a broken competition fails its runs, not the bench
                live.emit(f"  {s.competition_id} seed {s.seed}: not finished: {exc}")
                if board is not None:
                    board.failed(s.competition_id, s.seed, str(exc), s.arm)

    try:
        async with anyio.create_task_group() as tg:
            if model is not None:  # None: nothing to do (checked above)
                for s in todo:
                    tg.start_soon(one, s, model)
    finally:
        with anyio.CancelScope(shield=True):
            await box.aclose()
    return [
        s.report or GradeReport.missing(s.competition_id, seed=s.seed, reason=s.state)
        for s in run.status()
    ]


async def _engine_ready(box: Sandbox, concurrency: int | None, todo: bool) -> int:
    """Runs at once on ``box`` (``concurrency``, else the engine's slots), after its
    preflight when there is something to do: an engine that cannot answer (a job service's
    wrong address or key) stops the bench here, not as an infrastructure error at every step
    of every run. ``box`` is closed when this raises.
    """
    try:
        if todo:
            from openmle.search import preflight_sandbox

            await preflight_sandbox(box)
        return concurrency or (await _slots(box) if todo else 1)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await box.aclose()
        raise


def _todo(
    states: Sequence[RunStatus],
    only: Iterable[tuple[str, int, str]] | None,
    model: OperatorModel | None,
) -> list[RunStatus]:
    """The runs not done among ``only`` (``(competition, seed, arm)``; None: all).

    Raises:
        InvalidArgument: there is a run to do and no ``model``.
    """
    picked = None if only is None else {(c, int(k), a) for c, k, a in only}
    todo = [
        s
        for s in states
        if s.state != "done" and (picked is None or (s.competition_id, s.seed, s.arm) in picked)
    ]
    if model is None and todo:
        raise InvalidArgument(
            f"arun_bench(model=None) has {len(todo)} runs to do: pass an OperatorModel "
            "(model=None only with only=(), which makes the bench directory and runs nothing)"
        )
    return todo


def _gpus_here() -> int:
    """GPUs a local or Docker sandbox may lease here (:func:`openmle.backends.visible_gpus`)."""
    return len(visible_gpus(os.environ))


def preflight(config: BenchConfig, bench: Benchmark, own_sandbox: bool = True) -> None:
    """Stop a bench before its first step when a competition cannot run: its data cannot be
    prepared (for MLE-bench's ``split`` protocol: its validation view cannot be built), or it
    needs more GPUs per program run than this machine offers (checked for the local and Docker
    sandboxes this bench builds itself, ``own_sandbox``). A benchmark with a
    ``data_problem(ids)`` method (MLE-bench's :meth:`MLEBench.data_problem`) is asked first
    whether its data folder serves any of the competitions at all.

    Raises:
        InvalidArgument: the data folder serves none of the competitions (one line, the real
            cause), or one error counting the competitions that cannot run and naming the
            first ones' causes and fixes.
    """
    data_problem = getattr(bench, "data_problem", None)  # optional: see Benchmark
    problem = data_problem(config.competitions) if callable(data_problem) else None
    if problem is not None:  # a wrong data folder: one cause, not one line per competition
        raise InvalidArgument(str(problem))
    problems: list[str] = []
    have = _gpus_here() if own_sandbox and config.sandbox in {"local", "docker"} else None
    for cid in config.competitions:
        try:
            task = bench.task(cid)
            problem = task.preflight()
            if problem is not None:
                problems.append(f"{cid}: {problem}")
                continue
            need = task.resources.gpus
        except OpenMLEError as exc:
            problems.append(f"{cid}: cannot be prepared ({exc})")
            continue
        if have is not None and need > have:
            problems.append(
                f"{cid}: needs {need} GPU(s) per program run but this machine offers {have}; "
                "pass --gpus N to override the demand (recorded as a deviation) or run where "
                "the GPUs are"
            )
    if problems:
        raise InvalidArgument(
            f"{len(problems)} of {len(config.competitions)} competitions cannot run, so the "
            f"bench did not start: {_listed(problems)}"
        )


_SHOWN = 3
_PROBLEM_CHARS = 600
"""At most this many competitions' causes are spelled out in the preflight's error."""


def _listed(problems: Sequence[str]) -> str:
    """``problems`` (one per competition, ``<id>: <cause>``), bounded: the first
    :data:`_SHOWN` in full (each at most :data:`_PROBLEM_CHARS` characters: a longer one
    loses its middle, so that the fix at its end stays), then the count of the others and the
    first few of their ids.
    """
    half = (_PROBLEM_CHARS - 5) // 2
    shown = "; ".join(
        p if len(p) <= _PROBLEM_CHARS else f"{p[:half]} ... {p[-half:]}" for p in problems[:_SHOWN]
    )
    rest = [p.split(":", 1)[0] for p in problems[_SHOWN:]]
    if not rest:
        return shown
    ids = ", ".join(rest[:5]) + (", ..." if len(rest) > 5 else "")
    return f"{shown}; and {len(rest)} more competition(s) ({ids})"


def _library(config: BenchConfig, bench: Benchmark | None = None) -> PriorLibrary | None:
    """The bench's prior library (None without one), checked against the recorded hash and
    against every competition of the bench (:func:`check_priors_clean`, with each
    competition's name and data hashes from ``bench`` when given).
    """
    if config.priors is None:
        return None
    from openmle.priors import load_library

    library = load_library(config.priors)
    if config.priors_sha256 is not None and library.content_hash != config.priors_sha256:
        raise InvalidArgument(
            f"the prior library {config.priors!r} changed since the bench was made (sha256 "
            f"{library.content_hash[:16]}... instead of {config.priors_sha256[:16]}...); "
            "restore it, or start a new bench: runs with different priors are not comparable"
        )
    check_priors_clean(
        library,
        config.competitions,
        known=(
            {}
            if bench is None
            else {cid: competition_exclusions(bench, cid) for cid in config.competitions}
        ),
    )
    return library


_HASH_FILES = 256
"""At most this many public data files of a competition are hashed (sorted by path)."""


def _file_hashes(path: Path) -> tuple[str, str]:
    """The file's SHA-256 and ``md5:<hex>`` (MLE-bench's checksums are MD5s), in one pass."""
    h = hashlib.sha256()
    m = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
            m.update(chunk)
    return h.hexdigest(), f"md5:{m.hexdigest()}"


def competition_exclusions(bench: Benchmark, cid: str) -> Exclusions:
    """What identifies competition ``cid`` to the decontamination check: its id, its human
    name (MLE-bench's ``config.yaml`` ``name``), and data hashes: the SHA-256 of its
    description (what a run's manifest records as ``description_sha256``, so priors made
    from runs on it match) and the SHA-256 and MD5 (``md5:<hex>``, as MLE-bench's
    ``checksums.yaml`` and the shipped list record them) of each public data file of its
    test split (the first
    256 regular files under ``prepared/public``, NatureBench: ``problem/data``, sorted by path;
    symbolic links are not followed).

    A competition the bench cannot open is identified by its id alone (its runs fail
    later with the reason).
    """
    names: list[str] = []
    hashes: list[str] = []
    with contextlib.suppress(OpenMLEError, OSError, ValueError):
        task = bench.task(cid)
        names.extend(task.known_names)
        description = task.description
        if description:
            hashes.append(hashlib.sha256(description.encode()).hexdigest())
        public = task.public_dir(Split.TEST)
        if public.is_dir() and not public.is_symlink():
            files = sorted(p for p in public.rglob("*") if p.is_file() and not p.is_symlink())[
                :_HASH_FILES
            ]
            for f in files:
                with contextlib.suppress(OSError):
                    hashes.extend(_file_hashes(f))
    return Exclusions(ids=[cid], names=names, data_hashes=hashes, suite=f"bench:{cid}")


_HEX64 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$|^(md5:[0-9a-f]{32})$")


def check_priors_clean(
    library: PriorLibrary,
    competitions: Iterable[str],
    *,
    known: Mapping[str, Exclusions] | None = None,
) -> None:
    """Refuse to evaluate on a competition the priors were made from, with the one shared
    decontamination rule (:class:`openmle.priors.Exclusions`).

    A prior is about competition ``cid`` when one of its ``source_ids`` equals the id or
    the competition's name (compared normalised: lower case, punctuation as ``-``); when a
    data hash in its ``source_ids`` (64 hex digits, optionally ``sha256:``-prefixed, or
    ``md5:<32 hex>``) is one of the competition's data hashes (``known``); or when the id
    or the name is mentioned as whole words in its ``source``, its ``source_ids`` (so a
    bench reference ``ID@seed-K`` matches) or its advice text.

    Args:
        library: an :class:`openmle.priors.PriorLibrary`.
        competitions: the ids the bench evaluates on.
        known: per competition id, its name(s) and data hashes
            (:func:`competition_exclusions`; ``arun_bench`` computes them from the bench).
            A competition without an entry is matched by its id alone.

    Raises:
        InvalidArgument: a prior is about one of the competitions; the message names the
            competition, the prior, its source and what matched.
    """
    known = known or {}
    for cid in competitions:
        excl = Exclusions(ids=[cid], suite=cid) | known.get(cid, Exclusions())
        for prior in library.priors:
            hashes = [
                m.group(1) or m.group(2)
                for s in prior.source_ids
                if (m := _HEX64.match(s.strip().lower()))
            ]
            why = excl.match(
                name=prior.source,
                text=" ".join((*prior.source_ids, prior.text)),
                data_hashes=hashes,
                related_ids=prior.source_ids,
            )
            if why is not None:
                raise InvalidArgument(
                    f"refusing to evaluate on {cid!r}: it appears in the provenance of prior "
                    f"{prior.prior_id!r} (source {prior.source!r}; {why}); build the library "
                    f"without it (openmle.priors.Exclusions) or leave {cid!r} out of the bench"
                )


def _bench_of(config: BenchConfig, path: Path) -> Benchmark:
    """The benchmark a bench runs (:class:`openmle.bench.BenchmarkKind` ``open``)."""
    return benchmark_kind(config.benchmark).open(config, path)
