"""``openmle task``: readable output, --json, exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openmle._cli import main

from .conftest import PackageBuilder, write_csv


def test_validate_ok_and_json(
    make_package: PackageBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    """A good package exits 0 with a summary; --json prints the report."""
    root = make_package()
    assert main(["task", "validate", str(root)]) == 0
    out = capsys.readouterr().out
    assert "OK: 0 error(s)" in out and "sample submission scores" in out
    assert main(["task", "validate", str(root), "--json", "--no-smoke-test"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["sample_score"] is None


def test_validate_failure_exit_1(
    make_package: PackageBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broken package exits 1 and lists the problem with its file and fix."""
    root = make_package()
    (root / "data/public/test.csv").unlink()
    assert main(["task", "validate", str(root)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "data/public/test.csv" in out and "Fix:" in out


def test_grade_valid_invalid_and_usage(
    make_package: PackageBuilder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Valid submissions exit 0, invalid 1, an unknown task 2."""
    root = make_package()
    sample = root / "data/public/sample_submission.csv"
    assert main(["task", "grade", str(root), str(sample)]) == 0
    assert "score" in capsys.readouterr().out
    bad = tmp_path / "bad.csv"
    write_csv(bad, ["id", "z"], [[1, 2]])
    assert main(["task", "grade", str(root), str(bad), "--split", "valid", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["valid"] is False and data["split"] == "valid" and "columns" in data["reason"]
    assert main(["task", "grade", str(tmp_path / "none"), str(bad)]) == 2
    assert "Unknown task" in capsys.readouterr().err
    assert main(["task"]) == 2


def test_grade_bundled_shows_leaderboard(capsys: pytest.CaptureFixture[str]) -> None:
    """Grading a bundled task by name prints the leaderboard line; list shows all three."""
    from openmle.gym import bundled

    sample = bundled("tabular-binary").public_dir("test") / "sample_submission.csv"
    assert main(["task", "grade", "tabular-binary", str(sample)]) == 0
    assert "leaderboard (120 entries)" in capsys.readouterr().out
    assert main(["task", "list", "--json"]) == 0
    assert [r["name"] for r in json.loads(capsys.readouterr().out)] == [
        "tabular-binary",
        "tabular-multiclass",
        "tabular-regression",
    ]
    with pytest.raises(SystemExit) as info:
        main(["task", "grade", "tabular-binary", str(sample), "--split", "train"])
    assert info.value.code == 2


@pytest.mark.parametrize("command", ["grade", "validate"])
def test_a_misspelt_task_gets_did_you_mean(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`openmle task grade tabular-binry` named no close task; search --task did."""
    extra = [str(tmp_path / "sub.csv")] if command == "grade" else []
    assert main(["task", command, "tabular-binry", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("openmle: error: Unknown task 'tabular-binry'")
    assert "did you mean 'tabular-binary'?" in err


def test_list_columns_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    """`openmle task list` padded names to 20 and metrics to 10, then `higher is better` or
    `lower is better` (one space shorter), so the paths did not line up."""
    assert main(["task", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["task", "metric", "better", "path"]
    assert len(lines) == 4
    for word in ("metric", "better", "path"):
        at = lines[0].index(word)
        assert all(line[at - 2 : at] == "  " and line[at] != " " for line in lines), word
