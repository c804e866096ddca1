"""``RaySandbox.preflight``: a missing Ray or an unreachable cluster stops a search before its
first step (each node was an infrastructure error before, the fix only in the journal)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from openmle._cli import main
from openmle.backends import RaySandbox
from openmle.errors import MissingDependency, SandboxError


def test_without_ray_preflight_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(MissingDependency, match=r"pip install 'openmle\[ray\]'"):
        anyio.run(RaySandbox().preflight)


def test_search_on_ray_without_ray_stops_before_the_first_step(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    out = tmp_path / "run"
    argv = ["search", "--task", "tabular-binary", "--sandbox", "ray", "--steps", "2"]
    rc = main([*argv, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc != 0
    assert "pip install 'openmle[ray]'" in err and "infra_error" not in err
    assert not (out / "journal.jsonl").exists()


def test_an_unreachable_cluster_is_a_sandbox_error_naming_the_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("ray", reason="needs ray: pip install 'openmle[ray]'")
    sandbox = RaySandbox(address="10.255.255.1:6379")

    def refused() -> None:
        raise ConnectionError("could not connect to the GCS")

    monkeypatch.setattr(sandbox, "_task", refused)
    with pytest.raises(SandboxError, match=r"10\.255\.255\.1:6379 .*RAY_ADDRESS"):
        anyio.run(sandbox.preflight)
