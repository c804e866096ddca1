"""``openmle demo``: the worked reward example, printed and as JSON."""

from __future__ import annotations

import json

import pytest

from openmle._cli import main


def test_demo_prints_the_worked_example(capsys: pytest.CaptureFixture[str]) -> None:
    """The table shows the bounds, all 16 rows and the headline figures."""
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "adaptive bounds (signed) best -0.0830  worst -0.1930" in out
    assert "static bounds (signed)   best +0.0000  worst -20.0000" in out
    assert "reward spread: static 0.0044, adaptive 0.8000" in out
    assert "GRPO 1.718, entropic 5.654 (3.29x)" in out
    assert "0.083" in out and "0.171" in out
    assert len([ln for ln in out.splitlines() if ln.strip()[:2].strip().isdigit()]) == 16


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    """``--json`` prints one line with the same figures."""
    assert main(["demo", "--json"]) == 0
    fig = json.loads(capsys.readouterr().out)
    assert fig["adaptive_bounds"] == pytest.approx([-0.083, -0.193])
    assert fig["best_ratio"] == pytest.approx(3.29, abs=5e-3)
    assert len(fig["entropic_advantages"]) == 16
