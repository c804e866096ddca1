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
