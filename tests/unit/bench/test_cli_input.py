"""`openmle bench run|doctor`: bad input is refused before --out is made, in one line naming the
setting and the fix; progress, interrupt and doctor lines say what they mean.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from openmle._cli import main
from openmle.errors import InvalidArgument

pytest.importorskip("yaml")


def _run(mini: tuple[Path, Path], out: Path, *flags: str) -> list[str]:
    registry, data = mini
    return ["bench", "run", "mle-bench-lite", "--data", str(data), "--registry", str(registry),
            "--out", str(out), "--budget", "steps=1", "--quiet", *flags]  # fmt: skip


def test_seeds_are_a_count_or_a_list_of_seeds(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A string (``"12"`` ran seeds 1 and 2, ``"three"`` a traceback), 0, a float, a bool, an
    empty or repeated list: refused, naming the file's ``seeds`` and the fix; ``--seeds 0``
    names ``--seeds`` and says N >= 1."""
    from openmle.bench import BenchConfig

    registry, data = mini
    out = tmp_path / "b"
    exp = tmp_path / "exp.toml"
    for value in ('"three"', '"12"', "0", "2.0", "true", "[]", "[1, 1]", "[0, -1]"):
        exp.write_text(
            f'suite = "mle-bench-lite"\ndata = "{data}"\nregistry = "{registry}"\n'
            f'out = "{out}"\nbudget = "steps=1"\nseeds = {value}\n'
        )
        assert main(["bench", "run", str(exp), "--quiet"]) == 2, value
        err = capsys.readouterr().err
        assert f"{exp}: expected seeds = N with N >= 1" in err, err
        assert err.rstrip().endswith(f"but got seeds = {value}") and err.count("\n") == 1
        assert not out.exists()
    assert main(_run(mini, out, "--seeds", "0")) == 2
    err = capsys.readouterr().err
    assert "Expected --seeds N with N >= 1" in err and "got --seeds 0" in err
    assert not out.exists()
    with pytest.raises(InvalidArgument, match=r"at least one seed.*--seeds N with N >= 1"):
        BenchConfig(suite="s", competitions=["a"], seeds=[], model="offline", data_dir="d")


