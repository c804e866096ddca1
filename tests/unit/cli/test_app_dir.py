"""``--sandbox``/``--model module:callable`` from the user's own project folder, through the real
``openmle`` console script (which, unlike ``python -m``, does not put the current folder on
``sys.path``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_SANDBOX = """
from openmle import Outcome, RunResult
from openmle.testing import FunctionSandbox


class Mine:
    trusted = True  # a plain subprocess sandbox on my own machine

    def __init__(self):
        self.inner = FunctionSandbox(
            lambda job: RunResult(outcome=Outcome.SUCCESS, score=0.5, split=job.split)
        )

    async def run(self, job):
        return await self.inner.run(job)

    async def aclose(self):
        await self.inner.aclose()


def make():
    return Mine()
"""

_MODELS = """
from openmle.backends import OfflineModel


def make():
    return OfflineModel(sklearn=False)
"""


def _console_script() -> Path:
    script = Path(sys.executable).parent / "openmle"
    if not script.is_file():
        pytest.skip("the openmle console script is not installed next to this interpreter")
    return script


def _openmle(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(_console_script()), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _project(root: Path) -> Path:
    pkg = root / "proj" / "myagent"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sandbox.py").write_text(_SANDBOX)
    (pkg / "models.py").write_text(_MODELS)
    return pkg.parent


def _search(cwd: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _openmle(
        cwd, "search", "--task", "tabular-binary", "--sandbox", "myagent.sandbox:make",
        "--model", "myagent.models:make", "--budget", "steps=1", "--workers", "1",
        "--out", str(out), "--json", "--quiet", "--no-report", *extra,
    )  # fmt: skip


def test_factories_import_from_the_current_folder(tmp_path: Path) -> None:
    """Run from the project folder, the console script finds myagent/ as python -m would."""
    proj = _project(tmp_path)
    proc = _search(proj, tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["best_valid_score"] == 0.5
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["sandbox"]["spec"] == "myagent.sandbox:make"
    assert manifest["model"]["spec"] == "myagent.models:make"
    # a sandbox that says trusted = True is marked as such, in the manifest and the header
    assert manifest["sandbox"]["trusted"] is True
    plain = _openmle(
        proj, "search", "--task", "tabular-binary", "--sandbox", "myagent.sandbox:make",
        "--budget", "steps=1", "--out", str(tmp_path / "run2"), "--quiet", "--no-report",
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    header = plain.stdout.splitlines()[0]
    assert "sandbox myagent.sandbox:make (trusted: its programs can read the answers)" in header


def test_elsewhere_the_error_says_what_was_searched_and_how_to_fix_it(tmp_path: Path) -> None:
    """From another folder: one usage error naming the folder searched and both fixes; with
    --app-dir it runs; a --app-dir that is no folder is refused."""
    proj = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = _search(elsewhere, tmp_path / "run")
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr
    assert "no module named 'myagent'" in err and f"current folder {elsewhere}" in err
    assert "--app-dir DIR" in err and "pip install -e" in err
    assert "Traceback" not in err and not (tmp_path / "run").exists()
    ok = _search(elsewhere, tmp_path / "run", "--app-dir", str(proj))
    assert ok.returncode == 0, ok.stderr
    bad = _search(elsewhere, tmp_path / "run2", "--app-dir", str(tmp_path / "nope"))
    assert bad.returncode == 2 and "--app-dir" in bad.stderr
