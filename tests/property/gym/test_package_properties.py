"""Malformed packages and submissions give reports naming the problem, never a crash."""

from __future__ import annotations

import csv
import io
import tempfile
from collections.abc import Sequence
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmle.gym import load_task, validate_path
from openmle.gym._gradeproc import CsvError, read_csv

FILES = (
    "data/public/train.csv",
    "data/public/test.csv",
    "data/public/sample_submission.csv",
    "data/private/test_answer.csv",
    "data/public/description.txt",
    "task.toml",
)


def _csv(header: list[str], rows: Sequence[Sequence[object]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _write_good(root: Path, n_train: int, n_test: int) -> None:
    pub, priv = root / "data/public", root / "data/private"
    pub.mkdir(parents=True)
    priv.mkdir(parents=True)
    (pub / "train.csv").write_text(_csv(["id", "x", "y"], [[i, i, i % 2] for i in range(n_train)]))
    ids = range(n_train, n_train + n_test)
    (pub / "test.csv").write_text(_csv(["id", "x"], [[i, i] for i in ids]))
    (pub / "sample_submission.csv").write_text(_csv(["id", "y"], [[i, 0] for i in ids]))
    (priv / "test_answer.csv").write_text(_csv(["id", "y"], [[i, i % 2] for i in ids]))
    (pub / "description.txt").write_text("Predict y.\n")
    (root / "task.toml").write_text('metric = "accuracy"\n')


junk_text = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=100).map(lambda b: b.decode("latin-1")),
    st.lists(
        st.lists(st.sampled_from(["id", "x", "y", "", "1", "2.5", "nan", '"', "a,b"]), max_size=5),
        max_size=6,
    ).map(lambda rows: "\n".join(",".join(r) for r in rows)),
)

mutation = st.one_of(
    st.tuples(st.just("delete"), st.sampled_from(FILES), st.none()),
    st.tuples(st.just("replace"), st.sampled_from(FILES), junk_text),
    st.tuples(st.just("shift_ids"), st.sampled_from(FILES[1:4]), st.integers(-3, 3)),
)


def _apply(root: Path, kind: str, rel: str, arg: object) -> None:
    path = root / rel
    if kind == "delete":
        path.unlink(missing_ok=True)
    elif kind == "replace":
        assert isinstance(arg, str)
        path.write_bytes(arg.encode("utf-8", errors="surrogatepass"))
    elif kind == "shift_ids" and path.exists():
        lines = path.read_text().splitlines()
        out = [lines[0]]
        for line in lines[1:]:
            first, _, rest = line.partition(",")
            out.append(f"{int(first) + int(str(arg))},{rest}")
        path.write_text("\n".join(out) + "\n")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(2, 30),
    st.integers(1, 10),
    st.lists(mutation, max_size=3),
)
def test_validation_never_crashes(
    n_train: int, n_test: int, mutations: list[tuple[str, str, object]]
) -> None:
    """Whatever is broken, validate_path returns a report; each problem names a file and a fix."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        _write_good(root, n_train, n_test)
        for kind, rel, arg in mutations:
            _apply(root, kind, rel, arg)
        report = validate_path(root, smoke_test=False)
        for p in report.problems:
            assert p.file and p.message and p.fix
        if not mutations:
            assert report.ok, report.problems
        if any(k == "delete" and r != "task.toml" for k, r, _ in mutations):
            assert not report.ok


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(junk_text)
def test_grading_junk_never_crashes(text: str) -> None:
    """Any submission text grades to a report; invalid ones say why."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        _write_good(root, 20, 5)
        sub = Path(tmp) / "submission.csv"
        sub.write_bytes(text.encode("utf-8", errors="surrogatepass"))
        task = load_task(root)
        for split in ("test", "valid"):
            report = task.grade(sub, split)
            assert report.valid == (report.score is not None)
            if not report.valid:
                assert report.reason


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(FILES[1:4]),
    st.integers(-3, 3).filter(bool),
    st.integers(3, 12),
)
def test_mismatched_ids_are_named(rel: str, shift: int, n_test: int) -> None:
    """Shifting the ids of one of test/sample/answers is an error naming an id file."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        _write_good(root, 20, n_test)
        _apply(root, "shift_ids", rel, shift)
        report = validate_path(root, smoke_test=False)
        assert not report.ok
        id_files = set(FILES[1:4])
        assert any(p.file in id_files and "id" in p.message for p in report.errors), report


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FILES[:4]), junk_text)
def test_unparseable_csv_is_named(rel: str, text: str) -> None:
    """A CSV the reader rejects is an error whose file is that CSV."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        _write_good(root, 10, 3)
        _apply(root, "replace", rel, text)
        try:
            read_csv(root / rel, label=rel)
        except CsvError:
            report = validate_path(root, smoke_test=False)
            assert any(p.file == rel for p in report.errors), report
        else:
            validate_path(root, smoke_test=False)  # parseable junk: still no crash


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.permutations(list(range(8))), st.integers(0, 8))
def test_row_order_is_irrelevant_and_row_loss_is_named(order: list[int], keep: int) -> None:
    """Any row order grades the same; dropping rows is invalid with a row-count reason."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        _write_good(root, 20, 8)
        ids = list(range(20, 28))
        rows = [[ids[i], ids[i] % 2] for i in order][:keep]
        sub = Path(tmp) / "submission.csv"
        sub.write_text(_csv(["id", "y"], rows))
        report = load_task(root).grade(sub)
        if keep == 8:
            assert report.valid and report.score == 1.0
        else:
            assert not report.valid and "rows" in report.reason
