"""NatureBench cases as tasks: SOTA parsing, the gap g, the problem/evaluation split, resources
per case, and the evaluator run out of process (hand-computed values)."""

from __future__ import annotations

import math
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from tests.unit.bench._mininb import MULTI_CASE, add_multi_output_case, bench_run, build

from openmle import Resources, Split
from openmle.bench import NatureBench, PrimaryMetric, case_gap, parse_sota, primary_metrics
from openmle.bench.naturebench import GRADE_RECORD
from openmle.errors import InvalidArgument
from openmle.gym import GradeLimits


@pytest.fixture
def nb(tmp_path: Path) -> NatureBench:
    return NatureBench(build(tmp_path / "nb"), resources=Resources(cpus=2, memory_mb=2048))


@pytest.mark.parametrize(
    ("value", "hib", "expected"),
    [
        ("0.939 \u00b1 0.002", True, 0.939),
        ("11.5 (0.6)", True, 11.5),
        ("~0.60 to ~0.95", True, 0.95),
        ("~0.60 to ~0.95", False, 0.60),
        ("0.85-0.97", False, 0.85),
        ("< 1.6", False, 1.6),
        ("accuracy 0.9, (mean=0.919)", True, 0.919),
        ("~0.734 \u00b1 0.008", True, 0.734),
        (3, True, 3.0),
        ("n/a", True, None),
        (None, True, None),
        (True, True, None),
        ([{"value": "0.8 \u00b1 0.01"}, {"value": "0.75"}], True, 0.8),
        ([{"value": "0.8 \u00b1 0.01"}, {"value": "0.75"}], False, 0.75),
        ({"value": "12", "method": "m"}, True, 12.0),
    ],
)
def test_parse_sota_forms(value: object, hib: bool, expected: float | None) -> None:
    assert parse_sota(value, hib) == expected


def test_primary_metrics_skips_zero_unparsable_and_unnamed() -> None:
    meta = {
        "performance_entries": [
            {"dataset_name": "a", "metrics": [
                {"name": "M", "is_primary": True, "metric_direction": "lower_is_better",
                 "sota_score": "2.0"}]},
            {"dataset_name": "z", "metrics": [
                {"name": "M", "is_primary": True, "sota_score": "0"}]},
            {"dataset_name": "u", "metrics": [
                {"name": "M", "is_primary": True, "sota_score": "unknown"}]},
            {"dataset_name": "n", "metrics": [{"name": "M", "is_primary": False}]},
        ]
    }  # fmt: skip
    table, notes = primary_metrics(meta)
    assert table == {"a": PrimaryMetric(instance="a", metric="M", higher_is_better=False, sota=2.0)}
    assert len(notes) == 3
    assert primary_metrics({})[0] == {}


def test_case_gap_by_hand_and_no_cross_instance_leak() -> None:
    table = {
        "a": PrimaryMetric(instance="a", metric="Acc", higher_is_better=True, sota=0.8),
        "b": PrimaryMetric(instance="b", metric="RMSE", higher_is_better=False, sota=-2.0),
        "c": PrimaryMetric(instance="c", metric="Acc", higher_is_better=True, sota=0.5),
    }
    raw = {
        "a": {"nested": {"acc": 0.9}},  # loose name, nested block
        "b": {"rmse": 1.0},
        # "c" missing: -1, never a's 0.9 (a global fallback would leak it)
        "Acc": 0.99,
    }
    per, g = case_gap(raw, table)
    ga = (0.9 - 0.8) / 0.8
    gb = -1.0 * (1.0 - (-2.0)) / 2.0
    assert per == pytest.approx({"a": ga, "b": gb, "c": -1.0})
    assert g == pytest.approx((ga + gb - 1.0) / 3)
    per, g = case_gap({"a": {"Acc": float("nan")}, "b": {"RMSE": True}}, table)
    assert per == {"a": -1.0, "b": -1.0, "c": -1.0} and g == -1.0
    assert case_gap(raw, {}) == ({}, None)


