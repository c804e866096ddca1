"""A third benchmark through the bench, end to end: the toy adapter of
``tests/unit/bench/toy_benchmark`` (written only against ``openmle.bench``'s protocol) runs
through :func:`openmle.bench.arun_bench`, its submissions are kept and graded by its own
grader, and the report gives MLE-bench's fields against its leaderboard, naming it.
"""

from __future__ import annotations

import ast
import fcntl
import json
import os
import re
from pathlib import Path

import anyio
import pytest
from tests._files import deep_tree
from tests.unit.bench._toy_sandbox import number_sandbox
from tests.unit.bench.toy_benchmark import KIND, ToyBench, make_toy

from openmle.bench import (
    BenchConfig,
    Benchmark,
    BenchTask,
    arun_bench,
    bench_report,
    benchmark_kind,
    benchmark_names,
    register_benchmark,
    write_report,
)
from openmle.errors import InvalidArgument
from openmle.testing import ScriptedModel

ANSWERS = {"toy-a": 0.75, "toy-b": 0.25}


def _program(x: float) -> str:
    return f"plan: write {x}\n```python\nopen('submission.csv', 'w').write('{x}')\n```"


def test_toy_adapter_satisfies_the_protocols(tmp_path: Path) -> None:
    bench = ToyBench(make_toy(tmp_path / "toy", ANSWERS))
    assert isinstance(bench, Benchmark)
    assert isinstance(bench.task("toy-a"), BenchTask)
    assert benchmark_kind("toy") is KIND
    assert benchmark_names()[:2] == ("mle-bench", "naturebench")
    with pytest.raises(InvalidArgument, match="already registered"):
        register_benchmark(
            type(KIND)(name="toy", title="Other", open=KIND.open, leaderboards=False)
        )
    with pytest.raises(InvalidArgument, match=r"Expected benchmark in .*'toy'.* but got 'toyz'"):
        BenchConfig(suite="s", competitions=["toy-a"], seeds=[0], model="m", data_dir="d",
                    benchmark="toyz")  # fmt: skip


def test_toy_benchmark_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    root = make_toy(tmp_path / "toy", ANSWERS)
    config = BenchConfig(
        suite="toy-all",
        competitions=ToyBench(root).suite("toy-all"),
        seeds=(0, 1),
        model="scripted",
        budget={"steps": 2},
        data_dir=str(root),
        benchmark="toy",
        time_limit_s=30.0,
        concurrency=2,
    )
    model = ScriptedModel(lambda _req: _program(0.7))
    out = tmp_path / "bench"
    lines: list[str] = []
    reports = anyio.run(
        lambda: arun_bench(
            out, config=config, model=model, sandbox=number_sandbox, emit=lines.append
        )
    )
    assert [(r.competition_id, r.seed) for r in reports] == [
        ("toy-a", 0), ("toy-a", 1), ("toy-b", 0), ("toy-b", 1)
    ]  # fmt: skip
    by = {(r.competition_id, r.seed): r for r in reports}
    # 1 - |0.7 - 0.75| = 0.95: silver on the toy board (N=10: gold row 1, silver row 2)
    a = by[("toy-a", 0)]
    assert a.valid_submission and a.score == pytest.approx(0.95)
    assert (a.gold_threshold, a.silver_threshold, a.bronze_threshold) == (0.99, 0.95, 0.8)
    assert a.medal == "silver" and a.leaderboard_size == 10
    # 1 - |0.7 - 0.25| = 0.55: no medal, below the median (0.65)
    b = by[("toy-b", 1)]
    assert b.score == pytest.approx(0.55) and b.medal is None and not b.above_median
    # the bench kept each graded test submission, and the manifest holds the toy's entries
    assert (out / a.submission_path).read_text() == "0.7"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["toy"]["commit"] == "toy-1" and manifest["config"]["benchmark"] == "toy"
    # the report recomputes medals from the toy's leaderboard and names the benchmark
    rep = bench_report(out)
    assert rep.metrics.metrics["any_medal_percentage"].mean == 50.0
    paths = write_report(out)
    assert "ToyBench commit: toy-1" in paths["markdown"].read_text()
    graded = json.loads(paths["grading_report"].read_text())
    assert graded["total_runs"] == 4 and graded["total_medals"] == 2
    assert any("[4/4 runs" in ln for ln in lines)


