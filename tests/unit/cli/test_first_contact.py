"""A new user's first minutes: a wrong flag or value is one line from the command that got it,
before anything is printed or written, with the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmle._cli import main
from openmle.errors import InvalidArgument


def test_an_existing_out_is_refused_before_the_run_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`search --out EXISTING` printed the run header, then the error."""
    out = tmp_path / "taken"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    rc = main(["search", "--task", "tabular-binary", "--out", str(out), "--budget", "steps=1"])
    got = capsys.readouterr()
    assert rc == 2
    assert got.out == ""  # no "openmle search: task ..., writing ..." header
    assert f"--out {out}" in got.err and "choose a new directory" in got.err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_an_unknown_flag_gets_the_commands_own_usage_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`openmle demo --tsk ...` showed the top-level usage; now the demo's, naming --task."""
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--tsk", "tabular-binary"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("usage: openmle demo")
    assert "openmle demo: error: unrecognized arguments: --tsk tabular-binary" in err
    assert "did you mean --task?" in err
    with pytest.raises(SystemExit):
        main(["bench", "doctor", "lite", "--data", "d", "--registy", "r"])
    err = capsys.readouterr().err
    assert "usage: openmle bench doctor" in err and "did you mean --registry?" in err


def test_a_misspelt_task_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    """`--task tabular-binaryy` names tabular-binary, on the CLI and in resolve_task."""
    assert main(["demo", "--task", "tabular-binaryy"]) == 2
    assert "did you mean tabular-binary?" in capsys.readouterr().err
    from openmle.gym import resolve_task

    with pytest.raises(InvalidArgument, match="did you mean 'tabular-binary'"):
        resolve_task("tabular-binaryy")


def test_the_default_run_folder_is_ignored_and_documented() -> None:
    """Runs land in openmle-runs/ by default: the project's .gitignore and the tutorial say so."""
    repo = Path(__file__).resolve().parents[3]
    assert "openmle-runs/" in (repo / ".gitignore").read_text().splitlines()
    assert "add `openmle-runs/` to your `.gitignore`" in (repo / "docs" / "tutorial.md").read_text()


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str], rc: int = 2) -> str:
    """Run ``argv``, check it exits ``rc`` without the run header; its stderr."""
    assert main(argv) == rc
    got = capsys.readouterr()
    assert "writing" not in got.out and "building" not in got.out, got.out
    return got.err


def test_resume_of_a_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`resume garbage.txt` said `cannot read the manifest: Not a directory` (no path)."""
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("hi")
    err = _refused(["resume", str(garbage)], capsys, rc=1)
    assert f"{str(garbage)!r} is a file, not a run directory" in err


def test_an_out_that_is_a_file_is_called_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--out README.md` was refused as a non-empty run to resume."""
    readme = tmp_path / "README.md"
    readme.write_text("x")
    err = _refused(["search", "--task", "tabular-binary", "--out", str(readme)], capsys)
    assert "is a file, not a run directory" in err and "resume" not in err


def test_islands_are_checked_before_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--islands 1` was accepted; `--islands 3 --selector greedy` printed the header first."""
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-binary", "--out", str(out), "--islands"]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "1"])
    assert exited.value.code == 2
    assert "argument --islands: expected an integer >= 2" in capsys.readouterr().err
    err = _refused([*argv, "3", "--selector", "greedy"], capsys)
    assert "--islands 3 needs --selector three-factor or three-factor-paper" in err
    assert not out.exists()


def test_islands_with_another_selector_are_refused_by_the_spec() -> None:
    """The Python API refuses the spec itself (before anything is written)."""
    from openmle.search import Budget, GreedySelector, SearchConfig, SearchSpec
    from openmle.testing import FunctionSandbox, ScriptedModel

    with pytest.raises(InvalidArgument, match="islands=3 needs a ThreeFactorSelector"):
        SearchSpec(
            task="toy",
            model=ScriptedModel(["x"]),
            sandbox=FunctionSandbox(lambda job: None),  # type: ignore[arg-type,return-value]
            budget=Budget(steps=1),
            selector=GreedySelector(higher_is_better=True),
            config=SearchConfig(islands=3),
        )


def test_a_missing_data_folder_names_the_flag_before_building(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--data nonexist` printed "building nonexist into ..." and then named `raw_dir=`."""
    out = tmp_path / "run"
    err = _refused(["search", "--data", str(tmp_path / "nonexist"), "--out", str(out)], capsys)
    assert f"--data {tmp_path / 'nonexist'}: not a directory" in err and "raw_dir" not in err
    assert not out.exists()


def test_demo_help_has_no_preset(capsys: pytest.CaptureFixture[str]) -> None:
    """`demo --help` mentioned `--preset paper`, which only `search` has."""
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    assert "--preset" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["search", "--help"])
    assert "--preset paper: 7200" in " ".join(capsys.readouterr().out.split())
