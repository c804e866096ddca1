"""NatureBench's leaderboard metrics and submission files, checked against hand computation."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmle.bench.naturebench import (
    RESULTS_COLUMNS,
    CaseResult,
    case_domain,
    case_resources,
    check_results,
    leaderboard_metrics,
    metrics_by_domain,
    read_suite,
    write_results_csv,
    write_submission_yaml,
)
from openmle.errors import InvalidArgument, TaskPackageError

ROWS = [
    CaseResult(case_id="a", domain="bio", best_score=0.5, judge_verdict="valid", judge_reason="ok"),
    CaseResult(
        case_id="b", domain="bio", best_score=-0.2, judge_verdict="valid", judge_reason="ok"
    ),
    CaseResult(
        case_id="c", domain="bio", best_score=0.3, judge_verdict="invalid", judge_reason="leak"
    ),
    CaseResult(case_id="d", domain="chem", final_status="timeout"),  # no score
    CaseResult(
        case_id="e", domain="chem", best_score=0.05, judge_verdict="valid", judge_reason="ok"
    ),
    CaseResult(
        case_id="f", domain="chem", best_score=0.0, judge_verdict="valid", judge_reason="ok"
    ),
]


def test_overall_metrics_by_hand() -> None:
    """Six cases: 5 scored (one judged invalid), one unscored. g for all cases is
    [0.5, -0.2, -1 (invalid), -1 (no score), 0.05, 0.0]."""
    m = leaderboard_metrics(ROWS)
    assert (m.task_count, m.scored_count, m.valid_count, m.invalid_count, m.no_score_count) == (
        6,
        5,
        4,
        1,
        1,
    )
    assert m.score_rate == pytest.approx(5 / 6)
    assert m.completion_rate == pytest.approx(4 / 6)
    assert m.match_sota == pytest.approx(3 / 6)  # 0.5, 0.05 and 0.0 (>= 0)
    assert m.surpass_sota == pytest.approx(1 / 6)  # only 0.5 (> 0.1); 0.05 is not
    assert m.mean_g_all == pytest.approx(-1.65 / 6)
    assert m.median_g_all == pytest.approx(-0.1)  # sorted: -1 -1 -0.2 0 0.05 0.5
    assert m.median_g_valid == pytest.approx(0.025)  # -0.2 0 0.05 0.5


def test_per_domain_metrics_by_hand() -> None:
    d = metrics_by_domain(ROWS)
    assert list(d) == ["bio", "chem"]
    bio, chem = d["bio"], d["chem"]
    assert bio.score_rate == pytest.approx(1.0)
    assert bio.completion_rate == pytest.approx(2 / 3)
    assert bio.match_sota == pytest.approx(1 / 3)
    assert bio.surpass_sota == pytest.approx(1 / 3)
    assert bio.mean_g_all == pytest.approx(-0.7 / 3)
    assert bio.median_g_all == pytest.approx(-0.2)
    assert bio.median_g_valid == pytest.approx(0.15)
    assert chem.score_rate == pytest.approx(2 / 3)
    assert chem.completion_rate == pytest.approx(2 / 3)
    assert chem.match_sota == pytest.approx(2 / 3)
    assert chem.surpass_sota == 0.0
    assert chem.mean_g_all == pytest.approx(-0.95 / 3)
    assert chem.median_g_all == pytest.approx(0.0)
    assert chem.median_g_valid == pytest.approx(0.025)


def test_nothing_valid() -> None:
    """All invalid or unscored: every g is -1 and there is no valid median."""
    m = leaderboard_metrics([ROWS[2], ROWS[3]])
    assert m.completion_rate == 0.0 and m.match_sota == 0.0
    assert m.mean_g_all == -1.0 and m.median_g_all == -1.0
    assert m.median_g_valid is None


def test_bad_rows_are_refused() -> None:
    with pytest.raises(InvalidArgument, match="duplicates"):
        leaderboard_metrics([ROWS[0], ROWS[0]])
    with pytest.raises(InvalidArgument, match="finite"):
        CaseResult(case_id="x", best_score=float("nan"), judge_verdict="valid")
    with pytest.raises(InvalidArgument, match="not 'not_applicable'"):
        CaseResult(case_id="x", best_score=0.1)
    with pytest.raises(InvalidArgument, match="judge_verdict"):
        CaseResult(case_id="x", judge_verdict="maybe")


def test_written_results_pass_the_validator(tmp_path: Path) -> None:
    """Exact columns, an empty field for no score, every id once: no problems."""
    path = write_results_csv(tmp_path / "results.csv", reversed(ROWS))
    lines = path.read_text().splitlines()
    assert lines[0] == ",".join(RESULTS_COLUMNS)
    assert lines[4] == "d,timeout,,not_applicable,not_applicable"
    assert [ln.split(",")[0] for ln in lines[1:]] == list("abcdef")
    assert check_results(path, "abcdef") == []


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("a,ok,0.5,valid,ok\n", "missing official cases: ['b']"),
        ("a,ok,0.5,valid,ok\nb,,,not_applicable,not_applicable\nc,,,x,y\n", "not an official"),
        ("a,ok,0.5,valid,ok\na,ok,0.5,valid,ok\nb,,,not_applicable,not_applicable\n", "again"),
        ("a,ok,NaN,valid,ok\nb,,,not_applicable,not_applicable\n", "not a finite number"),
        ("a,ok,None,valid,ok\nb,,,not_applicable,not_applicable\n", "not a finite number"),
        ("a,ok,-,valid,ok\nb,,,not_applicable,not_applicable\n", "not a finite number"),
        ("a,ok,0.5,not_applicable,x\nb,,,not_applicable,not_applicable\n", "judge_verdict"),
        ("a,ok,0.5,valid,\nb,,,not_applicable,not_applicable\n", "judge_reason is required"),
        ("a,ok,0.5,valid,ok\nb,,,not_applicable,because\n", "must be 'not_applicable'"),
        ("a,ok,0.5,valid\nb,,,not_applicable,not_applicable\n", "4 fields"),
    ],
)
def test_validator_rules(tmp_path: Path, body: str, problem: str) -> None:
    path = tmp_path / "results.csv"
    path.write_text(",".join(RESULTS_COLUMNS) + "\n" + body)
    problems = check_results(path, ["a", "b"])
    assert any(problem in p for p in problems), problems


def test_validator_wants_the_exact_header(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text("case_id,best_score\na,0.5\n")
    assert "must be exactly" in check_results(path, ["a"])[0]


def test_submission_yaml(tmp_path: Path) -> None:
    """Both sections; strings quoted (a colon or a quote in a value stays a value)."""
    info = {
        "model": 'M: "1"',
        "agent": "openmle",
        "organization": "Independent",
        "url": "https://example.org",
        "submission_date": "2026-12-01",
        "contact": "me@example.org",
    }
    path = write_submission_yaml(tmp_path / "submission.yaml", info, {"track": "naturebench-25"})
    text = path.read_text()
    assert text.startswith('submission:\n  model: "M: \\"1\\""\n')
    assert '  track: "naturebench-25"\n' in text
    assert "  timeout_seconds: 14400\n" in text and "  web_search: false\n" in text
    yaml = pytest.importorskip("yaml")
    loaded = yaml.safe_load(text)
    assert loaded["submission"]["model"] == 'M: "1"'
    assert loaded["evaluation"]["evaluation_pipeline"] == "custom"
    with pytest.raises(InvalidArgument, match="missing"):
        write_submission_yaml(tmp_path / "x.yaml", {"model": "m"})


def _task_set(tmp_path: Path) -> Path:
    ts = tmp_path / "task-set"
    (ts / "mini").mkdir(parents=True)
    (ts / "cpu.txt").write_text("case_cpu\n")
    (ts / "gpu_low.txt").write_text("# low\ncase_gpu\n\n")
    (ts / "gpu_high.txt").write_text("")
    (ts / "all.txt").write_text("case_cpu\ncase_gpu\n")
    (ts / "mini" / "all.txt").write_text("case_gpu\n")
    return ts


def test_suites_and_resources(tmp_path: Path) -> None:
    """Suites come from the task-set lists; a GPU case gets one GPU, a CPU case none."""
    ts = _task_set(tmp_path)
    assert read_suite(ts) == ("case_cpu", "case_gpu")
    assert read_suite(ts, "gpu_low") == ("case_gpu",)
    assert read_suite(ts, track="mini") == ("case_gpu",)
    assert case_resources("case_gpu", ts).gpu_count == 1
    assert case_resources("case_cpu", ts).gpu_count == 0
    with pytest.raises(TaskPackageError, match="in none of"):
        case_resources("other", ts)
    with pytest.raises(InvalidArgument, match="suite"):
        read_suite(ts, "gpu")
    with pytest.raises(InvalidArgument, match="track"):
        read_suite(ts, track="../x")
    (ts / "cpu.txt").write_text("a\na\n")
    with pytest.raises(TaskPackageError, match="twice"):
        read_suite(ts, "cpu")


def test_case_domain(tmp_path: Path) -> None:
    case = tmp_path / "case"
    case.mkdir()
    with pytest.raises(TaskPackageError, match=r"metadata\.json"):
        case_domain(case)
    (case / "metadata.json").write_text('{"domain_metadata": {"primary_domain": "Biology"}}')
    assert case_domain(case) == "Biology"
    (case / "metadata.json").write_text("{}")
    assert case_domain(case) == "Other"
    (case / "metadata.json").write_text("[1]")
    with pytest.raises(TaskPackageError, match="not a JSON object"):
        case_domain(case)
