"""The 2 x 2 ablation on the miniature MLE-bench: priors off/on x 1 / 2 workers at one
sandbox_s budget, same competitions and seeds; the report shows the arms side by side; a
library naming a bench competition is refused before anything is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import anyio
import attrs
import pytest
from tests.unit.bench._minibench import mini_config

from openmle.bench import (
    BenchConfig,
    MLEBench,
    arun_bench,
    bench_report,
    check_priors_clean,
    competition_exclusions,
    priors_ablation,
    write_report,
)
from openmle.errors import InvalidArgument
from openmle.priors import Prior, PriorLibrary, save_library
from openmle.testing import ScriptedModel

pytest.importorskip("yaml")
pytest.importorskip("pandas")

pytestmark = [pytest.mark.integration, pytest.mark.slow]

#: Each run's sandbox_s budget: smaller than one program's run, so every run stops after its
#: first program (the arms compare at one budget; the size of it is not what is tested).
BUDGET_S = 0.05

PROGRAM = """plan: copy the sample
```python
import os, shutil
shutil.copyfile(os.path.join(os.environ["DATA_DIR"], "sample_submission.csv"), "submission.csv")
print("copied")
```"""


def _config(mini: tuple[Path, Path], lib: Path) -> BenchConfig:
    return mini_config(
        mini,
        competitions=["mini-tabular"],
        seeds=(0, 1),
        model="scripted",
        budget={"sandbox_s": BUDGET_S},
        time_limit_s=60.0,
        concurrency=2,
        priors=str(lib),
        arms=priors_ablation(2),
    )


def _refused(mini: tuple[Path, Path], tmp_path: Path, leak: Prior, match: str) -> None:
    """A bench whose library holds ``leak`` is refused (an InvalidArgument matching ``match``)
    before its folder is made."""
    lib = tmp_path / "lib.jsonl"
    save_library(PriorLibrary([leak]), lib)
    out = tmp_path / "bench"
    with pytest.raises(InvalidArgument, match=match):
        anyio.run(
            lambda: arun_bench(
                out, config=_config(mini, lib), model=ScriptedModel(lambda _r: PROGRAM)
            )
        )
    assert not out.exists()


def test_two_by_two_arms_run_and_report_side_by_side(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    lib = tmp_path / "lib.jsonl"
    library = PriorLibrary(
        [
            Prior(
                prior_id="p",
                kind="trick",
                text="Copy nothing blindly.",
                source="s",
                source_ids=["x"],
            )
        ]
    )
    save_library(library, lib)
    out = tmp_path / "bench"
    reports = anyio.run(
        lambda: arun_bench(out, config=_config(mini, lib), model=ScriptedModel(lambda _r: PROGRAM))
    )
    assert len(reports) == 8  # every arm x seed
    for arm in ("base", "priors", "parallel", "priors+parallel"):
        for seed in (0, 1):
            rd = out / "runs" / arm / "mini-tabular" / f"seed-{seed}"
            assert (rd / "bench_result.json").is_file(), rd
            m = json.loads((rd / "manifest.json").read_text())
            assert m["workers"] == (2 if "parallel" in arm else 1)
            assert m["budget"]["sandbox_s"] == BUDGET_S and m["config"]["seed"] == seed
            has = "priors" in m["extra"]
            assert has == arm.startswith("priors"), arm
            if has:
                assert m["extra"]["priors"]["sha256"] == library.content_hash
            assert (out / "submissions" / arm / "mini-tabular" / f"seed-{seed}").is_dir()
    rep = bench_report(out)
    md = rep.markdown()
    assert "## Arms" in md and "priors+parallel" in md and " ± " in md
    assert "differ in priors on purpose" in md and "same sandbox compute" in md
    d = rep.to_dict()
    assert set(d["arms"]) == {"base", "priors", "parallel", "priors+parallel"}
    for arm in d["arms"].values():
        assert arm["metrics"]["num_seeds"] == 2
        assert arm["spent"]["sandbox_s"] >= 2 * BUDGET_S
    # Every arm's runs are in the Runs table, with an arm column.
    runs_md = md.split("## Runs", 1)[1]
    assert "| arm | competition | seed |" in runs_md
    for arm in ("base", "priors", "parallel", "priors+parallel"):
        for seed in (0, 1):
            assert f"| {arm} | mini-tabular | {seed} |" in runs_md, (arm, seed)
    assert "arm priors+parallel" in rep.html()
    # MLE-bench's files: the main pair holds the base arm; each arm has its own pair.
    paths = write_report(out)
    main = [json.loads(ln) for ln in paths["submission_jsonl"].read_text().splitlines()]
    assert len(main) == 2
    assert all("/submissions/base/" in ln["submission_path"] for ln in main)
    assert json.loads(paths["grading_report"].read_text())["total_runs"] == 2
    for arm in ("base", "priors", "parallel", "priors+parallel"):
        jl = out / "arms" / arm / "submission.jsonl"
        assert paths[f"submission_jsonl:{arm}"] == jl
        lines = [json.loads(ln) for ln in jl.read_text().splitlines()]
        assert sorted(Path(ln["submission_path"]).parent.name for ln in lines) == [
            "seed-0",
            "seed-1",
        ]
        assert all(f"/submissions/{arm}/mini-tabular/" in ln["submission_path"] for ln in lines)
        assert all(Path(ln["submission_path"]).is_file() for ln in lines)
        grading = json.loads((out / "arms" / arm / "grading_report.json").read_text())
        assert grading["total_runs"] == 2
        assert len(grading["competition_reports"]) == 2
    # The library changed: the bench refuses to resume with it.
    save_library(PriorLibrary([]), lib)
    with pytest.raises(InvalidArgument, match="changed since the bench was made"):
        anyio.run(lambda: arun_bench(out, model=ScriptedModel(lambda _r: PROGRAM)))


def test_a_library_made_from_a_bench_competition_is_refused(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    leak = Prior(
        prior_id="leak",
        kind="method",
        text="t",
        source="openmle run mini-tabular@seed-0",
        source_ids=["mini-tabular@seed-0"],
    )
    _refused(mini, tmp_path, leak, r"'mini-tabular'.*openmle run mini-tabular")


def test_a_library_citing_a_competitions_data_hash_is_refused(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """The bench hashes each competition's public data (and description): a prior whose
    provenance carries one of those hashes is refused, whatever it calls the source."""
    registry, data = mini
    train = data / "mini-tabular" / "prepared" / "public" / "train.csv"
    digest = hashlib.sha256(train.read_bytes()).hexdigest()
    bench = MLEBench.locate(str(registry), str(data), valid_dir=tmp_path / "valid")
    excl = competition_exclusions(bench, "mini-tabular")
    assert digest in excl.data_hashes and "mini-tabular" in excl.names
    md5 = hashlib.md5(train.read_bytes(), usedforsecurity=False).hexdigest()
    assert f"md5:{md5}" in excl.data_hashes  # as MLE-bench's checksums.yaml records it
    leak = Prior(prior_id="leak", kind="method", text="t", source="a write-up", source_ids=[digest])
    _refused(mini, tmp_path, leak, r"'mini-tabular'.*'leak'.*data hash")
    clean = attrs.evolve(leak, source_ids=[hashlib.sha256(b"other data").hexdigest()])
    check_priors_clean(PriorLibrary([clean]), ["mini-tabular"], known={"mini-tabular": excl})
