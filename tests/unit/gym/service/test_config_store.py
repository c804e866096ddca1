"""Service settings, API-key loading and the SQLite store's single-owner lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmle.errors import InvalidArgument, SandboxError
from openmle.gym._service._store import JobStore
from openmle.gym.service import ServiceConfig, load_api_keys, load_sandbox


def test_keys_from_environment_and_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys come from the comma-separated variable and the file, deduplicated, comments skipped."""
    monkeypatch.setenv("OPENMLE_SERVICE_API_KEYS", "key-aaaaaaaa, key-bbbbbbbb,")
    f = tmp_path / "keys"
    f.write_text("# ops keys\nkey-cccccccc\n\nkey-aaaaaaaa\n")
    assert load_api_keys(file=f) == ("key-aaaaaaaa", "key-bbbbbbbb", "key-cccccccc")
    with pytest.raises(InvalidArgument, match="API key file"):
        load_api_keys(file=tmp_path / "missing")


def test_config_refuses_no_keys_unless_told(tmp_path: Path) -> None:
    """Without keys the service refuses to start unless ``allow_no_auth`` says so."""
    with pytest.raises(InvalidArgument, match="no API keys"):
        ServiceConfig(db_path=tmp_path / "db")
    assert ServiceConfig(db_path=tmp_path / "db", allow_no_auth=True).allow_no_auth


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"api_keys": ("short",)}, "at least 8"),
        ({"cpu_slots": -1}, "cpu_slots"),
        ({"cpu_slots": 0, "gpu_slots": 0}, "cpu_slots or gpu_slots"),
        ({"max_queued": 0}, "max_queued"),
        ({"default_timeout_s": 10.0, "max_job_timeout_s": 5.0}, "default_timeout_s"),
        ({"task_roots": ("/nonexistent-root",)}, "not a directory"),
    ],
)
def test_bad_settings_name_the_field(tmp_path: Path, kw: dict[str, object], match: str) -> None:
    """Invalid settings raise ``InvalidArgument`` naming the field."""
    kw.setdefault("api_keys", ("k" * 10,))
    with pytest.raises(InvalidArgument, match=match):
        ServiceConfig(db_path=tmp_path / "db", **kw)  # type: ignore[arg-type]


def test_one_service_per_database(tmp_path: Path) -> None:
    """A second store on the same file refuses to open; after close it can."""
    first = JobStore(tmp_path / "jobs.db")
    with pytest.raises(SandboxError, match="another job service"):
        JobStore(tmp_path / "jobs.db")
    first.close()
    JobStore(tmp_path / "jobs.db").close()


def test_sandbox_spec_must_name_a_factory() -> None:
    """Bad ``module:callable`` specs, and factories returning non-sandboxes, are refused."""
    for spec in ("nope", "openmle:", "no_such_module_x:f", "openmle:no_such_attr"):
        with pytest.raises(InvalidArgument):
            load_sandbox(spec)
    with pytest.raises(InvalidArgument, match="not a Sandbox"):
        load_sandbox("builtins:dict")


def test_cli_refuses_to_serve_without_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``openmle serve`` without keys exits 1 and says how to give one."""
    from openmle._cli import main

    monkeypatch.delenv("OPENMLE_SERVICE_API_KEYS", raising=False)
    assert main(["serve", "--db", str(tmp_path / "jobs.db")]) == 1
    assert "OPENMLE_SERVICE_API_KEYS" in capsys.readouterr().err


def test_no_auth_only_on_loopback(tmp_path: Path) -> None:
    """Serving without keys is refused on a non-loopback address."""
    from openmle.gym.service import serve

    config = ServiceConfig(db_path=tmp_path / "db", allow_no_auth=True)
    with pytest.raises(InvalidArgument, match="without API keys"):
        serve(config, host="0.0.0.0")
