"""`openmle bench report` on a bench directory as an attacker leaves it: stored medals are
recomputed, every text is escaped, a malformed or hostile bench_result.json is refused in one
line; plus the Human Rank by hand, the modality breakdown, the validation-vs-test gap, the
budget in words and the medal strip's ticks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.unit.bench._minibench import IDS, mini_config

from openmle._cli import main
from openmle.bench import (
    BenchRun,
    MLEBench,
    bench_report,
    read_result,
    write_report,
)
from openmle.errors import InvalidArgument

pytest.importorskip("yaml")

HOSTILE = '<img src=x onerror="alert(1)"> | **bold** [link](http://evil) `code`\n# heading'


def _bench(mini: tuple[Path, Path], out: Path, seeds: int = 1) -> BenchRun:
    registry, data = mini
    config = mini_config(
        mini, suite="mle-bench-lite", competitions=IDS, seeds=range(seeds), budget={"steps": 2}
    )
    return BenchRun.create(out, config, MLEBench.locate(registry, data, valid_dir=out / "valid"))


def _result(run: BenchRun, cid: str, seed: int, report: dict[str, Any], **extra: Any) -> Path:
    rd = run.run_dir(cid, seed)
    rd.mkdir(parents=True, exist_ok=True)
    kept = run.submission_path(cid, seed)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text("id,label\n")
    body = {"competition_id": cid, "seed": seed, "reason": "", **report}
    path = rd / "bench_result.json"
    path.write_text(json.dumps({"report": body, "spent": {"steps": 2}, **extra}))
    return path


def test_forged_medals_are_recomputed_and_human_rank_is_hand_computed(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """A result claiming gold for a score that earns none is reported without a medal; 0.94 on
    mini-tabular's board (0.99, 0.97, ..., 0.61: 20 entries) is beaten by 3 and beats 17:
    Human Rank 17/20 = 0.85 (the RL reward's 1 - 3/19 = 0.842 is never printed) and silver."""
    run = _bench(mini, tmp_path / "b")
    forged = {"score": 0.62, "gold_medal": True, "any_medal": True, "human_rank": 1.0,
              "gold_threshold": 0.1, "valid_submission": True,
              "submission_path": "../../x"}  # fmt: skip
    _result(run, "mini-tabular", 0, forged)
    _result(run, "mini-jsonl", 0, {"score": 0.94})
    rep = bench_report(tmp_path / "b")
    tab = next(r for r in rep.reports if r.competition_id == "mini-tabular")
    assert not tab.any_medal and not tab.gold_medal and tab.gold_threshold == 0.97
    assert tab.human_rank == pytest.approx(1 / 20)
    assert tab.submission_path == "submissions/mini-tabular/seed-0/submission.csv"
    # mini-jsonl's board is [1.0, 0.95, 0.9, 0.8, 0.7, 0.6, 0.55, 0.5]: 0.94 beats 6 of 8
    js = next(r for r in rep.reports if r.competition_id == "mini-jsonl")
    assert js.human_rank == 0.75
    run2 = _bench(mini, tmp_path / "c")
    _result(run2, "mini-tabular", 0, {"score": 0.94})
    tab2 = next(
        r for r in bench_report(tmp_path / "c").reports if r.competition_id == "mini-tabular"
    )
    assert tab2.human_rank == 0.85 and tab2.silver_medal and not tab2.gold_medal
    # a stored score without its kept submission is not counted
    (run2.submission_path("mini-tabular", 0)).unlink()
    tab3 = next(
        r for r in bench_report(tmp_path / "c").reports if r.competition_id == "mini-tabular"
    )
    assert tab3.score is None and not tab3.valid_submission


def test_every_text_is_escaped_in_markdown_and_html(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """A grader reason with raw HTML and Markdown lands escaped in report.md and report.html."""
    run = _bench(mini, tmp_path / "b")
    _result(run, "mini-tabular", 0, {"score": None, "reason": HOSTILE})
    paths = write_report(tmp_path / "b")
    md = paths["markdown"].read_text()
    page = paths["html"].read_text()
    assert "<img" not in md and '&lt;img src=x onerror="alert(1)"&gt;' in md
    assert "\\*\\*bold\\*\\*" in md and "\\[link\\]" in md and "\\`code\\`" in md
    assert "\\| \\*\\*bold" in md and "\n# heading" not in md
    assert "<img" not in page and "&lt;img src=x" in page
    # an apostrophe reads as one (no entity left half escaped: "&\\#x27;")
    assert "each competition's grader" in md and "&\\#" not in md
    # the budget reads as words, not a Python dict
    assert "budget: steps 2" in md and "{'" not in md and "None" not in md.split("## Suite")[0]


@pytest.mark.parametrize("attack", ["not_json", "wrong_type", "bool_score", "symlink", "fifo",
                                    "huge", "wrong_id", "unknown_field"])  # fmt: skip
def test_a_malformed_result_is_refused_in_one_line_naming_it(
    mini: tuple[Path, Path], tmp_path: Path, attack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _bench(mini, tmp_path / "b")
    path = _result(run, "mini-tabular", 0, {"score": 0.9})
    if attack == "not_json":
        path.write_text("{not json")
    elif attack == "wrong_type":
        path.write_text(json.dumps({"report": {"competition_id": "mini-tabular", "score": "x"}}))
    elif attack == "bool_score":
        path.write_text(json.dumps({"report": {"competition_id": "mini-tabular", "score": True}}))
    elif attack == "symlink":
        path.unlink()
        path.symlink_to("/dev/zero")
    elif attack == "fifo":
        path.unlink()
        os.mkfifo(path)
    elif attack == "huge":  # past the read-back cap (apparent size: refused before reading)
        os.truncate(path, (64 << 20) + 1)
    elif attack == "wrong_id":
        path.write_text(json.dumps({"report": {"competition_id": "mini-jsonl", "seed": 0}}))
    else:
        path.write_text(json.dumps({"report": {"competition_id": "mini-tabular", "evil": 1}}))
    with pytest.raises(InvalidArgument, match=r"bench_result\.json") as info:
        bench_report(tmp_path / "b")
    assert "\n" not in str(info.value)
    assert main(["bench", "report", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err


def test_read_result_absent_is_none(tmp_path: Path) -> None:
    assert read_result(tmp_path / "bench_result.json") is None


def test_modalities_validation_gap_and_medal_strip(mini: tuple[Path, Path], tmp_path: Path) -> None:
    """The per-modality table groups the competitions (the miniature's ids are not Lite ids:
    "unknown"); the validation-vs-test table compares the medal the best validation score would
    earn with the test one; the strip's silver and median ticks differ and the axis is labelled."""
    run = _bench(mini, tmp_path / "b")
    _result(run, "mini-tabular", 0, {"score": 0.94}, best_valid_score=0.99)  # gold on valid
    _result(run, "mini-jsonl", 0, {"score": 0.4}, best_valid_score=0.2)
    rep = bench_report(tmp_path / "b")
    rows = rep.modality_rows()
    assert [(r[0], r[1]) for r in rows] == [("unknown", 3)]
    gap = rep.validation_gap()
    assert gap is not None
    assert gap["validation_any_medal"].mean == pytest.approx(100 / 3)
    assert gap["test_any_medal"].mean == pytest.approx(100 / 3)
    md = rep.markdown()
    assert "## By modality" in md and "## Validation vs test" in md
    d = rep.to_dict()
    assert d["modalities"]["unknown"]["competitions"] == 3 and "ddof 1" in d["aggregation"]
    assert d["validation_vs_test"]["test_minus_validation"]["mean"] == 0.0
    page = rep.html()
    assert 'stroke="#7d3c98" stroke-width="2" stroke-dasharray' in page  # median: dashed purple
    assert 'stroke="#717d7e"' in page and "(better)</text>" in page


def test_a_report_without_a_preset_says_how_it_differs_from_the_paper(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """Without ``--preset paper`` the header said nothing of the paper: it now says the numbers
    are not its operating point and lists each setting that differs (Markdown and HTML)."""
    run = _bench(mini, tmp_path / "b")
    _result(run, "mini-tabular", 0, {"score": 0.94})
    rep = bench_report(tmp_path / "b")
    md = rep.markdown()
    assert "- preset: none; not the paper" in md and "operating point" in md
    for gap in ("steps: paper 800 -&gt; used 2", "seeds: paper 3 -&gt; used 1",
                "sandbox\\_s: paper 43200.0 -&gt; used none",
                "time\\_limit\\_s: paper 7200.0 -&gt; used 3600.0",
                "validation: paper self -&gt; used auto"):  # fmt: skip
        assert gap in md, gap
    assert "<li>preset: none; not the paper&#x27;s operating point" in rep.html()


def test_submission_jsonl_lists_every_run_as_mlebench_make_submission_does(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """It listed only the runs with a submission: ``mlebench grade`` then counted 1 run of 6
    here (a medal rate over the wrong total) and shifted seeds. Now one line per run,
    seed-major, ``null`` where no submission was kept (MLE-bench's make_submission.py)."""
    run = _bench(mini, tmp_path / "b", seeds=2)
    _result(run, "mini-tabular", 1, {"score": 0.94})
    paths = write_report(tmp_path / "b")
    lines = [json.loads(ln) for ln in paths["submission_jsonl"].read_text().splitlines()]
    assert [ln["competition_id"] for ln in lines] == [*IDS, *IDS]
    kept = str(run.submission_path("mini-tabular", 1).resolve())
    assert [ln["submission_path"] for ln in lines] == [None] * 5 + [kept]
    graded = json.loads(paths["grading_report"].read_text())
    assert graded["total_runs"] == 6 and graded["total_runs_with_submissions"] == 1


def test_a_report_of_an_unfinished_bench_says_so_in_its_header(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    """Runs not finished count as failures in every number; the header said nothing of it, so
    an interrupted bench's table read as a result. It now says how many, and how to finish."""
    run = _bench(mini, tmp_path / "b", seeds=2)
    _result(run, "mini-tabular", 0, {"score": 0.94})
    rep = bench_report(tmp_path / "b")
    want = (
        f"unfinished: 5 of 6 runs (pending 5) are counted as failures below; finish them with "
        f"openmle bench resume {tmp_path / 'b'}"
    )
    assert f"- **{want}**" in rep.markdown().replace("\\", "")
    assert f"<li><strong>{want}</strong></li>" in rep.html()
    assert rep.to_dict()["unfinished_runs"] == {"pending": 5}
    for cid in IDS:
        for seed in (0, 1):
            if (cid, seed) != ("mini-tabular", 0):
                _result(run, cid, seed, {"score": 0.5})
    done = bench_report(tmp_path / "b")
    assert "unfinished" not in done.markdown() and done.to_dict()["unfinished_runs"] == {}


def test_lite_modalities_are_the_papers_partition() -> None:
    """9 image, 5 text, 2 audio, 4 tabular, 2 multimodal: every Lite id has one."""
    from collections import Counter

    from openmle.bench import LITE_IDS, MODALITIES, modality_of

    assert set(MODALITIES) == set(LITE_IDS)
    counts = Counter(modality_of(c) for c in LITE_IDS)
    assert counts == {"image": 9, "text": 5, "audio": 2, "tabular": 4, "multimodal": 2}


def test_naturebench_report_flags_are_refused_on_another_bench(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--judge``/``--model-name`` on an MLE-bench bench were ignored silently: refused, one
    line naming them; on a NatureBench bench a ``--judge`` file that does not exist is refused.
    """
    from typing import cast

    from openmle.bench import BenchConfig, Benchmark

    _bench(mini, tmp_path / "b")
    flags = ["--judge", str(tmp_path / "nosuch.json"), "--model-name", "X"]
    assert main(["bench", "report", str(tmp_path / "b"), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert "--judge, --model-name: only a NatureBench bench takes them" in err
    assert len(err.splitlines()) == 1

    class _Bench:
        def manifest_entries(self, competitions: object) -> dict[str, str]:
            return {}

    config = BenchConfig(suite="custom", competitions=("a",), seeds=(0,), model="offline",
                         data_dir=str(tmp_path), benchmark="naturebench")  # fmt: skip
    BenchRun.create(tmp_path / "nb", config, cast(Benchmark, _Bench()))
    assert main(["bench", "report", str(tmp_path / "nb"), *flags]) == 2
    assert "--judge " + str(tmp_path / "nosuch.json") + ": no such file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["report.html", "report.json", "report.md", "submission.jsonl", "grading_report.json"]
)
def test_a_link_in_the_bench_dir_is_replaced_never_written_through(
    mini: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    """A bench directory from elsewhere with ``report.html -> ~/.bashrc``: the report replaced
    the user's file."""
    run = _bench(mini, tmp_path / "b")
    _result(run, "mini-tabular", 0, {"score": 0.9})
    canary = tmp_path / "canary"
    canary.write_bytes(b"CANARY\n")
    (tmp_path / "b" / name).symlink_to(canary)
    written = write_report(tmp_path / "b")
    assert canary.read_bytes() == b"CANARY\n"
    assert not (tmp_path / "b" / name).is_symlink()
    assert all(p.is_file() for p in written.values())


def test_a_competition_id_that_is_a_path_is_refused(
    mini: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``competitions: ["../../outside"]`` made status and report read a result outside the
    bench directory (and a resume would have written its run there)."""
    run = _bench(mini, tmp_path / "b")
    _result(run, "mini-tabular", 0, {"score": 0.9})
    outside = tmp_path / "outside" / "seed-0"
    outside.mkdir(parents=True)
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    m["config"]["competitions"] = ["../../outside", "mini-tabular"]
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(m))
    for command in ("status", "report"):
        assert main(["bench", command, str(tmp_path / "b")]) != 0
        err = capsys.readouterr().err
        assert "'../../outside', not a competition id" in err and "Traceback" not in err


def test_a_runs_dir_linked_outside_is_refused_before_a_run_writes(
    mini: tuple[Path, Path], tmp_path: Path
) -> None:
    from openmle.bench._runner import _real_dirs

    run = _bench(mini, tmp_path / "b")
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "b" / "runs").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidArgument, match="runs is a symbolic link"):
        _real_dirs(run, "mini-tabular", 0, "")
    assert list(outside.iterdir()) == []
