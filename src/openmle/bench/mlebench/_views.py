"""The validation-view engine: apply a :class:`SplitRule` to ``prepared/public``.

:func:`build_validation_view` writes ``out/public`` (the same file names and formats as
``prepared/public``: the training part, the unlabeled held-out part, the sample submission) and
``out/private`` (the held-out answers in the format the competition's ``grade.py`` reads from
``prepared/private``, so its own ``grade_fn`` grades validation submissions). Deterministic: the
draw is ``random.Random("<competition>:<seed>")`` over the units in file order.

Standard library only, except ``denoising-dirty-documents`` (its answers are pixels: Pillow and
numpy, which MLE-bench installs). CSV pools are streamed (two passes; only the held-out rows
and, where files follow rows, the ids stay in memory). Large files are hard-linked into the view
when the file system allows it, copied otherwise. The engine runs in the confined grading
process (:mod:`openmle.bench.mlebench.child`); it never runs inside the sandbox.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import random
import re
import shutil
import sys
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from openmle.bench.mlebench._rules import LITE_RULES, Media, SplitRule
from openmle.errors import MissingDependency, TaskPackageError

__all__ = ["build_validation_view", "generic_rule", "rule_for"]

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))

_FIX = "ship prepared/valid/{public,private} for it, or run with --validation self"


# ---------------------------------------------------------------------------- rule lookup


def rule_for(
    competition: str,
    public_dir: Path,
    *,
    answers: str = "test.csv",
    sample: str = "sample_submission.csv",
    answer_header: Sequence[str] | None = None,
) -> SplitRule:
    """The shipped rule of ``competition``, else a generic rule when one applies.

    Args:
        competition: the competition id.
        public_dir: its ``prepared/public``.
        answers: the answers' file name under ``private/`` (``config.yaml``).
        sample: the sample submission's file name under ``public/``.
        answer_header: the columns of the test answers (for the generic rule).

    Raises:
        TaskPackageError: no shipped rule and the public data does not fit the generic one
            (the message names the reason and the fix).
    """
    rule = LITE_RULES.get(competition)
    if rule is not None:
        return rule
    return generic_rule(
        competition, public_dir, answers=answers, sample=sample, answer_header=answer_header
    )


def generic_rule(
    competition: str,
    public_dir: Path,
    *,
    answers: str = "test.csv",
    sample: str = "sample_submission.csv",
    answer_header: Sequence[str] | None = None,
) -> SplitRule:
    """A rule for a competition without a shipped one: one labelled CSV of public whose
    columns hold the sample submission's id (its first column) and targets (the others);
    ``train``/``test`` (or ``train_images``/``test_images``) folders of files named by id
    follow their rows; the answers have the sample's columns (or any pool columns).

    Raises:
        TaskPackageError: the data does not have that shape (names what is missing and the
            fix).
    """
    why = f"{competition}: no validation rule ships for it and the generic rule does not apply"
    if not answers.endswith(".csv"):
        raise TaskPackageError(f"{why} (its answers {answers} are not a CSV); {_FIX}")
    sample_path = public_dir / sample
    if not sample_path.is_file():
        raise TaskPackageError(f"{why} (no {sample} in prepared/public); {_FIX}")
    header = _header(sample_path)
    if len(header) < 2:
        raise TaskPackageError(f"{why} ({sample} has fewer than two columns); {_FIX}")
    id_column, targets = header[0], tuple(header[1:])
    pools = []
    for f in sorted(public_dir.glob("*.csv")):
        if f.name == sample or f.name.startswith("test") or "sample" in f.name.lower():
            continue
        cols = _header(f)
        if id_column in cols and all(t in cols for t in targets):
            pools.append((f.name, cols))
    if len(pools) != 1:
        found = "none" if not pools else ", ".join(n for n, _ in pools)
        raise TaskPackageError(
            f"{why} (expected one CSV with the columns {header[:6]} of {sample}, found "
            f"{found}); {_FIX}"
        )
    pool, cols = pools[0]
    ans = tuple(answer_header or header)
    if not all(c in cols for c in ans):
        raise TaskPackageError(
            f"{why} (the answers have columns that {pool} lacks: "
            f"{[c for c in ans if c not in cols][:6]}); {_FIX}"
        )
    media: list[Media] = []
    for train, test in (("train", "test"), ("train_images", "test_images")):
        if (public_dir / train).is_dir():
            name = _media_name(public_dir / pool, public_dir / train, id_column)
            if name is not None:
                media.append(Media(train=train, test=test, name=name))
    return SplitRule(
        competition=competition,
        pool=pool,
        id_column=id_column,
        targets=targets,
        test_file="test.csv" if (public_dir / "test.csv").is_file() else None,
        sample=sample,
        answers=answers,
        answer_columns=ans,
        media=tuple(media),
        instruction=(
            f"Hold out a random 10% of the rows of {pool} (seed 0). Score it with the "
            "competition's metric."
        ),
    )


def _media_name(pool: Path, folder: Path, id_column: str) -> str | None:
    """``{id}`` plus the extension of the folder's files when they are named by id."""
    with _open_text(pool) as fh:
        reader = csv.DictReader(fh)
        first = next(reader, None)
    if first is None:
        return None
    ident = first.get(id_column, "")
    for p in folder.iterdir():
        if p.name == ident:
            return "{id}"
        if p.stem == ident:
            return "{id}" + p.suffix
    return None


