"""The deterministic gate: named findings about what prepare.py produced.

Every check reads files as CSV text on the host (never imports them) and grades through
:meth:`openmle.gym.Task.grade`, which runs the vetted metric in its own confined process.
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attrs import field, frozen

from openmle._trees import scratch_dir
from openmle._types import Split
from openmle.builder._intake import sha256_file
from openmle.builder._inventory import (
    CLASS_FOLDERS,
    Inventory,
    class_folders,
    class_table_root,
    read_table,
)
from openmle.builder._spec import TaskSpec, hint_conflicts
from openmle.gym import CsvError, check_split, positive_labels

if TYPE_CHECKING:
    from openmle.gym import Task

__all__ = ["FINDINGS", "Finding", "GateResult", "checksums", "run_gate"]

FINDINGS: dict[str, str] = {
    "missing_file": "a file the package needs was not written",
    "symlink": "a symbolic link in the output",
    "unreadable_csv": "a CSV that does not parse",
    "label_leaking_file_name": "a public file whose name reveals the label",
    "label_leaking_id": "a test id of a per-class image folder's task names a class or a raw "
    "path (name rows by the copied images' neutral names)",
    "duplicate_ids": "an id repeated in test data, the sample submission or the answers",
    "id_mismatch": "test, sample submission and answers do not hold the same ids",
    "target_in_public_test": "the target column is in public test data",
    "train_missing_target": "train.csv lacks the target column",
    "answers_missing_target": "the answers lack the target column",
    "row_count_mismatch": "sample submission or answers rows differ from test rows",
    "raw_rows_not_conserved": "train + test rows differ from the raw labelled rows",
    "not_deterministic": "two runs of prepare.py wrote different files",
    "split_rule_violated": "the train/test split breaks the spec's split rule",
    "metric_failed_on_sample": "the metric fails or is not finite on the sample submission",
    "answers_not_best": "the answers, submitted, do not get the best possible score",
    "sample_scores_as_answers": "the sample submission scores as well as the answers",
    "package_invalid": "openmle task validate reports an error",
    "missing_asset": "a row's image is not in the package's public/images/",
    "metric_rejected": "the model's utils/metric.py failed the metric check (not deterministic, "
    "not finite, reaching outside, or not ordering the constant baseline below the answers)",
    "contradicts_sample_submission": "the task is not the one the raw sample submission asks "
    "(target, labelled table, id, answer columns or their format)",
    "contradicts_description": "the metric is not the one the raw description names",
    "contradicts_goal": "the target or metric is not the one the user's goal names",
}
"""Every finding code and what it means."""

_EXPECTED = (
    "public/train.csv",
    "public/test.csv",
    "public/sample_submission.csv",
    "public/description.txt",
    "private/test_answer.csv",
)
_LEAK_WORDS = ("answer", "label", "solution", "truth", "target", "private")


@frozen(kw_only=True)
class Finding:
    """One gate finding: its code (a key of :data:`FINDINGS`), the file and the explanation."""

    code: str
    file: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"code": self.code, "file": self.file, "message": self.message}


@frozen(kw_only=True)
class GateResult:
    """The gate's record: findings, scores of the sample and of the answers, checksums."""

    findings: tuple[Finding, ...]
    sample_score: float | None = None
    answers_score: float | None = None
    checksums: dict[str, str] = field(factory=dict)

    @property
    def passed(self) -> bool:
        """Whether there is no finding."""
        return not self.findings

    @property
    def codes(self) -> tuple[str, ...]:
        """The finding codes, in order."""
        return tuple(f.code for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "passed": self.passed,
            "findings": [f.to_dict() for f in self.findings],
            "sample_score": self.sample_score,
            "answers_score": self.answers_score,
            "checksums": dict(self.checksums),
        }


