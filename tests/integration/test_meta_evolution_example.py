"""examples/meta_evolution.py runs end to end at a small size and reports both searches."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests._examples import load_example

pytest.importorskip("torch", reason="needs torch: pip install 'openmle[torch]'")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.torch,
    pytest.mark.slow,
    pytest.mark.usefixtures("one_torch_thread"),  # tiny model beside the programs
]


def test_meta_evolution_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Search, export, SFT + GSPO, search again: both searches ran their budget and printed."""
    report = load_example("meta_evolution").main(
        ["--steps", "4", "--gspo-steps", "1", "--workdir", str(tmp_path)]
    )
    out = capsys.readouterr().out
    assert "search before training:" in out and "search after training:" in out
    for key in ("before", "after"):
        assert report[key]["nodes"] == 4
    assert report["sft_records"] >= 1
    assert len(report["gspo_rewards"]) == 1
    for name in ("search-before", "search-after"):
        assert (tmp_path / name / "journal.jsonl").is_file()
    assert (tmp_path / "sft.parquet").is_file()
