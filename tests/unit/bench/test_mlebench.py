"""The MLE-bench adapter on a miniature registry and prepared data made here."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.unit.bench._minibench import IDS

from openmle import Split
from openmle.bench import LITE_IDS, MLEBench, competition_report, doctor
from openmle.errors import InvalidArgument, MissingDependency
from openmle.gym import GradeReport

pytest.importorskip("yaml")
pytest.importorskip("pandas")


@pytest.fixture
def bench(mini: tuple[Path, Path], tmp_path: Path) -> MLEBench:
    registry, data = mini
    return MLEBench.locate(registry, data, valid_dir=tmp_path / "valid")


def sample_copy(task_public: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / "submission.csv"
    shutil.copyfile(task_public / "sample_submission.csv", out)
    return out


def test_locate_and_suites(mini: tuple[Path, Path], bench: MLEBench) -> None:
    """A checkout or its mlebench folder; suites from its split files; id lists checked."""
    registry, data = mini
    assert MLEBench.locate(registry / "mlebench", data).repo_root == registry.resolve()
    assert bench.ids() == list(IDS)
    assert bench.suite("mle-bench-lite") == list(IDS)
    assert bench.suite("mle-bench-medium") == ["mini-tabular"]
    assert bench.suite("mle-bench-all") == list(IDS)
    assert bench.suite("mini-jsonl,mini-tabular") == ["mini-jsonl", "mini-tabular"]
    with pytest.raises(InvalidArgument, match="Unknown suite"):
        bench.suite("mini-nope")
    with pytest.raises(InvalidArgument, match="MLE-bench checkout"):
        MLEBench.locate(data, data)


def test_without_mlebench_says_what_to_install(mini: tuple[Path, Path]) -> None:
    if importlib.util.find_spec("mlebench") is not None:
        pytest.skip("mlebench is installed here")
    with pytest.raises(MissingDependency, match="pip install -e"):
        MLEBench.locate(None, mini[1])


def test_test_split_reads_prepared_data_in_place(bench: MLEBench, tmp_path: Path) -> None:
    """Public data is prepared/public itself (no copy); answers are private and graded out of
    process by the competition's own grader; medals from the registry's leaderboard."""
    t = bench.task("mini-tabular")
    assert t.public_dir(Split.TEST) == bench.data_dir / "mini-tabular" / "prepared" / "public"
    assert bench.data_dir / "mini-tabular" / "prepared" / "private" in t.private_paths
    assert t.higher_is_better and "Predict the label" in t.description
    sub = sample_copy(t.public_dir(Split.TEST), tmp_path / "w")
    g = t.grade(sub, Split.TEST)
    assert g.valid and g.score is not None and 0.0 < g.score < 1.0
    assert "mlebench" not in sys.modules  # graded in a child process
    report = competition_report("mini-tabular", g.score, t.leaderboard, submission_exists=True)
    assert report.valid_submission and not report.any_medal and report.leaderboard_size == 20


def test_invalid_submissions_are_outcomes(bench: MLEBench, tmp_path: Path) -> None:
    t = bench.task("mini-tabular")
    bad = tmp_path / "submission.csv"
    bad.write_text("id,wrong\n1,2\n")
    g = t.grade(bad, Split.TEST)
    assert not g.valid and "needs columns id and label" in g.reason
    gone = t.grade(tmp_path / "nothing.csv", Split.TEST)
    assert isinstance(gone, GradeReport)
    assert not gone.valid and not gone.submission_exists
    answers = bench.data_dir / "mini-tabular" / "prepared" / "private" / "test.csv"
    leak = t.grade(answers, Split.TEST)
    assert not leak.valid and "hidden answers" in leak.reason


def test_lower_is_better_image_folder_with_built_validation(
    bench: MLEBench, tmp_path: Path
) -> None:
    """mini-images: direction from the leaderboard order; the validation view is made by the
    competition's preparer from the public data, its answers outside the public view."""
    t = bench.task("mini-images")
    assert not t.higher_is_better
    vpub = t.public_dir(Split.VALID)
    assert (vpub / "train").is_dir() and any((vpub / "test").glob("*.png"))
    assert vpub.is_relative_to(tmp_path / "valid")
    assert not (vpub / "test.csv").exists()
    vans = t.answers_path(Split.VALID)
    assert vans.is_file() and any(vans.is_relative_to(p) for p in t.private_paths)
    g = t.grade(sample_copy(vpub, tmp_path / "v"), Split.VALID)
    assert g.valid and g.score == pytest.approx(0.5)
    test = t.grade(sample_copy(t.public_dir(Split.TEST), tmp_path / "t"), Split.TEST)
    report = competition_report("mini-images", test.score, t.leaderboard, submission_exists=True)
    assert report.is_lower_better and report.score == 0.5


