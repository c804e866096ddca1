"""`openmle task build --sandbox`: through the sandbox registry, like `openmle search`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openmle.builder._pipeline import sandbox_factory
from openmle.errors import InvalidArgument

pytestmark = [pytest.mark.integration, pytest.mark.slow]

_PLUGIN = """import os
from openmle.backends import LocalSandbox


def make(resolver):
    with open(os.environ["BUILDBOX_LOG"], "a") as f:
        f.write("made\\n")
    return LocalSandbox(resolver=resolver, max_concurrency=1)


def no_resolver():
    return LocalSandbox()
"""


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[3] / "src")
    env["PYTHONPATH"] = os.pathsep.join([src, str(tmp_path / "site")])
    env["BUILDBOX_LOG"] = str(tmp_path / "log")
    return subprocess.run(
        [sys.executable, "-m", "openmle", "task", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def _setup(tmp_path: Path) -> Path:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "buildbox.py").write_text(_PLUGIN)
    raw = tmp_path / "raw"
    raw.mkdir()
    rows = ["x,y"] + [f"{k},{'ab'[k % 3 == 0]}" for k in range(60)]
    (raw / "data.csv").write_text("\n".join(rows) + "\n")
    return raw


def test_build_runs_prepare_in_a_module_callable_sandbox(tmp_path: Path) -> None:
    """--sandbox module:callable builds the sandbox with the builder's resolver and uses it."""
    raw = _setup(tmp_path)
    out = tmp_path / "pkg"
    proc = _cli(
        tmp_path, "build", str(raw), "--out", str(out), "--sandbox", "buildbox:make",
        "--no-solvability",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (out / "task.toml").is_file()
    # prepare.py ran twice (the determinism check), each time in a sandbox the factory made.
    assert (tmp_path / "log").read_text().splitlines().count("made") >= 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("buildbox:no_resolver", "sandbox factory taking resolver="),
        ("nosuchmodule:make", "nosuchmodule"),
        ("warp-drive", "warp-drive"),
    ],
)
def test_bad_sandbox_specs_are_usage_errors(tmp_path: Path, spec: str, message: str) -> None:
    """A spec naming nothing, or a factory without resolver=, exits 2 before any build."""
    raw = _setup(tmp_path)
    for command in (["build", str(raw)], ["build-many", str(tmp_path)]):
        proc = _cli(tmp_path, *command, "--out", str(tmp_path / "o"), "--sandbox", spec)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr
        assert not (tmp_path / "o").exists()
    assert not (tmp_path / "log").exists()


def test_sandbox_factory_routes_specs() -> None:
    """local is the builder's default (None); docker takes resolver= and gives a factory."""
    assert sandbox_factory("local") is None
    assert callable(sandbox_factory("docker"))
    with pytest.raises(InvalidArgument, match="taking resolver="):
        sandbox_factory("service:http://127.0.0.1:9")
