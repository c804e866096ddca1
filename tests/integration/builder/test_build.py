"""Real builds with the offline model through a LocalSandbox: scikit-learn's on-disk datasets
become packages `openmle task validate` accepts, and a short offline-model search on the
iris, wine and diabetes packages beats the package's constant baseline on the validation split
(issue 17's evidence; one build serves both checks); each mutation of prepare.py fails the
build with its own named finding."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from tests._net import unreached_listener
from tests.integration.builder._steps import Mutant as _Mutant
from tests.integration.builder._steps import build, search_beats_constant, validate, write_sklearn
from tests.integration.builder._steps import replace as _replace

from openmle.backends import OfflineModel
from openmle.builder._intake import sha256_file
from openmle.gym import load_task

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("name", ["iris", "wine", "breast_cancer", "diabetes", "digits"])
def test_sklearn_dataset_builds_a_valid_package(tmp_path: Path, name: str) -> None:
    raw, out = tmp_path / name, tmp_path / "out" / name
    write_sklearn(name, raw)
    result = build(
        raw,
        out,
        OfflineModel(),
        source=f"sklearn.datasets.load_{name}",
        licence="BSD-3",
        judge=True,
    )
    assert result.status == "built", result.reason
    assert result.package == out
    validate(out)
    record = json.loads((out / "builder" / "record.json").read_text())
    for key in (
        "intake",
        "decontam",
        "inventory",
        "spec",
        "prepare",
        "gate",
        "solvability",
        "checksums",
        "quality",
    ):
        assert key in record, key
    assert record["intake"]["licence"] == "BSD-3"
    assert record["quality"]["verdict"] in ("recommended", "conditional")
    assert record["quality"]["errors"] == []
    assert record["gate"]["passed"] is True and record["gate"]["findings"] == []
    solv = record["solvability"]
    hib = solv["higher_is_better"]
    const, model = solv["constant"]["score"], solv["model"]["score"]
    assert (model > const) if hib else (model < const)
    assert record["checksums"]["public/train.csv"] == sha256_file(out / "data/public/train.csv")
    task = load_task(out)
    assert task.leaderboard is not None and len(task.leaderboard) == 50
    # No leftovers next to the package.
    assert sorted(p.name for p in out.parent.iterdir()) == [name]
    if name in SEARCHED:
        search_beats_constant(out, result, steps=3)


SEARCHED = ("iris", "wine", "diabetes")
"""The packages a three-step offline-model search must improve on (beat the constant)."""


MUTATIONS: dict[str, tuple[Callable[[str], str], str]] = {
    "label_in_test": (
        _replace(
            "keep = [j for j in range(len(header)) if j != t]", "keep = list(range(len(header)))"
        ),
        "target_in_public_test",
    ),
    "duplicate_ids": (
        _replace(
            "[[str(k)] + r for k, r in enumerate(body)]",
            "[[str(k // 2)] + r for k, r in enumerate(body)]",
        ),
        "duplicate_ids",
    ),
    "nan_metric": (
        _replace('p = f"{1 / len(classes):.6f}"', 'p = "nan"'),
        "metric_failed_on_sample",
    ),
    "leaky_file_name": (
        _replace(
            '    _write(public / "sample_submission.csv", cols, rows)',
            '    _write(public / "sample_submission.csv", cols, rows)\n'
            '    _write(public / "test_labels.csv", [id_col, target],'
            " [[r[i], r[t]] for r in test])",
        ),
        "label_leaking_file_name",
    ),
    "not_deterministic": (
        _replace("rng = random.Random(seed)", "rng = random.Random()"),
        "not_deterministic",
    ),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutated_prepare_fails_with_its_finding(tmp_path: Path, mutation: str) -> None:
    mutate, code = MUTATIONS[mutation]
    raw, out = tmp_path / "iris", tmp_path / "out"
    write_sklearn("iris", raw)
    result = build(raw, out, _Mutant(mutate), solvability=False)
    assert result.status == "rejected", result
    assert result.stage == "gate"
    assert code in result.findings, result.findings
    assert code in result.reason
    assert not out.exists()
    assert [f["code"] for f in result.record["gate"]["findings"]] == list(result.findings)


def test_prepare_opening_a_socket_is_refused_and_reported(tmp_path: Path) -> None:
    # The target is a listener this test starts on the host's loopback: the sandbox has no
    # network, so the connection fails inside it (never a packet to an outside address).
    with unreached_listener() as port:
        connect = (
            "    import socket\n"
            f'    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()\n'
            "    raw, public, private = Path(raw), Path(public), Path(private)"
        )
        model = _Mutant(
            _replace("    raw, public, private = Path(raw), Path(public), Path(private)", connect)
        )
        raw, out = tmp_path / "iris", tmp_path / "out"
        write_sklearn("iris", raw)
        result = build(raw, out, model, solvability=False, max_prepare_attempts=2)
    assert result.status == "failed" and result.stage == "prepare"
    assert "runtime_error" in result.reason
    # Inside the sandbox's own network namespace the port is closed (refused) or there is no
    # network at all (unreachable): either is the OSError the reason must end with.
    errors = ("OSError", "ConnectionRefusedError", "Network is unreachable")
    assert any(e in result.reason for e in errors), result.reason
    runs = result.record["prepare"]["attempts"]
    assert len(runs) == 2 and all(r["outcome"] == "runtime_error" for r in runs)
    assert not out.exists()


def test_raw_data_matching_a_benchmark_hash_is_refused(tmp_path: Path) -> None:
    raw, out = tmp_path / "some-data", tmp_path / "out"
    write_sklearn("iris", raw)
    blocklist = tmp_path / "eval.txt"
    blocklist.write_text(f"# my evaluation set\nsha256:{sha256_file(raw / 'iris.csv')}\n")
    from openmle.builder import load_blocklist

    result = build(raw, out, OfflineModel(), blocklist=load_blocklist([blocklist]))
    assert result.status == "rejected" and result.stage == "decontam"
    assert result.findings == ("contaminated",)
    assert "sha256 of iris.csv" in result.reason
    assert not out.exists()


def test_cli_build_exit_codes(tmp_path: Path) -> None:
    raw, out = tmp_path / "wine", tmp_path / "pkg"
    write_sklearn("wine", raw)
    cmd = [sys.executable, "-m", "openmle", "task", "build", str(raw), "--out", str(out)]
    first = subprocess.run([*cmd, "--no-solvability"], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"built {out}" in first.stdout
    again = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert again.returncode == 2 and "exists" in again.stderr
    blocklist = tmp_path / "eval.txt"
    blocklist.write_text("name:wine\n")
    refused = subprocess.run(
        [*cmd[:-1], str(tmp_path / "pkg2"), "--blocklist", str(blocklist), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["findings"] == ["contaminated"]
