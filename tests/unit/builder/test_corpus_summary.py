"""The build-many summary counts a stage that did not run as skipped, never as passed."""

from __future__ import annotations

import json
from pathlib import Path

from openmle.builder import BuildResult
from openmle.builder._corpus import _entry, summarize


def _record(corpus: Path, name: str, entry: dict[str, object]) -> None:
    (corpus / "records").mkdir(parents=True, exist_ok=True)
    (corpus / "records" / f"{name}.json").write_text(json.dumps(entry))


def test_stages_that_did_not_run_are_skipped_in_the_table_and_summary_json(
    tmp_path: Path,
) -> None:
    """`task build-many` without --judge showed `judge 3 3 100%` and `metric 3 3 100%`."""
    built = BuildResult(
        status="built",
        stage="emit",
        reason="",
        package=tmp_path / "x",
        record={"skipped": ["metric", "judge"]},
    )
    for name in ("a", "b", "c"):
        _record(tmp_path, name, _entry(built))
    summary = summarize(tmp_path, ["a", "b", "c"], 0)
    stages = json.loads((tmp_path / "summary.json").read_text())["stages"]
    assert stages == summary.stages
    assert stages["judge"] == {"reached": 0, "passed": 0, "skipped": 3}
    assert stages["metric"] == {"reached": 0, "passed": 0, "skipped": 3}
    assert stages["solvability"] == {"reached": 3, "passed": 3, "skipped": 0}
    lines = {line.split()[0]: line.split()[1:] for line in summary.table().splitlines()[2:]}
    assert lines["judge"] == ["0", "0", "3", "-"]
    assert lines["emit"] == ["3", "3", "0", "100.0%"]


def test_a_record_without_skipped_stages_counts_as_before(tmp_path: Path) -> None:
    """A corpus built by an earlier version (no ``skipped`` in its records) still sums up."""
    _record(tmp_path, "a", {"status": "rejected", "stage": "gate", "reason": "", "findings": []})
    stages = summarize(tmp_path, ["a"], 1).stages
    assert stages["gate"] == {"reached": 1, "passed": 0, "skipped": 0}
    assert stages["prepare"] == {"reached": 1, "passed": 1, "skipped": 0}