# ---------------------------------------------------------------------------- files


def _split_member(rel: str) -> tuple[str, str | None]:
    outer, _, inner = rel.partition("!")
    return outer, inner or None


@contextlib.contextmanager
def _open_text(path: Path, member: str | None = None) -> Iterator[IO[str]]:
    if member is None:
        with path.open(encoding="utf-8", newline="") as fh:
            yield fh
        return
    with zipfile.ZipFile(path) as zf, zf.open(member) as raw:
        yield io.TextIOWrapper(raw, encoding="utf-8", newline="")


def _header(path: Path, member: str | None = None) -> list[str]:
    with _open_text(path, member) as fh:
        return next(csv.reader(fh), [])


def _first_row(path: Path, member: str | None = None) -> dict[str, str]:
    with _open_text(path, member) as fh:
        return next(csv.DictReader(fh), None) or {}


class _Out:
    """A CSV written to ``path``; zipped as ``member`` on close when given."""

    def __init__(self, path: Path, header: Sequence[str], *, member: str | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path, self.member = path, member
        self._file = Path(f"{path}.csv-part") if member else path
        self._fh = self._file.open("w", encoding="utf-8", newline="")
        self.writer = csv.writer(self._fh)
        self.writer.writerow(header)
        self.rows = 0

    def write(self, row: Sequence[Any]) -> None:
        self.writer.writerow(row)
        self.rows += 1

    def close(self) -> None:
        self._fh.close()
        if self.member:
            with zipfile.ZipFile(self.path, "w", zipfile.ZIP_DEFLATED) as zf:
                zf.write(self._file, arcname=self.member)
            self._file.unlink()


def _link(src: Path, dst: Path) -> None:
    """Hard-link ``src`` (a file or a folder tree) to ``dst``; copy where links fail.

    Symbolic links are never followed nor copied (one could point at the answers).
    """
    if src.is_symlink():
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=_link_file, dirs_exist_ok=True, ignore=_symlinks)
    else:
        _link_file(src, dst)


def _symlinks(folder: str, names: list[str]) -> set[str]:
    return {n for n in names if os.path.islink(os.path.join(folder, n))}


