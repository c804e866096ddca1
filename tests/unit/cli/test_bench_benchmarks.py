"""``openmle bench run --benchmark``: the choices are the benchmark registry's names, so a
benchmark a package registered (the toy of ``tests/unit/bench/toy_benchmark``) is one, and the
command opens it through its registered kind (no benchmark named in the CLI)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from tests.unit.bench._toy_sandbox import number_sandbox
from tests.unit.bench.toy_benchmark import make_toy

from openmle._cli import build_parser, main
from openmle.bench import benchmark_names
from openmle.testing import FunctionSandbox, ScriptedModel

HERE = "tests.unit.cli.test_bench_benchmarks"


def toy_model(**_options: Any) -> ScriptedModel:
    """Every answer writes 0.7 (``--model tests.unit.cli.test_bench_benchmarks:toy_model``)."""
    code = "open('submission.csv', 'w').write('0.7')"
    return ScriptedModel(lambda _req: f"plan: write 0.7\n```python\n{code}\n```")


def toy_sandbox(resolver: Any, **_options: Any) -> FunctionSandbox:
    """Runs a program by the number it writes, graded by the toy's grader through the
    bench's resolver (so the bench keeps the test submission)."""

    return number_sandbox(resolver)


def _sub(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    found: argparse.ArgumentParser = action.choices[name]
    return found


def _choices() -> list[str]:
    run = _sub(_sub(build_parser(), "bench"), "run")
    (action,) = [a for a in run._actions if "--benchmark" in a.option_strings]
    assert action.choices is not None
    return list(action.choices)


def test_the_choices_are_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    """The registered toy is a choice, shown by --help; an unknown name lists the registry."""
    assert "toy" in benchmark_names()
    assert _choices() == list(benchmark_names())
    assert _choices()[:2] == ["mle-bench", "naturebench"]
    with pytest.raises(SystemExit):
        main(["bench", "run", "--help"])
    assert "{mle-bench,naturebench,toy" in capsys.readouterr().out.replace("\n", "")
    with pytest.raises(SystemExit) as usage:
        main(["bench", "run", "toy-all", "--benchmark", "toyz"])
    assert usage.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'toyz'" in err and "'toy'" in err


def test_bench_run_opens_the_registered_benchmark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``openmle bench run toy-all --benchmark toy``: the toy's suite, run and graded by the
    toy, reported against its leaderboard; an unknown suite is the toy's own error."""
    monkeypatch.chdir(tmp_path)
    root = make_toy(tmp_path / "toy", {"toy-a": 0.75, "toy-b": 0.25})
    out = tmp_path / "bench"
    common = ["--benchmark", "toy", "--data", str(root), "--seeds", "1"]
    common += ["--model", f"{HERE}:toy_model", "--sandbox", f"{HERE}:toy_sandbox"]
    assert main(["bench", "run", "no-such-suite", *common, "--out", str(out)]) == 2
    assert "Unknown toy competitions" in capsys.readouterr().err
    argv = ["bench", "run", "toy-all", *common, "--budget", "steps=2", "--out", str(out)]
    assert main([*argv, "--quiet", "--json"]) == 0
    done = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (done["runs"], done["valid"], done["medals"]) == (2, 2, 1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["benchmark"] == "toy"
    assert manifest["config"]["competitions"] == ["toy-a", "toy-b"]
