"""``openmle search --model draft=SPEC,...,default=SPEC`` and ``--summary-model SPEC``: the
routing and the summary model are recorded in the manifest and used again by ``resume``; a bad
value exits 2 naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openmle._cli import main

ROUTED = "draft=offline-numpy,default=offline"


def _search(out: Path, *extra: str, steps: int = 3) -> list[str]:
    argv = ["search", "--task", "tabular-regression", "--steps", str(steps), "--workers", "1"]
    return [*argv, "--out", str(out), "--quiet", "--no-report", *extra]


def test_routed_models_and_the_summary_model_are_recorded_and_resumed(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["--model", ROUTED, "--summaries", "--summary-model", "offline-numpy"]
    assert main(_search(out, *args)) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    routes = manifest["model"]["routes"]
    assert {k: v["spec"] for k, v in routes.items()} == {
        "draft": "offline-numpy",
        "default": "offline",
    }
    assert manifest["summary_model"]["spec"] == "offline-numpy"
    cli = manifest["extra"]["cli"]
    assert (cli["model"], cli["summary_model"]) == (ROUTED, "offline-numpy")
    # resume rebuilds the recorded routing (no --model on the command line)
    assert main(["resume", str(out), "--budget", "steps=4", "--quiet", "--no-report"]) == 0
    lines = (out / "journal.jsonl").read_text().splitlines()
    nodes = [json.loads(x)["node"] for x in lines if '"event":"node"' in x]
    assert len(nodes) == 4


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("draft=offline,improve=offline", "no model for operator 'debug'"),
        ("draft=offline,default=no-such-model", "--model default=no-such-model"),
        ("draft=offline,draft=offline,default=offline", "draft= is given twice"),
        ("draft=,default=offline", "draft= names no model"),
        # a key that is no operator is refused by name, with the keys (it was read as part
        # of the previous spec, or reported as a missing operator)
        (
            "draft=offline,improv=offline-numpy,default=offline",
            "improv= is no operator (did you mean improve=?); the keys are draft, improve, "
            "debug, crossover, default",
        ),
        ("draft=offline,improv=offline", "improv= is no operator"),
        ("drat=offline,default=offline", "drat= is no operator (did you mean draft=?)"),
    ],
)
def test_a_bad_routed_model_exits_2_naming_the_flag(
    tmp_path: Path, value: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_search(tmp_path / "run", "--model", value)) == 2
    err = capsys.readouterr().err
    assert "--model" in err and says in err, err
    assert not (tmp_path / "run").exists()


def test_a_url_query_in_a_routed_spec_is_no_route_key() -> None:
    """A comma inside a URL's query continues that spec (its keys are no operators)."""
    from openmle._cli._search import _parse_routes

    value = "draft=openai:http://h/v1?a=1,b=2#m,default=offline"
    assert _parse_routes(value) == {"draft": "openai:http://h/v1?a=1,b=2#m", "default": "offline"}


def test_summary_model_needs_summaries_and_one_spec(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(_search(tmp_path / "a", "--summary-model", "offline")) == 2
    assert "add --summaries" in capsys.readouterr().err
    bad = ["--summaries", "--summary-model", "draft=offline"]
    assert main(_search(tmp_path / "b", *bad)) == 2
    assert "--summary-model 'draft=offline': one model" in capsys.readouterr().err