def test_case_is_a_task_problem_data_only(nb: NatureBench) -> None:
    t = nb.task("nb-gpu-chem")
    assert t.public_dir(Split.VALID) == t.public_dir(Split.TEST) == t.root / "problem" / "data"
    assert t.private_paths == (t.root / "evaluation",)
    assert not t.public_dir("test").is_relative_to(t.private_paths[0])
    assert "Predict `label`" in t.description and "$OUTPUT_DIR/submission.csv" in t.description
    assert t.higher_is_better
    assert t.domain == "Chemistry"
    with pytest.raises(InvalidArgument, match="case id"):
        nb.task("../nb-gpu-chem")


def test_resources_per_case(nb: NatureBench) -> None:
    assert nb.task("nb-cpu-bio").resources == Resources(cpus=2, gpus=0, memory_mb=2048)
    assert nb.task("nb-gpu-chem").resources.gpus == 1
    assert nb.task("nb-broken-bio").resources.gpus == 1
    assert nb.task("nb-gpu-chem").time_limit_s == 14_400.0
    # in no task-set list: metadata.json's gpu severity decides
    (nb.task_set / "gpu_low.txt").write_text("")
    assert nb.task("nb-gpu-chem").tier == ""
    assert nb.task("nb-gpu-chem").gpus == 1
    (nb.task_set / "cpu.txt").write_text("")
    assert nb.task("nb-cpu-bio").gpus == 0


def test_suites(nb: NatureBench, tmp_path: Path) -> None:
    assert nb.suite("all") == ["nb-cpu-bio", "nb-gpu-chem", "nb-broken-bio"]
    assert nb.suite("cpu") == ["nb-cpu-bio"]
    assert nb.suite("gpu_low") == ["nb-gpu-chem"]
    assert nb.suite("gpu_high") == ["nb-broken-bio"]
    assert nb.suite("nb-gpu-chem,nb-cpu-bio") == ["nb-gpu-chem", "nb-cpu-bio"]
    lite = tmp_path / "lite.txt"
    lite.write_text("# my lite subset\nnb-cpu-bio\n")
    assert nb.suite(str(lite)) == ["nb-cpu-bio"]
    with pytest.raises(InvalidArgument, match="Unknown NatureBench case"):
        nb.suite("nope")
    # lite's ten cases, none downloaded: all ten are named (it showed 8), and lite is a suite
    from openmle.bench.naturebench import LITE_CASES

    with pytest.raises(InvalidArgument) as info:
        nb.suite("lite")
    assert all(c in str(info.value) for c in LITE_CASES) and "'lite'" in str(info.value)
    many = ",".join(f"x{i}" for i in range(13))
    with pytest.raises(InvalidArgument, match=r"'x9'\] and 3 more under"):
        nb.suite(many)
    with pytest.raises(InvalidArgument, match="No NatureBench tasks"):
        NatureBench(tmp_path / "empty")


def _submission(nb: NatureBench, cid: str, tmp: Path, *, wrong: int = 0) -> Path:
    answers = (nb.tasks_dir / cid / "evaluation" / "ground_truth" / "answers.csv").read_text()
    lines = answers.splitlines()
    body = [lines[0]]
    for k, line in enumerate(lines[1:]):
        i, y = line.split(",")
        body.append(f"{i},{1 - int(y) if k < wrong else y}")
    sub = tmp / cid / "submission.csv"
    sub.parent.mkdir(parents=True)
    sub.write_text("\n".join(body) + "\n")
    return sub