def test_jsonl_answers_and_shipped_validation(bench: MLEBench, tmp_path: Path) -> None:
    t = bench.task("mini-jsonl")
    assert (
        t.public_dir(Split.VALID) == bench.data_dir / "mini-jsonl" / "prepared" / "valid" / "public"
    )
    assert t.answers_path(Split.TEST).suffix == ".jsonl"
    g = t.grade(sample_copy(t.public_dir(Split.TEST), tmp_path / "t"), Split.TEST)
    assert g.valid and g.score is not None and 0.5 < g.score < 0.8


def test_doctor_finds_problems_and_fixes(mini: tuple[Path, Path], tmp_path: Path) -> None:
    """All ok on the clean copy; an lfs pointer, missing private data and a changed file are
    each reported with their fix; an unknown id is a problem line, not a crash."""
    registry, data = mini
    reg2, data2 = tmp_path / "reg", tmp_path / "data"
    shutil.copytree(registry, reg2)
    shutil.copytree(data, data2)
    b = MLEBench.locate(reg2, data2)
    lines = doctor(b, [*IDS, "mini-nope"])
    assert [ln.ok for ln in lines] == [True, True, True, False]
    (reg2 / "mlebench/competitions/mini-images/leaderboard.csv").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 10\n"
    )
    shutil.rmtree(data2 / "mini-tabular" / "prepared" / "private")
    (reg2 / "mlebench/competitions/mini-jsonl/checksums.yaml").write_text(
        "public:\n  train.csv: 0123\nprivate: {}\n"
    )
    by = {ln.competition_id: ln for ln in doctor(b, IDS, checksums=True)}
    assert not by["mini-images"].ok and "git lfs pull" in by["mini-images"].fixes[0]
    assert not by["mini-tabular"].ok and "mlebench prepare" in by["mini-tabular"].fixes[0]
    assert not by["mini-jsonl"].ok and "checksum" in by["mini-jsonl"].problems[0]


def test_lite_ids_without_split_files(mini: tuple[Path, Path], tmp_path: Path) -> None:
    """An installed mlebench has no experiments/splits: Lite falls back to the embedded 22 ids
    (MLE-bench's low.txt); medium/high say what they need."""
    registry, data = mini
    reg2 = tmp_path / "site-packages"
    shutil.copytree(registry / "mlebench", reg2 / "mlebench")
    b = MLEBench.locate(reg2, data)
    assert b.suite("mle-bench-lite") == list(LITE_IDS)
    assert len(LITE_IDS) == 22 == len(set(LITE_IDS))
    with pytest.raises(InvalidArgument, match=r"medium\.txt"):
        b.suite("mle-bench-medium")


def test_doctor_builds_each_validation_view(mini: tuple[Path, Path], tmp_path: Path) -> None:
    """Ready only when the validation view is built: its rule is a note; a public folder the
    rules cannot split is one problem naming --validation self and prepared/valid."""
    registry, data = mini
    data2 = tmp_path / "data"
    shutil.copytree(data, data2)
    b = MLEBench.locate(registry, data2, valid_dir=tmp_path / "valid")
    by = {ln.competition_id: ln for ln in doctor(b, IDS)}
    assert all(ln.ok for ln in by.values())
    assert any("held out" in n for n in by["mini-tabular"].notes)
    assert "validation: the shipped prepared/valid" in by["mini-jsonl"].notes
    (data2 / "mini-images" / "prepared" / "public" / "train.csv").unlink()
    b2 = MLEBench.locate(registry, data2, valid_dir=tmp_path / "valid2")
    (line,) = doctor(b2, ["mini-images"])
    assert not line.ok and len(line.problems) == 1
    assert "no validation view" in line.problems[0]
    assert "--validation self" in line.fixes[0] and "prepared/valid" in line.fixes[0]


