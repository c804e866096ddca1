"""The bench's engines: the spec grammar, the picklable Ray resolver, the job service's task
directories (hostile ones refused) and the slots a bench fills."""

from __future__ import annotations

import importlib.util
import json
import pickle
from pathlib import Path
from typing import Any

import anyio
import pytest

from openmle.bench import bench_sandbox, bench_task_sandbox
from openmle.bench._engines import (
    MARKER,
    BenchRefResolver,
    ServiceTasks,
    TaskDirResolver,
    engine_slots,
)
from openmle.bench._runner import _Resolver
from openmle.errors import InvalidArgument, MissingDependency


def test_specs_follow_the_one_registry() -> None:
    for spec in ("local", "service:http://127.0.0.1:9"):
        assert callable(bench_sandbox(spec))
    if importlib.util.find_spec("ray") is not None:
        assert callable(bench_sandbox("ray"))
    else:  # refused before any bench directory is made, with the install line
        with pytest.raises(MissingDependency, match=r"openmle\[ray\]"):
            bench_sandbox("ray")
    with pytest.raises(InvalidArgument, match="Expected --sandbox to be one of"):
        bench_sandbox("no-such-sandbox")
    with pytest.raises(InvalidArgument, match="needs an argument"):
        bench_sandbox("service")


def test_the_ray_resolver_ships_only_the_path(tmp_path: Path) -> None:
    r = BenchRefResolver(str(tmp_path), _Resolver.open)
    r._inner = object()  # what a worker caches is never shipped
    back = pickle.loads(pickle.dumps(r))
    assert back.bench_dir == str(tmp_path) and back._inner is None
    with pytest.raises(InvalidArgument, match="not a bench directory"):
        back("mini@seed-0")


def _task_dir(root: Path, ref: str, marker: Any) -> Path:
    d = root / "bench" / "tasks" / ref
    d.mkdir(parents=True)
    if marker is not None:
        (d / MARKER).write_text(json.dumps(marker))
    return d


def test_hostile_task_directories_are_refused(tmp_path: Path) -> None:
    resolve = TaskDirResolver(_Resolver.open)
    good = {"kind": "openmle-bench-task", "ref": "c@seed-0"}
    with pytest.raises(InvalidArgument, match="runs only `openmle bench` jobs"):
        resolve("toy")  # a bundled task name: not a bench's
    cases = [
        _task_dir(tmp_path / "a", "c@seed-0", None),  # no marker
        _task_dir(tmp_path / "b", "c@seed-0", {**good, "ref": "d@seed-0"}),  # another ref
        _task_dir(tmp_path / "c", "c@seed-0", {**good, "kind": "x"}),
        _task_dir(tmp_path / "d", "c@seed-0", [good]),
    ]
    big = _task_dir(tmp_path / "e", "c@seed-0", None)
    (big / MARKER).write_text(json.dumps({**good, "pad": "x" * 10_000}))  # over the cap
    linked = _task_dir(tmp_path / "f", "c@seed-0", None)
    (tmp_path / "elsewhere.json").write_text(json.dumps(good))
    (linked / MARKER).symlink_to(tmp_path / "elsewhere.json")  # never followed
    wrong_folder = tmp_path / "g" / "bench" / "other" / "c@seed-0"
    wrong_folder.mkdir(parents=True)
    (wrong_folder / MARKER).write_text(json.dumps(good))
    for d in [*cases, big, linked, wrong_folder]:
        with pytest.raises(InvalidArgument, match="not an `openmle bench` task directory"):
            resolve(str(d))
    ok = _task_dir(tmp_path / "h", "c@seed-0", good)
    with pytest.raises(InvalidArgument, match="not a bench directory"):
        resolve(str(ok))  # the marker is right, but no bench manifest two levels up


def test_service_task_directories_only_for_bench_refs(tmp_path: Path) -> None:
    box = ServiceTasks(inner=None, bench_dir=tmp_path)
    d = box._task_dir("mini-tabular@seed-3")
    assert d == tmp_path.resolve() / "tasks" / "mini-tabular@seed-3"
    assert json.loads((d / MARKER).read_text()) == {
        "kind": "openmle-bench-task",
        "ref": "mini-tabular@seed-3",
    }
    for bad in ("../x@seed-0", "x", "a/b@seed-0", "x@seed-", ".x@seed-0"):
        with pytest.raises(InvalidArgument, match="bench task reference"):
            box._task_dir(bad)


def test_bench_task_sandbox_needs_an_inner_taking_a_resolver() -> None:
    with pytest.raises(InvalidArgument, match="takes no resolver"):
        bench_task_sandbox("service:http://127.0.0.1:9")


def test_slots_of_a_sandbox() -> None:
    class Box:
        max_concurrency = 3

    assert anyio.run(engine_slots, Box()) == 3
    assert anyio.run(engine_slots, object()) == 1
