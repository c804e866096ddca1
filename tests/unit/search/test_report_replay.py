"""The search report's replay (each node's request and answer) and two runs side by side."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest
from tests.unit.search._toy import four_step_run

from openmle import Job, ModelRequest, Outcome, RunResult
from openmle._cli import main
from openmle.search import (
    REPLAY_CHARS,
    RunDir,
    compare_runs,
    write_comparison,
    write_report,
)

_HOSTILE = "<script>alert('owned')</script>"


def _grade(job: Job) -> RunResult:
    if "boom" in job.code:
        return RunResult(outcome=Outcome.RUNTIME_ERROR, split=job.split, runtime_s=0.1)
    return RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split, runtime_s=0.1)


def _run(path: Path, *, boom_at: int | None = None, description: str = "toy task") -> Path:
    """A four-step run with the offline model; its ``boom_at``-th answer (1-based) fails."""
    calls = 0

    def model(request: ModelRequest) -> str:
        nonlocal calls
        calls += 1
        body = "boom = 1" if calls == boom_at else "score = 0.5"
        return f"Plan {calls}: {_HOSTILE}\n```python\n{body}\n```"

    return four_step_run(path, model, _grade, description=description)


def test_replay_shows_each_request_and_answer_collapsed_and_escaped(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    rd = RunDir.open(run)
    digests = rd.node_requests()
    assert len(digests) == 4
    html = write_report(run).read_text()
    replay = html[html.index("<h2>Replay") :]
    # every node is there, collapsed (no "open" attribute anywhere in the replay)
    assert replay.count('<details class="node">') == 4
    assert "<details open" not in replay
    # the exact request text, read back from requests/, is shown (escaped)
    for node_id, digest in digests.items():
        assert node_id in replay
        for msg in rd.request(digest).messages:
            assert msg.content[:200].replace("&", "&amp;").replace("<", "&lt;")[:80] in replay
    # the answer: the model's plan and program
    assert "Plan 1:" in replay and "score = 0.5" in replay
    # model output is untrusted: never a live tag anywhere in the page
    assert "<script" not in html
    assert "&lt;script&gt;alert(&#x27;owned&#x27;)&lt;/script&gt;" in replay


def test_replay_cuts_a_long_message_with_a_marked_cut(tmp_path: Path) -> None:
    long = "y" * (REPLAY_CHARS + 5_000)
    run = _run(tmp_path / "run", description=long)
    rd = RunDir.open(run)
    sent = [m.content for d in rd.node_requests().values() for m in rd.request(d).messages]
    msg = next(c for c in sent if long in c)  # the request really carried it
    replay = write_report(run).read_text().split("<h2>Replay", 1)[1]
    assert escape(msg[:REPLAY_CHARS]) + '<span class="cut">' in replay
    assert "y" * (REPLAY_CHARS + 1) not in replay
    assert f"more characters of {len(msg):,} not shown" in replay
    assert "[… cut:" in replay and "more characters of" in replay


def test_replay_names_an_altered_request_and_still_writes(tmp_path: Path) -> None:
    run = _run(tmp_path / "run")
    digest = next(iter(RunDir.open(run).node_requests().values()))
    (run / "requests" / f"{digest}.json.gz").write_bytes(b"not gzip")
    replay = write_report(run).read_text().split("<h2>Replay", 1)[1]
    assert "request unreadable" in replay


def test_two_runs_side_by_side_name_the_first_divergence(tmp_path: Path) -> None:
    a = _run(tmp_path / "a")
    b = _run(tmp_path / "b", boom_at=3)
    nodes_b = sorted(RunDir.open(b).nodes(), key=lambda n: n.step)
    failed = next(n for n in nodes_b if not n.ok)
    comp = compare_runs(a, b)
    assert comp.first_divergence == failed.step
    assert "runtime_error" in comp.divergence
    assert comp.steps_a == comp.steps_b == 4
    path, same = write_comparison(a, b, tmp_path / "cmp.html")
    assert same == comp
    html = path.read_text()
    assert f"First divergence at <b>step {failed.step}</b>" in html
    assert html.count('class="diverge"') == 1
    assert html.count('class="curve"') == 2
    assert "<script" not in html
    # a run compared with itself does not diverge
    assert compare_runs(a, a).first_divergence is None


def test_cli_report_two_runs_and_single_run_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _run(tmp_path / "a")
    b = _run(tmp_path / "b", boom_at=3)
    assert main(["report", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert "first divergence at step" in out
    assert (a / "compare-b.html").is_file()
    assert main(["report", str(a), str(b), "--json", "--out", str(tmp_path / "c.html")]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["report"] == str(tmp_path / "c.html") and got["first_divergence"] is not None
    assert main(["report", str(a), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"report": str(a / "report.html")}


def test_replay_stops_showing_texts_past_its_total(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from openmle.search._runs import report

    run = _run(tmp_path / "run")
    monkeypatch.setattr(report, "REPLAY_TOTAL_CHARS", 1)
    replay = write_report(run).read_text().split("<h2>Replay", 1)[1]
    assert replay.count('<details class="node">') == 4  # every node is still listed
    assert replay.count("characters are spent") == 3  # the first one spent the total
    assert "Plan 2:" not in replay
