"""``openmle search --priors FILE --islands N`` and ``openmle resume --priors FILE``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openmle._cli import main
from openmle.priors import Prior, PriorLibrary, save_library

LIB = PriorLibrary(
    [Prior(prior_id="boost", kind="method", text="Try hgb(max_iter=300).", source="w")]
)


def test_search_with_priors_and_islands_then_resume_checks_the_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lib = tmp_path / "lib.jsonl"
    save_library(LIB, lib)
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-binary", "--steps", "3", "--workers", "1"]
    argv += ["--priors", str(lib), "--islands", "2", "--out", str(out), "--quiet"]
    assert main([*argv, "--no-report", "--json"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["config"]["islands"] == 2
    assert m["extra"]["priors"]["sha256"] == LIB.content_hash
    assert m["extra"]["priors"]["shown"] == ["boost"]
    assert m["extra"]["cli"]["priors"] == str(lib)
    nodes = [json.loads(x) for x in (out / "journal.jsonl").read_text().splitlines()]
    drafts = [r["node"] for r in nodes if r["event"] == "node" and r["node"]["operator"] == "draft"]
    assert drafts and all(d["priors_shown"] == ["boost"] for d in drafts)
    assert all(d["island"] == d["step"] % 2 for d in drafts)
    other = tmp_path / "other.jsonl"
    save_library(PriorLibrary([]), other)
    capsys.readouterr()
    code = main(["resume", str(out), "--priors", str(other), "--budget", "steps=4", "--quiet"])
    assert code != 0
    assert "same library" in capsys.readouterr().err


def test_a_missing_library_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-binary", "--steps", "2"]
    code = main([*argv, "--priors", str(tmp_path / "no"), "--out", str(out), "--quiet"])
    assert code != 0 and not out.exists()
    assert "prior library" in capsys.readouterr().err