def _link_file(src: str | Path, dst: str | Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _copy_rest(public: Path, view: Path, claimed: set[str]) -> None:
    """Link every top-level entry of public the rule did not claim into the view."""
    for p in sorted(public.iterdir()):
        if p.name in claimed or p.is_symlink():
            continue
        _link(p, view / p.name)


def _top(rel: str | None) -> str | None:
    return None if rel is None else _split_member(rel)[0].split("/")[0]


def _choose(n: int, rule: SplitRule, what: str) -> set[int]:
    """The held-out unit indices: ``fraction`` of ``n`` (at least 1, at most ``cap``), never
    all of them.
    """
    if n < 2:
        raise TaskPackageError(
            f"{rule.competition}: {rule.pool} has {n} {what}; a validation split needs at "
            f"least 2; {_FIX}"
        )
    k = max(1, round(rule.fraction * n))
    if rule.cap is not None:
        k = min(k, rule.cap)
    k = min(k, n - 1)
    rng = random.Random(f"{rule.competition}:{rule.seed}")
    return set(rng.sample(range(n), k))


def _sample_fill(public: Path, rule: SplitRule) -> tuple[list[str], dict[str, str]]:
    outer, member = _split_member(rule.sample)
    path = public / outer
    if not path.is_file():
        raise TaskPackageError(
            f"{rule.competition}: {outer} is missing from prepared/public; re-run "
            f"`mlebench prepare -c {rule.competition}`"
        )
    return _header(path, member), _first_row(path, member)


def _missing(rule: SplitRule, where: str, cols: Sequence[str], need: Sequence[str]) -> None:
    lack = [c for c in need if c not in cols]
    if lack:
        raise TaskPackageError(
            f"{rule.competition}: {where} lacks the column(s) {lack[:6]} the validation rule "
            f"needs (found {list(cols)[:8]}); re-run `mlebench prepare -c {rule.competition}`"
            f" or {_FIX}"
        )


# ---------------------------------------------------------------------------- engine


def build_validation_view(
    competition: str,
    public_dir: Path | str,
    out_dir: Path | str,
    *,
    rule: SplitRule | None = None,
    answers: str = "test.csv",
    sample: str = "sample_submission.csv",
    answer_header: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Write the validation view of ``competition`` from ``public_dir`` into ``out_dir``.

    Args:
        competition: the competition id (picks the shipped rule, else the generic one).
        public_dir: the competition's ``prepared/public``.
        out_dir: a new or empty folder; ``public/`` and ``private/`` are written in it.
        rule: a rule to use instead of the shipped or generic one.
        answers, sample, answer_header: for the generic rule (see :func:`rule_for`).

    Returns:
        ``{"rule": str, "train": int, "valid": int, "answers": str}``: the rule in words, the
        units on each side and the answers' path relative to ``out_dir``.

    Raises:
        TaskPackageError: no rule applies, or the public data lacks what the rule needs (the
            message names the file, the column and the fix).
    """
    public, out = Path(public_dir), Path(out_dir)
    if not public.is_dir():
        raise TaskPackageError(
            f"{competition}: {public} is missing; run `mlebench prepare -c {competition}`"
        )
    r = rule or rule_for(
        competition, public, answers=answers, sample=sample, answer_header=answer_header
    )
    (out / "public").mkdir(parents=True, exist_ok=True)
    (out / "private").mkdir(parents=True, exist_ok=True)
    builder = {
        "rows": _rows,
        "paired_images": _paired_images,
        "json_records": _json_records,
        "labelled_files": _labelled_files,
        "time_days": _time_days,
        "birds": _birds,
    }[r.kind]
    n_train, n_valid = builder(r, public, out / "public", out / "private")
    return {
        "rule": r.describe(),
        "train": n_train,
        "valid": n_valid,
        "answers": f"private/{r.answers}",
    }


def _rows(rule: SplitRule, public: Path, view: Path, private: Path) -> tuple[int, int]:
    split = _RowSplit(rule, public)
    chosen = _choose(split.scan(), rule, "groups" if rule.group else "rows")
    n_rows, n_valid = split.write(chosen, view, private)
    for m in rule.media:
        _move_media(rule, m, public, view, split.train_ids, split.valid_ids)
    for f in rule.filtered:
        _filter_csv(public / f, view / f, rule.id_column, set(split.train_ids))
    claimed = {split.outer, _split_member(rule.sample)[0], *rule.filtered, *rule.drop}
    if rule.test_file:
        claimed.add(_split_member(rule.test_file)[0])
    for m in rule.media:
        claimed.update({_top(m.train) or "", _top(m.test) or ""})
    _copy_rest(public, view, claimed)
    return n_rows - n_valid, n_valid


class _RowSplit:
    """The ``rows`` kind: two streaming passes over the pool CSV."""

    def __init__(self, rule: SplitRule, public: Path) -> None:
        self.rule, self.public = rule, public
        self.outer, self.member = _split_member(rule.pool)
        self.pool = public / self.outer
        if not self.pool.is_file():
            raise TaskPackageError(
                f"{rule.competition}: {self.outer} is missing from prepared/public; re-run "
                f"`mlebench prepare -c {rule.competition}`"
            )
        self.header = _header(self.pool, self.member)
        need = [*rule.id_from] if rule.id_from else [rule.id_column]
        need += [t for t in rule.targets if rule.one_hot is None or t == rule.one_hot]
        if rule.group:
            need.append(rule.group)
        if rule.test_columns:
            need += rule.test_columns
        _missing(rule, rule.pool, self.header, need)
        self.col = {c: i for i, c in enumerate(self.header)}
        self.groups: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        self.train_ids: list[str] = []
        self.valid_ids: list[tuple[str, str]] = []

    def ident(self, row: list[str]) -> str:
        if self.rule.id_from:
            return "_".join(row[self.col[c]] for c in self.rule.id_from)
        return row[self.col[self.rule.id_column]]

    def rows(self) -> Iterator[list[str]]:
        with _open_text(self.pool, self.member) as fh:
            reader = csv.reader(fh)
            next(reader, None)
            for row in reader:
                if len(row) == len(self.header):
                    yield row

    def scan(self) -> int:
        """Pass 1: count the units (rows, or groups in order of first appearance)."""
        rule, n = self.rule, 0
        for row in self.rows():
            n += 1
            if rule.group:
                self.groups.setdefault(row[self.col[rule.group]], len(self.groups))
            if rule.distinct_ids:
                key = self.ident(row)
                self.counts[key] = self.counts.get(key, 0) + 1
        return len(self.groups) if rule.group else n

    def _answer_header(self, classes: list[str]) -> list[str]:
        rule = self.rule
        if rule.answer_columns == ("*",):
            cols = list(self.header)
        elif rule.answer_columns:
            cols = list(rule.answer_columns)
        elif rule.one_hot:
            cols = [rule.id_column, *classes]
        else:
            cols = [rule.id_column, *rule.targets]
        return cols + list(rule.answer_constants)

    def write(self, chosen: set[int], view: Path, private: Path) -> tuple[int, int]:
        """Pass 2: the training part, the test part, the sample and the answers."""
        rule = self.rule
        s_header, s_first = _sample_fill(self.public, rule)
        classes = [c for c in s_header if c != rule.id_column] if rule.one_hot else []
        a_header = self._answer_header(classes)
        t_header = list(rule.test_columns or [c for c in self.header if c not in rule.targets])
        outs: dict[str, _Out] = {
            "train": _Out(view / self.outer, self.header, member=self.member),
            "sample": _Out(
                view / _split_member(rule.sample)[0], s_header, member=_split_member(rule.sample)[1]
            ),
            "answers": _Out(private / rule.answers, a_header),
        }
        if rule.test_file:
            t_outer, t_member = _split_member(rule.test_file)
            outs["test"] = _Out(view / t_outer, t_header, member=t_member)
        if rule.private_sample:
            outs["private_sample"] = _Out(private / rule.private_sample, s_header)
        keep_ids = bool(rule.media or rule.filtered)
        n_rows = n_valid = 0
        try:
            for index, row in enumerate(self.rows()):
                n_rows += 1
                unit = self.groups[row[self.col[rule.group]]] if rule.group else index
                old = self.ident(row)
                if unit not in chosen or (rule.distinct_ids and self.counts.get(old) != 1):
                    outs["train"].write(row)
                    if keep_ids:
                        self.train_ids.append(old)
                    continue
                new = rule.test_id.format(i=n_valid) if rule.test_id else old
                n_valid += 1
                if keep_ids:
                    self.valid_ids.append((old, new))
                values = dict(zip(self.header, row, strict=True))
                values[rule.id_column] = new
                if "test" in outs:
                    outs["test"].write([values[c] for c in t_header])
                srow = [self._sample_cell(c, values, s_first) for c in s_header]
                outs["sample"].write(srow)
                if "private_sample" in outs:
                    outs["private_sample"].write(srow)
                outs["answers"].write([self._answer_cell(c, values, classes) for c in a_header])
        finally:
            for o in outs.values():
                o.close()
        if n_valid == 0:
            raise TaskPackageError(
                f"{rule.competition}: no row of {rule.pool} could be held out (ids not "
                f"unique?); {_FIX}"
            )
        return n_rows, n_valid

    def _sample_cell(self, c: str, values: Mapping[str, str], first: Mapping[str, str]) -> str:
        rule = self.rule
        if c == rule.id_column:
            return values[c]
        if c in rule.sample_from:
            return values[rule.sample_from[c]]
        if c in values and c not in rule.targets:
            return values[c]
        return first.get(c, "0")

    def _answer_cell(self, c: str, values: Mapping[str, str], classes: list[str]) -> str:
        rule = self.rule
        if c in rule.answer_constants:
            return rule.answer_constants[c]
        if rule.one_hot and c in classes:
            return "1" if values[rule.one_hot] == c else "0"
        return values[c]


def _filter_csv(src: Path, dst: Path, column: str, keep: set[str]) -> None:
    if not src.is_file():
        return
    with _open_text(src) as fh:
        reader = csv.reader(fh)
        header = next(reader, [])
        out = _Out(dst, header)
        i = header.index(column) if column in header else None
        for row in reader:
            if i is None or (len(row) > i and row[i] in keep):
                out.write(row)
        out.close()


def _move_media(
    rule: SplitRule,
    m: Media,
    public: Path,
    view: Path,
    train_ids: list[str],
    valid_ids: list[tuple[str, str]],
) -> None:
    src = public / m.train
    pairs = [(m.name.format(id=i), m.train, m.name.format(id=i)) for i in train_ids] + [
        (m.name.format(id=old), m.test, m.name.format(id=new)) for old, new in valid_ids
    ]
    if m.train.endswith(".zip"):
        if not src.is_file():
            raise TaskPackageError(f"{rule.competition}: {m.train} is missing from prepared/public")
        with zipfile.ZipFile(src) as zin:
            members = {Path(n).name: n for n in zin.namelist() if not n.endswith("/")}
            writers: dict[str, zipfile.ZipFile] = {}
            try:
                for name, dest, new in pairs:
                    if name not in members:
                        raise TaskPackageError(
                            f"{rule.competition}: {m.train} has no {name} for a row of "
                            f"{rule.pool}; re-run `mlebench prepare -c {rule.competition}`"
                        )
                    zw = writers.get(dest)
                    if zw is None:
                        (view / dest).parent.mkdir(parents=True, exist_ok=True)
                        zw = writers[dest] = zipfile.ZipFile(view / dest, "w", zipfile.ZIP_DEFLATED)
                    zw.writestr(new, zin.read(members[name]))
            finally:
                for zw in writers.values():
                    zw.close()
        return
    if not src.is_dir():
        raise TaskPackageError(f"{rule.competition}: {m.train}/ is missing from prepared/public")
    for name, dest, new in pairs:
        f = src / name
        if not f.exists():
            raise TaskPackageError(
                f"{rule.competition}: {m.train}/{name} is missing for a row of {rule.pool}; "
                f"re-run `mlebench prepare -c {rule.competition}`"
            )
        _link(f, view / dest / new)


def _paired_images(rule: SplitRule, public: Path, view: Path, private: Path) -> tuple[int, int]:
    dirty, clean = public / rule.pool, public / rule.media[0].train
    names = sorted(p.name for p in dirty.glob("*.png")) if dirty.is_dir() else []
    if not clean.is_dir():
        raise TaskPackageError(f"{rule.competition}: {clean.name}/ is missing from public")
    chosen = _choose(len(names), rule, "images")
    held = [n for i, n in enumerate(names) if i in chosen]
    for i, n in enumerate(names):
        if i in chosen:
            _link(dirty / n, view / "test" / n)
        else:
            _link(dirty / n, view / rule.pool / n)
            _link(clean / n, view / clean.name / n)
    import numpy as np

    try:
        from PIL import Image
    except ImportError:
        raise MissingDependency(
            f"{rule.competition}: its validation view reads images with Pillow: "
            "pip install 'openmle[data]' (or pillow)"
        ) from None

    s_header, s_first = _sample_fill(public, rule)
    answers = _Out(private / rule.answers, ["id", "value"])
    sample = _Out(view / rule.sample, s_header)
    fill = s_first.get("value", "1")
    for n in held:
        if not (clean / n).is_file():
            raise TaskPackageError(f"{rule.competition}: {clean.name}/{n} is missing")
        with Image.open(clean / n) as im:
            arr = np.asarray(im.convert("L")) / 255.0
        stem = Path(n).stem
        rows, cols = arr.shape
        for r in range(rows):
            line = arr[r]
            for c in range(cols):
                pid = f"{stem}_{r + 1}_{c + 1}"
                answers.write([pid, repr(float(line[c]))])
                sample.write([pid, fill])
    answers.close()
    sample.close()
    _copy_rest(public, view, {rule.pool, clean.name, "test", rule.sample})
    return len(names) - len(held), len(held)


def _json_records(rule: SplitRule, public: Path, view: Path, private: Path) -> tuple[int, int]:
    src = public / rule.pool
    try:
        records = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskPackageError(
            f"{rule.competition}: cannot read {rule.pool} ({type(exc).__name__}); re-run "
            f"`mlebench prepare -c {rule.competition}`"
        ) from None
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise TaskPackageError(f"{rule.competition}: {rule.pool} is not a list of records")
    target = rule.targets[0]
    for r in records:
        if rule.id_column not in r or target not in r:
            raise TaskPackageError(
                f"{rule.competition}: a record of {rule.pool} lacks {rule.id_column} or "
                f"{target}; re-run `mlebench prepare -c {rule.competition}`"
            )
    test_file = rule.test_file or "test.json"
    fields: list[str] | None = None
    with contextlib.suppress(OSError, ValueError, IndexError, AttributeError):
        fields = list(json.loads((public / test_file).read_text(encoding="utf-8"))[0].keys())
    chosen = _choose(len(records), rule, "records")
    train = [r for i, r in enumerate(records) if i not in chosen]
    held = [r for i, r in enumerate(records) if i in chosen]
    keep = fields or [k for k in held[0] if k != target]
    (view / rule.pool).write_text(json.dumps(train, indent=4), encoding="utf-8")
    (view / test_file).write_text(
        json.dumps([{k: r[k] for k in keep if k in r} for r in held], indent=4), encoding="utf-8"
    )
    for name in (rule.pool, test_file):
        stem = Path(name).stem
        if (public / f"{stem}.zip").is_file():
            with zipfile.ZipFile(view / f"{stem}.zip", "w", zipfile.ZIP_DEFLATED) as zf:
                zf.write(view / name, arcname=name)
    s_header, s_first = _sample_fill(public, rule)
    answers = _Out(private / rule.answers, [rule.id_column, target])
    sample = _Out(view / rule.sample, s_header)
    for r in held:
        answers.write([r[rule.id_column], int(bool(r[target]))])
        sample.write(
            [r[rule.id_column] if c == rule.id_column else s_first.get(c, "0") for c in s_header]
        )
    answers.close()
    sample.close()
    claimed = {rule.pool, test_file, rule.sample, f"{Path(rule.pool).stem}.zip"}
    claimed.add(f"{Path(test_file).stem}.zip")
    _copy_rest(public, view, claimed)
    return len(train), len(held)


def _zip_files(path: Path, suffix: str) -> tuple[list[str], dict[str, str]]:
    with zipfile.ZipFile(path) as zf:
        members = {Path(n).name: n for n in zf.namelist() if n.endswith(suffix)}
    return sorted(members), members


def _labelled_files(rule: SplitRule, public: Path, view: Path, private: Path) -> tuple[int, int]:
    src = public / rule.pool
    if not src.is_file():
        raise TaskPackageError(f"{rule.competition}: {rule.pool} is missing from prepared/public")
    names, members = _zip_files(src, ".jpg")
    chosen = _choose(len(names), rule, "images")
    s_header, s_first = _sample_fill(public, rule)
    answers = _Out(private / rule.answers, [rule.id_column, rule.targets[0]])
    sample = _Out(view / rule.sample, s_header)
    counters = {"cat": 0, "dog": 0}
    n_valid = 0
    test_zip = rule.media[0].test
    with (
        zipfile.ZipFile(src) as zin,
        zipfile.ZipFile(view / rule.pool, "w", zipfile.ZIP_DEFLATED) as ztrain,
        zipfile.ZipFile(view / test_zip, "w", zipfile.ZIP_DEFLATED) as ztest,
    ):
        for i, name in enumerate(names):
            data = zin.read(members[name])
            if i in chosen:
                n_valid += 1
                ztest.writestr(f"{n_valid}.jpg", data)
                answers.write([n_valid, int("dog" in name)])
                sample.write(
                    [n_valid if c == rule.id_column else s_first.get(c, "0.5") for c in s_header]
                )
            else:
                kind = "cat" if "cat" in name else "dog"
                ztrain.writestr(f"{kind}.{counters[kind]}.jpg", data)
                counters[kind] += 1
    answers.close()
    sample.close()
    _copy_rest(public, view, {rule.pool, test_zip, rule.sample})
    return len(names) - n_valid, n_valid


def _time_days(rule: SplitRule, public: Path, view: Path, private: Path) -> tuple[int, int]:
    src = public / rule.pool
    if not src.is_file():
        raise TaskPackageError(f"{rule.competition}: {rule.pool} is missing from prepared/public")
    names, members = _zip_files(src, ".aif")
    by_day: dict[str, list[str]] = {}
    for n in names:
        by_day.setdefault(n.split("_")[0], []).append(n)
    days = sorted(by_day)
    if len(days) >= 2:
        n_days = min(len(days) - 1, max(1, round(rule.fraction * len(days))))
        held = {n for d in days[-n_days:] for n in by_day[d]}
    else:
        if len(names) < 2:
            raise TaskPackageError(f"{rule.competition}: {rule.pool} has fewer than 2 clips")
        k = min(len(names) - 1, max(1, round(rule.fraction * len(names))))
        held = set(names[-k:])
    train_dir = Path(rule.pool).stem
    test_zip = rule.media[0].test
    test_dir = Path(test_zip).stem
    s_header, s_first = _sample_fill(public, rule)
    answers = _Out(private / rule.answers, [rule.id_column, rule.targets[0]])
    sample = _Out(view / rule.sample, s_header)
    n_train = n_valid = 0
    with (
        zipfile.ZipFile(src) as zin,
        zipfile.ZipFile(view / rule.pool, "w", zipfile.ZIP_DEFLATED) as ztrain,
        zipfile.ZipFile(view / test_zip, "w", zipfile.ZIP_DEFLATED) as ztest,
    ):
        ztrain.writestr(f"{train_dir}/", b"")
        ztest.writestr(f"{test_dir}/", b"")
        for name in names:
            data = zin.read(members[name])
            if name in held:
                new = name.split("TRAIN")[0] + f"Test{n_valid}.aif"
                n_valid += 1
                ztest.writestr(f"{test_dir}/{new}", data)
                answers.write([new, 1 if Path(name).stem.endswith("_1") else 0])
                sample.write(
                    [new if c == rule.id_column else s_first.get(c, "0") for c in s_header]
                )
            else:
                renamed = re.sub(r"TRAIN\d+", f"TRAIN{n_train}", name)
                ztrain.writestr(f"{train_dir}/{renamed}", data)
                n_train += 1
    answers.close()
    sample.close()
    _copy_rest(public, view, {rule.pool, test_zip, rule.sample})
    return n_train, n_valid


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError:
        raise TaskPackageError(f"{path.name} is missing from prepared/public") from None


def _birds(rule: SplitRule, public: Path, view: Path, private: Path) -> tuple[int, int]:
    ess = public / "essential_data"
    folds: dict[int, str] = {}
    for line in _read_lines(ess / "CVfolds_2.txt")[1:]:
        rid, _, fold = line.partition(",")
        if rid.strip().isdigit():
            folds[int(rid)] = fold.strip()
    labels: dict[int, str | None] = {}
    for line in _read_lines(ess / "rec_labels_test_hidden.txt")[1:]:
        rid, _, rest = line.partition(",")
        if rid.strip().isdigit():
            labels[int(rid)] = None if rest.strip() == "?" else rest.strip()
    pool = sorted(r for r, f in folds.items() if f == "0" and labels.get(r) is not None)
    chosen = _choose(len(pool), rule, "labelled recordings")
    held = {r for i, r in enumerate(pool) if i in chosen}
    keep = set(pool)
    names: dict[int, str] = {}
    for line in _read_lines(ess / "rec_id2filename.txt")[1:]:
        rid, _, fname = line.partition(",")
        if rid.strip().isdigit():
            names[int(rid)] = fname.strip()
    dropped = {names[r] for r in names if r not in keep}
    n_species = max(1, len(_read_lines(ess / "species_list.txt")) - 1)
    if not (ess / "species_list.txt").is_file():
        n_species = 19
    vess = view / "essential_data"
    vess.mkdir(parents=True, exist_ok=True)
    (vess / "CVfolds_2.txt").write_text(
        "rec_id,fold\n" + "".join(f"{r},{1 if r in held else 0}\n" for r in pool)
    )
    lab_lines = ["rec_id,[labels]"]
    for r in pool:
        lab = labels[r] or ""
        lab_lines.append(f"{r},?" if r in held else (f"{r},{lab}" if lab else f"{r}"))
    (vess / "rec_labels_test_hidden.txt").write_text("\n".join(lab_lines) + "\n")
    (vess / "rec_id2filename.txt").write_text(
        "rec_id,filename\n" + "".join(f"{r},{names[r]}\n" for r in pool if r in names)
    )
    answers = _Out(private / rule.answers, ["Id", "Probability"])
    s_header, s_first = _sample_fill(public, rule)
    sample = _Out(view / rule.sample, s_header)
    for r in sorted(held):
        species = {int(x) for x in (labels[r] or "").split(",") if x.strip().isdigit()}
        for s in range(n_species):
            answers.write([r * 100 + s, int(s in species)])
            sample.write([r * 100 + s if c == "Id" else s_first.get(c, "0") for c in s_header])
    answers.close()
    sample.close()
    _birds_rest(rule, public, view, dropped, keep)
    return len(pool) - len(held), len(held)


def _birds_rest(
    rule: SplitRule, public: Path, view: Path, dropped: set[str], keep: set[int]
) -> None:
    """Every other file of public, without the recordings left out of the view."""
    handled = {"CVfolds_2.txt", "rec_labels_test_hidden.txt", "rec_id2filename.txt"}
    for p in sorted(public.rglob("*")):
        rel = p.relative_to(public)
        if p.is_dir() or p.is_symlink() or rel.as_posix() == rule.sample:
            continue
        if (rel.parts[0] == "essential_data" and p.name in handled) or p.stem in dropped:
            continue
        if p.suffix == ".txt" and rel.parts[0] == "supplemental_data":
            _filter_ids(p, view / rel, keep)
            continue
        _link(p, view / rel)


def _filter_ids(src: Path, dst: Path, keep: set[int]) -> None:
    lines = _read_lines(src)
    out = lines[:1]
    for line in lines[1:]:
        rid = line.partition(",")[0].strip()
        if rid.isdigit() and int(rid) in keep:
            out.append(line)
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("\n".join(out) + "\n")


def rules_table() -> Mapping[str, str]:
    """Competition id -> its rule in words (for docs and the doctor)."""
    return {cid: r.describe() for cid, r in LITE_RULES.items()}
