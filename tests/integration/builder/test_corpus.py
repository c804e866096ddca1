"""`openmle task build-many` at small corpus scale: killed with SIGKILL mid-way and rerun, every
source ends up built (or rejected/failed) exactly once and the summary matches the disk."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

N_SOURCES = 20


def _make_sources(root: Path) -> None:
    rng = np.random.default_rng(7)
    for k in range(N_SOURCES):
        d = root / f"src{k:02d}"
        d.mkdir(parents=True)
        x = rng.normal(size=(60, 3))
        if k % 2:
            y = [f"{v:.4f}" for v in x @ [1.0, -2.0, 0.5] + rng.normal(size=60)]
        else:
            y = ["yes" if v > 0 else "no" for v in x[:, 0] + 0.3 * rng.normal(size=60)]
        lines = ["a,b,c,target"] + [
            f"{r[0]:.4f},{r[1]:.4f},{r[2]:.4f},{t}" for r, t in zip(x, y, strict=True)
        ]
        (d / "data.csv").write_text("\n".join(lines) + "\n")
        (root / f"src{k:02d}.provenance.json").write_text(
            json.dumps({"source": f"test/{k}", "licence": "CC0"})
        )
    # One source the builder must refuse (its name is on the shipped benchmark list), one with
    # no table (rejected at the inventory: nothing holds labels).
    (root / "src05").rename(root / "spooky-author-identification")
    (root / "src07" / "data.csv").rename(root / "src07" / "notes.bin")


def _cmd(sources: Path, corpus: Path) -> list[str]:
    return [
        sys.executable, "-m", "openmle", "task", "build-many", str(sources),
        "--out", str(corpus), "--workers", "2", "--no-solvability",
    ]  # fmt: skip


def test_build_many_resumes_after_kill_9(tmp_path: Path) -> None:
    sources, corpus = tmp_path / "sources", tmp_path / "corpus"
    _make_sources(sources)
    records = corpus / "records"
    proc = subprocess.Popen(
        _cmd(sources, corpus),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if records.is_dir() and len(list(records.glob("*.json"))) >= 4:
                break
            time.sleep(0.2)
        assert proc.poll() is None, "build-many finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    time.sleep(1.0)
    done_before = {p.stem for p in records.glob("*.json")}
    assert 4 <= len(done_before) < N_SOURCES
    before = {
        p.name: (
            p.stat().st_ino,
            p.stat().st_mtime_ns,
            (p / "builder" / "record.json").read_bytes(),
        )
        for p in (corpus / "tasks").iterdir()
        if not p.name.startswith(".")
    }

    rerun = subprocess.run(
        [*_cmd(sources, corpus)[:-1], "--no-solvability", "--json"],
        capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    summary = json.loads(rerun.stdout)

    # Every source finished exactly once: one record each; nothing finished before was redone.
    names = sorted(p.name for p in sources.iterdir() if p.is_dir())
    assert sorted(p.stem for p in records.glob("*.json")) == names
    assert not [p for p in records.iterdir() if p.name.startswith(".")]
    assert summary["skipped"] >= len(done_before)
    tasks = sorted(p.name for p in (corpus / "tasks").iterdir())
    assert not [t for t in tasks if t.startswith(".")], "half-built staging directories left"
    for name, (ino, mtime, rec) in before.items():
        p = corpus / "tasks" / name
        assert (p.stat().st_ino, p.stat().st_mtime_ns) == (ino, mtime)
        assert (p / "builder" / "record.json").read_bytes() == rec

    entries = {n: json.loads((records / f"{n}.json").read_text()) for n in names}
    built = sorted(n for n, e in entries.items() if e["status"] == "built")
    assert tasks == built
    assert summary["built"] == len(tasks) == N_SOURCES - 2
    assert entries["spooky-author-identification"]["status"] == "rejected"
    assert entries["spooky-author-identification"]["findings"] == ["contaminated"]
    assert entries["src07"]["status"] == "rejected" and entries["src07"]["stage"] == "inventory"
    assert summary["rejected"] == 2 and summary["failed"] == 0
    stages, n = summary["stages"], N_SOURCES
    assert stages["intake"] == {"reached": n, "passed": n, "skipped": 0}
    assert stages["decontam"] == {"reached": n, "passed": n - 1, "skipped": 0}
    assert stages["emit"] == {"reached": n - 2, "passed": n - 2, "skipped": 0}
    # Not asked for (--judge, solvability) or not needed (no custom metric): skipped, not passed,
    # also for the packages published just before the kill (their record.json says so).
    for skipped in ("metric", "solvability", "judge"):
        assert stages[skipped] == {"reached": 0, "passed": 0, "skipped": n - 2}, skipped
    assert summary["reasons"] == {"contaminated": 1, "no_table": 1}
    index = (corpus / "index.txt").read_text().split()
    assert index == [str(corpus / "tasks" / n) for n in built]
    rec = json.loads((corpus / "tasks" / "src03" / "builder" / "record.json").read_text())
    assert rec["intake"]["source"] == "test/3" and rec["intake"]["licence"] == "CC0"
    from openmle.gym import load_task

    assert load_task(index[0]).validate().ok