def test_no_model_makes_the_directory_and_refuses_runs(tmp_path: Path) -> None:
    """``model=None`` makes a bench directory with ``only=()`` (what ``bench run --launcher``
    does before it submits the runs), and is refused, naming the fix, with runs to do.
    """
    root = make_toy(tmp_path / "toy", ANSWERS)
    config = BenchConfig(suite="toy-all", competitions=["toy-a"], seeds=[0], model="scripted",
                         budget={"steps": 1}, data_dir=str(root), benchmark="toy")  # fmt: skip
    out = tmp_path / "bench"
    made = anyio.run(
        lambda: arun_bench(out, config=config, model=None, sandbox=number_sandbox, only=())
    )
    assert [(r.competition_id, r.valid_submission) for r in made] == [("toy-a", False)]
    assert (out / "manifest.json").is_file()
    with pytest.raises(InvalidArgument, match=r"model=None\) has 1 runs to do: pass an Operator"):
        anyio.run(lambda: arun_bench(out, model=None, sandbox=number_sandbox))
    assert not (out / "runs" / "toy-a" / "seed-0" / "journal.jsonl").exists()


def _one_run_bench(tmp_path: Path) -> tuple[Path, Path]:
    """A bench of one toy run made with nothing run yet: the bench and the run directory."""
    root = make_toy(tmp_path / "toy", ANSWERS)
    config = BenchConfig(suite="toy-all", competitions=["toy-a"], seeds=[0], model="scripted",
                         budget={"steps": 1}, data_dir=str(root), benchmark="toy")  # fmt: skip
    out = tmp_path / "bench"
    anyio.run(lambda: arun_bench(out, config=config, model=None, sandbox=number_sandbox, only=()))
    rd = out / "runs" / "toy-a" / "seed-0"
    rd.mkdir(parents=True, exist_ok=True)
    return out, rd


def test_a_received_run_directory_without_manifest_is_replaced_whatever_it_holds(
    deep_tmp_path: Path,
) -> None:
    """A bench directory from elsewhere whose run directory has no manifest (a run killed
    while being made) is replaced on resume; one holding a tree 1,500 levels deep made
    ``bench run`` raise ``RecursionError`` (``shutil.rmtree`` recurses)."""
    out, rd = _one_run_bench(deep_tmp_path)
    deep_tree(rd, 1500)
    model = ScriptedModel(lambda _req: _program(0.75))
    reports = anyio.run(lambda: arun_bench(out, model=model, sandbox=number_sandbox))
    assert [(r.competition_id, r.valid_submission) for r in reports] == [("toy-a", True)]
    assert not (rd / "d").exists() and (rd / "manifest.json").is_file()


def test_a_run_another_driver_is_making_is_left_to_it(tmp_path: Path) -> None:
    """Two drivers of one bench: where the other driver holds the run's writer lock and has
    not written the manifest yet (it is making the run), this driver's run fails, naming
    the other, and leaves its files; it deleted the directory under the other driver (which
    then wrote into a deleted directory while this one started a second run beside it).
    """
    out, rd = _one_run_bench(tmp_path)
    (rd / "journal.jsonl").write_bytes(b"")  # the other driver's first file
    held = os.open(rd / "writer.lock", os.O_RDWR | os.O_CREAT)
    lines: list[str] = []
    model = ScriptedModel(lambda _req: _program(0.75))
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        reports = anyio.run(
            lambda: arun_bench(out, model=model, sandbox=number_sandbox, emit=lines.append)
        )
    finally:
        os.close(held)
    assert [(r.competition_id, r.valid_submission) for r in reports] == [("toy-a", False)]
    assert any("not finished" in ln and "being written by another process" in ln for ln in lines)
    assert (rd / "journal.jsonl").is_file() and not (rd / "manifest.json").exists()
    assert model.requests == []
    # once the other driver is gone, the run starts over in the directory
    reports = anyio.run(lambda: arun_bench(out, model=model, sandbox=number_sandbox))
    assert [(r.competition_id, r.valid_submission) for r in reports] == [("toy-a", True)]


def test_toy_adapter_lives_in_its_own_folder() -> None:
    """Nothing under src/openmle names the toy benchmark, and the toy imports only
    ``openmle``'s public surface."""
    src = Path(__file__).resolve().parents[3] / "src" / "openmle"
    named = re.compile(r"toy_benchmark|ToyBench|benchmark=[\"']toy[\"']")
    assert not [p for p in src.rglob("*.py") if named.search(p.read_text())]
    tree = ast.parse((Path(__file__).parent / "toy_benchmark" / "__init__.py").read_text())
    modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    assert all(not m.startswith("openmle") or "._" not in m for m in modules), modules
