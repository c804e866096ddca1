"""``bench doctor``: preflight of MLE-bench competitions (registry entry, leaderboard, prepared
data, checksums, and the validation view each search needs), one line per competition with the
fix for each problem. Nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, final

from attrs import frozen

from openmle._leaderboard import GIT_LFS_POINTER
from openmle.bench._medals import Leaderboard
from openmle.bench.mlebench._registry import Competition, MLEBench, _load_yaml, git_output
from openmle.errors import InvalidArgument, MissingDependency, TaskPackageError

__all__ = ["DoctorLine", "doctor"]


@final
@frozen(kw_only=True)
class DoctorLine:
    """One competition's preflight: ``ok`` when nothing blocks a run."""

    competition_id: str
    ok: bool
    problems: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "competition_id": self.competition_id,
            "ok": self.ok,
            "problems": list(self.problems),
            "fixes": list(self.fixes),
            "notes": list(self.notes),
        }


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _nonempty(d: Path) -> bool:
    try:
        return d.is_dir() and any(d.iterdir())
    except OSError:
        return False


def doctor(
    bench: MLEBench, ids: Sequence[str], *, checksums: bool = False, views: bool = True
) -> list[DoctorLine]:
    """Check each competition's registry entry, leaderboard and prepared data (no downloads),
    and build its validation view: a competition is ready only when its view exists.

    Problems (each with its fix): not in the registry, malformed config, missing leaderboard,
    a git-lfs pointer instead of the leaderboard, missing or empty public/private data, missing
    answers or sample submission, checksum mismatches (with ``checksums=True``), a validation
    view that cannot be built (with ``views=True``, the default; the view is built once and
    cached under the bench's ``valid_dir``). Notes: the validation rule and MLE-bench's known
    issues with the competition.
    """
    return [_doctor_one(bench, cid, checksums=checksums, views=views) for cid in ids]


_PIP_INSTALL = re.compile(r"pip install '[^']+'(?: \(or [\w.-]+\))?")
"""The install command a missing-library error names (``pip install 'openmle[data]' (or
pillow)``)."""


def _doctor_view(
    bench: MLEBench, cid: str, bad: Callable[[str, str], None], notes: list[str]
) -> None:
    """Build (or find) the validation view of ``cid``; a failure is one problem with its fix."""
    try:
        info = bench.task(cid).validation_info()
    except TaskPackageError as exc:
        text = str(exc).removeprefix(f"{cid}: ")
        problem, sep, fix = text.rpartition("; ")
        if not sep:
            problem, fix = text, "run with --validation self, or ship prepared/valid"
            install = _PIP_INSTALL.search(text)
            if install is not None:  # a missing library: installing it is the fix
                fix = f"{install.group(0)}, or run with --validation self"
        bad(f"no validation view ({problem})", fix)
        return
    if info.get("shipped"):
        notes.append("validation: the shipped prepared/valid")
    elif info:
        notes.append(
            f"validation: {info.get('rule')} -> {info.get('valid')} held out, "
            f"{info.get('train')} to train"
        )


def _doctor_one(bench: MLEBench, cid: str, *, checksums: bool, views: bool = True) -> DoctorLine:
    problems: list[str] = []
    fixes: list[str] = []
    notes: list[str] = []

    def bad(problem: str, fix: str) -> None:
        problems.append(problem)
        fixes.append(fix)

    def line() -> DoctorLine:
        return DoctorLine(
            competition_id=cid,
            ok=not problems,
            problems=tuple(problems),
            fixes=tuple(fixes),
            notes=tuple(notes),
        )

    try:
        comp = bench.competition(cid)
    except InvalidArgument as exc:
        bad(str(exc).split(";")[0], "check the id, or point --registry at the right checkout")
        return line()
    except MissingDependency as exc:
        bad("cannot read the registry", str(exc))
        return line()
    _doctor_leaderboard(comp, bad, notes)
    root = bench.data_dir / cid / "prepared"
    _doctor_data(bench, comp, root, bad)
    if comp.grade_fn.startswith("mlebench.") and not (comp.directory / "grade.py").is_file():
        bad("the competition's grade.py is missing", "update the MLE-bench checkout")
    if checksums and root.is_dir():
        _check_sums(comp, root, bad, notes)
    if checksums and comp.leaderboard_path.is_file():
        _check_leaderboard_commit(bench, comp, bad, notes)
    if views and not problems:
        _doctor_view(bench, cid, bad, notes)
    if comp.known_issue:
        notes.append(f"MLE-bench known issue: {comp.known_issue}")
    return line()


def _doctor_data(
    bench: MLEBench, comp: Competition, root: Path, bad: Callable[[str, str], None]
) -> None:
    """The prepared data of ``comp`` under ``root`` (``<data>/<id>/prepared``): a competition
    never prepared is one problem; otherwise each half (public, private) and its key file.
    """
    prep = f"run `mlebench prepare -c {comp.id} --data-dir {bench.data_dir}`"
    if not root.is_dir():
        bad("not prepared (no prepared/ folder)", prep)
        return
    if not _nonempty(root / "public"):
        bad("prepared/public is missing or empty", prep)
    elif not (bench.data_dir / comp.sample_submission).is_file():
        bad(f"the sample submission {comp.sample_submission} is missing", prep)
    if not _nonempty(root / "private"):
        bad("prepared/private is missing or empty", prep)
    elif not (bench.data_dir / comp.answers).is_file():
        bad(f"the answers {comp.answers} are missing", prep)


