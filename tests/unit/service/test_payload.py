"""Submission parsing: task-root confinement (a property over generated paths) and field mapping."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmle import Split
from openmle.service import job_view
from openmle.service._payload import PayloadError, confine, parse_submit
from openmle.service._store import JobRow


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A task root with nested dirs, an inward and an outward symlink, and a secret outside."""
    base = tmp_path_factory.mktemp("confine")
    root, secret = base / "root", base / "secret"
    (root / "a" / "b").mkdir(parents=True)
    secret.mkdir()
    (root / "out").symlink_to(secret)
    (root / "a" / "in").symlink_to(root / "a" / "b")
    (root / "a" / "up").symlink_to(base)
    return root, secret


_SEGMENTS = st.sampled_from(["a", "b", "..", ".", "out", "in", "up", "secret", "root", ""])


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(_SEGMENTS, min_size=1, max_size=6), absolute=st.booleans())
def test_confined_paths_never_leave_the_root(
    tree: tuple[Path, Path], parts: list[str], absolute: bool
) -> None:
    """Whatever the path, ``confine`` returns a directory inside the root or refuses with 400."""
    root, _ = tree
    ref = "/".join(parts)
    if absolute:
        ref = f"{root}/{ref}"
    try:
        got = confine(ref, [root])
    except PayloadError as exc:
        refusal = (exc.status, exc.field, bool(exc.detail))
        assert refusal == (400, "data_dir", True)
        return
    real_root = Path(os.path.realpath(root))
    assert got.is_dir() and got.is_relative_to(real_root), (ref, got)
    assert ".." not in parts


def _parse(body: dict[str, Any], roots: list[Path], **kw: Any) -> Any:
    kw.setdefault("default_timeout_s", 100.0)
    kw.setdefault("max_timeout_s", 1000.0)
    kw.setdefault("max_code_bytes", 1000)
    kw.setdefault("gpu_slots", 1)
    return parse_submit(body, roots=roots, **kw)


def test_fields_map_onto_the_job(tmp_path: Path) -> None:
    """Defaults, split aliases, GPU resources and bundled names map as documented."""
    (tmp_path / "toy").mkdir()
    req = _parse({"code": "x", "task": "toy"}, [tmp_path])
    assert req.job.timeout_s == 100.0 and req.pool == "cpu" and req.priority == 1
    assert req.job.split is Split.VALID and req.job.task == str(tmp_path.resolve() / "toy")
    req = _parse(
        {"code": "x", "task": "tabular-binary", "resource_type": "gpu", "eval_split": "test"},
        [tmp_path],
    )
    assert req.job.task == "tabular-binary" and req.job.resources.gpus == 1
    assert req.pool == "gpu" and req.job.split is Split.TEST
    req = _parse({"code": "x", "task": "toy", "environment": {"EVAL_SPLIT": "test"}}, [tmp_path])
    assert req.job.split is Split.TEST and dict(req.job.env) == {}
    with pytest.raises(PayloadError, match="larger than the limit"):
        _parse({"code": "x" * 2000, "task": "toy"}, [tmp_path])
    with pytest.raises(PayloadError, match="no task roots"):
        _parse({"code": "x", "data_dir": "toy"}, [])
    # A name that is neither under a root nor bundled is refused, never looked up elsewhere.
    with pytest.raises(PayloadError, match="no task directory 'nowhere'") as info:
        _parse({"code": "x", "task": "nowhere"}, [tmp_path])
    assert info.value.status == 400 and info.value.field == "task"


def test_same_job_same_hash(tmp_path: Path) -> None:
    """The request hash depends on the job, not on the idempotency key or field order."""
    (tmp_path / "toy").mkdir()
    a = _parse({"code": "x", "task": "toy", "idempotency_key": "k1"}, [tmp_path])
    b = _parse({"idempotency_key": "k2", "task": "toy", "code": "x"}, [tmp_path])
    c = _parse({"code": "y", "task": "toy"}, [tmp_path])
    assert a.request_hash() == b.request_hash() != c.request_hash()


def test_job_view_scores_by_split() -> None:
    """A test-split score is reported as ``test_score``, never as a validation score."""
    row = JobRow(
        seq=1,
        id="j",
        owner="o",
        idempotency_key=None,
        request_hash="h",
        name="n",
        pool="cpu",
        priority=1,
        spec={"job": {"split": "test", "timeout_s": 5.0}, "task_ref": "toy"},
        status="completed",
        attempts=1,
        created_at=0.0,
        started_at=1.0,
        completed_at=2.5,
        result={"outcome": "success", "score": 0.9, "split": "test", "logs": "hi"},
        detail="",
    )
    view = job_view(row)
    res = view["result"]
    assert res["test_score"] == 0.9 and res["valid_score"] is None and res["score"] == 0.9
    assert res["scores_by_split"] == {"test": 0.9} and res["run_log"] == "hi"
    assert view["created_at"] == "1970-01-01T00:00:00.000000Z"
    assert view["completed_at"] == "1970-01-01T00:00:02.500000Z"


@pytest.mark.parametrize(
    "ref",
    ["a" * 100_000, "a/" + "b" * 300, "c" * 5000, "loop", "loop/x", "a/loop2/y"],
    ids=["long", "long-name", "over-path-max", "loop", "in-loop", "nested-loop"],
)
def test_a_path_too_long_or_looping_is_a_400_never_a_500(tmp_path: Path, ref: str) -> None:
    """``task: "a" * 100000`` raised OSError (ENAMETOOLONG) out of the handler: a 500."""
    (tmp_path / "a").mkdir()
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "a" / "loop2").symlink_to(tmp_path / "a" / "loop2")
    for key in ("task", "data_dir"):
        body = {"code": "print(1)", key: ref}
        with pytest.raises(PayloadError) as info:
            _parse(body, [tmp_path])
        assert info.value.status == 400 and info.value.field in ("task", "data_dir")