def test_a_run_adopts_the_view_doctor_built(
    mini: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench doctor` builds the view in the shared cache; a bench then takes it (hard links of
    the same files) instead of running the split a second time."""
    registry, data = mini
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    (line,) = doctor(MLEBench.locate(registry, data), ["mini-tabular"])
    assert line.ok
    (cached,) = (tmp_path / "cache" / "mlebench-valid" / "mini-tabular").iterdir()
    run = MLEBench.locate(registry, data, valid_dir=tmp_path / "bench" / "valid")
    task = run.task("mini-tabular")
    view = task.public_dir(Split.VALID).parent
    assert view == tmp_path / "bench" / "valid" / "mini-tabular" / cached.name
    for f in (p for p in cached.rglob("*") if p.is_file() and not p.is_symlink()):
        twin = view / f.relative_to(cached)
        assert twin.read_bytes() == f.read_bytes()
        assert twin.stat().st_ino == f.stat().st_ino  # a link, not a second split
    assert task.validation_info() == run.task("mini-tabular").validation_info()
    # an incomplete cache entry is not taken: the run builds its own view
    shutil.rmtree(view)
    (cached / "view.json").unlink()
    again = MLEBench.locate(registry, data, valid_dir=tmp_path / "bench2" / "valid")
    fresh = again.task("mini-tabular").public_dir(Split.VALID).parent
    assert (fresh / "view.json").is_file()
    assert fresh.joinpath("view.json").stat().st_nlink == 1  # built here, not linked


def test_validation_self_protocol(mini: tuple[Path, Path], tmp_path: Path) -> None:
    """--validation self: the program reads the full public data, the description carries the
    competition's split instruction and the score line, the valid grade only checks the format
    (no answers), and the run's score is the number the program printed."""
    from openmle._runlog import classify_run

    registry, data = mini
    b = MLEBench.locate(registry, data, valid_dir=tmp_path / "valid", validation="self")
    t = b.task("mini-tabular")
    assert t.protocol == "self"
    assert t.public_dir(Split.VALID) == t.public_dir(Split.TEST)
    assert "Final Validation Score: <number>" in t.description
    assert "10%" in t.description and "higher is better" in t.description
    good = t.grade(sample_copy(t.public_dir(Split.TEST), tmp_path / "w"), Split.VALID)
    assert good.valid and good.score is None and getattr(good, "self_scored", False)
    bad = tmp_path / "b" / "submission.csv"
    bad.parent.mkdir()
    bad.write_text("id,label\n1,0\n")
    g = t.grade(bad, Split.VALID)
    assert not g.valid and "sample submission" in g.reason

    def run(logs: str) -> Any:
        return classify_run(
            split=Split.VALID,
            exit_code=0,
            timed_out=False,
            oom=False,
            submission=bad,
            grade=good,
            logs=logs,
        )

    r = run("fold 1\nFinal Validation Score: 0.8125\n")
    assert r.outcome.value == "success" and r.score == 0.8125
    r = run("no score printed\n")
    assert r.outcome.value == "invalid_submission" and "Final Validation Score" in r.detail
    assert not (tmp_path / "valid").exists()  # no view is built under self
    auto = MLEBench.locate(registry, data, valid_dir=tmp_path / "v2")
    assert auto.task("mini-tabular").protocol == "split"
    assert "Final Validation Score" not in auto.task("mini-tabular").description
    with pytest.raises(InvalidArgument, match="--validation"):
        MLEBench.locate(registry, data, validation="holdout")


def test_preflight_stops_a_bench_before_its_first_step(
    mini: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A competition that cannot be prepared, or that needs GPUs this machine lacks, stops the
    bench with one error naming each cause; nothing is written."""
    import anyio

    from openmle import Resources
    from openmle.bench import BenchConfig, arun_bench
    from openmle.testing import ScriptedModel

    registry, data = mini
    data2 = tmp_path / "data"
    shutil.copytree(data, data2)
    (data2 / "mini-images" / "prepared" / "public" / "train.csv").unlink()
    (data2 / "mini-jsonl" / "prepared" / "private" / "answers.jsonl").unlink()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")

    def config(**kw: object) -> BenchConfig:
        base: dict[str, object] = {
            "suite": "custom",
            "competitions": list(IDS),
            "seeds": [0],
            "model": "offline",
            "budget": {"steps": 1},
            "data_dir": str(data2),
            "registry": str(registry),
        }
        return BenchConfig(**(base | kw))  # type: ignore[arg-type]

    out = tmp_path / "bench"
    split = config(validation="split")
    with pytest.raises(InvalidArgument) as err:
        anyio.run(lambda: arun_bench(out, config=split, model=ScriptedModel([])))
    msg = str(err.value)
    assert "2 of 3 competitions cannot run" in msg and "mini-images" in msg
    assert "--validation self" in msg and "mlebench prepare -c mini-jsonl" in msg
    assert not (out / "manifest.json").exists() and not (out / "runs").exists()
    gpu = config(competitions=["mini-tabular"], resources=Resources(gpus=1))
    with pytest.raises(InvalidArgument, match=r"needs 1 GPU.*--gpus N"):
        anyio.run(lambda: arun_bench(out, config=gpu, model=ScriptedModel([])))
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize(
    ("visible", "smi_fails"), [("0,-1,1", False), (None, True)], ids=["cuda-mask", "smi-fails"]
)
def test_preflight_counts_the_gpus_a_sandbox_may_lease(
    mini: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    visible: str | None,
    smi_fails: bool,
) -> None:
    """The bench's GPU check and its manifest's hardware record see the GPUs as the sandboxes
    lease them: CUDA stops reading ``CUDA_VISIBLE_DEVICES`` at its first invalid entry (one GPU
    in ``0,-1,1``), and a failing ``nvidia-smi``'s error line is no GPU."""
    import anyio

    from openmle import Resources
    from openmle.bench import BenchConfig, arun_bench
    from openmle.bench._runner import hardware
    from openmle.testing import ScriptedModel

    registry, data = mini
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(
        "#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the "
        'NVIDIA driver."\nexit 9\n'
        if smi_fails
        else '#!/bin/sh\nprintf "0\\n1\\n"\n'
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}:{os.environ['PATH']}")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    need = 2 if visible else 1
    config = BenchConfig(
        suite="custom",
        competitions=["mini-tabular"],
        seeds=[0],
        model="offline",
        budget={"steps": 1},
        data_dir=str(data),
        registry=str(registry),
        resources=Resources(gpus=need),
    )
    out = tmp_path / "bench"
    with pytest.raises(InvalidArgument, match=rf"needs {need} GPU"):
        anyio.run(lambda: arun_bench(out, config=config, model=ScriptedModel([])))
    if smi_fails:
        assert hardware()["gpus"] == []


def test_report_lines_name_the_protocol_and_deviations() -> None:
    from openmle.bench.mlebench._registry import protocol_lines

    m = {
        "validation": {"a": "split", "b": "self", "c": "split"},
        "deviations": ["--gpus 0: every program run gets 0 GPU(s), whatever its task demands"],
    }
    lines = protocol_lines(m)
    assert lines[0].startswith("- validation: search selected on self (each program's own")
    assert "split (held-out views" in lines[0] and "for a, c" in lines[0]
    assert lines[1].startswith("- deviations: --gpus 0")
    assert protocol_lines({}) == []
    assert protocol_lines({"validation": "junk", "deviations": "junk"}) == []