def test_grade_runs_the_evaluator_and_scores_g(nb: NatureBench, tmp_path: Path) -> None:
    # 40 test rows, 4 wrong: error rate 0.1 against SOTA 0.05 (lower is better)
    sub = _submission(nb, "nb-cpu-bio", tmp_path, wrong=4)
    rep = nb.task("nb-cpu-bio").grade(sub, Split.TEST)
    assert rep.valid and rep.score == pytest.approx(-(0.1 - 0.05) / 0.05)
    record = (sub.parent / GRADE_RECORD).read_text()
    assert '"status": "scored"' in record and '"ErrorRate"' in record
    # two primary instances ('zero' has SOTA 0 and is skipped): main all right, extra -1
    sub = _submission(nb, "nb-gpu-chem", tmp_path)
    rep = nb.task("nb-gpu-chem").grade(sub, Split.VALID)
    assert rep.score == pytest.approx(((1.0 - 0.8) / 0.8 - 1.0) / 2)
    assert not (sub.parent / GRADE_RECORD).exists()  # only a test grade is recorded


def test_failing_evaluator_and_missing_submission_are_unscored(
    nb: NatureBench, tmp_path: Path
) -> None:
    sub = _submission(nb, "nb-broken-bio", tmp_path)
    t = nb.task("nb-broken-bio")
    rep = t.grade(sub, Split.TEST)
    assert not rep.valid and rep.score is None
    assert "RuntimeError" in rep.reason
    rec = t.evaluate(tmp_path / "absent.csv")
    assert rec["status"] == "no_submission" and rec["g"] is None


def test_evaluator_is_bounded_by_the_grade_limits(nb: NatureBench, tmp_path: Path) -> None:
    evaluator = nb.tasks_dir / "nb-cpu-bio" / "evaluation" / "evaluator.py"
    evaluator.write_text("def run_evaluation():\n    while True:\n        pass\n")
    slow = NatureBench(nb.root, grade_limits=GradeLimits(timeout_s=2.0))
    start = time.monotonic()
    rec = slow.task("nb-cpu-bio").evaluate(_submission(nb, "nb-cpu-bio", tmp_path))
    elapsed = time.monotonic() - start
    # A busy loop under timeout_s=2 (and cpu_s following it) meets the wall-clock limit, the
    # CPU soft limit (SIGXCPU) or the CPU hard limit (SIGKILL) first, by the machine's luck:
    # the contract is that it is stopped and reported naming the limit, not which one won.
    assert rec["status"] == "evaluator_error" and rec["g"] is None
    assert rec["message"] in {
        "the evaluator hit its time limit",
        "the evaluator hit its cpu limit",
        "the evaluator was killed at a limit (its CPU hard limit, the out-of-memory killer or "
        "a cancellation)",
    }, rec
    # Bounded: stopped near its 2 s limits (the bound is generous, so machine speed never
    # decides the test; an unbounded evaluator would hang here until pytest's timeout).
    assert elapsed < 60, elapsed


def test_grade_limits_of_the_wrong_type_are_refused(nb: NatureBench) -> None:
    """A ``grade_limits`` that is not a GradeLimits was silently replaced by the defaults."""
    with pytest.raises(InvalidArgument, match=r"grade_limits to be an openmle.gym.GradeLimits"):
        NatureBench(nb.root, grade_limits={"timeout_s": 2.0})  # type: ignore[arg-type]


def test_symlinked_submission_is_never_evaluated(nb: NatureBench, tmp_path: Path) -> None:
    """A program cannot point the evaluator at the ground truth through a link."""
    link = tmp_path / "submission.csv"
    link.symlink_to(nb.tasks_dir / "nb-cpu-bio" / "evaluation" / "ground_truth" / "answers.csv")
    rec = nb.task("nb-cpu-bio").evaluate(link)
    assert rec["status"] == "no_submission" and rec["g"] is None


