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


def test_an_unknown_flag_gets_the_commands_own_line_and_a_suggestion(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`openmle demo --tsk ...` showed the top-level usage; now the demo's, naming --task."""
    with pytest.raises(SystemExit) as exited:
        main(["demo", "--tsk", "tabular-binary"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err == (
        "openmle demo: error: unrecognized arguments: --tsk tabular-binary "
        "(--tsk: did you mean --task?); see openmle demo --help\n"
    )
    with pytest.raises(SystemExit):
        main(["bench", "doctor", "lite", "--data", "d", "--registy", "r"])
    err = capsys.readouterr().err
    assert err.startswith("openmle bench doctor: error: ") and "did you mean --registry?" in err


@pytest.mark.parametrize(
    ("argv", "head"),
    [
        (["search", "--workers", "0"], "openmle search: error: argument --workers: "),
        (["search", "--timeout", "-5"], "openmle search: error: argument --timeout: "),
        (["search", "--seed", "abc"], "openmle search: error: argument --seed: "),
        (["search", "--steps", "0"], "openmle search: error: argument --steps: "),
        (["search", "--selector", "best"], "openmle search: error: argument --selector: "),
        (["search", "--track", "foo"], "openmle search: error: --track: unknown tracker 'foo'"),
        (["export", "--format", "csv"], "openmle export: error: argument --format: "),
        (["task", "grade"], "openmle task grade: error: the following arguments are required"),
        (["nosuchcommand"], "openmle: error: argument COMMAND: invalid choice: 'nosuchcommand'"),
    ],
)
def test_a_value_the_parser_refuses_is_one_line_exit_2(
    argv: list[str], head: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse printed a 13-line usage block and `openmle search: error: ...`; the --track
    message said `argument --track: --track: ...`. Now one line, no repeated flag, the fix."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.count("\n") == 1 and err.startswith(head), err
    prog = head.partition(": error")[0]
    assert err.endswith(f"; see {prog} --help\n")
    assert "usage:" not in err and "--track: --track" not in err


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
