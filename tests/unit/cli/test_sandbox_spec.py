"""`openmle search|resume --sandbox/--model`: every shipped part, ``module:callable`` and
entry-point names; resume rebuilds the recorded parts or names the flag to pass."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests._plugin_pkg import write_plugin_package

import openmle
from openmle.search import SearchSpec


def test_sandbox_specs_build_every_backend() -> None:
    """--sandbox names every shipped sandbox; a bad spec names the choices."""
    from tests._sandboxes import assert_builds_shipped_sandboxes

    from openmle._cli._search import build_sandbox
    from openmle.errors import InvalidArgument

    assert_builds_shipped_sandboxes(build_sandbox)
    with pytest.raises(
        InvalidArgument, match="docker, local, ray, service:URL, or module:callable"
    ):
        build_sandbox("k8s")
    # a URL without its scheme said JobServiceSandbox.base_url='127.0.0.1:8765'
    with pytest.raises(InvalidArgument, match=r"--sandbox service:URL needs http\(s\)://HOST:PORT"):
        build_sandbox("service:127.0.0.1:8765")


def _cli(
    *args: str, site: Path, log: Path, ok: bool = True, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m openmle ARGS --json`` with the plugin package on PYTHONPATH."""
    src = Path(openmle.__file__).parents[1]
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{src}", "KITPLUGIN_LOG": str(log)}
    proc = subprocess.run(
        [sys.executable, "-m", "openmle", *args, "--json", "--quiet", "--no-report"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
        cwd=cwd,
    )
    assert (proc.returncode == 0) is ok, proc.stderr
    return proc


def _search(out: Path, site: Path, log: Path, sandbox: str, model: str) -> dict[str, Any]:
    proc = _cli(
        "search", "--task", "tabular-regression", "--model", model, "--sandbox", sandbox,
        "--budget", "steps=2", "--workers", "1", "--out", str(out), site=site, log=log,
    )  # fmt: skip
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_search_and_resume_take_custom_parts(tmp_path: Path) -> None:
    """--sandbox/--model module:callable and entry-point names work for search; resume
    rebuilds the same parts from the manifest (it does not fall back to the local sandbox)."""
    site = write_plugin_package(tmp_path / "site")
    log = tmp_path / "log"
    out = tmp_path / "run"
    s = _search(out, site, log, "kitplugin:make", "kitplugin:make_model")
    assert s["nodes"] == 2 and s["best_valid_score"] == 0.5
    lines = log.read_text().splitlines()
    assert lines.count("factory valid") == 2 and "factory test" in lines and "model" in lines
    log.write_text("")
    r = json.loads(_cli("resume", str(out), "--budget", "steps=3", site=site, log=log).stdout)
    assert r["nodes"] == 3
    lines = log.read_text().splitlines()
    assert "factory valid" in lines and "model" in lines  # the same parts, rebuilt

    by_name = _search(tmp_path / "named", site, log, "kitplugin-box", "kitplugin-model")
    assert by_name["nodes"] == 2
    assert "entry valid" in log.read_text().splitlines()


def test_resume_refuses_a_sandbox_it_cannot_rebuild(tmp_path: Path) -> None:
    """A run started from Python with a sandbox object the registry did not build: resume
    names --sandbox instead of swapping in the local sandbox; with --sandbox it resumes."""
    from openmle.backends import OfflineModel
    from openmle.search import Budget, RunDir, run_search

    site = write_plugin_package(tmp_path / "site", "kitplugin_lib")
    sys.path.insert(0, str(site))
    try:
        from kitplugin_lib import FixedSandbox  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(site))
    out = tmp_path / "run"
    run_search(
        SearchSpec(
            task="tabular-regression",
            model=OfflineModel(sklearn=False),
            sandbox=FixedSandbox(),
            budget=Budget(steps=1),
        ),
        run_dir=out,
    )
    m = RunDir.open(out).manifest
    assert m["sandbox"]["spec"] is None and m["sandbox"]["class"] == "kitplugin_lib.FixedSandbox"
    log = tmp_path / "log"
    proc = _cli("resume", str(out), "--model", "offline-numpy", site=site, log=log, ok=False)
    assert proc.returncode != 0
    assert "--sandbox" in proc.stderr and "kitplugin_lib.FixedSandbox" in proc.stderr
    assert len([ln for ln in (out / "journal.jsonl").read_text().splitlines() if ln]) > 0
    proc = _cli(
        "resume", str(out), "--model", "offline-numpy", "--sandbox", "kitplugin:make",
        "--budget", "steps=2", site=write_plugin_package(tmp_path / "site2"), log=log,
    )  # fmt: skip
    assert json.loads(proc.stdout)["nodes"] == 2
    assert "factory valid" in log.read_text().splitlines()


def test_resume_records_specs_of_parts_built_by_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run from Python whose parts came from make_sandbox/make_model records their specs,
    so ``openmle resume`` rebuilds them without flags."""
    from openmle.backends import make_model, make_sandbox
    from openmle.search import Budget, RunDir, run_search

    site = write_plugin_package(tmp_path / "site", "kitplugin_rec")
    sys.path.insert(0, str(site))
    try:
        out = tmp_path / "run"
        run_search(
            SearchSpec(
                task="tabular-regression",
                model=make_model("kitplugin_rec:make_model"),
                sandbox=make_sandbox("kitplugin_rec:make"),
                budget=Budget(steps=1),
            ),
            run_dir=out,
        )
    finally:
        sys.path.remove(str(site))
    m = RunDir.open(out).manifest
    assert m["sandbox"]["spec"] == "kitplugin_rec:make"
    assert m["model"]["spec"] == "kitplugin_rec:make_model"
    log = tmp_path / "log"
    monkeypatch.setenv("KITPLUGIN_REC_LOG", str(log))  # the subprocess inherits it
    proc = _cli("resume", str(out), "--budget", "steps=2", site=site, log=tmp_path / "x")
    assert json.loads(proc.stdout)["nodes"] == 2
    assert "factory valid" in log.read_text().splitlines()


def test_search_on_a_service_checks_its_scores_against_the_task_metric_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`openmle search --sandbox service:URL` built JobServiceSandbox without ``task_meta``, so
    an AUC of 1.7 from the service became the best score (the range check worked only from the
    Python API); now the CLI passes the task's metadata as the Python API does: INFRA_ERROR.
    """
    pytest.importorskip("uvicorn", reason="needs uvicorn: pip install 'openmle[service]'")
    from tests._serve import served_in_thread

    from openmle import Outcome, RunResult
    from openmle._cli import main
    from openmle.service import ServiceConfig, create_app
    from openmle.testing import FunctionSandbox

    def handler(job: Any) -> RunResult:
        return RunResult(outcome=Outcome.SUCCESS, score=1.7, split=job.split, logs="ok")

    key = "client-key-0123456789"
    config = ServiceConfig(db_path=tmp_path / "jobs.db", api_keys=(key,), cpu_slots=2)
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEY", key)
    with served_in_thread(create_app(config, sandbox=FunctionSandbox(handler))) as url:
        code = main(["search", "--task", "tabular-binary", "--model", "offline", "--sandbox",
                     f"service:{url}", "--budget", "steps=1", "--out", str(tmp_path / "run"),
                     "--json", "--quiet"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 1 and summary["best_valid_score"] is None
    assert summary["outcomes"] == {"infra_error": 1}
