"""`openmle bench` for campaigns from the command line: routed models and a summary model
recorded in the manifest and reused by resume, `bench status`, bad input named by its flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openmle._cli import main
from openmle.search import read_journal

pytest.importorskip("yaml")


def test_routed_models_and_summary_model_are_recorded(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, data = mini
    out = tmp_path / "b"
    routed = "draft=offline,improve=offline-numpy,default=offline"
    args = ["bench", "run", "mini-tabular", "--data", str(data), "--registry", str(registry),
            "--seeds", "1", "--budget", "steps=2", "--out", str(out), "--time-limit", "60",
            "--model", routed, "--summary-model", "offline", "--json"]  # fmt: skip
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 1
    config = json.loads((out / "manifest.json").read_text())["config"]
    assert config["model"] == routed and config["summary_model"] == "offline"
    nodes = [
        r["node"] for r in read_journal(out / "runs/mini-tabular/seed-0") if r["event"] == "node"
    ]
    assert len(nodes) == 2
    # resume takes both from the manifest; a finished bench is left as it is
    assert main(["bench", "resume", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["runs"] == 1
    assert main(["bench", "status", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "mini-tabular" in shown and "finished" in shown and "1 runs: 1 finished" in shown


def test_bad_model_flags_name_the_flag(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, data = mini
    base = ["bench", "run", "mini-tabular", "--data", str(data), "--registry", str(registry),
            "--seeds", "1", "--budget", "steps=1"]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "a"), "--summary-model", "draft=offline"]) == 2
    assert "--summary-model" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "b"), "--model", "draft=offline"]) == 2
    assert "no model for operator 'improve'" in capsys.readouterr().err
    assert main([*base, "--out", str(tmp_path / "c"), "--sandbox", "nope"]) == 2
    assert "Expected --sandbox to be one of" in capsys.readouterr().err
    assert main(["bench", "status", str(tmp_path)]) == 2
    assert "not a bench directory" in capsys.readouterr().err


def test_a_terminal_gets_the_live_table(
    mini: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("rich", reason="the 'live' extra is not installed")
    import sys

    registry, data = mini
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "120")
    args = ["bench", "run", "mini-tabular", "--data", str(data), "--registry", str(registry),
            "--seeds", "1", "--budget", "steps=1", "--time-limit", "60"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "live")]) == 0
    shown = capsys.readouterr().out
    assert "runs in flight" in shown and "runs done 1/1" in shown
    assert main([*args, "--out", str(tmp_path / "plain"), "--plain"]) == 0
    shown = capsys.readouterr().out
    assert "runs in flight" not in shown and "[1/1 runs" in shown
