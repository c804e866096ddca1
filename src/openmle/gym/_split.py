"""The validation view: a deterministic hold-out of a task's public training data.

Search must never see the private test answers, so it runs against a view built from
``data/public/train.csv`` alone: a fixed share of the training rows (chosen by a seeded
permutation, kept in file order) becomes the view's ``test.csv`` with the target columns
removed, their targets become the view's answers, and the other rows become the view's
``train.csv``. Every other public file is linked (or copied) unchanged, and the sample
submission keeps the task's columns. The view lives in the cache, outside the package:
``<cache>/valid/<name>-<key>/public`` (what the program sees) and ``.../private`` (the
hold-out answers, never mounted). The key hashes the inputs, so an edited ``train.csv`` gets a
fresh view.

Departure from the released system: its tasks were prepared with a separate validation data
directory by external tooling; here the view is derived on demand and identically everywhere.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from openmle.errors import TaskPackageError
from openmle.gym._cache import cache_root, publish_dir
from openmle.gym._gradeproc import CsvError, Table, read_csv

__all__ = ["VALID_SEED", "valid_view_dir", "valid_view_key", "valid_view_path"]

VALID_SEED = 20260729
"""Seed of the hold-out permutation (fixed: the view must be identical everywhere)."""

_VERSION = b"openmle-valid-view-1"
_ANSWERS = Path("data/private/test_answer.csv")


def _open_regular(path: Path) -> int:
    """A read-only descriptor on ``path`` when it is (or links to) a regular file; a FIFO is
    not waited on and a device (``-> /dev/zero``) is not read: both raise :class:`OSError`.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _header(path: Path) -> list[str]:
    """The CSV's header, from its first line (at most 1 MiB); [] when it cannot be read."""
    try:
        with open(_open_regular(path), newline="", encoding="utf-8-sig") as f:
            first = f.readline(1 << 20)
        return [h.strip() for h in next(csv.reader([first]), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return []


def _hash_file(h: hashlib._Hash, path: Path) -> None:
    """Feed the regular file ``path`` to ``h`` in chunks (``<missing>`` when unreadable)."""
    try:
        fd = _open_regular(path)
    except OSError:
        h.update(b"<missing>")
        return
    with open(fd, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)


def valid_view_key(root: Path, *, id_column: str | None, fraction: float) -> str:
    """A hex digest of everything the view depends on."""
    h = hashlib.sha256(_VERSION)
    h.update(repr((id_column, fraction, VALID_SEED)).encode())
    public = root / "data" / "public"
    _hash_file(h, public / "train.csv")
    h.update(repr(_header(public / "sample_submission.csv")).encode())
    h.update(repr(_header(root / _ANSWERS)).encode())
    with contextlib.suppress(OSError):
        h.update(repr(sorted(p.name for p in public.iterdir())).encode())
    return h.hexdigest()


def _write(path: Path, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _link_or_copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst, copy_function=_copy_file)
    else:
        _copy_file(str(src), str(dst))


def _copy_file(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _build(
    tmp: Path, root: Path, *, id_column: str | None, targets: Sequence[str], fraction: float
) -> None:
    public = root / "data" / "public"
    try:
        train = read_csv(public / "train.csv", label="data/public/train.csv", max_bytes=1 << 34)
        sample = read_csv(public / "sample_submission.csv", label="sample_submission.csv")
    except CsvError as exc:
        raise TaskPackageError(f"Cannot build the validation view: {exc}") from None
    missing = [c for c in [*([id_column] if id_column else []), *targets] if c not in train.header]
    if missing:
        raise TaskPackageError(
            f"Cannot build the validation view: data/public/train.csv lacks the column(s) "
            f"{missing} that the answers file has; keep the id and target columns in train.csv"
        )
    n = len(train.rows)
    n_hold = min(max(1, round(fraction * n)), n - 1)
    if n < 2:
        raise TaskPackageError(
            f"Cannot build the validation view: data/public/train.csv has {n} rows; it needs "
            "enough rows to hold some out (at least 2)"
        )
    perm = np.random.default_rng(VALID_SEED).permutation(n)
    held = np.zeros(n, dtype=bool)
    held[perm[:n_hold]] = True
    keep_rows = [r for r, h in zip(train.rows, held, strict=True) if not h]
    hold_rows = [r for r, h in zip(train.rows, held, strict=True) if h]
    held_table = Table(train.header, hold_rows)

    pub, priv = tmp / "public", tmp / "private"
    pub.mkdir()
    priv.mkdir()
    for entry in sorted(public.iterdir()):
        if entry.name not in {"train.csv", "test.csv", "sample_submission.csv"}:
            _link_or_copy(entry, pub / entry.name)
    _write(pub / "train.csv", train.header, keep_rows)
    real_test = _header(public / "test.csv")
    if real_test and all(c in train.header for c in real_test):
        test_cols = [c for c in real_test if c not in targets]
    else:
        test_cols = [c for c in train.header if c not in targets]
    _write(
        pub / "test.csv",
        test_cols,
        [[r[train.header.index(c)] for c in test_cols] for r in hold_rows],
    )
    filler = sample.rows[0] if sample.rows else ["0"] * len(sample.header)
    ids = held_table.column(id_column) if id_column else [""] * n_hold
    sample_rows = [
        [i if c == id_column else filler[k] for k, c in enumerate(sample.header)] for i in ids
    ]
    _write(pub / "sample_submission.csv", sample.header, sample_rows)
    answer_cols = [*([id_column] if id_column else []), *targets]
    _write(
        priv / "test_answer.csv",
        answer_cols,
        [[r[train.header.index(c)] for c in answer_cols] for r in hold_rows],
    )


def valid_view_path(name: str, key: str) -> Path:
    """Where the view of task ``name`` with inputs digest ``key`` lives (built or not)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:60] or "task"
    return cache_root() / "valid" / f"{safe}-{key[:16]}"


def valid_view_dir(
    root: Path,
    *,
    name: str,
    id_column: str | None,
    fraction: float,
    key: str | None = None,
) -> Path:
    """Materialise (once) and return the view root holding ``public/`` and ``private/``.

    Args:
        root: the task package root.
        name: the task name (part of the directory name).
        id_column: the id column shared by train.csv, the answers and the sample submission,
            or None to match rows by position.
        fraction: share of training rows held out, in (0, 1).
        key: a precomputed :func:`valid_view_key` (computed when None).

    Raises:
        TaskPackageError: train.csv is unreadable, lacks the id or target columns, or is too
            small to split.
    """
    key = key or valid_view_key(root, id_column=id_column, fraction=fraction)
    target = valid_view_path(name, key)
    if target.is_dir():
        return target
    answers_header = _header(root / _ANSWERS)
    if not answers_header:
        raise TaskPackageError(
            f"Cannot build the validation view: {_ANSWERS} is missing or has no header; write "
            "the hidden answers there (id and target columns)"
        )
    targets = [c for c in answers_header if c != id_column]
    return publish_dir(
        target,
        lambda tmp: _build(tmp, root, id_column=id_column, targets=targets, fraction=fraction),
    )