def _doctor_leaderboard(
    comp: Competition, bad: Callable[[str, str], None], notes: list[str]
) -> None:
    lb = comp.leaderboard_path
    if not lb.is_file():
        bad("leaderboard.csv is missing", "update the MLE-bench checkout (git pull)")
    else:
        with lb.open("rb") as fh:
            head = fh.read(len(GIT_LFS_POINTER)).decode("utf-8", "replace")
        if head == GIT_LFS_POINTER:
            bad(
                "leaderboard.csv is a git-lfs pointer",
                "run `git lfs fetch --all && git lfs pull` in the MLE-bench checkout",
            )
        else:
            try:
                board = Leaderboard.from_csv(lb)
            except (InvalidArgument, OSError, UnicodeDecodeError) as exc:
                bad(f"leaderboard.csv is unreadable ({exc})", "restore it from MLE-bench")
                return
            _doctor_blank_scores(board, bad, notes)


def _doctor_blank_scores(
    board: Leaderboard, bad: Callable[[str, str], None], notes: list[str]
) -> None:
    """Rows without a finite score: MLE-bench counts them in N (they move every threshold);
    an empty first or last row also decides its direction (higher is better, whatever the
    metric), so that is a problem, the others a note.
    """
    blank = [i + 1 for i, v in enumerate(board.scores) if not math.isfinite(v)]
    if not blank:
        return
    rows = ", ".join(map(str, blank[:5])) + (
        f" and {len(blank) - 5} more" if len(blank) > 5 else ""
    )
    text = f"leaderboard.csv has {len(blank)} of {board.n} rows without a finite score"
    text += f" (data rows {rows})"
    if blank[0] == 1 or blank[-1] == board.n:
        bad(
            f"{text}; MLE-bench reads the direction from the first and last rows, so its medals "
            "would take higher as better whatever the metric",
            "restore leaderboard.csv from MLE-bench (`git lfs pull` in the checkout)",
        )
    else:
        notes.append(f"{text}; MLE-bench counts them in N, which sets the medal rows")


def _committed_blob(repo: Path, rel: str) -> bytes | None:
    """The blob of ``rel`` at ``HEAD`` of the git checkout ``repo`` (for a git-lfs file: its
    pointer, as ``git show`` applies no filter), or None (no git, not a checkout, no such
    file at ``HEAD``).
    """
    return git_output(repo, "show", f"HEAD:{rel}")


def _lfs_pointer(blob: bytes) -> tuple[str, int] | None:
    """``(sha256 hex, size)`` of a git-lfs pointer blob, or None when ``blob`` is not one."""
    text = blob[:1024].decode("utf-8", "replace")
    if not text.startswith(GIT_LFS_POINTER):
        return None
    fields = dict(line.partition(" ")[::2] for line in text.splitlines())
    oid, size = fields.get("oid", ""), fields.get("size", "")
    if not oid.startswith("sha256:") or not size.isdigit():
        return None
    return oid.removeprefix("sha256:"), int(size)


def _check_leaderboard_commit(
    bench: MLEBench, comp: Competition, bad: Callable[[str, str], None], notes: list[str]
) -> None:
    """``leaderboard.csv`` against the checkout's commit (``--checksums``): the sha256 and size
    its git-lfs pointer names (or the committed bytes, where it is not in git-lfs). A truncated
    or edited leaderboard moves every threshold and MLE-bench would not notice either.
    """
    path = comp.leaderboard_path
    try:
        rel = path.relative_to(bench.repo_root).as_posix()
    except ValueError:  # a competitions folder linked from elsewhere
        rel = ""
    blob = _committed_blob(bench.repo_root, rel) if rel else None
    if blob is None:
        notes.append("leaderboard.csv not checked (the registry is not a git checkout)")
        return
    pointer = _lfs_pointer(blob)
    data = path.read_bytes()
    if pointer is None:
        same = data == blob
    else:
        same = len(data) == pointer[1] and hashlib.sha256(data).hexdigest() == pointer[0]
    if not same:
        bad(
            "leaderboard.csv differs from the one the checkout's commit names (a partial or "
            "edited leaderboard moves the medal thresholds)",
            f"run `git checkout -- {rel} && git lfs pull` in the MLE-bench checkout",
        )


def _check_sums(
    comp: Competition, root: Path, bad: Callable[[str, str], None], notes: list[str]
) -> None:
    if not comp.checksums_path.is_file():
        notes.append("no checksums.yaml to compare with")
        return
    try:
        expected = _load_yaml(comp.checksums_path)
    except TaskPackageError as exc:
        notes.append(str(exc))
        return
    for part in ("public", "private"):
        for fname, want in (expected.get(part) or {}).items():
            f = root / part / str(fname)
            if not f.is_file():
                bad(f"{part}/{fname} is missing", f"re-run `mlebench prepare -c {comp.id}`")
            elif _md5(f) != str(want):
                bad(
                    f"{part}/{fname} does not match its checksum",
                    f"delete {root} and re-run `mlebench prepare -c {comp.id}`",
                )