def checksums(root: Path) -> dict[str, str]:
    """SHA-256 of every regular file under ``root``, by relative path."""
    return {
        p.relative_to(root).as_posix(): sha256_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


def _best(metric: str) -> float:
    return 1.0 if metric in ("accuracy", "auc", "macro_f1", "map@k") else 0.0


def _perfect_submission(spec: TaskSpec, answers: Path, sample_header: list[str], out: Path) -> None:
    header, rows = read_table(answers)  # raises ValueError
    id_i, t_i = header.index(spec.submission_id), header.index(spec.target)
    positive = positive_labels([r[t_i] for r in rows]) if spec.metric == "auc" else []
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(sample_header)
        for k, r in enumerate(rows):
            if spec.metric == "auc":
                w.writerow([r[id_i], "1" if positive[k] else "0"])
            elif spec.metric == "log_loss":
                w.writerow([r[id_i]] + ["1" if c == r[t_i] else "0" for c in sample_header[1:]])
            else:
                w.writerow([r[id_i], r[t_i]])


def _check_split_rule(
    spec: TaskSpec,
    train: tuple[list[str], list[list[str]]],
    test: tuple[list[str], list[list[str]]],
    answers: tuple[list[str], list[list[str]]],
    add: Callable[[str, str, str], None],
) -> None:
    rule = spec.split
    if rule.kind == "random":
        return
    if rule.kind == "stratified":
        column, (train_h, train_rows), (test_h, test_rows) = spec.target, train, answers
    else:
        column, (train_h, train_rows), (test_h, test_rows) = rule.column or "", train, test
    if column not in train_h or column not in test_h:
        add(
            "split_rule_violated",
            "public/test.csv",
            f"the {rule.kind} split column {column!r} is missing from train or test; keep it",
        )
        return
    i, j = train_h.index(column), test_h.index(column)
    why = check_split(
        rule.kind,
        spec.test_fraction,
        [r[i] for r in train_rows],
        [r[j] for r in test_rows],
        column,
    )
    if why:
        add("split_rule_violated", "public/test.csv", f"{rule.kind} split: {why}")


_Table = tuple[list[str], list[list[str]]]
_Add = Callable[[str, str, str], None]


def run_gate(spec: TaskSpec, inv: Inventory, package: Path, second_run: Path | None) -> GateResult:
    """Check the package at ``package`` (data/public, data/private) built by prepare.py.

    ``second_run`` holds a second run's ``public``/``private`` for the determinism check.
    """
    from openmle.gym import load_task

    found: list[Finding] = []

    def add(code: str, file: str, message: str) -> None:
        found.append(Finding(code=code, file=file, message=message))

    data = package / "data"
    sums = checksums(data)
    _check_files(spec, data, add)
    if second_run is not None:
        _check_determinism(sums, checksums(second_run), add)
    tables = _read_tables(data, add)
    if len(tables) < 4:
        return GateResult(findings=tuple(found), checksums=sums)
    _check_tables(spec, inv, tables, add)
    if spec.inputs.images is not None:
        _check_images(data / "public", tables, add)
    _check_class_ids(spec, inv, tables["public/test.csv"], add)
    _check_hints(spec, inv, tables["public/sample_submission.csv"][0], add)
    if found:
        return GateResult(findings=tuple(found), checksums=sums)
    task = load_task(package)
    sample_h = tables["public/sample_submission.csv"][0]
    sample_score, answers_score = _check_scores(spec, task, data, sample_h, add)
    if not found:
        report = task.validate(smoke_test=True)
        for problem in report.errors:
            add("package_invalid", problem.file, str(problem)[:300])
    return GateResult(
        findings=tuple(found),
        sample_score=sample_score,
        answers_score=answers_score,
        checksums=sums,
    )


def _check_files(spec: TaskSpec, data: Path, add: _Add) -> None:
    """Expected files present, no symbolic links, no public file name that names the label."""
    for rel in _EXPECTED:
        if not (data / rel).is_file():
            add("missing_file", rel, f"prepare.py did not write {rel}")
    for p in sorted(data.rglob("*")):
        if p.is_symlink():
            add("symlink", p.relative_to(data).as_posix(), "a symbolic link; write plain files")
    public = data / "public"
    for p in sorted(public.rglob("*")) if public.is_dir() else []:
        rel = p.relative_to(data).as_posix()
        stem = p.name.lower()
        if rel in _EXPECTED or not p.is_file():
            continue
        if spec.target.lower() in stem or any(w in stem for w in _LEAK_WORDS):
            add(
                "label_leaking_file_name", rel, "the file name reveals the label; rename or drop it"
            )


def _check_determinism(sums: dict[str, str], other: dict[str, str], add: _Add) -> None:
    """Two runs of prepare.py wrote the same bytes."""
    if other != sums:
        differ = sorted(k for k in set(other) | set(sums) if other.get(k) != sums.get(k))
        add(
            "not_deterministic",
            ", ".join(differ[:5]),
            "two runs wrote different bytes; seed every random choice",
        )


def _read_tables(data: Path, add: _Add) -> dict[str, _Table]:
    """The expected CSV files that exist and can be read, by relative path."""
    tables: dict[str, _Table] = {}
    for rel in _EXPECTED:
        if rel.endswith(".csv") and (data / rel).is_file():
            try:
                tables[rel] = read_table(data / rel)
            except (OSError, UnicodeDecodeError, ValueError, csv.Error) as exc:
                add("unreadable_csv", rel, str(exc)[:200])
    return tables


def _check_tables(spec: TaskSpec, inv: Inventory, tables: dict[str, _Table], add: _Add) -> None:
    """The four tables agree: target columns, ids, row counts, raw rows kept, the split rule."""
    train_h, train = tables["public/train.csv"]
    test_h, test = tables["public/test.csv"]
    ans_h, answers = tables["private/test_answer.csv"]
    if spec.target in test_h:
        add(
            "target_in_public_test",
            "public/test.csv",
            f"holds the target column {spec.target!r}; drop it",
        )
    if spec.target not in ans_h:
        add("answers_missing_target", "private/test_answer.csv", f"lacks {spec.target!r}")
    if spec.target not in train_h:
        add("train_missing_target", "public/train.csv", f"lacks the target column {spec.target!r}")
    _check_ids(spec.submission_id, tables, add)
    _check_row_counts(spec, inv, tables, add)
    _check_split_rule(spec, (train_h, train), (test_h, test), (ans_h, answers), add)


def _check_images(public: Path, tables: dict[str, _Table], add: _Add) -> None:
    """Every train and test row names its image (column ``image``), a file under
    ``public/images/`` (a relative path, no ``..``); the tables' paths are checked as text.
    """
    for rel in ("public/train.csv", "public/test.csv"):
        header, rows = tables[rel]
        if "image" not in header:
            add("missing_asset", rel, "has no column 'image' naming each row's image; add it")
            continue
        j = header.index("image")
        bad = [r[j] for r in rows if not _image_path_ok(public, r[j])]
        if bad:
            add(
                "missing_asset",
                rel,
                f"{len(bad)} row(s) name no image under images/ (first {bad[0][:80]!r}); "
                "copy each row's image there",
            )


def _image_path_ok(public: Path, value: str) -> bool:
    """``value`` is ``images/...`` (no empty, ``.`` or ``..`` part), a regular file there."""
    parts = value.split("/")
    if len(parts) < 2 or parts[0] != "images" or any(p in ("", ".", "..") for p in parts):
        return False
    path = public.joinpath(*parts)
    return path.is_file() and not path.is_symlink()


def _words(text: str) -> str:
    return " " + " ".join(re.findall(r"[a-z0-9]+", text.lower())) + " "


def _check_class_ids(spec: TaskSpec, inv: Inventory, test: _Table, add: _Add) -> None:
    """A per-class image folder's task: no test id holds a class name (as whole words) or a
    raw image path (whose folder is the class), so an id cannot give the answer.
    """
    table = inv.file(spec.data_file)
    if table is None or table.format != CLASS_FOLDERS:
        return
    header, rows = test
    if spec.submission_id not in header:
        return  # missing_file already says so
    raw = class_folders(tuple(f.path for f in inv.files)).get(class_table_root(spec.data_file))
    pairs = raw or []
    classes = {_words(label) for _, label in pairs} - {"  "}
    paths = {path for path, _ in pairs}
    j = header.index(spec.submission_id)
    bad = [r[j] for r in rows if r[j] in paths or any(c in _words(r[j]) for c in classes)]
    if bad:
        add(
            "label_leaking_id",
            "public/test.csv",
            f"{len(bad)} test id(s) name a class or a raw path (first {bad[0][:80]!r}); name "
            "each row by its copied image's neutral name or a number",
        )


def _check_hints(spec: TaskSpec, inv: Inventory, sample_h: list[str], add: _Add) -> None:
    """The task follows the raw sample submission, description and goal (see the hints)."""
    hints = inv.hints
    for code, message in hint_conflicts(spec, hints):
        add(code, "builder/record.json", message)
    if hints.target is not None and spec.target == hints.target and hints.id_column:
        want = [hints.id_column, *hints.answer_columns]
        if sample_h != want:
            add(
                "contradicts_sample_submission",
                "public/sample_submission.csv",
                f"columns {sample_h[:8]} differ from the raw sample submission's {want[:8]}; "
                "write them in its order",
            )


def _check_ids(idc: str, tables: dict[str, _Table], add: _Add) -> None:
    """Test, sample and answers each have unique ids in column ``idc``, the same set."""
    ids: dict[str, list[str]] = {}
    for rel in ("public/test.csv", "public/sample_submission.csv", "private/test_answer.csv"):
        h, rows = tables[rel]
        if idc not in h:
            add("missing_file", rel, f"has no id column {idc!r}")
            continue
        col = [r[h.index(idc)] for r in rows]
        dup = [k for k, n in Counter(col).items() if n > 1]
        if dup:
            add("duplicate_ids", rel, f"{len(dup)} id(s) appear more than once")
        ids[rel] = col
    if len(ids) == 3 and not (
        set(ids["public/test.csv"])
        == set(ids["public/sample_submission.csv"])
        == set(ids["private/test_answer.csv"])
    ):
        add("id_mismatch", "public/sample_submission.csv", "test, sample and answers ids differ")


def _check_row_counts(spec: TaskSpec, inv: Inventory, tables: dict[str, _Table], add: _Add) -> None:
    """Test, sample and answers have as many rows; train + test keep every labelled raw row."""
    train = tables["public/train.csv"][1]
    test = tables["public/test.csv"][1]
    sample = tables["public/sample_submission.csv"][1]
    answers = tables["private/test_answer.csv"][1]
    if not len(test) == len(sample) == len(answers):
        add(
            "row_count_mismatch",
            "private/test_answer.csv",
            f"test {len(test)}, sample {len(sample)}, answers {len(answers)} rows",
        )
    table = inv.file(spec.data_file)
    if table is not None and table.rows is not None:
        target = table.column(spec.target)
        labelled = table.rows - (target.missing if target else 0)
        if len(train) + len(test) != labelled:
            add(
                "raw_rows_not_conserved",
                "public/train.csv",
                f"train {len(train)} + test {len(test)} rows != {labelled} labelled raw rows",
            )


def _check_scores(
    spec: TaskSpec, task: Task, data: Path, sample_h: list[str], add: _Add
) -> tuple[float | None, float | None]:
    """Grade the sample and a perfect submission built from the answers.

    The sample must score a finite number, the answers the metric's best, and the sample must
    not score as well as the answers. Returns ``(sample_score, answers_score)``.
    """
    sample_report = task.grade(data / "public" / "sample_submission.csv", Split.TEST)
    sample_score = sample_report.score if sample_report.valid else None
    if sample_score is None or not math.isfinite(sample_score):
        add(
            "metric_failed_on_sample",
            "public/sample_submission.csv",
            sample_report.reason[:300] or "not finite",
        )
    with scratch_dir(prefix="openmle-gate-") as tmp:
        perfect = Path(tmp) / "submission.csv"
        try:
            _perfect_submission(spec, data / "private/test_answer.csv", sample_h, perfect)
            ans_report = task.grade(perfect, Split.TEST)
            answers_score, why = (ans_report.score if ans_report.valid else None), ans_report.reason
        except (ValueError, CsvError) as exc:
            answers_score, why = None, str(exc)
    best = _best(spec.metric)
    if spec.custom:  # no known best: the metric check ordered the answers above the sample
        if answers_score is None:
            add("answers_not_best", "private/test_answer.csv", f"no score: {why[:200]}")
    elif answers_score is None or abs(answers_score - best) > 1e-6:
        add(
            "answers_not_best",
            "private/test_answer.csv",
            f"the answers score {answers_score} (best {best}): {why[:200]}",
        )
    elif sample_score is not None and abs(sample_score - answers_score) <= 1e-9:
        add(
            "sample_scores_as_answers",
            "public/sample_submission.csv",
            "the sample is as good as the answers; it leaks them",
        )
    return sample_score, answers_score
