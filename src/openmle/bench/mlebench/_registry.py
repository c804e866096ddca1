"""MLE-bench competitions as openmle tasks, without copying their data.

Inputs:

- a *registry*: an MLE-bench checkout (``<repo>/mlebench/competitions/<id>/config.yaml``,
  ``leaderboard.csv``, ``grade.py``, ``prepare.py``, ``description.md`` and
  ``<repo>/experiments/splits/*.txt``) or the installed ``mlebench`` package (found without
  importing it);
- a *data directory* prepared by ``mlebench prepare``: ``<data>/<id>/prepared/public`` (what an
  agent sees) and ``<data>/<id>/prepared/private`` (the answers).

Each competition becomes an :class:`MLEBenchTask` (an :class:`openmle._task_protocol.TaskHandle`):

- ``test``: the program reads ``prepared/public`` in place (read-only); the answers in
  ``prepared/private`` are never mounted.
- ``valid``: the split search selects on (``validation="split"``). A competition may ship one
  (``<data>/<id>/prepared/valid/{public,private}``); otherwise it is built once from the
  competition's rule (:mod:`openmle.bench.mlebench._rules`, applied by
  :func:`openmle.bench.mlebench.build_validation_view`) in the confined grading process, under
  ``valid_dir``, keyed by the public data's listing and the rule. Under ``validation="self"`` the
  program reads ``prepared/public``, holds out its own part (the instruction is appended to the
  description) and prints its score; the valid grade only checks the submission's format.
- Grading runs the competition's own ``grade_fn(submission_df, answers)`` from the registry in
  gym's confined grading process (:func:`openmle.gym.run_child` running
  :mod:`openmle.bench.mlebench.child`: fixed environment, memory and CPU limits, its own session,
  killed at the deadline or on cancellation). pandas reads the CSV with
  ``float_precision="round_trip"`` and the answers as CSV or JSONL, as MLE-bench does. An
  exception gives an invalid submission: MLE-bench's ``InvalidSubmissionError`` message masked
  (:func:`openmle.bench.mlebench.mask_reason`), other errors only by type.
- The leaderboard is the registry's ``leaderboard.csv``; medals follow
  :func:`openmle.bench.competition_report`.

Nothing here downloads anything; without a registry the error says what to install.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from attrs import define, field, frozen

from openmle._trees import remove_tree
from openmle._types import Resources, Split, check_split
from openmle.bench._medals import Leaderboard
from openmle.bench._suites import KNOWN_ISSUES, LITE_IDS, SUITE_FILES, SUITES
from openmle.bench.mlebench._grade import (
    build_view_confined,
    check_format_confined,
    grade_confined,
)
from openmle.bench.mlebench._rules import LITE_RULES
from openmle.bench.mlebench._views import rule_for
from openmle.errors import InvalidArgument, MissingDependency, TaskPackageError
from openmle.gym import GradeLimits, GradeReport, cache_root

if TYPE_CHECKING:
    from openmle.bench._runner import BenchConfig

__all__ = [
    "INSTALL_HINT",
    "VALIDATION_PROTOCOLS",
    "Competition",
    "MLEBench",
    "MLEBenchTask",
    "SelfScored",
    "git_output",
    "protocol_lines",
]


VIEW_ENGINE_VERSION = 1
"""Bumped when the validation-view engine changes what it writes (rebuilds cached views)."""

VALIDATION_PROTOCOLS = ("auto", "split", "self")
"""How search scores candidates: ``split`` (a held-out view graded by the competition's
grader), ``self`` (the program's own printed validation score), ``auto`` (split when possible)."""

INSTALL_HINT = (
    "install MLE-bench (`git clone https://github.com/openai/mle-bench && cd mle-bench && "
    "git lfs fetch --all && git lfs pull && pip install -e .`) or pass the checkout with "
    "--registry PATH"
)


def _load_yaml(path: Path) -> dict[str, Any]:
    """A registry YAML file: with PyYAML when installed, else with the reader of the subset
    MLE-bench's ``config.yaml``/``checksums.yaml`` use (:mod:`openmle.bench._miniyaml`).
    """
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        from openmle.bench._miniyaml import load

        try:
            data = load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise TaskPackageError(
                f"{path}: cannot read it ({exc}); PyYAML reads all of YAML: pip install pyyaml"
            ) from None
    else:
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise TaskPackageError(f"{path}: cannot read it ({exc})") from None
    if not isinstance(data, dict):
        raise TaskPackageError(f"{path}: expected a mapping at the top level")
    return data


def git_output(repo: Path, *args: str, timeout: float = 30) -> bytes | None:
    """The standard output of ``git -C repo ARGS`` in the git checkout ``repo``, or None (no
    git, not a checkout, git failed or took over ``timeout`` seconds).
    """
    git = shutil.which("git")
    if git is None or not (repo / ".git").exists():
        return None
    try:
        out = subprocess.run(
            [git, "-C", str(repo), *args],
            capture_output=True,
            timeout=timeout,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _git_commit(root: Path) -> str | None:
    out = git_output(root, "rev-parse", "HEAD", timeout=10)
    sha = "" if out is None else out.decode(errors="replace").strip()
    return sha if len(sha) == 40 else None


def _under(rel: str, marker: str) -> str | None:
    """The part of ``rel`` after ``marker`` (``a/prepared/private/x.csv`` -> ``x.csv``)."""
    parts = Path(rel).as_posix().split(f"/{marker}/", 1)
    return parts[1] if len(parts) == 2 else None


def _resolved(p: str | os.PathLike[str]) -> Path:
    return Path(p).expanduser().resolve()


@final
@frozen(kw_only=True)
class Competition:
    """One registry entry (``config.yaml``), with paths resolved."""

    id: str
    name: str
    competition_type: str
    repo_root: Path
    directory: Path
    description_path: Path
    answers: str
    sample_submission: str
    grade_fn: str
    preparer: str | None
    leaderboard_path: Path
    checksums_path: Path

    @property
    def known_issue(self) -> str | None:
        """MLE-bench's listed problem with this competition, if any."""
        return KNOWN_ISSUES.get(self.id)


@final
@define(eq=False)
class MLEBench:
    """An MLE-bench registry plus a prepared data directory.

    Args:
        repo_root: the directory holding the ``mlebench`` package (a checkout's root, or
            site-packages for an installed copy).
        data_dir: the directory ``mlebench prepare`` wrote (``<id>/prepared/...``).
        valid_dir: where validation views are built (default: ``data_dir/../openmle-valid``
            is avoided; the default is ``$OPENMLE_CACHE``/``~/.cache/openmle`` ``/mlebench-valid``).
        resources: what each program run may use (the hardware the comparison assumes).
        time_limit_s: the wall-clock limit of one program run.
        grade_timeout_s: the wall-clock limit on one grading process.
        grade_memory_mb: the address-space limit of one grading process (MiB).
        grade_max_bytes: the largest submission the grader reads (bytes); a larger one is an
            invalid submission naming the limit.
        view_timeout_s: the wall-clock limit on building one validation view.
        view_memory_mb: the address-space limit of the process building a view (MiB).
        validation: ``split`` (search selects on the held-out view this package builds),
            ``self`` (the program holds out its own part as the competition's instruction in
            the description says and prints ``Final Validation Score: <number>``; search
            selects on that), or ``auto`` (split when a rule or a shipped view exists, else
            self).
        python: kept for compatibility; grading runs in this interpreter
            (:func:`openmle.gym.run_child`), which needs pandas and the registry's imports.
    """

    repo_root: Path = field(converter=_resolved)
    data_dir: Path = field(converter=_resolved)
    valid_dir: Path | None = None
    resources: Resources = field(factory=Resources)
    time_limit_s: float = 3600.0
    grade_timeout_s: float = 600.0
    grade_memory_mb: int = 8192
    grade_max_bytes: int = 512 * 1024 * 1024
    view_timeout_s: float = 7200.0
    view_memory_mb: int = 16384
    validation: str = field(default="auto")
    python: str = field(factory=lambda: sys.executable)
    _tasks: dict[str, MLEBenchTask] = field(factory=dict, init=False)
    _lock: threading.Lock = field(factory=threading.Lock, init=False)

    @validation.validator
    def _check_validation(self, _attr: object, value: str) -> None:
        if value not in VALIDATION_PROTOCOLS:
            raise InvalidArgument(
                f"Expected --validation to be one of {list(VALIDATION_PROTOCOLS)} but got {value!r}"
            )

    # ------------------------------------------------------------------ construction

    @classmethod
    def locate(
        cls,
        registry: str | os.PathLike[str] | None,
        data_dir: str | os.PathLike[str],
        **kwargs: Any,
    ) -> MLEBench:
        """Find the registry: ``registry`` (a checkout or its ``mlebench`` folder) or the
        installed ``mlebench`` package.

        Raises:
            MissingDependency: no registry given and ``mlebench`` is not installed (says what
                to install).
            InvalidArgument: ``registry`` is not an MLE-bench checkout.
        """
        if registry is not None:
            p = Path(registry).expanduser().resolve()
            if (p / "mlebench" / "competitions").is_dir():
                return cls(p, data_dir, **kwargs)
            if p.name == "mlebench" and (p / "competitions").is_dir():
                return cls(p.parent, data_dir, **kwargs)
            raise InvalidArgument(
                f"Expected --registry to be an MLE-bench checkout (with mlebench/competitions) "
                f"but got {str(p)!r}; {INSTALL_HINT}"
            )
        spec = importlib.util.find_spec("mlebench")
        if spec is None or not spec.submodule_search_locations:
            raise MissingDependency(f"MLE-bench is not installed; {INSTALL_HINT}")
        pkg = Path(next(iter(spec.submodule_search_locations))).resolve()
        return cls(pkg.parent, data_dir, **kwargs)

    @property
    def competitions_dir(self) -> Path:
        """``mlebench/competitions`` of the registry."""
        return self.repo_root / "mlebench" / "competitions"

    @property
    def commit(self) -> str | None:
        """The registry's git commit, when it is a git checkout."""
        return _git_commit(self.repo_root)

    def _valid_root(self) -> Path:
        if self.valid_dir is not None:
            return Path(self.valid_dir).resolve()
        return cache_root() / VIEW_CACHE

    # ------------------------------------------------------------------ suites

    def ids(self) -> list[str]:
        """Every competition id in the registry, sorted."""
        if not self.competitions_dir.is_dir():
            return []
        return sorted(p.parent.name for p in self.competitions_dir.glob("*/config.yaml"))

    def suite(self, spec: str | Sequence[str]) -> list[str]:
        """The competition ids of a suite name (``mle-bench-lite``, ``-medium``, ``-high``,
        ``-all``), a comma-separated list, a file of ids (one a line) or a list of ids.

        Raises:
            InvalidArgument: an unknown suite or a split file that is missing.
        """
        if not isinstance(spec, str):
            return _dedupe(spec)
        if spec == "mle-bench-all":
            return self.ids()
        if spec in SUITE_FILES:
            f = self.repo_root / "experiments" / "splits" / SUITE_FILES[spec]
            if f.is_file():
                return _dedupe(f.read_text(encoding="utf-8").split())
            if spec == "mle-bench-lite":
                return list(LITE_IDS)
            raise InvalidArgument(
                f"Suite {spec!r} needs {f} (MLE-bench's split file); pass an MLE-bench "
                "checkout with --registry"
            )
        path = Path(spec)
        if path.suffix == ".txt" and path.is_file():
            return _dedupe(path.read_text(encoding="utf-8").split())
        ids = _dedupe(s.strip() for s in spec.split(",") if s.strip())
        known = set(self.ids())
        unknown = [i for i in ids if i not in known]
        if unknown:
            near = [
                m for u in unknown for m in difflib.get_close_matches(u, known | set(SUITES), 1)
            ]
            raise InvalidArgument(
                f"Unknown suite or competition(s) {unknown}: give one of {list(SUITES)}, a "
                "comma-separated list of competition ids of the registry, or a .txt file of ids"
                + (f"; did you mean {', '.join(near)}?" if near else "")
            )
        return ids

    def data_problem(self, ids: Sequence[str]) -> str | None:
        """Why ``data_dir`` serves none of ``ids``, in one line naming ``--data`` and the fix:
        it does not exist, or it holds no ``<id>/prepared`` folder of ``ids`` (a wrong or empty
        folder, or the folder above the one ``mlebench prepare`` wrote, which is then named).
        None when at least one competition has its ``prepared`` folder: what each one lacks is
        then :meth:`MLEBenchTask.preflight`'s (and ``bench doctor``'s) to say.
        """
        d = self.data_dir
        if not d.is_dir():
            why = "not a directory" if d.exists() else "no such directory"
            return f"--data {d}: {why}; {_DATA_FIX}"
        if any(_is_dir(d / cid / "prepared") for cid in ids):
            return None
        below, above = _data_below(d, ids), _data_above(d, ids)
        hint = (
            f"; {below} holds them: pass --data {below}"
            if below is not None
            else f"; {d} is inside the data folder {above}: pass --data {above}"
            if above is not None
            else ""
        )
        return f"--data {d} holds none of the suite's <id>/prepared folders ({_DATA_FIX}){hint}"

    # ------------------------------------------------------------------ competitions

    def competition(self, cid: str) -> Competition:
        """The registry entry of ``cid``.

        Raises:
            InvalidArgument: no such competition in the registry.
            TaskPackageError: its ``config.yaml`` is malformed.
        """
        d = self.competitions_dir / cid
        cfg_path = d / "config.yaml"
        if "/" in cid or cid in {"", ".", ".."} or not cfg_path.is_file():
            raise InvalidArgument(
                f"No competition {cid!r} in the MLE-bench registry at {self.repo_root}; "
                "check the id (see `openmle bench doctor mle-bench-all`)"
            )
        cfg = _load_yaml(cfg_path)
        try:
            ds = cfg["dataset"]
            grader = cfg["grader"]
            comp = Competition(
                id=str(cfg.get("id", cid)),
                name=str(cfg.get("name", cid)),
                competition_type=str(cfg.get("competition_type", "")),
                repo_root=self.repo_root,
                directory=d,
                description_path=self.repo_root / str(cfg["description"]),
                answers=str(ds["answers"]),
                sample_submission=str(ds["sample_submission"]),
                grade_fn=str(grader["grade_fn"]),
                preparer=None if cfg.get("preparer") is None else str(cfg["preparer"]),
                leaderboard_path=d / "leaderboard.csv",
                checksums_path=d / "checksums.yaml",
            )
        except (KeyError, TypeError) as exc:
            raise TaskPackageError(f"{cfg_path}: missing key {exc}") from None
        if comp.id != cid:
            raise TaskPackageError(f"{cfg_path}: id {comp.id!r} differs from its folder {cid!r}")
        return comp

    def task(self, cid: str) -> MLEBenchTask:
        """The task of competition ``cid`` (cached)."""
        with self._lock:
            t = self._tasks.get(cid)
        if t is None:
            t = MLEBenchTask(bench=self, competition=self.competition(cid))
            with self._lock:
                t = self._tasks.setdefault(cid, t)
        return t

    def resolve(self, ref: str) -> MLEBenchTask:
        """A :data:`~openmle._task_protocol.TaskResolver`: a competition id -> its task."""
        return self.task(ref)

    def manifest(self) -> dict[str, Any]:
        """What identifies this registry and data (for the bench manifest)."""
        return {
            "registry": str(self.repo_root),
            "mlebench_commit": self.commit,
            "data_dir": str(self.data_dir),
            "resources": self.resources.to_dict(),
            "time_limit_s": self.time_limit_s,
        }

    def manifest_entries(self, competitions: Sequence[str]) -> dict[str, Any]:
        """The bench manifest's ``mlebench`` (:meth:`manifest`) and ``validation`` (each
        competition's protocol) entries.
        """
        return {
            "mlebench": self.manifest(),
            "validation": {cid: self.task(cid).protocol for cid in competitions},
        }


def open_for_bench(config: BenchConfig, path: Path) -> MLEBench:
    """The MLE-bench a bench runs (``BenchConfig.registry``, ``data_dir``, resources, time
    limit and validation protocol; validation views under ``BENCH_DIR/valid``).
    """
    return MLEBench.locate(
        config.registry,
        config.data_dir,
        valid_dir=path / "valid",
        resources=config.resources,
        time_limit_s=config.time_limit_s,
        validation=config.validation,
    )


def _dedupe(ids: Iterable[str]) -> list[str]:
    out: list[str] = []
    for i in ids:
        if i and i not in out:
            out.append(i)
    return out


@final
@frozen(kw_only=True)
class SelfScored:
    """The validation grade under ``--validation self``: the submission's format was checked
    against the public sample submission (no answers read); the score is the one the program
    printed (``self_scored``: see :func:`openmle._runlog.classify_run`).
    """

    task: str
    valid: bool
    reason: str = ""
    score: float | None = None
    split: Split = Split.VALID
    self_scored: bool = True


@final
@define(eq=False)
class MLEBenchTask:
    """One MLE-bench competition as a task (see the module doc)."""

    bench: MLEBench
    competition: Competition
    _leaderboard: Leaderboard | None = field(default=None, init=False)
    _valid_lock: threading.Lock = field(factory=threading.Lock, init=False)
    _protocol: str | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        """The competition id (the ``Job.task`` reference)."""
        return self.competition.id

    @property
    def root(self) -> Path:
        """``<data>/<id>``."""
        return self.bench.data_dir / self.competition.id

    @property
    def known_names(self) -> tuple[str, ...]:
        """The competition's human name (``config.yaml``'s ``name``)."""
        return (self.competition.name,)

    @property
    def grades_kept_copy(self) -> bool:
        """A test submission is graded from the sandbox's copy (the bench keeps a copy)."""
        return False

    def preflight(self) -> str | None:
        """Why the competition cannot run: its prepared test data or answers are missing
        (with the ``mlebench prepare`` command), or its leaderboard cannot be read (missing,
        a git-lfs pointer, no ``score`` column, no row: no medal could be computed, so the
        run would only count as a failure). Builds the validation view under the ``split``
        protocol.

        Raises:
            TaskPackageError: the validation view cannot be built.
        """
        public, answers = self.public_dir(Split.TEST), self.answers_path(Split.TEST)
        if not public.is_dir() or not answers.is_file():
            missing = public if not public.is_dir() else answers
            return (
                f"cannot be prepared ({missing} is missing; run `mlebench prepare -c "
                f"{self.name} --data-dir {self.bench.data_dir}`)"
            )
        try:
            self.leaderboard  # noqa: B018 - read (and cached) before any step is spent
        except (InvalidArgument, OSError, UnicodeDecodeError) as exc:
            board = os.fspath(self.competition.leaderboard_path)
            where = "" if board in str(exc) else f" {board}"  # the path once, not twice
            return (
                f"cannot be graded: its leaderboard{where} is unusable ({exc}); restore it "
                "from MLE-bench (`git checkout -- "
                f"mlebench/competitions/{self.name}/leaderboard.csv && git lfs pull` in the "
                "checkout)"
            )
        if self.protocol == "split":
            self.public_dir(Split.VALID)
        return None

    @property
    def resources(self) -> Resources:
        """What one program run may use."""
        return self.bench.resources

    @property
    def time_limit_s(self) -> float:
        """Wall-clock limit of one program run."""
        return self.bench.time_limit_s

    @property
    def description(self) -> str:
        """The competition's ``description.md`` (public); under ``--validation self`` followed
        by the competition's split instruction and the score line to print.
        """
        try:
            text = self.competition.description_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
        if self.protocol != "self":
            return text
        return f"{text.rstrip()}\n\n{self.self_instruction()}\n"

    @property
    def protocol(self) -> str:
        """``split`` or ``self``: how this competition's candidates are scored in search."""
        if self._protocol is None:
            want = self.bench.validation
            if want == "auto":
                want = "split" if self._split_possible() else "self"
            self._protocol = want
        return self._protocol

    def _split_possible(self) -> bool:
        if self._valid_path() == self.root / "prepared" / "valid":
            return True
        try:
            rule_for(
                self.competition.id,
                self.root / "prepared" / "public",
                answers=_under(self.competition.answers, "private")
                or Path(self.competition.answers).name,
                sample=_under(self.competition.sample_submission, "public")
                or Path(self.competition.sample_submission).name,
                answer_header=self._answer_header(),
            )
        except (TaskPackageError, OSError, UnicodeDecodeError):
            return False
        return True

    def self_instruction(self) -> str:
        """The ``--validation self`` instruction: how to hold out a validation part and the
        line to print.
        """
        rule = LITE_RULES.get(self.competition.id)
        split = (
            rule.instruction
            if rule is not None
            else (
                "Hold out a random 10% of the labelled training data (seed 0) as validation, "
                "keeping rows that belong together (a patient, a sentence, a time period) on "
                "one side. Score it with the competition's metric."
            )
        )
        try:
            direction = "higher" if self.higher_is_better else "lower"
        except InvalidArgument:
            direction = "higher"
        return (
            "## Validation (your own)\n\n"
            f"{split} Train on the rest, then print exactly one line `Final Validation Score: "
            f"<number>` with that score ({direction} is better); the search selects programs "
            "on it. Then write ./submission.csv for the test data in the sample submission's "
            "format (you may retrain on all training data first); it is graded once at the end."
        )

    @property
    def leaderboard(self) -> Leaderboard:
        """The registry's leaderboard (file order).

        Raises:
            InvalidArgument: missing, a git-lfs pointer, or without a score column.
        """
        if self._leaderboard is None:
            p = self.competition.leaderboard_path
            if not p.is_file():
                raise InvalidArgument(f"{p} is missing; {INSTALL_HINT}")
            self._leaderboard = Leaderboard.from_csv(p)
        return self._leaderboard

    @property
    def higher_is_better(self) -> bool:
        """MLE-bench's direction: from the leaderboard order."""
        return not self.leaderboard.lower_is_better

    @property
    def private_paths(self) -> tuple[Path, ...]:
        """The prepared answers and the validation view's answers."""
        return (self.root / "prepared" / "private", self._valid_path() / "private")

    def public_dir(self, split: Split | str) -> Path:
        """``prepared/public`` for test; the validation view's public data for valid.

        Raises:
            TaskPackageError: the validation view cannot be built (says why and the fix).
        """
        if check_split(split) is Split.TEST or self.protocol == "self":
            return self.root / "prepared" / "public"
        return self._valid_view() / "public"

    def answers_path(self, split: Split | str) -> Path:
        """The answers of ``split`` (for graders only)."""
        if check_split(split) is Split.TEST:
            return self.bench.data_dir / self.competition.answers
        rel = _under(self.competition.answers, "private") or Path(self.competition.answers).name
        return self._valid_view() / "private" / rel

    # ------------------------------------------------------------------ validation view

    def _valid_path(self) -> Path:
        shipped = self.root / "prepared" / "valid"
        if (shipped / "public").is_dir() and (shipped / "private").is_dir():
            return shipped
        return self.bench._valid_root() / self.competition.id / self._valid_key()

    def _valid_key(self) -> str:
        """Changes when the public data's listing, the rule or the engine changes."""
        rule = LITE_RULES.get(self.competition.id)
        h = hashlib.sha256(f"{VIEW_ENGINE_VERSION}:{rule!r}".encode())
        public = self.root / "prepared" / "public"
        with contextlib.suppress(OSError):
            for p in sorted(public.iterdir()):
                st = p.stat()
                h.update(f"{p.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        return h.hexdigest()[:16]

    def _valid_view(self) -> Path:
        path = self._valid_path()
        if (path / "public").is_dir() and (path / "private").is_dir():
            return path
        with self._valid_lock:
            if (path / "public").is_dir():
                return path
            if not self._adopt_cached(path):
                self._build_valid(path)
        return path

    def _adopt_cached(self, path: Path) -> bool:
        """Take the view ``openmle bench doctor`` already built in the shared cache (same
        competition, same key: same public listing, rule and engine) instead of building it
        again: hard links (a copy across file systems) into ``path``. False when there is none.
        """
        cached = cache_root() / VIEW_CACHE / self.competition.id / path.name
        if cached == path or not (cached / "view.json").is_file():
            return False
        if not ((cached / "public").is_dir() and (cached / "private").is_dir()):
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".adopt-", dir=path.parent))
        try:
            shutil.copytree(cached, tmp, symlinks=True, copy_function=_link_or_copy,
                            dirs_exist_ok=True)  # fmt: skip
            with contextlib.suppress(OSError):
                tmp.rename(path)
        except OSError:
            return False
        finally:
            remove_tree(tmp)
        return (path / "public").is_dir()

    @property
    def grade_limits(self) -> GradeLimits:
        """The limits of one grading process (a sandbox bounds its time by the job's)."""
        return GradeLimits(
            timeout_s=self.bench.grade_timeout_s,
            memory_mb=self.bench.grade_memory_mb,
            max_bytes=self.bench.grade_max_bytes,
        )

    def _answer_header(self) -> list[str] | None:
        """The test answers' column names (the first line only, bounded), or None."""
        p = self.bench.data_dir / self.competition.answers
        if p.suffix != ".csv":
            return None
        try:
            with p.open("rb") as fh:
                first = fh.readline(1 << 20).decode("utf-8", "replace")
        except OSError:
            return None
        import csv

        return next(csv.reader([first.strip("\r\n")]), None)

    def _build_valid(self, path: Path) -> None:
        comp = self.competition
        public = self.root / "prepared" / "public"
        if not public.is_dir():
            raise TaskPackageError(
                f"{comp.id}: {public} is missing; run `mlebench prepare -c {comp.id}`"
            )
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=path.parent))
        try:
            info, why = build_view_confined(
                competition=comp.id,
                public=public,
                out=tmp,
                answers=_under(comp.answers, "private") or Path(comp.answers).name,
                sample=_under(comp.sample_submission, "public")
                or Path(comp.sample_submission).name,
                answer_header=self._answer_header(),
                limits=GradeLimits(
                    timeout_s=self.bench.view_timeout_s, memory_mb=self.bench.view_memory_mb
                ),
            )
            if info is None:
                raise TaskPackageError(why if why.startswith(comp.id) else f"{comp.id}: {why}")
            (tmp / "view.json").write_text(json.dumps(info, indent=2))
            if comp.description_path.is_file() and not (tmp / "public" / "description.md").exists():
                shutil.copyfile(comp.description_path, tmp / "public" / "description.md")
            with contextlib.suppress(OSError):
                tmp.rename(path)
        finally:
            remove_tree(tmp)
        if not (path / "public").is_dir():
            raise TaskPackageError(f"{comp.id}: the validation view at {path} was not made")

    def validation_info(self) -> dict[str, Any]:
        """How the validation view was made (``view.json``: the rule, units per side), built
        first when needed; ``{"shipped": True}`` for a shipped ``prepared/valid``.

        Raises:
            TaskPackageError: the view cannot be built (says why and the fix).
        """
        path = self._valid_view()
        if path == self.root / "prepared" / "valid":
            return {"shipped": True}
        try:
            data = json.loads((path / "view.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    # ------------------------------------------------------------------ grading

    def _public_words(self) -> list[str]:
        """The sample submission's column names (public; kept by the reason mask)."""
        p = self.bench.data_dir / self.competition.sample_submission
        try:
            with p.open("rb") as fh:
                first = fh.readline(1 << 16).decode("utf-8", "replace")
        except OSError:
            return []
        return [c.strip().strip('"') for c in first.strip().split(",")][:500]

    def grade(
        self,
        submission: Path | str,
        split: Split | str = Split.TEST,
        *,
        timeout_s: float | None = None,
    ) -> GradeReport | SelfScored:
        """Grade ``submission`` with the competition's grader in the confined grading process
        (:func:`openmle.gym.run_child`: fixed environment, memory and CPU limits, killed at
        ``timeout_s`` or the bench's ``grade_timeout_s``, and on cancellation).

        Never raises for a bad submission: ``valid=False`` with the reason (masked: no
        numbers or values that could come from the answers). Under ``--validation self`` the
        ``valid`` split is not graded against answers: a :class:`SelfScored` format check.
        """
        s = check_split(split)
        path = Path(submission)
        try:
            hib = self.higher_is_better
        except InvalidArgument:
            hib = True

        def invalid(reason: str, *, exists: bool = True) -> GradeReport:
            return GradeReport(
                task=self.name,
                split=s,
                valid=False,
                reason=reason,
                higher_is_better=hib,
                submission_path=str(path),
                submission_exists=exists,
            )

        if path.is_symlink():
            return invalid("the submission is a symbolic link; write a regular file")
        if not path.is_file() or path.suffix.lower() != ".csv":
            return invalid(
                f"no submission CSV at {path.name}; the program must write ./submission.csv",
                exists=False,
            )
        try:
            answers = self.answers_path(s) if self.protocol == "split" or s is Split.TEST else None
        except TaskPackageError as exc:
            return invalid(f"the task is broken: {exc}")
        real = path.resolve()
        if any(real.is_relative_to(p.resolve()) for p in self.private_paths):
            return invalid("the submission lies among the hidden answers; write your own file")
        limits = self.grade_limits
        if timeout_s is not None:
            limits = limits.with_timeout(max(1.0, min(float(timeout_s), limits.timeout_s)))
        if s is Split.VALID and self.protocol == "self":
            ok, why = check_format_confined(
                submission=real,
                sample=self.bench.data_dir / self.competition.sample_submission,
                limits=limits,
            )
            return SelfScored(task=self.name, valid=ok, reason=why)
        if answers is None:  # pragma: no cover - self protocol returned above
            return invalid("the task is broken: no answers for this split")
        score, reason, _broken = grade_confined(
            repo_root=self.competition.repo_root,
            grade_fn=self.competition.grade_fn,
            submission=real,
            answers=answers,
            limits=limits,
            public_words=self._public_words(),
            mlebench_round=s is Split.TEST,
        )
        if score is None:
            return invalid(reason)
        return GradeReport(
            task=self.name,
            split=s,
            score=score,
            valid=True,
            reason="",
            higher_is_better=hib,
            submission_path=str(path),
        )


_DATA_FIX = "it should be the --data-dir given to `mlebench prepare`, e.g. ~/.cache/mle-bench/data"
_DATA_SCAN = 200
"""At most this many sub-folders of a wrong ``--data`` are looked into for the right one."""


def _is_dir(p: Path) -> bool:
    try:
        return p.is_dir()
    except OSError:
        return False


def _data_below(d: Path, ids: Sequence[str]) -> Path | None:
    """The first sub-folder of ``d`` (sorted, at most :data:`_DATA_SCAN`) holding a
    ``<id>/prepared`` folder of ``ids``: where ``--data`` should point; None if none does.
    """
    try:
        subs = sorted(p for p in d.iterdir() if _is_dir(p))[:_DATA_SCAN]
    except OSError:
        return None
    return next((p for p in subs if any(_is_dir(p / c / "prepared") for c in ids)), None)


def _data_above(d: Path, ids: Sequence[str]) -> Path | None:
    """The folder above ``d`` (at most 3 levels: ``d`` is ``<data>/<id>``, its ``prepared``
    or ``prepared/public``) holding a ``<id>/prepared`` folder of ``ids``; None if none does.
    """
    for parent in list(d.resolve().parents)[:3]:
        if any(_is_dir(parent / c / "prepared") for c in ids):
            return parent
    return None


VIEW_CACHE = "mlebench-valid"
"""The folder under the openmle cache where validation views are built by default (and where
``bench doctor`` leaves them for a run to take)."""


def _link_or_copy(src: str, dst: str) -> None:
    """Hard-link ``src`` to ``dst``; copy when the two are on different file systems."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def protocol_lines(manifest: Mapping[str, Any]) -> list[str]:
    """Report lines (Markdown bullets) saying which validation protocol produced the numbers and
    which deviations the bench ran with, from a bench manifest (read back: only strings are
    used, each name shortened).
    """
    out: list[str] = []
    protocols = manifest.get("validation")
    if isinstance(protocols, Mapping) and protocols:
        by: dict[str, list[str]] = {}
        for cid, proto in protocols.items():
            by.setdefault(str(proto)[:10], []).append(str(cid)[:80])
        words = {
            "split": "held-out views of the public data, graded by each competition's grader",
            "self": "each program's own printed validation score",
        }
        parts = []
        for proto, ids in sorted(by.items()):
            listed = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            parts.append(f"{proto} ({words.get(proto, proto)}) for {listed}")
        out.append("- validation: search selected on " + "; ".join(parts))
    deviations = manifest.get("deviations")
    if isinstance(deviations, list) and deviations:
        out.append("- deviations: " + "; ".join(str(d)[:200] for d in deviations[:20]))
    return out