def test_a_bad_sandbox_or_model_writes_nothing(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--sandbox nonsense``, ``--sandbox ray`` without Ray and ``--model nonsense`` with a
    launcher fail before ``--out`` exists (a manifest there made the fixed command refuse)."""
    out = tmp_path / "b"
    assert main(_run(mini, out, "--sandbox", "nonsense")) == 2
    assert "Expected --sandbox" in capsys.readouterr().err and not out.exists()
    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    assert main(_run(mini, out, "--sandbox", "ray")) == 1  # MissingDependency
    assert "pip install 'openmle[ray]'" in capsys.readouterr().err and not out.exists()
    pytest.importorskip("submitit")
    assert main(_run(mini, out, "--model", "nonsense", "--launcher", "local")) == 2
    assert "Expected --model" in capsys.readouterr().err and not out.exists()


def test_a_bad_launcher_option_writes_nothing(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--launcher-option foo`` (no ``=``) fails before ``--out`` exists (it left a manifest);
    a key ``--launcher local`` ignores is refused, naming it and the keys it takes."""
    pytest.importorskip("submitit")
    out = tmp_path / "b"
    assert main(_run(mini, out, "--launcher", "local", "--launcher-option", "foo")) == 2
    assert "Expected --launcher-option KEY=VALUE" in capsys.readouterr().err
    assert not out.exists()
    flags = ("--launcher", "local", "--launcher-option", "nosuchparam=3")
    assert main(_run(mini, out, *flags)) == 2
    err = capsys.readouterr().err
    assert "--launcher-option nosuchparam" in err and "timeout_min" in err
    assert not out.exists()


def test_an_option_slurm_refuses_writes_nothing(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--launcher slurm`` with a misspelt key (``slurm_partitoin=gpu``) ended in submitit's
    NameError traceback, and a dictionary that is not JSON in a ValueError, both after the
    bench directory was made; each is now one line naming the option, and nothing is
    written."""
    pytest.importorskip("submitit")
    out = tmp_path / "b"
    for option, said in (
        ("slurm_partitoin=gpu", "'slurm_partitoin'"),
        ('slurm_additional_parameters={"account": "a"', "dictionaries as JSON"),
    ):
        assert main(_run(mini, out, "--launcher", "slurm", "--launcher-option", option)) == 2
        err = capsys.readouterr().err
        assert err.startswith("openmle: error: --launcher-option") and said in err, err
        assert err.count("\n") == 1 and not out.exists()


def test_bad_resources_and_workers_name_the_flags(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--memory-mb -1`` said ``Resources.memory_mb=-1`` and ``--workers 0`` ``workers >= 1``:
    each names its flag now, in one line, and nothing is written."""
    out = tmp_path / "b"
    for flags, said in (
        (("--memory-mb", "-1"), "got --memory-mb -1"),
        (("--cpus", "0"), "got --cpus 0.0"),
        (("--gpus", "-1"), "got --gpus -1"),
        (("--workers", "0"), "Expected --workers N with N >= 1 but got --workers 0"),
    ):
        assert main(_run(mini, out, *flags)) == 2
        err = capsys.readouterr().err
        assert said in err and "Resources." not in err and err.count("\n") == 1, err
        assert not out.exists()


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_a_wrong_data_folder_is_one_line(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A missing, empty or one-level-too-high ``--data``: doctor and run say so in one line
    (it was one FAIL line per competition and half); run makes nothing."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tmp_path / "b"
    cases = {
        tmp_path / "nope": f"--data {tmp_path / 'nope'}: no such directory; it should be the "
        "--data-dir given to `mlebench prepare`",
        empty: f"--data {empty} holds none of the suite's <id>/prepared folders (it should be",
        data.parent: f"; {data} holds them: pass --data {data}",
    }
    for folder, expected in cases.items():
        doctor = ["bench", "doctor", "mle-bench-lite", "--data", str(folder)]
        assert main([*doctor, "--registry", str(registry)]) == 2
        assert expected in _one_error(capsys)
        assert main(_run(mini, out, "--data", str(folder))) == 2
        assert expected in _one_error(capsys) and not out.exists()


def test_a_data_folder_one_level_too_deep_names_the_right_one(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--data`` at a competition's folder, its ``prepared`` or ``prepared/public``: one line
    naming the data folder to pass (it only said what ``--data`` should be in general)."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    out = tmp_path / "b"
    comp = data / "mini-tabular"
    for folder in (comp, comp / "prepared", comp / "prepared" / "public"):
        want = f"is inside the data folder {data.resolve()}: pass --data {data.resolve()}"
        doctor = ["bench", "doctor", "mle-bench-lite", "--data", str(folder)]
        assert main([*doctor, "--registry", str(registry)]) == 2
        assert want in _one_error(capsys)
        assert main(_run(mini, out, "--data", str(folder))) == 2
        assert want in _one_error(capsys) and not out.exists()


def test_some_competitions_prepared_one_line_each(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Some prepared, others not: doctor gives one problem per unprepared competition (not one
    per half); run counts the competitions and its fix names --data-dir as doctor's does."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    data2 = tmp_path / "data"
    shutil.copytree(data, data2)
    for cid in ("mini-images", "mini-jsonl"):
        shutil.rmtree(data2 / cid / "prepared")
    args = ["bench", "doctor", "mle-bench-lite", "--data", str(data2), "--registry", str(registry)]
    assert main([*args, "--json"]) == 1
    lines = {ln["competition_id"]: ln for ln in json.loads(capsys.readouterr().out)}
    assert lines["mini-images"]["problems"] == ["not prepared (no prepared/ folder)"]
    fix = f"run `mlebench prepare -c mini-images --data-dir {data2}`"
    assert lines["mini-images"]["fixes"] == [fix] and lines["mini-tabular"]["ok"]
    out = tmp_path / "b"
    assert main(_run(mini, out, "--data", str(data2))) == 2
    err = _one_error(capsys)
    assert "2 of 3 competitions cannot run" in err
    assert f"mlebench prepare -c mini-jsonl --data-dir {data2}`" in err


def test_an_unusable_leaderboard_stops_the_bench_before_its_first_step(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leaderboard with no row (or a git-lfs pointer): doctor says FAIL, and run refuses
    to start, naming the file and the fix (it ran the search and exited 0 with a table that
    counted the competition as a failed run)."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    reg2 = tmp_path / "registry"
    shutil.copytree(registry, reg2)
    board = reg2 / "mlebench" / "competitions" / "mini-tabular" / "leaderboard.csv"
    out = tmp_path / "b"
    cases = (
        ("teamId,score,submissionDate\n", f"leaderboard {board} is unusable"),
        ("version https://git-lfs.github.com/spec/v1\n", f"{board} is a git-lfs pointer"),
    )
    for text, reason in cases:
        board.write_text(text)
        args = ["bench", "run", "mini-tabular", "--data", str(data), "--registry", str(reg2),
                "--out", str(out), "--budget", "steps=1", "--seeds", "1", "--quiet"]  # fmt: skip
        assert main(args) == 2
        err = _one_error(capsys)
        assert "1 of 1 competitions cannot run" in err and "mini-tabular: cannot be graded" in err
        assert reason in err and "git lfs pull" in err
        assert not out.exists()
        doctor = ["bench", "doctor", "mini-tabular", "--data", str(data), "--registry", str(reg2)]
        assert main(doctor) == 1 and "FAIL" in capsys.readouterr().out


def test_doctor_flags_leaderboard_rows_without_a_score(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A leaderboard whose last row has no score reads as higher-is-better by MLE-bench's rule
    (a log loss of 4.8 took gold on [0.5, -, abc], and doctor said ok): a problem now; a blank
    row inside the board is a note (it still counts in N)."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    reg2 = tmp_path / "registry"
    shutil.copytree(registry, reg2)
    board = reg2 / "mlebench" / "competitions" / "mini-tabular" / "leaderboard.csv"
    args = ["bench", "doctor", "mini-tabular", "--data", str(data), "--registry", str(reg2)]
    board.write_text("teamId,score\n1,0.5\n2,\n3,abc\n")
    assert main([*args, "--json"]) == 1
    (line,) = json.loads(capsys.readouterr().out)
    assert line["problems"][0].startswith(
        "leaderboard.csv has 2 of 3 rows without a finite score (data rows 2, 3); MLE-bench "
        "reads the direction from the first and last rows"
    )
    assert "git lfs pull" in line["fixes"][0]
    board.write_text("teamId,score\n1,0.1\n2,\n3,0.9\n")
    assert main([*args, "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)
    assert line["ok"] and any("1 of 3 rows without a finite score" in n for n in line["notes"])


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_doctor_checksums_compare_the_leaderboard_with_the_commit(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--checksums``: a leaderboard cut short (a partial download, an edit) moved every
    threshold unnoticed; it is now compared with the sha256 and size of the git-lfs pointer
    the checkout's commit holds, and a mismatch is a problem with the fix."""
    import hashlib
    import subprocess

    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    reg2 = tmp_path / "registry"
    shutil.copytree(registry, reg2)
    rel = "mlebench/competitions/mini-tabular/leaderboard.csv"
    real = (reg2 / rel).read_bytes()
    pointer = (
        "version https://git-lfs.github.com/spec/v1\n"
        f"oid sha256:{hashlib.sha256(real).hexdigest()}\nsize {len(real)}\n"
    )
    (reg2 / rel).write_text(pointer)  # what git stores for a git-lfs file

    def git(*a: str) -> None:
        subprocess.run(["git", "-C", str(reg2), *a], check=True, capture_output=True)

    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "registry")
    (reg2 / rel).write_bytes(real)  # what `git lfs pull` writes
    args = ["bench", "doctor", "mini-tabular", "--data", str(data), "--registry", str(reg2)]
    assert main([*args, "--checksums", "--json"]) == 0
    (line,) = json.loads(capsys.readouterr().out)
    assert line["ok"], line
    (reg2 / rel).write_bytes(real[: len(real) // 2].rsplit(b"\n", 1)[0] + b"\n")
    assert main([*args, "--checksums", "--json"]) == 1
    (line,) = json.loads(capsys.readouterr().out)
    assert line["problems"] == [
        "leaderboard.csv differs from the one the checkout's commit names (a partial or edited "
        "leaderboard moves the medal thresholds)"
    ]
    assert line["fixes"] == [
        f"run `git checkout -- {rel} && git lfs pull` in the MLE-bench checkout"
    ]
    assert main([*args, "--json"]) == 0  # without --checksums: not compared
    capsys.readouterr()


def test_a_resume_with_another_model_is_recorded_as_a_deviation(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``bench resume --model`` with runs left: the report's header said only the model the
    bench began with; the manifest's deviations (and so the header) now say the unfinished runs
    went on with the other one. A resume with nothing left to do records nothing."""
    from tests.unit.bench._minibench import mini_config

    from openmle.bench import BenchRun, MLEBench

    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    registry, data = mini
    out = tmp_path / "b"
    config = mini_config(mini, competitions=["mini-tabular"], seeds=[0], budget={"steps": 1})
    BenchRun.create(out, config, MLEBench.locate(registry, data, valid_dir=out / "valid"))
    assert main(["bench", "resume", str(out), "--model", "offline-numpy", "--quiet"]) == 0
    capsys.readouterr()
    want = (
        "resumed with --model offline-numpy (the bench began with offline): the runs "
        "unfinished at that resume went on with it"
    )
    assert BenchRun.open(out).manifest["deviations"] == [want]
    assert "- deviations: resumed with --model offline-numpy" in (out / "report.md").read_text()
    done = ["bench", "resume", str(out), "--summary-model", "offline-numpy", "--quiet"]
    assert main(done) == 0
    assert BenchRun.open(out).manifest["deviations"] == [want]  # all done: nothing recorded


def test_a_typo_in_a_competition_id_names_the_nearest_one(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A misspelt id: one line listing what is accepted and the nearest id (it gave only the
    suites, and the ids had to be found elsewhere)."""
    registry, data = mini
    out = tmp_path / "b"
    args = ["bench", "run", "mini-tabluar", "--data", str(data), "--registry", str(registry),
            "--out", str(out), "--quiet"]  # fmt: skip
    assert main(args) == 2
    err = _one_error(capsys)
    assert "Unknown suite or competition(s) ['mini-tabluar']" in err
    assert err.rstrip().endswith("; did you mean mini-tabular?") and not out.exists()


def test_doctor_names_the_install_when_a_view_needs_a_missing_library() -> None:
    """Without Pillow, denoising-dirty-documents' view cannot be built: doctor's fix said
    "run with --validation self, or ship prepared/valid"; it now leads with the install."""
    from types import SimpleNamespace

    from openmle.bench.mlebench._doctor import _doctor_view
    from openmle.errors import TaskPackageError

    cid = "denoising-dirty-documents"
    text = (
        f"{cid}: building the validation view failed (MissingDependency: {cid}: its validation "
        "view reads images with Pillow: pip install 'openmle[data]' (or pillow))"
    )

    def info() -> dict[str, Any]:
        raise TaskPackageError(text)

    bench = SimpleNamespace(task=lambda _cid: SimpleNamespace(validation_info=info))
    got: list[tuple[str, str]] = []
    _doctor_view(bench, cid, lambda p, f: got.append((p, f)), [])  # type: ignore[arg-type]
    assert got == [
        (
            f"no validation view ({text.removeprefix(cid + ': ')})",
            "pip install 'openmle[data]' (or pillow), or run with --validation self",
        )
    ]


def test_a_budget_naming_a_cap_twice_is_refused(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--budget steps=1,steps=2`` ran with steps=2, silently: refused now, on the flag and in
    an experiment file."""
    registry, data = mini
    out = tmp_path / "b"
    assert main(_run(mini, out, "--budget", "steps=1,wall_s=60,steps=2")) == 2
    assert "--budget names steps= twice; give each cap once" in _one_error(capsys)
    exp = tmp_path / "exp.toml"
    exp.write_text(
        f'suite = "mle-bench-lite"\ndata = "{data}"\nregistry = "{registry}"\n'
        f'out = "{out}"\nbudget = "wall_s=60,wall_s=90"\n'
    )
    assert main(["bench", "run", str(exp), "--quiet"]) == 2
    assert f"{exp}: budget names wall_s= twice" in _one_error(capsys) and not out.exists()


def test_a_bad_out_or_time_limit_is_refused_before_anything_is_written(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--out`` a file gave a NotADirectoryError traceback; ``--out`` an existing bench was
    refused only after the preflight had built views inside it; ``--time-limit`` 0, -5, nan or
    inf ran the bench with every run counted a failure. Each is one line naming the flag now,
    and nothing is written."""
    monkeypatch.setenv("OPENMLE_CACHE", str(tmp_path / "cache"))
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(_run(mini, afile)) == 2
    assert f"--out {str(afile)!r} is a file; give a new directory" in _one_error(capsys)
    used = tmp_path / "used"
    used.mkdir()
    (used / "manifest.json").write_text("{}")
    assert main(_run(mini, used)) == 2
    assert "already exists and is not empty" in _one_error(capsys)
    assert sorted(p.name for p in used.iterdir()) == ["manifest.json"]  # no valid/ built in it
    out = tmp_path / "b"
    for bad in ("0", "-5", "nan", "inf"):
        assert main(_run(mini, out, f"--time-limit={bad}")) == 2
        err = _one_error(capsys)
        assert "Expected time_limit_s, the seconds one program run may take" in err
        assert "--time-limit SECONDS" in err and not out.exists()


def test_experiment_file_values_of_the_wrong_type_name_the_key(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A quoted number, a float GPU count or ``true`` in the experiment file gave a traceback
    (``workers = "two"``, ``concurrency = "2"``) or ran with another value (``gpus = 1.5`` as
    1, ``time_limit_s = true`` as 1 s): one line naming the file, the key and the type."""
    registry, data = mini
    out = tmp_path / "b"
    exp = tmp_path / "exp.toml"
    cases = {
        'workers = "two"': 'expected workers = a whole number, e.g. 2 but got workers = "two"',
        'concurrency = "2"': "expected concurrency = a whole number",
        "gpus = 1.5": "expected gpus = a whole number, e.g. 2 but got gpus = 1.5",
        'cpus = "x"': 'expected cpus = a number, e.g. 8 but got cpus = "x"',
        "time_limit_s = true": "expected time_limit_s = a number, e.g. 3600 but got "
        "time_limit_s = true",
        "model = 3": 'expected model = a string, e.g. "..." but got model = 3',
    }
    for line, expected in cases.items():
        exp.write_text(
            f'suite = "mle-bench-lite"\ndata = "{data}"\nregistry = "{registry}"\n'
            f'out = "{out}"\nbudget = "steps=1"\n{line}\n'
        )
        assert main(["bench", "run", str(exp), "--quiet"]) == 2, line
        assert f"{exp}: {expected}" in _one_error(capsys) and not out.exists()


def test_the_preflight_listing_is_bounded() -> None:
    """22 competitions that cannot run: three causes in full, then the others counted; a long
    cause loses its middle, not its end (where the fix is)."""
    from openmle.bench._runner import _listed

    problems = [f"c{i}: cannot be prepared ({'x' * 900}); run the fix" for i in range(22)]
    text = _listed(problems)
    assert text.endswith("; and 19 more competition(s) (c3, c4, c5, c6, c7, ...)")
    assert len(text) < 1900 and text.count("cannot be prepared") == 3
    assert text.count("x ... x") == 3 and text.count("); run the fix") == 3


def test_progress_counts_committed_steps() -> None:
    """``step 0/2`` goes with ``steps 100% left`` (the proposed step is not counted)."""
    from tests.unit.bench._progress import progress

    from openmle.bench._runner import _Live

    lines: list[str] = []
    live = _Live(total=1, done=0, medals=0, emit=lines.append)

    live.run_line("c", 0, progress(0, None, 0.5), 2)
    live.run_line("c", 0, progress(1, 0.5, 1.0), 2)
    assert "step 0/2" in lines[0] and lines[0].endswith("steps 100% left")
    assert "step 1/2" in lines[1] and lines[1].endswith("steps 50% left")


@pytest.mark.parametrize("group", [False, True])
def test_an_interrupted_bench_says_how_to_resume(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    group: bool,
) -> None:
    """Ctrl-C (alone or inside a task group's exception group) exits 130 with the
    ``openmle bench resume`` line once the bench directory holds its manifest."""
    out = tmp_path / "b"

    def interrupted_go(args: Any, path: Path, *_: Any) -> int:
        path.mkdir()
        (path / "manifest.json").write_text("{}")
        if group:
            raise BaseExceptionGroup("runs", [KeyboardInterrupt()])
        raise KeyboardInterrupt

    monkeypatch.setattr("openmle._cli._bench._go", interrupted_go)
    assert main(_run(mini, out)) == 130
    err = capsys.readouterr().err
    assert err.startswith("openmle: interrupted (Ctrl-C)\n")
    assert f"continue with: openmle bench resume {out}\n" in err


def test_the_whale_rule_reads_as_a_sentence() -> None:
    from openmle.bench.mlebench import lite_rule

    rule = lite_rule("the-icml-2013-whale-challenge-right-whale-redux")
    assert rule is not None
    assert rule.describe() == "train2.zip: the latest 50% of recording days held out (seed 0)"


def test_resume_of_a_bench_that_records_a_bad_sandbox_names_it_and_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bench directory written before --sandbox was checked can record one that names
    nothing: resume said "Expected --sandbox ... got 'nosuch'" as if the user had typed it; now
    one line naming the manifest, the recorded value and --sandbox, which then resumes it.
    """
    from tests.unit.bench._mininb import build

    from openmle.bench import BenchConfig, BenchRun, NatureBench

    root = build(tmp_path / "nb")
    config = BenchConfig(suite="x", competitions=("nb-cpu-bio",), seeds=(0,), model="offline",
                         budget={"steps": 1}, data_dir=str(root), benchmark="naturebench",
                         sandbox="nosuch")  # fmt: skip
    bench = tmp_path / "bench"
    BenchRun.create(bench, config, NatureBench(root))
    assert main(["bench", "resume", str(bench)]) == 2
    err = capsys.readouterr().err
    assert f"{bench}/manifest.json records --sandbox 'nosuch'" in err
    assert "pass --sandbox SPEC" in err and len(err.strip().splitlines()) == 1
    assert main(["bench", "resume", str(bench), "--sandbox", "local", "--quiet"]) == 0
