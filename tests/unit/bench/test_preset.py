"""`openmle bench run --preset paper`: a shortened run of the paper's operating point on the
miniature MLE-bench (offline model, local sandbox) records the preset and every deviation in
the manifest and the report; the Draft prompt it sent holds the data preview and the
remaining-budget line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import attrs
import pytest

from openmle._cli import main
from openmle.bench import BenchConfig, preset_deviations
from openmle.search import PAPER

pytest.importorskip("yaml")
pytest.importorskip("pandas")


def test_paper_preset_run_reports_the_preset_and_every_deviation(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry, data = mini
    out = tmp_path / "bench"
    rc = main(["bench", "run", "mini-tabular", "--data", str(data), "--registry", str(registry),
               "--preset", "paper", "--budget", "steps=2", "--seeds", "1",
               "--time-limit", "120", "--out", str(out), "--quiet"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    manifest = json.loads((out / "manifest.json").read_text())
    cfg = manifest["config"]
    assert cfg["preset"] == PAPER.to_dict()
    # the user's flags are the deviations; the rest holds the preset's values
    assert cfg["deviations"] == {
        "steps": {"preset": 800, "used": 2},
        "seeds": {"preset": 3, "used": 1},
        "time_limit_s": {"preset": 7200.0, "used": 120.0},
    }
    assert cfg["validation"] == "self" and manifest["validation"] == {"mini-tabular": "self"}
    assert cfg["budget"]["sandbox_s"] == 43_200 and cfg["budget"]["wall_s"] == 64_800
    assert cfg["search"] == {
        "max_debug_depth": 10,
        "selector": "released",
        "prompt_chars": {"crossover": 78_400, "improve": 54_300},
        "data_preview": True,
        "gpu_memory_gb": 12.0,
    }
    # one deviations record in the manifest: the same lines the report prints
    assert manifest["deviations"] == [
        "seeds: preset 3 -> used 1",
        "steps: preset 800 -> used 2",
        "time_limit_s: preset 7200.0 -> used 120.0",
    ]
    assert manifest["gpu_memory_cap_gb"]["cap"] == 12.0
    assert manifest["gpu_memory_cap_gb"]["enforced"] is False
    run = json.loads((out / "runs/mini-tabular/seed-0/manifest.json").read_text())
    assert run["config"]["max_debug_depth"] == 10
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    for text in (md, page):
        assert "preset: paper (" in text and "validation protocol: self" in text
        for line in (
            "deviations: seeds: preset 3 -&gt; used 1; steps: preset 800 -&gt; used 2; ",
            "time\\_limit\\_s: preset 7200.0 -&gt; used 120.0"
            if text is md
            else "time_limit_s: preset 7200.0 -&gt; used 120.0",
        ):
            assert line in text
        assert text.count("steps: preset 800") == 1
    # the recorded Draft request: data preview and the remaining-budget line
    blobs = sorted((out / "runs/mini-tabular/seed-0/requests").glob("*.json.gz"))
    prompts = [json.loads(gzip.decompress(b.read_bytes()))["messages"][-1]["content"]
               for b in blobs]  # fmt: skip
    first = next(p for p in prompts if "Files (under the data directory)" in p)
    assert "train.csv" in first and "columns (4): id:int, x1:float, x2:float, label:int" in first
    assert (
        "This search has 1 step, " in first
        and "of wall time and 12 hours of program run time" in first
    )


def test_deviations_are_computed_from_the_config() -> None:
    """A config holding every preset value has no deviation; each change is one entry."""
    from openmle.bench import preset_search

    base = BenchConfig(
        suite="s", competitions=["a"], seeds=[0, 1, 2], model="offline", data_dir="/d",
        budget={"steps": 800, "sandbox_s": 43_200.0, "wall_s": 64_800.0},
        time_limit_s=7_200.0, search=preset_search(PAPER),
    )  # fmt: skip
    assert preset_deviations(PAPER, attrs.evolve(base, validation="self")).deviations == {}
    devs = preset_deviations(PAPER, base).deviations
    assert devs == {"validation": {"preset": "self", "used": "auto"}}
    plain = BenchConfig(suite="s", competitions=["a"], seeds=[0], model="m", data_dir="/d",
                        budget={"steps": 800})  # fmt: skip
    got = preset_deviations(PAPER, plain).deviations
    assert got["max_debug_depth"] == {"preset": 10, "used": 3}
    assert got["prompt_chars"]["used"] == {} and got["sandbox_s"]["used"] is None
