"""A new user's first minutes: a wrong flag or value is one line from the command that got it,
before anything is printed or written, with the fix."""

from __future__ import annotations

import re
import shlex
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


_DOCS = Path(__file__).resolve().parents[3] / "docs"


def _blocks(page: str, lang: str) -> list[str]:
    """The fenced ``lang`` blocks of ``docs/<page>``, in order."""
    text = (_DOCS / page).read_text()
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def test_the_task_packages_grading_commands_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """task-packages.md graded the test split's submission.csv with `--split valid` (800 rows
    expected, 1,000 given): it always failed. Its blocks now run, in order, as written."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    for code in _blocks("how-to/task-packages.md", "python")[:2]:
        exec(compile(code, "task-packages.md", "exec"), namespace)
    commands = [
        shlex.split(line.partition("#")[0])[1:]
        for line in _blocks("how-to/task-packages.md", "bash")[0].splitlines()
        if line.startswith("openmle task grade")
    ]
    assert len(commands) == 2 and commands[1][4:6] == ["--split", "valid"]
    for argv in commands:
        assert main(argv) == 0, capsys.readouterr()
    assert '"valid": true' in capsys.readouterr().out


def test_the_custom_sandbox_checks_run_as_a_script() -> None:
    """custom-sandbox.md's check used a top-level `await`, a SyntaxError in a script."""
    for code in _blocks("how-to/custom-sandbox.md", "python"):
        compile(code, "custom-sandbox.md", "exec")  # no top-level await


def test_the_tutorial_names_its_steps_and_the_plots_extra() -> None:
    """The export block's skip note named step 3 (the report); the run it reads is step 4's.
    The README's first install has no matplotlib: step 3 says that the plots need it."""
    text = (_DOCS / "tutorial.md").read_text()
    assert "the command of step 4 wrote" in text and "commands of step 3 wrote" not in text
    assert "`Plots: matplotlib not installed`" in text


def test_the_miniature_snippet_runs_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """run-mle-bench.md's `build_miniature("lite-mini")` read like a suite name and failed the
    second time (the directory already held a miniature)."""
    monkeypatch.chdir(tmp_path)
    (code,) = [b for b in _blocks("how-to/run-mle-bench.md", "python") if "build_miniature" in b]
    code = code.replace(
        "build_miniature(root)", "build_miniature(root, ids=['spooky-author-identification'])"
    )
    code = code.replace('"dogs-vs-cats-redux-kernels-edition"', '"spooky-author-identification"')
    for _ in range(2):
        exec(compile(code, "run-mle-bench.md", "exec"), {})


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


def test_a_sandbox_that_fails_its_preflight_stops_search_before_the_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--sandbox service:URL` with nothing listening printed the run header, then the error."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-binary", "--sandbox", f"service:{url}", "--steps", "2"]
    err = _refused([*argv, "--out", str(out)], capsys, rc=1)
    assert f"no job service answers at {url}" in err and not out.exists()