def test_evaluator_sees_no_caller_secrets(
    nb: NatureBench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENMLE_TEST_SECRET", "hunter2")
    evaluator = nb.tasks_dir / "nb-cpu-bio" / "evaluation" / "evaluator.py"
    evaluator.write_text(
        "import os\n"
        "def run_evaluation():\n"
        "    leaked = os.environ.get('OPENMLE_TEST_SECRET') is not None\n"
        "    return {'main': {'ErrorRate': 1.0 if leaked else 0.05}}\n"
    )
    g = nb.task("nb-cpu-bio").evaluate(_submission(nb, "nb-cpu-bio", tmp_path))["g"]
    assert g is not None and math.isclose(g, 0.0, abs_tol=1e-12)


def test_bench_config_names_its_benchmark() -> None:
    from openmle.bench import BenchConfig

    base: dict[str, Any] = {
        "suite": "all",
        "competitions": ["a"],
        "seeds": [0],
        "model": "offline",
        "data_dir": "/d",
    }
    assert BenchConfig(**base).benchmark == "mle-bench"  # older manifests load unchanged
    cfg = BenchConfig(**base, benchmark="naturebench")
    assert BenchConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(InvalidArgument, match="benchmark"):
        BenchConfig(**base, benchmark="kaggle")


def test_judge_file_is_checked(tmp_path: Path) -> None:
    from openmle.bench import read_judge

    good = tmp_path / "judge.json"
    good.write_text('{"a": {"is_valid": false, "reason": "leak"}, "b": {"is_valid": true, '
                    '"reason": "ok"}}')  # fmt: skip
    assert read_judge(good) == {"a": ("invalid", "leak"), "b": ("valid", "ok")}
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": {"is_valid": "no", "reason": ""}}')
    with pytest.raises(InvalidArgument, match="is_valid"):
        read_judge(bad)
    with pytest.raises(InvalidArgument, match="Cannot read"):
        read_judge(tmp_path / "absent.json")


def test_case_environment_reaches_the_sandbox_through_the_bench(
    nb: NatureBench, tmp_path: Path
) -> None:
    """The bench's task wrapper passes a case's Dockerfile.v3 on (DockerSandbox builds it); an
    MLE-bench task has none, so its jobs keep the sandbox's image."""
    from openmle._task_protocol import TaskEnvironment

    _, resolve = bench_run(nb, tmp_path / "bench", nb.suite("all"), suite="all")
    task = resolve("nb-cpu-bio@seed-0")
    assert isinstance(task, TaskEnvironment)
    assert task.dockerfile == nb.tasks_dir / "nb-cpu-bio" / "environment" / "Dockerfile.v3"
    assert not task.dockerfile.parent.is_relative_to(task.private_paths[0])
    (nb.tasks_dir / "nb-cpu-bio" / "environment" / "Dockerfile.v3").unlink()
    assert task.dockerfile is None


def _multi_outputs(nb: NatureBench, out: Path, *, wrong: int = 0, only: str = "") -> Path:
    """``out/<inst>/pred.csv`` from the answers, the first ``wrong`` rows of inst2 flipped."""
    truth = nb.tasks_dir / add_multi_output_case(nb.root) / "evaluation" / "ground_truth"
    for inst in ("inst1", "inst2"):
        if only and inst != only:
            continue
        lines = (truth / f"{inst}.csv").read_text().splitlines()
        rows = [lines[0]]
        for k, line in enumerate(lines[1:]):
            i, y = line.split(",")
            flip = inst == "inst2" and k < wrong
            rows.append(f"{i},{1 - int(y) if flip else y}")
        (out / inst).mkdir(parents=True)
        (out / inst / "pred.csv").write_text("\n".join(rows) + "\n")
    return out


def test_an_output_directory_reaches_the_evaluator(nb: NatureBench, tmp_path: Path) -> None:
    """A case whose evaluator reads OUTPUT_DIR/<inst>/pred.csv is graded on a directory; a
    missing instance counts -1; the test grade's record lands beside the directory."""
    out = _multi_outputs(nb, tmp_path / "g" / "output", wrong=5)
    task = nb.task("nb-multi-out")
    assert task.outputs == "output" and "./output/" in task.description
    rep = task.grade(out, Split.TEST)
    # inst1 20/20 (g = 0.25), inst2 15/20 (g = (0.75 - 0.8) / 0.8)
    assert rep.valid and rep.score == pytest.approx((0.25 - 0.0625) / 2)
    assert '"status": "scored"' in (tmp_path / "g" / GRADE_RECORD).read_text()
    half = _multi_outputs(nb, tmp_path / "h" / "output", only="inst1")
    assert task.grade(half, Split.VALID).score == pytest.approx((0.25 - 1.0) / 2)


def test_the_bench_keeps_the_graded_output_directory(nb: NatureBench, tmp_path: Path) -> None:
    """A bench run keeps the output directory it graded (and its record) under submissions/."""
    cid = add_multi_output_case(nb.root)
    run, resolve = bench_run(nb, tmp_path / "bench", [cid])
    task = resolve(f"{cid}@seed-0")
    assert task.outputs == "output"
    out = _multi_outputs(nb, tmp_path / "g" / "output")
    (out / "submission.csv").write_text("id,label\n")
    rep = task.grade(out, Split.TEST)
    assert rep.score == pytest.approx(0.25)
    kept = run.submission_path(cid, 0)
    assert (kept.parent / "output" / "inst2" / "pred.csv").is_file()
    assert kept.read_text() == "id,label\n"
    assert '"status": "scored"' in kept.with_name(GRADE_RECORD).read_text()


def test_gpus_override_replaces_each_cases_demand(nb: NatureBench) -> None:
    """--gpus N (a recorded deviation) lets a CPU-only machine run a gpu_low case."""
    import attrs

    cpu_only = attrs.evolve(nb, gpus_override=0)
    assert cpu_only.task("nb-gpu-chem").gpus == 0
    assert cpu_only.task("nb-gpu-chem").resources.gpus == 0
    assert nb.task("nb-gpu-chem").gpus == 1


def test_the_bench_keeps_one_copy_of_the_output_directory(nb: NatureBench, tmp_path: Path) -> None:
    """The sandbox's vetted copy becomes the kept copy (moved, same inode), and the evaluator
    reads it in place: no second copy of a large output (issue 25, item 3)."""
    cid = add_multi_output_case(nb.root)
    run, resolve = bench_run(nb, tmp_path / "bench", [cid])
    task = resolve(f"{cid}@seed-0")
    out = _multi_outputs(nb, tmp_path / "g" / "output")
    inode = (out / "inst1" / "pred.csv").stat().st_ino
    rep = task.grade(out, Split.TEST)
    assert rep.score == pytest.approx(0.25)
    kept = run.submission_path(cid, 0).parent / "output"
    assert (kept / "inst1" / "pred.csv").stat().st_ino == inode  # moved, never copied
    assert not out.exists()


def test_the_evaluator_reads_an_output_directory_in_place(nb: NatureBench, tmp_path: Path) -> None:
    """OUTPUT_DIR is the directory given (no copy of it is made for the evaluator)."""
    out = _multi_outputs(nb, tmp_path / "g" / "output")  # adds the case
    evaluator = nb.root / "tasks" / MULTI_CASE / "evaluation" / "evaluator.py"
    text = evaluator.read_text()
    evaluator.write_text(
        text + "\n_inner = run_evaluation\n"
        "def run_evaluation():\n"
        "    found = _inner()\n"
        "    found['where'] = {'dir': os.environ['OUTPUT_DIR']}\n"
        "    return found\n"
    )
    record = nb.task(MULTI_CASE).evaluate(out)
    assert record["raw"]["where"]["dir"] == str(out)


def test_lite_suite_is_the_papers_ten_cases(nb: NatureBench) -> None:
    """``lite`` names the paper's ten cases; cases not downloaded are refused by name, and
    once a case folder of that id exists the suite resolves to the ten in order."""
    from openmle.bench.naturebench import LITE_CASES

    assert len(LITE_CASES) == 10 and len(set(LITE_CASES)) == 10
    with pytest.raises(InvalidArgument, match="s41587-025-02688-8"):
        nb.suite("lite")
    template = nb.tasks_dir / "nb-cpu-bio"
    for cid in LITE_CASES:
        shutil.copytree(template, nb.tasks_dir / cid)
    assert nb.suite("lite") == list(LITE_CASES)
